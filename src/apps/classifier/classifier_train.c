/* Trainer pieces: batches (gathered from the plans of apps/train/
 * batch_plan.h), evaluation, the run state as JSON, and the classifier's
 * checkpoints. The loop itself is in classifier_train_loop.c. */
#include "apps/classifier/classifier_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier/classifier_ensemble.h"
#include "io/json.h"

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void attn_batch_gather(const attn_tok_set *set, const attn_batch_plan *plan, int b, int32_t *ids,
                       int32_t *lens, int *labels, int64_t *B, int64_t *L) {
  int lo = plan->start[b], hi = plan->start[b + 1];
  int32_t maxl = 1;
  for (int i = lo; i < hi; i++)
    if (set->lens[plan->order[i]] > maxl) maxl = set->lens[plan->order[i]];
  for (int i = lo; i < hi; i++) {
    int e = plan->order[i];
    int32_t *row = ids + (int64_t)(i - lo) * maxl;
    memcpy(row, set->ids[e], (size_t)set->lens[e] * sizeof(int32_t));
    memset(row + set->lens[e], 0, (size_t)(maxl - set->lens[e]) * sizeof(int32_t));
    lens[i - lo] = set->lens[e];
    if (labels) labels[i - lo] = set->labels[e];
  }
  *B = hi - lo;
  *L = maxl;
}

/* Token t of row r at step `step` is dropped iff its uniform < p. */
static int token_dropped(uint64_t key, int64_t r, int64_t t, float p) {
  return attn_rng_uniform(key, ((uint64_t)r << 32) | (uint64_t)t) < p;
}

attn_status attn_token_dropout(int32_t *ids, int32_t *lens, int64_t B, int64_t *L, float p,
                               uint64_t seed, int64_t step) {
  if (!ids || !lens || !L || B < 0 || *L < 1 || !(p >= 0.0f && p < 1.0f))
    return attn_set_error(ATTN_EINVAL, "token_dropout: NULL buffer, empty batch or p %g not in [0, 1)",
                          (double)p);
  if (p == 0.0f || B == 0) return ATTN_OK;
  uint64_t st = seed ^ 0x746f6b656e64726full, key = splitmix64(&st);
  st = key ^ (uint64_t)step;
  key = splitmix64(&st);
  int64_t L0 = *L, L1 = 1;
  int32_t *kept = malloc((size_t)B * sizeof(int32_t));
  if (!kept) return attn_set_error(ATTN_ENOMEM, "token_dropout: out of memory");
  for (int64_t r = 0; r < B; r++) {
    if (lens[r] < 1 || lens[r] > L0) {
      free(kept);
      return attn_set_error(ATTN_EINVAL, "token_dropout: row %lld has %d tokens (L %lld)",
                            (long long)r, (int)lens[r], (long long)L0);
    }
    int32_t n = 0;
    for (int64_t t = 0; t < lens[r]; t++) n += !token_dropped(key, r, t, p);
    kept[r] = n > 0 ? n : 1;
    if (kept[r] > L1) L1 = kept[r];
  }
  // Compact in place: row r moves from r*L0 to r*L1 <= r*L0, and within a row
  // the write index never passes the read index, so nothing unread is lost.
  for (int64_t r = 0; r < B; r++) {
    const int32_t *src = ids + r * L0;
    int32_t *dst = ids + r * L1;
    int32_t n = 0;
    if (kept[r] == 1 && lens[r] > 0) {  // all dropped, or one kept: find which
      int64_t t = 0;
      while (t < lens[r] && token_dropped(key, r, t, p)) t++;
      dst[n++] = src[t < lens[r] ? t : 0];
    } else {
      for (int64_t t = 0; t < lens[r]; t++)
        if (!token_dropped(key, r, t, p)) dst[n++] = src[t];
    }
    for (int64_t t = n; t < L1; t++) dst[t] = 0;
    lens[r] = n;
  }
  free(kept);
  *L = L1;
  return ATTN_OK;
}

/* m[0..n): one model, or an ensemble (the mean of the members'
 * probabilities), each run under ctx (NULL: f32, auto backend). */
static attn_status evaluate(const attn_clf *m, int n, const attn_nn_ctx *ctx, const attn_tok_set *set,
                            int batch, double *loss, double *acc, int *pred, float *p_pos) {
  if (!m || n < 1 || !set || set->n <= 0 || batch <= 0)
    return attn_set_error(ATTN_EINVAL, "clf_evaluate: no model, empty set or bad batch");
  attn_clf_ens ens = {n, (attn_clf *)m};
  attn_batch_plan plan;
  attn_status st = attn_batch_plan_make(set->lens, set->n, batch, 1, 0, 0, 0, &plan);
  if (st) return st;
  int64_t C = m->c.classes;
  int32_t *ids = malloc((size_t)(batch * m->c.max_len) * sizeof(int32_t));
  int32_t *lens = malloc((size_t)batch * sizeof(int32_t));
  int *lab = malloc((size_t)batch * sizeof(int));
  float *probs = malloc((size_t)(batch * C) * sizeof(float));
  if (!ids || !lens || !lab || !probs) st = attn_set_error(ATTN_ENOMEM, "clf_evaluate: out of memory");
  double lsum = 0.0;
  long correct = 0;
  for (int b = 0; !st && b < plan.nb; b++) {
    int64_t B, L;
    attn_batch_gather(set, &plan, b, ids, lens, lab, &B, &L);
    st = attn_clf_ens_predict_ctx(&ens, ctx, ids, lens, B, L, probs);
    for (int64_t i = 0; !st && i < B; i++) {
      int e = plan.order[plan.start[b] + i], best = 0;
      for (int64_t c = 1; c < C; c++)
        if (probs[i * C + c] > probs[i * C + best]) best = (int)c;
      double pt = probs[i * C + lab[i]];
      lsum += -log(pt > 1e-30 ? pt : 1e-30);
      correct += best == lab[i];
      if (pred) pred[e] = best;
      if (p_pos) p_pos[e] = probs[i * C + 1];
    }
  }
  if (!st) {
    if (loss) *loss = lsum / set->n;
    if (acc) *acc = (double)correct / set->n;
  }
  free(ids);
  free(lens);
  free(lab);
  free(probs);
  attn_batch_plan_free(&plan);
  return st;
}

attn_status attn_clf_evaluate(const attn_clf *m, const attn_tok_set *set, int batch, double *loss,
                              double *acc, int *pred, float *p_pos) {
  return attn_clf_evaluate_ctx(m, NULL, set, batch, loss, acc, pred, p_pos);
}

attn_status attn_clf_evaluate_ctx(const attn_clf *m, const attn_nn_ctx *ctx,
                                  const attn_tok_set *set, int batch, double *loss, double *acc,
                                  int *pred, float *p_pos) {
  return evaluate(m, 1, ctx, set, batch, loss, acc, pred, p_pos);
}

attn_status attn_clf_evaluate_members(const attn_clf *m, int n, const attn_tok_set *set, int batch,
                                      double *loss, double *acc, int *pred, float *p_pos) {
  return evaluate(m, n, NULL, set, batch, loss, acc, pred, p_pos);
}

attn_status attn_clf_evaluate_members_ctx(const attn_clf *m, int n, const attn_nn_ctx *ctx,
                                          const attn_tok_set *set, int batch, double *loss,
                                          double *acc, int *pred, float *p_pos) {
  return evaluate(m, n, ctx, set, batch, loss, acc, pred, p_pos);
}

void attn_train_state_init(attn_train_state *s) {
  memset(s, 0, sizeof *s);
  s->best_epoch = -1;
  s->shards = 1;
  attn_loss_scaler_init(&s->scaler, 0);
}

void attn_train_state_free(attn_train_state *s) {
  if (s) attn_ema_free(&s->ema);
}

attn_status attn_train_state_to_json(const attn_train_state *s, char **json) {
  char buf[768];
  int n = snprintf(buf, sizeof buf,
                   "{\"step\":%lld,\"epoch\":%d,\"batch\":%d,\"loss_sum\":%.17g,\"best\":%.17g,"
                   "\"best_epoch\":%d,\"seconds\":%.3f,\"shards\":%d",
                   (long long)s->step, s->epoch, s->batch, s->loss_sum, s->best, s->best_epoch,
                   s->seconds, s->shards);
  if (s->scaler.enabled)  // fp16: the loss scaler goes on where it was (%.9g: exact float)
    n += snprintf(buf + n, sizeof buf - (size_t)n,
                  ",\"loss_scale\":%.9g,\"loss_scale_tracker\":%lld,\"loss_scale_steps\":%lld,"
                  "\"loss_scale_skipped\":%lld",
                  (double)s->scaler.scale, (long long)s->scaler.growth_tracker,
                  (long long)s->scaler.steps, (long long)s->scaler.skipped);
  snprintf(buf + n, sizeof buf - (size_t)n, "}");
  *json = strdup(buf);
  return *json ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "train state: out of memory");
}

attn_status attn_train_state_from_json(const char *json, attn_train_state *s) {
  if (!json) return attn_set_error(ATTN_EFORMAT, "checkpoint has no \"trainer.state\" (not a training checkpoint)");
  json_value *v = NULL;
  char err[128];
  if (attn_json_parse(json, strlen(json), &v, err, sizeof err))
    return attn_set_error(ATTN_EFORMAT, "trainer.state: %s", err);
  attn_train_state_init(s);
  static const char *const keys[] = {"step", "epoch", "batch", "loss_sum", "best", "best_epoch", "seconds"};
  attn_status st = ATTN_OK;
  for (int i = 0; i < 7 && !st; i++) {
    const json_value *x = attn_json_get(v, keys[i]);
    if (!x || x->type != JSON_NUMBER) {
      st = attn_set_error(ATTN_EFORMAT, "trainer.state: '%s' missing or not a number", keys[i]);
      break;
    }
    double d = x->number;
    switch (i) {
      case 0: s->step = (int64_t)d; break;
      case 1: s->epoch = (int)d; break;
      case 2: s->batch = (int)d; break;
      case 3: s->loss_sum = d; break;
      case 4: s->best = d; break;
      case 5: s->best_epoch = (int)d; break;
      default: s->seconds = d; break;
    }
  }
  const json_value *sh = st ? NULL : attn_json_get(v, "shards");  // absent: whole batches
  if (sh && (sh->type != JSON_NUMBER || !(sh->number >= 1 && sh->number <= 4096)))
    st = attn_set_error(ATTN_EFORMAT, "trainer.state: 'shards' is not a number in 1..4096");
  else if (sh)
    s->shards = (int)sh->number;
  // fp16 runs: the loss scaler (all four keys, or none: a run without one)
  static const char *const lkeys[] = {"loss_scale", "loss_scale_tracker", "loss_scale_steps",
                                      "loss_scale_skipped"};
  int nl = 0;
  double lv[4] = {0};
  for (int i = 0; i < 4 && !st; i++) {
    const json_value *x = attn_json_get(v, lkeys[i]);
    if (!x) continue;
    if (x->type != JSON_NUMBER) {
      st = attn_set_error(ATTN_EFORMAT, "trainer.state: '%s' is not a number", lkeys[i]);
      break;
    }
    lv[i] = x->number;
    nl++;
  }
  if (!st && nl != 0 && nl != 4)
    st = attn_set_error(ATTN_EFORMAT, "trainer.state: loss scaler keys incomplete (%d of 4)", nl);
  if (!st && nl == 4) {
    if (!(lv[0] > 0) || !isfinite((float)lv[0]) || lv[1] < 0 || lv[2] < 0 || lv[3] < 0 ||
        lv[3] > lv[2])
      st = attn_set_error(ATTN_EFORMAT, "trainer.state: invalid loss scaler state "
                          "(scale %g, tracker %g, steps %g, skipped %g)", lv[0], lv[1], lv[2], lv[3]);
    else {
      attn_loss_scaler_init(&s->scaler, 1);
      s->scaler.scale = (float)lv[0];
      s->scaler.growth_tracker = (int64_t)lv[1];
      s->scaler.steps = (int64_t)lv[2];
      s->scaler.skipped = (int64_t)lv[3];
    }
  }
  attn_json_free(v);
  return st;
}

attn_status attn_clf_save(const char *path, const attn_clf *m, const attn_adam *opt,
                          const attn_train_state *s, const attn_st *meta) {
  attn_st *extra;
  attn_status st = attn_st_new(&extra);
  if (st) return st;
  for (int i = 0; meta && !st && i < attn_st_meta_count(meta); i++) {
    const char *k = attn_st_meta_key(meta, i);
    if (strcmp(k, "config") && strcmp(k, "trainer.state"))
      st = attn_st_set_meta(extra, k, attn_st_meta(meta, k));
  }
  char *cfg = NULL, *sj = NULL;
  if (!st) st = attn_clf_config_to_json(&m->c, &cfg);
  if (!st) st = attn_st_set_meta(extra, "config", cfg);
  if (!st && s) st = attn_train_state_to_json(s, &sj);
  if (!st && s) st = attn_st_set_meta(extra, "trainer.state", sj);
  if (!st && s && s->ema.avg) st = attn_ema_store_st(&s->ema, &m->p, extra);
  if (!st) st = attn_checkpoint_save(path, &m->p, opt, extra);
  free(cfg);
  free(sj);
  attn_st_free(extra);
  return st;
}

attn_status attn_clf_load_train_state(const char *path, attn_clf *m, attn_adam *opt,
                                      attn_train_state *s) {
  attn_st *f = NULL;
  attn_status st = attn_checkpoint_load(path, &m->p, opt, &f);
  attn_train_state ns;
  if (!st) st = attn_train_state_from_json(attn_st_meta(f, "trainer.state"), &ns);
  if (!st) st = attn_ema_load_st(&ns.ema, &m->p, f, NULL);
  if (!st) *s = ns;  // s changes only when everything loaded
  attn_st_free(f);
  return st;
}
