/* The G2P training run's expected duration (g2p_budget.h). */
#include "apps/seq2seq/g2p_budget.h"

#include <math.h>
#include <string.h>

static double set_tokens(const attn_g2p_set *s) {
  double n = 0;
  for (int i = 0; s && i < s->n; i++) n += s->tgt_len[i] + 1; /* the phonemes and </s> */
  return n;
}

enum { PROBE_BATCHES = 4, PROBE_ROUNDS = 2 };

attn_status attn_g2p_cost_probe(const attn_g2p_model *m, const attn_g2p_set *train,
                                const attn_g2p_set *val, const attn_g2p_train_opts *o,
                                attn_g2p_cost *c) {
  memset(c, 0, sizeof *c);
  if (train->n < 1) return attn_set_error(ATTN_EINVAL, "g2p: no training examples to time");
  const double t_start = attn_train_now();
  attn_g2p_model pm = {0};
  attn_adam opt = {0};
  attn_batch_plan plan = {0};
  attn_g2p_batch bt[PROBE_BATCHES] = {{0}};
  attn_g2p_saved sv = {0};
  attn_status st = attn_g2p_plan(train, o, 0, 0, &plan);
  if (!st) st = attn_g2p_create(&pm, &m->c, &m->g);
  if (!st) st = attn_g2p_init(&pm, o->seed);
  if (!st) st = attn_g2p_adam_init(&opt, &pm, o);
  for (int k = 0; !st && k < PROBE_BATCHES; k++) {
    const int b = (int)((2 * k + 1) * (int64_t)plan.nb / (2 * PROBE_BATCHES));
    st = attn_g2p_batch_gather(train, plan.order + plan.start[b], plan.start[b + 1] - plan.start[b],
                               &bt[k]);
  }
  float loss = 0;
  int64_t step = 0;
  if (!st) st = attn_g2p_train_step(&pm, &opt, &sv, &bt[PROBE_BATCHES / 2], o, o->lr, step++, &loss);
  double best_t[PROBE_BATCHES], best_v[PROBE_BATCHES], tokens = 0;
  for (int k = 0; k < PROBE_BATCHES; k++) tokens += (double)bt[k].tokens;
  for (int r = 0; !st && r < PROBE_ROUNDS; r++)
    for (int k = 0; !st && k < PROBE_BATCHES; k++) {
      double t0 = attn_train_now();
      st = attn_g2p_train_step(&pm, &opt, &sv, &bt[k], o, o->lr, step++, &loss);
      const double t1 = attn_train_now();
      if (!st) st = attn_g2p_batch_loss(&pm, o->precision, &sv, &bt[k], &loss);
      const double t2 = attn_train_now();
      if (r == 0 || t1 - t0 < best_t[k]) best_t[k] = t1 - t0;
      if (r == 0 || t2 - t1 < best_v[k]) best_v[k] = t2 - t1;
    }
  if (!st) {
    double secs_t = 0, secs_v = 0;
    for (int k = 0; k < PROBE_BATCHES; k++) {
      secs_t += best_t[k];
      secs_v += best_v[k];
    }
    c->steps = plan.nb;
    c->train_tokens = set_tokens(train);
    c->val_tokens = set_tokens(val);
    c->train_tokens_per_s = secs_t > 0 ? tokens / secs_t : 0;
    c->val_tokens_per_s = secs_v > 0 ? tokens / secs_v : 0;
  }
  for (int k = 0; k < PROBE_BATCHES; k++) attn_g2p_batch_free(&bt[k]);
  attn_g2p_saved_free(&sv);
  attn_batch_plan_free(&plan);
  attn_adam_free(&opt);
  attn_g2p_free(&pm);
  c->probe_seconds = attn_train_now() - t_start;
  return st ? attn_prefix_error(st, "g2p: timing the training step") : ATTN_OK;
}

double attn_g2p_cost_epoch_seconds(const attn_g2p_cost *c) {
  double s = 0;
  if (c->train_tokens_per_s > 0) s += c->train_tokens / c->train_tokens_per_s;
  if (c->val_tokens_per_s > 0) s += c->val_tokens / c->val_tokens_per_s;
  return s;
}

int attn_g2p_cost_fit(const attn_g2p_cost *c, double budget, int max_epochs) {
  const double e = attn_g2p_cost_epoch_seconds(c);
  double fit = e > 0 ? floor(budget / e) : (double)max_epochs;
  if (fit > max_epochs) fit = max_epochs;
  return fit < 1 ? 1 : (int)fit;
}
