/* Padded against packed training steps on the run's own batches
 * (classifier_varlen_bench.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "apps/classifier/classifier_varlen_bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One forward + backward of the batch with m->varlen = mode; *packed: it was. */
static attn_status one_step(attn_clf *m, const attn_train_opts *o, int mode, attn_clf_acts *a,
                            const int32_t *ids, const int32_t *lens, const int32_t *tg, int64_t B,
                            int64_t L, float *dl, double *cpu, double *wall, int *packed) {
  attn_nn_ctx ctx = {.backend = o->backend, .training = 1, .seed = o->seed,
                     .precision = o->precision};
  m->varlen = mode;
  attn_params_zero_grad(&m->p);
  double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
  attn_status st = attn_clf_forward(m, &ctx, o->ckpt_acts, a, ids, lens, B, L, NULL);
  if (!st)
    st = attn_cross_entropy_f32(a->logits, tg, B, m->c.classes, -1, o->label_smoothing, NULL, dl);
  if (!st) st = attn_clf_backward(m, a, dl);
  *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  *wall = clock_s(CLOCK_MONOTONIC) - w0;
  *packed = a->cu != NULL;
  return st;
}

attn_status attn_train_varlen_bench(attn_clf *m, const attn_train_opts *o, const attn_tok_set *set,
                                    int batches, int rounds, attn_varlen_bench *r) {
  if (!m || !o || !set || !r || set->n <= 0 || batches <= 0 || rounds <= 0 || o->batch <= 0)
    return attn_set_error(ATTN_EINVAL, "varlen bench: NULL argument, no data, batches or rounds <= 0");
  memset(r, 0, sizeof *r);
  int saved = m->varlen;
  attn_batch_plan plan;
  attn_status st = attn_batch_plan_make(set->lens, set->n, o->batch, o->chunk_batches, 1, o->seed,
                                        0, &plan);
  if (st) return st;
  int32_t *ids = malloc((size_t)o->batch * (size_t)m->c.max_len * sizeof(int32_t));
  int32_t *lens = malloc((size_t)o->batch * sizeof(int32_t)), *tg = malloc((size_t)o->batch * sizeof(int32_t));
  int *labels = malloc((size_t)o->batch * sizeof(int));
  float *dl = malloc((size_t)o->batch * (size_t)m->c.classes * sizeof(float));
  attn_clf_acts a;
  memset(&a, 0, sizeof a);
  if (!ids || !lens || !tg || !labels || !dl) st = attn_set_error(ATTN_ENOMEM, "varlen bench: out of memory");
  for (int b = 0; !st && b < plan.nb && b < batches; b++) {
    int64_t B, L;
    attn_batch_gather(set, &plan, b, ids, lens, labels, &B, &L);
    if (o->token_dropout > 0) st = attn_token_dropout(ids, lens, B, &L, o->token_dropout, o->seed, b);
    for (int64_t i = 0; i < B; i++) tg[i] = labels[i], r->tokens += lens[i];
    r->padded += B * L;
    double best[2][2] = {{0, 0}, {0, 0}};
    int packed = 0;
    for (int k = 0; !st && k < 2 * rounds; k++) {  // padded, packed, padded, ...
      double c, w;
      int mode = k % 2, p = 0;
      st = one_step(m, o, mode ? ATTN_CLF_VARLEN_ON : ATTN_CLF_VARLEN_OFF, &a, ids, lens, tg, B, L,
                    dl, &c, &w, &p);
      if (k < 2 || c < best[mode][0]) best[mode][0] = c;
      if (k < 2 || w < best[mode][1]) best[mode][1] = w;
      if (mode) packed = p;
    }
    for (int i = 0; i < 2; i++) r->cpu[i] += best[i][0], r->wall[i] += best[i][1];
    r->packed_batches += packed;
    r->batches++;
  }
  m->varlen = saved;
  attn_clf_acts_free(&a);
  attn_batch_plan_free(&plan);
  free(ids);
  free(lens);
  free(tg);
  free(labels);
  free(dl);
  return st;
}
