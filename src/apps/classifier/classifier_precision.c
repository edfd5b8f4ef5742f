/* The classifier's precision probes (classifier_precision.h). */
#include "apps/classifier/classifier_precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/train/train_replan.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the process, all threads: what other load does not move. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

attn_status attn_prec_probe_batch(const attn_tok_set *train, int64_t max_len, int max_rows,
                                  int64_t target_tokens, float token_dropout, uint64_t seed,
                                  int32_t *ids, int32_t *lens, int *labels, int64_t *B, int64_t *L) {
  if (!train || train->n <= 0 || max_len < 1 || max_rows < 1 || !ids || !lens || !labels || !B || !L)
    return attn_set_error(ATTN_EINVAL, "probe batch: empty training set or NULL buffer");
  int n = train->n;
  /* the examples by length, and the one at the token-weighted median */
  int *idx = malloc((size_t)n * sizeof *idx);
  if (!idx) return attn_set_error(ATTN_ENOMEM, "probe batch: out of memory");
  for (int i = 0; i < n; i++) idx[i] = i;
  for (int i = 1; i < n; i++) {  // insertion sort by length: once per run, n ~ 5k
    int v = idx[i], j = i;
    while (j > 0 && train->lens[idx[j - 1]] > train->lens[v]) idx[j] = idx[j - 1], j--;
    idx[j] = v;
  }
  double total = 0, cum = 0;
  for (int i = 0; i < n; i++) total += train->lens[i];
  int med = 0;
  while (med < n - 1 && (cum += train->lens[idx[med]]) < total / 2) med++;
  double kept = (double)train->lens[idx[med]] * (1.0 - token_dropout);
  int rows = (int)((double)target_tokens / (kept > 1 ? kept : 1) + 0.5);
  if (rows < 2) rows = 2;
  if (rows > max_rows) rows = max_rows;
  if (rows > n) rows = n;
  int lo = med - rows / 2;
  if (lo < 0) lo = 0;
  if (lo + rows > n) lo = n - rows;
  int32_t lmax = 1;
  for (int r = 0; r < rows; r++)
    if (train->lens[idx[lo + r]] > lmax) lmax = train->lens[idx[lo + r]];
  if (lmax > max_len) lmax = (int32_t)max_len;
  for (int r = 0; r < rows; r++) {
    int e = idx[lo + r];
    int32_t len = train->lens[e] < lmax ? train->lens[e] : lmax;
    memcpy(ids + (int64_t)r * lmax, train->ids[e], (size_t)len * sizeof(int32_t));
    memset(ids + (int64_t)r * lmax + len, 0, (size_t)(lmax - len) * sizeof(int32_t));
    lens[r] = len;
    labels[r] = train->labels[e];
  }
  free(idx);
  *B = rows;
  *L = lmax;
  return token_dropout > 0 ? attn_token_dropout(ids, lens, rows, L, token_dropout, seed, 0) : ATTN_OK;
}

typedef struct {
  attn_clf m;
  attn_adam opt;
  attn_qat *qat;
  attn_clf_acts acts[3];
  int32_t *tg;
  float *dlogits, *probs;
} probe_model;

static void probe_free(probe_model *pm) {
  for (int i = 0; i < 3; i++) attn_clf_acts_free(&pm->acts[i]);
  attn_adam_free(&pm->opt);
  attn_qat_free(pm->qat);
  attn_clf_free(&pm->m);
  free(pm->tg);
  free(pm->dlogits);
  free(pm->probs);
}

/* Forward + loss + backward in precision prec (acts k); *fb its time. Then
 * zero_grad, clipping and AdamW (what every step adds); *fixed their time. */
static attn_status probe_step(probe_model *pm, const attn_prec_probe_opts *o, attn_precision prec,
                              int k, uint64_t step, const int32_t *ids, const int32_t *lens,
                              int64_t B, int64_t L, double *fb, double *fb_cpu, double *fixed) {
  attn_nn_ctx ctx = {.backend = o->backend, .training = 1, .seed = o->seed, .step = step,
                     .precision = prec, .qat = pm->qat};
  double c0 = cpu_s(), t0 = now_s();
  attn_status st = attn_clf_forward(&pm->m, &ctx, o->ckpt_acts, &pm->acts[k], ids, lens, B, L, NULL);
  if (!st)
    st = attn_cross_entropy_f32(pm->acts[k].logits, pm->tg, B, pm->m.c.classes, -1, 0.0f, NULL,
                                pm->dlogits);
  if (!st) st = attn_clf_backward(&pm->m, &pm->acts[k], pm->dlogits);
  double t1 = now_s();
  *fb_cpu = cpu_s() - c0;
  double norm = 0;
  if (!st) st = attn_clip_grad_norm(&pm->m.p, 1.0, &norm);
  if (st == ATTN_ENUMERIC) st = ATTN_OK;  // a random model's odd step: timing only
  if (!st) st = attn_adam_step(&pm->opt, &pm->m.p, 1e-4);
  attn_params_zero_grad(&pm->m.p);
  *fb = t1 - t0;
  *fixed = now_s() - t1;
  return st;
}

attn_status attn_prec_probe(const attn_clf_config *c, const attn_prec_probe_opts *o,
                            const int32_t *ids, const int32_t *lens, const int *labels, int64_t B,
                            int64_t L, const attn_precision *cands, int n,
                            attn_prec_probe_result *r) {
  if (!c || !o || !ids || !lens || !labels || !r || B < 1 || L < 1 || (n > 0 && !cands))
    return attn_set_error(ATTN_EINVAL, "precision probe: NULL argument or empty batch");
  memset(r, 0, sizeof *r);
  double t_start = now_s();
  r->t[0].prec = ATTN_PREC_F32;
  r->n = 1;
  for (int i = 0; i < n && r->n < 3; i++) {
    int dup = cands[i] == ATTN_PREC_F32;
    for (int j = 1; j < r->n; j++) dup |= r->t[j].prec == cands[i];
    if (!dup) r->t[r->n++].prec = cands[i];
  }
  r->B = B;
  r->L = L;
  for (int64_t b = 0; b < B; b++) r->tokens += lens[b];
  int rounds = o->rounds > 0 ? o->rounds : 5;
  double max_s = o->max_seconds > 0 ? o->max_seconds : 2.0;
  /* the rounds spread over the window (a short one waits): one busy second
   * of a shared machine does not set the best of them all */
  attn_probe_window win = {max_s < 2.0 ? max_s : 2.0, rounds < 3 ? rounds : 3, rounds};

  probe_model pm;
  memset(&pm, 0, sizeof pm);
  attn_status st = attn_clf_create(&pm.m, c);
  if (!st) st = attn_clf_init(&pm.m, o->seed);
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  if (!st) st = attn_adam_init(&pm.opt, &pm.m.p, &ac);
  if (!st && o->qat) st = attn_qat_new(&pm.qat, 0);
  if (!st && pm.qat) st = attn_qat_set_activation(pm.qat, o->qat_act);
  pm.tg = malloc((size_t)B * sizeof(int32_t));
  pm.dlogits = malloc((size_t)(B * c->classes) * sizeof(float));
  pm.probs = malloc((size_t)(B * c->classes) * sizeof(float));
  if (!st && (!pm.tg || !pm.dlogits || !pm.probs))
    st = attn_set_error(ATTN_ENOMEM, "precision probe: out of memory");
  for (int64_t b = 0; !st && b < B; b++) pm.tg[b] = labels[b];

  double fixed_best = 1e30, fb, fbc, fixed;
  uint64_t step = 0;
  double warm[3] = {0};
  for (int i = 0; !st && i < r->n; i++) {  // warm-up: first-use allocations, page faults
    st = probe_step(&pm, o, r->t[i].prec, i, step++, ids, lens, B, L, &warm[i], &fbc, &fixed);
    /* a candidate whose warm-up took over 3x f32's (which paid the thread
     * pool's start too) is far below the margin: no timed rounds */
    if (i > 0 && warm[i] > 3.0 * warm[0]) {
      r->t[i].dropped = 1;
      r->t[i].fb_seconds = warm[i];
      r->t[i].fb_cpu_seconds = fbc;
      r->t[i].rounds = 1;
    }
  }
  double t_rounds = now_s();
  for (int round = 0; !st && round < rounds; round++) {
    double wait = attn_probe_window_next(&win, round, now_s() - t_rounds);
    if (wait < 0) break;
    if (wait > 0) {
      struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
      nanosleep(&ts, NULL);
    }
    for (int i = 0; !st && i < r->n; i++) {
      attn_prec_timing *t = &r->t[i];
      if (t->dropped) continue;
      st = probe_step(&pm, o, t->prec, i, step++, ids, lens, B, L, &fb, &fbc, &fixed);
      if (st) break;
      if (!t->rounds || fb < t->fb_seconds) t->fb_seconds = fb;
      if (!t->rounds || fbc < t->fb_cpu_seconds) t->fb_cpu_seconds = fbc;
      t->rounds++;
      if (fixed < fixed_best) fixed_best = fixed;
    }
    for (int i = 1; !st && i < r->n; i++)  // far slower than f32: no need to measure it again
      if (r->t[i].fb_seconds > 2.0 * r->t[0].fb_seconds) r->t[i].dropped = 1;
  }
  for (int i = 0; !st && i < r->n; i++)
    r->t[i].tokens_per_s = r->t[i].fb_seconds > 0 ? (double)r->tokens / r->t[i].fb_seconds : 0;
  r->step_fixed_seconds = fixed_best < 1e30 ? fixed_best : 0;
  /* f32 inference, as validation and the test report run it */
  double ev_best = 1e30;
  for (int k = 0; !st && k < 2; k++) {
    double t0 = now_s();
    st = attn_clf_predict_ctx(&pm.m, NULL, ids, lens, B, L, pm.probs);
    if (now_s() - t0 < ev_best) ev_best = now_s() - t0;
  }
  if (!st) r->eval_tokens_per_s = ev_best > 0 ? (double)r->tokens / ev_best : 0;
  probe_free(&pm);
  r->seconds = now_s() - t_start;
  if (st) attn_prefix_error(st, "precision probe");
  return st;
}

attn_status attn_prec_probe_infer(const attn_clf_ens *e, const int32_t *ids, const int32_t *lens,
                                  int64_t B, int64_t L, double *ratio) {
  *ratio = 0;
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  if (!bf.candidate) return ATTN_OK;
  if (!e || e->n < 1 || B < 1) return attn_set_error(ATTN_EINVAL, "inference probe: empty input");
  const int64_t n = B * e->m[0].c.classes;
  float *probs = malloc((size_t)n * sizeof(float));
  if (!probs) return attn_set_error(ATTN_ENOMEM, "inference probe: out of memory");
  const attn_nn_ctx ctx[2] = {{.precision = ATTN_PREC_F32}, {.precision = ATTN_PREC_BF16}};
  double best[2] = {1e30, 1e30};
  attn_status st = ATTN_OK;
  for (int round = 0; !st && round < 4; round++) /* round 0 warms up */
    for (int i = 0; !st && i < 2; i++) {
      double t0 = now_s();
      st = attn_clf_ens_predict_ctx(e, &ctx[i], ids, lens, B, L, probs);
      double t = now_s() - t0;
      if (round > 0 && t < best[i]) best[i] = t;
    }
  free(probs);
  if (st) return attn_prefix_error(st, "inference probe");
  *ratio = best[1] > 0 ? best[0] / best[1] : 0;
  return ATTN_OK;
}

attn_status attn_prec_auto_infer(const attn_clf_ens *e, const int32_t *ids, const int32_t *lens,
                                 int64_t B, int64_t L, attn_precision *prec, char *why,
                                 size_t why_cap) {
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  double r = 0;
  attn_status st = bf.candidate ? attn_prec_probe_infer(e, ids, lens, B, L, &r) : ATTN_OK;
  if (st) return st;
  *prec = r >= ATTN_PREC_AUTO_MARGIN ? ATTN_PREC_BF16 : ATTN_PREC_F32;
  if (!bf.candidate) snprintf(why, why_cap, "bf16: %s", bf.why);
  else
    snprintf(why, why_cap, "bf16 %.2fx f32%s; %s", r,
             r >= ATTN_PREC_AUTO_MARGIN ? "" : ", under the margin", bf.units);
  return ATTN_OK;
}
