/* Training the language model (lm_train.h). */
#include "apps/lm/lm_train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/lm/lm_data.h"
#include "apps/lm/lm_ngram.h"
#include "apps/train/train_progress.h"
#include "attn/kernels.h"

void attn_lm_train_opts_default(attn_lm_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->seq = 128;
  o->batch = 16;
  o->epochs = 1;
  o->lr = 3e-3;
  o->min_lr = 3e-4;
  o->weight_decay = 0.1;
  o->clip = 1.0;
  o->warmup_frac = 0.05;
  o->seed = 1;
  o->ngram_order = 3;
}

void attn_lm_data_free(attn_lm_data *d) {
  if (!d) return;
  attn_bpe_free(d->bpe);
  free(d->train);
  free(d->val);
  memset(d, 0, sizeof *d);
}

attn_status attn_lm_data_load(const char *path, int vocab, attn_lm_data *d) {
  memset(d, 0, sizeof *d);
  attn_lm_corpus c;
  attn_status st = attn_lm_corpus_read(path, &c);
  if (st) return st;
  const char **texts = malloc((size_t)c.n * sizeof *texts);
  size_t *lens = malloc((size_t)c.n * sizeof *lens);
  int nt = 0;
  if (!texts || !lens) st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
  for (int i = 0; !st && i < c.n; i++)
    if (!c.is_val[i]) texts[nt] = c.texts[i], lens[nt++] = c.lens[i];
  attn_bpe_config bc;
  attn_bpe_config_default(&bc);
  bc.vocab_size = vocab;
  bc.max_text_bytes = 0;
  if (!st) st = attn_bpe_train(texts, lens, nt, &bc, &d->bpe);
  for (int v = 0; !st && v < 2; v++) {
    char *t = NULL;
    size_t n = 0, nids = 0;
    st = attn_lm_corpus_join(&c, v, &t, &n);
    if (!st) st = attn_bpe_encode_alloc(d->bpe, t, n, v ? &d->val : &d->train, &nids);
    free(t);
    if (v)
      d->n_val = (int64_t)nids, d->bytes_val = (int64_t)n;
    else
      d->n_train = (int64_t)nids, d->bytes_train = (int64_t)n;
  }
  d->docs_train = c.n_train;
  d->docs_val = c.n_val;
  free(texts);
  free(lens);
  attn_lm_corpus_free(&c);
  if (!st && d->n_train < 2)
    st = attn_set_error(ATTN_EINVAL, "corpus '%s': %lld training tokens (at least 2)", path,
                        (long long)d->n_train);
  if (st) attn_lm_data_free(d);
  return st;
}

attn_status attn_lm_perplexity(const attn_lm_model *m, const int32_t *tokens, int64_t n,
                               int64_t seq, int64_t batch, double *ppl) {
  if (!m || !tokens || !ppl) return attn_set_error(ATTN_EINVAL, "perplexity: NULL argument");
  if (n < 2)
    return attn_set_error(ATTN_EINVAL, "perplexity: %lld tokens (at least 2)", (long long)n);
  if (seq < 1 || seq > m->c.max_len) seq = m->c.max_len;
  if (batch < 1) batch = 1;
  const int64_t full = (n - 1) / seq, rest = (n - 1) % seq;
  int32_t *in = malloc((size_t)(batch * seq) * sizeof *in),
          *tg = malloc((size_t)(batch * seq) * sizeof *tg);
  attn_lm_saved s = {0};
  const attn_nn_ctx ctx = {0};
  attn_status st = in && tg ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "perplexity: out of memory");
  double nll = 0;
  int64_t cnt = 0;
  int64_t B = 0;
  for (int64_t w = 0; !st && w < full + (rest > 0); w += B) {
    const int64_t T = w < full ? seq : rest;
    B = w < full ? (full - w < batch ? full - w : batch) : 1;
    for (int64_t b = 0; b < B; b++) {
      memcpy(in + b * T, tokens + (w + b) * seq, (size_t)T * sizeof *in);
      memcpy(tg + b * T, tokens + (w + b) * seq + 1, (size_t)T * sizeof *tg);
    }
    double sum = 0;
    int64_t k = 0;
    st = attn_lm_forward(m, &ctx, &s, in, B, T);
    if (!st) st = attn_lm_nll_sum(m, &s, tg, &sum, &k);
    nll += sum, cnt += k;
    if (w >= full) break;
  }
  if (!st) *ppl = exp(nll / (double)cnt);
  attn_lm_saved_free(&s);
  free(in);
  free(tg);
  return st;
}

/* splitmix64 */
static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* window order of an epoch: a Fisher-Yates shuffle seeded by (seed, epoch) */
static void shuffle(int64_t *order, int64_t n, uint64_t seed, int epoch) {
  uint64_t s = seed * 1000003ull + (uint64_t)epoch;
  for (int64_t i = 0; i < n; i++)
    order[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    const int64_t j = (int64_t)(mix(&s) % (uint64_t)(i + 1));
    const int64_t t = order[i];
    order[i] = order[j], order[j] = t;
  }
}

typedef struct {
  attn_lm_model m;
  attn_adam opt;
  attn_lm_saved s;
  int32_t *in, *tg;
} trainer;

static void trainer_free(trainer *t) {
  attn_lm_free(&t->m);
  attn_adam_free(&t->opt);
  attn_lm_saved_free(&t->s);
  free(t->in);
  free(t->tg);
  memset(t, 0, sizeof *t);
}

static attn_status trainer_init(trainer *t, const attn_lm_config *c, const attn_lm_train_opts *o) {
  memset(t, 0, sizeof *t);
  attn_status st = attn_lm_create(&t->m, c);
  if (!st) st = attn_lm_init(&t->m, o->seed);
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  ac.beta2 = 0.95;
  ac.weight_decay = o->weight_decay;
  if (!st) st = attn_adam_init(&t->opt, &t->m.p, &ac);
  if (!st) st = attn_adam_set_decay_rule(&t->opt, &t->m.p, attn_lm_decay_rule, NULL);
  t->in = malloc((size_t)(o->batch * o->seq) * sizeof *t->in);
  t->tg = malloc((size_t)(o->batch * o->seq) * sizeof *t->tg);
  if (!st && (!t->in || !t->tg)) st = attn_set_error(ATTN_ENOMEM, "lm train: out of memory");
  if (st) trainer_free(t);
  return st;
}

/* One optimizer step on windows win[0..batch) of the stream. */
static attn_status train_step(trainer *t, const attn_lm_train_opts *o, const int32_t *stream,
                              const int64_t *win, double lr, float *loss) {
  const int64_t B = o->batch, T = o->seq;
  for (int64_t b = 0; b < B; b++) {
    memcpy(t->in + b * T, stream + win[b] * T, (size_t)T * sizeof *t->in);
    memcpy(t->tg + b * T, stream + win[b] * T + 1, (size_t)T * sizeof *t->tg);
  }
  const attn_nn_ctx ctx = {0};
  attn_status st = attn_lm_forward(&t->m, &ctx, &t->s, t->in, B, T);
  if (!st) st = attn_lm_loss(&t->m, &ctx, &t->s, t->tg, 1, loss);
  if (!st) st = attn_clip_grad_norm(&t->m.p, o->clip, NULL);
  if (!st) st = attn_adam_step(&t->opt, &t->m.p, lr);
  attn_params_zero_grad(&t->m.p);
  return st;
}

/* seconds of one training step, best of 3 after one warm-up, on a fresh
 * model (the run's bits do not depend on the probe) */
/* With a time budget, the plan (the steps, the cosine's length) is made
 * again every REPLAN_EVERY steps from the speed the run has measured: a
 * machine busier than at the probe shrinks it, a quieter one grows it back
 * (never past --epochs). The numbers trained depend on the final plan. */
enum { REPLAN_EVERY = 100 };

/* seconds of steps [step, fit) and their validation passes (each epoch end
 * crossed, and the last step) */
static double plan_seconds(int64_t step, int64_t fit, double step_s, double val_s, int64_t spe) {
  const int64_t ends = fit / spe - step / spe, passes = ends + (fit % spe != 0);
  return (double)(fit - step) * step_s + (double)passes * val_s;
}

int64_t attn_lm_replan(int64_t step, double step_s, double val_s, double left, int64_t spe,
                       int64_t max_total) {
  if (!(step_s > 0) || spe < 1) return max_total;
  if (max_total <= step + 1) return step + 1;
  int64_t lo = step + 1, hi = max_total; /* the largest fit in [lo, hi] within left */
  if (plan_seconds(step, hi, step_s, val_s, spe) <= left) return hi;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (plan_seconds(step, mid, step_s, val_s, spe) <= left)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

static attn_status probe(const attn_lm_config *c, const attn_lm_train_opts *o,
                         const int32_t *stream, int64_t nwin, double *step_s) {
  trainer t;
  attn_status st = trainer_init(&t, c, o);
  if (st) return st;
  int64_t *win = malloc((size_t)o->batch * sizeof *win);
  if (!win) st = attn_set_error(ATTN_ENOMEM, "lm train: out of memory");
  for (int64_t b = 0; win && b < o->batch; b++)
    win[b] = (b * 7919) % nwin;
  double best = 0;
  float loss;
  for (int r = 0; !st && r < 4; r++) {
    const double t0 = attn_train_now();
    st = train_step(&t, o, stream, win, o->lr * 0.01, &loss);
    const double dt = attn_train_now() - t0;
    if (r == 1 || (r > 1 && dt < best)) best = dt;
  }
  free(win);
  trainer_free(&t);
  *step_s = best;
  return st;
}

static void say_time(char *buf, size_t n, double s) {
  if (s < 90)
    snprintf(buf, n, "%.0f s", s);
  else
    snprintf(buf, n, "%.1f min", s / 60);
}

attn_status attn_lm_train_run(const attn_lm_config *cin, const attn_lm_data *d,
                              const attn_lm_train_opts *o, double *best_ppl) {
  if (!cin || !d || !o || !o->out) return attn_set_error(ATTN_EINVAL, "lm train: NULL argument");
  if (o->seq < 2 || o->seq > cin->max_len || o->batch < 1 || o->epochs < 1)
    return attn_set_error(
        ATTN_EINVAL, "lm train: --seq %lld (2..max_len %lld), --batch %lld, --epochs %d",
        (long long)o->seq, (long long)cin->max_len, (long long)o->batch, o->epochs);
  attn_lm_config c = *cin;
  c.vocab = attn_bpe_vocab_size(d->bpe);
  const int64_t nwin = (d->n_train - 1) / o->seq;
  if (nwin < o->batch)
    return attn_set_error(ATTN_EINVAL,
                          "lm train: %lld training tokens make %lld windows of %lld; a batch needs "
                          "%lld (a smaller --seq or --batch, or more text)",
                          (long long)d->n_train, (long long)nwin, (long long)o->seq,
                          (long long)o->batch);
  if (mkdir(o->out, 0777) && errno != EEXIST)
    return attn_set_error(ATTN_EINVAL, "lm train: cannot make '%s': %s", o->out, strerror(errno));
  const int64_t spe = nwin / o->batch, tok_step = o->batch * o->seq;
  int64_t total = spe * o->epochs;
  attn_status st = ATTN_OK;
  /* the baseline on the same validation tokens */
  double ng[2] = {0, 0};
  const int orders[2] = {2, o->ngram_order};
  for (int k = 0; k < 2 && d->n_val >= 2; k++) {
    if (k == 1 && orders[1] == 2) {
      ng[1] = ng[0];
      break;
    }
    attn_lm_ngram g;
    st = attn_lm_ngram_train(&g, orders[k], c.vocab, d->train, d->n_train);
    if (!st) st = attn_lm_ngram_perplexity(&g, d->val, d->n_val, &ng[k]);
    attn_lm_ngram_free(&g);
    if (st) return st;
  }
  if (!o->quiet) {
    printf("data: %d training documents (%lld tokens, %.2f bytes/token), %d validation documents "
           "(%lld tokens); vocabulary %lld\n",
           d->docs_train, (long long)d->n_train, (double)d->bytes_train / (double)d->n_train,
           d->docs_val, (long long)d->n_val, (long long)c.vocab);
    if (d->n_val >= 2)
      printf("baseline: Kneser-Ney bigram validation perplexity %.2f, order-%d %.2f\n", ng[0],
             orders[1], ng[1]);
  }
  double deadline = 0, probe_tps = 0, val_tokens = 0.6 * (double)d->n_val;
  if (o->time_budget > 0) {
    double step_s = 0;
    const double tp0 = attn_train_now();
    deadline = tp0 + o->time_budget;
    if ((st = probe(&c, o, d->train, nwin, &step_s))) return st;
    const double left = o->time_budget - (attn_train_now() - tp0);
    const double tps = (double)tok_step / step_s;
    probe_tps = tps;
    const double val_s = 0.6 * (double)d->n_val / tps; /* a validation token: ~0.6 of a step's */
    int64_t fit = (int64_t)floor(left / step_s);
    for (int it = 0; it < 3; it++) {
      const int64_t ep = (fit + spe - 1) / spe;
      fit = (int64_t)floor((left - (double)(ep < 1 ? 1 : ep) * val_s) / step_s);
    }
    if (fit < 1) fit = 1;
    char a[32], b[32];
    say_time(a, sizeof a, (double)total * step_s + (double)o->epochs * val_s);
    say_time(b, sizeof b, o->time_budget);
    if (!o->quiet)
      printf("plan: %.0f training tokens/s measured (step %.3f s); %d epoch(s) = %lld steps "
             "would take %s; budget %s -> %lld steps (%.2f epochs)\n",
             tps, step_s, o->epochs, (long long)total, a, b, (long long)(fit < total ? fit : total),
             (double)(fit < total ? fit : total) / (double)spe);
    if (fit < total) total = fit;
  }
  if (o->max_steps > 0 && total > o->max_steps) total = o->max_steps;
  attn_schedule sch = {ATTN_SCHED_WARMUP_COSINE, o->lr, o->min_lr, 0, total};
  sch.warmup_steps = (int64_t)(o->warmup_frac * (double)total);
  if (sch.warmup_steps >= total) sch.warmup_steps = total - 1;
  if ((st = attn_schedule_check(&sch))) return st;
  trainer t;
  if ((st = trainer_init(&t, &c, o))) return st;
  char *tok_text = NULL;
  int64_t *order = malloc((size_t)nwin * sizeof *order);
  if (!order) st = attn_set_error(ATTN_ENOMEM, "lm train: out of memory");
  if (!st) st = attn_bpe_save(d->bpe, &tok_text);
  if (!o->quiet && !st)
    printf("model: %lld layers, d_model %lld, %lld heads, ff %lld, %lld parameters; %lld steps of "
           "%lld x %lld tokens (%lld steps an epoch), AdamW lr %g -> %g\n",
           (long long)c.layers, (long long)c.d_model, (long long)c.heads, (long long)c.ff,
           (long long)t.m.p.numel, (long long)total, (long long)o->batch, (long long)o->seq,
           (long long)spe, o->lr, o->min_lr);
  double best = INFINITY, loss_sum = 0, line_sum = 0; /* the epoch's, the line's */
  int64_t loss_n = 0, line_n = 0;
  const double t_start = attn_train_now();
  double t_line = t_start, val_el = 0; /* val_el: seconds of validation so far */
  char path[4096], vbuf[32], sbuf[32];
  const int64_t max_total =
      o->max_steps > 0 && o->max_steps < spe * o->epochs ? o->max_steps : spe * o->epochs;
  for (int64_t step = 0; !st && step < total; step++) {
    if (deadline > 0 && step >= REPLAN_EVERY && step % REPLAN_EVERY == 0) {
      /* re-plan from the speed measured so far (validation included) */
      const double now = attn_train_now();
      const double step_s = (now - t_start - val_el) / (double)step;
      const double tps = (double)tok_step / step_s;
      const int64_t fit =
          attn_lm_replan(step, step_s, val_tokens / tps, deadline - now, spe, max_total);
      if (llabs(fit - total) * 50 > total) { /* a change of more than 2 % */
        if (!o->quiet)
          printf("plan: %lld -> %lld steps: measured %.0f tokens/s over %lld steps, probe said "
                 "%.0f\n",
                 (long long)total, (long long)fit, tps, (long long)step, probe_tps);
        total = fit;
        sch.total_steps = total;
        if (sch.warmup_steps >= total) sch.warmup_steps = total - 1;
      }
    }
    const int epoch = (int)(step / spe);
    const int64_t b = step % spe;
    if (b == 0) shuffle(order, nwin, o->seed, epoch);
    float loss = 0;
    st = train_step(&t, o, d->train, order + b * o->batch, attn_schedule_lr(&sch, step), &loss);
    if (st) break;
    loss_sum += loss, loss_n++;
    line_sum += loss, line_n++;
    const double now = attn_train_now();
    const int last = step + 1 == total || b + 1 == spe;
    if (!o->quiet && (now - t_line >= 30 || last)) {
      const double el = now - t_start;
      char eta[32];
      say_time(eta, sizeof eta, el / (double)(step + 1) * (double)(total - step - 1));
      printf("step %lld/%lld  epoch %d  loss %.3f  %.0f tokens/s  ETA %s\n", (long long)(step + 1),
             (long long)total, epoch + 1, line_sum / (double)line_n,
             (double)tok_step * (double)(step + 1) / el, eta);
      fflush(stdout);
      t_line = now;
      line_sum = 0, line_n = 0;
    }
    if (!last) continue;
    double vp = NAN;
    const double tv0 = attn_train_now();
    if (d->n_val >= 2 && (st = attn_lm_perplexity(&t.m, d->val, d->n_val, o->seq, o->batch, &vp)))
      break;
    val_el += attn_train_now() - tv0;
    if (!o->quiet) {
      printf("epoch %d (%lld steps): train loss %.3f, validation perplexity %.2f (KN bigram %.2f, "
             "order %d %.2f)\n",
             epoch + 1, (long long)(step + 1), loss_sum / (double)loss_n, vp, ng[0], orders[1],
             ng[1]);
      fflush(stdout);
    }
    loss_sum = 0, loss_n = 0;
    snprintf(vbuf, sizeof vbuf, "%.6g", vp);
    snprintf(sbuf, sizeof sbuf, "%lld", (long long)o->seq);
    const char *kv[] = {"lm.val_perplexity", vbuf, "lm.train_seq", sbuf, NULL};
    snprintf(path, sizeof path, "%s/last.safetensors", o->out);
    st = attn_lm_save(path, &t.m, &t.opt, tok_text, kv);
    if (!st && (!(vp >= best) || isnan(vp))) {
      best = vp;
      snprintf(path, sizeof path, "%s/best.safetensors", o->out);
      st = attn_lm_save(path, &t.m, NULL, tok_text, kv);
    }
  }
  if (!st && best_ppl) *best_ppl = best;
  if (!st && !o->quiet)
    printf("trained in %.0f s; best validation perplexity %.2f; model %s/best.safetensors\n",
           attn_train_now() - t_start, best, o->out);
  free(order);
  free(tok_text);
  trainer_free(&t);
  return st;
}
