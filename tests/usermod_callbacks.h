/* The user data and the per-pair callbacks (attn/sdpa_mods.h) that
 * tests/test_usermod.c and tests/test_usermod_row.c share: a causal
 * mask_mod, ALiBi (with its parameter gradient) and softcap as score_mod. */
#ifndef ATTN_TEST_USERMOD_CALLBACKS_H
#define ATTN_TEST_USERMOD_CALLBACKS_H

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
  int64_t q_offset, wl, wr; /* window: -1 unbounded */
  const float *slopes;      /* [Hq] ALiBi */
  int64_t B, H;
  float cap;                /* softcap */
  const int32_t *doc;       /* document id per position (self-attention) */
  float *slope_grad;        /* [B, H] partials of d loss / d slope[h] */
  int64_t nan_b, nan_h, nan_q, nan_kv; /* nan_score: NaN there */
  atomic_long calls;        /* mask_mod + score_mod calls (counting callbacks) */
  atomic_long inf_seen;     /* infinite scores passed to a row callback */
  atomic_long max_n;        /* the longest run passed to a row callback */
} mctx;

static int causal_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h;
  return kv <= q + ((mctx *)u)->q_offset;
}

static float dist(const mctx *c, int64_t q, int64_t kv) {
  const int64_t p = q + c->q_offset;
  return (float)(p > kv ? p - kv : kv - p);
}

static float alibi_score(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b;
  const mctx *c = u;
  return s + (-c->slopes[h] * dist(c, q, kv)); /* the built-in's rounding: s + bias */
}

static float one_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)s, (void)b, (void)h, (void)q, (void)kv, (void)u;
  return 1.0f;
}

static void alibi_param_grad(float s, float g, int64_t b, int64_t h, int64_t q, int64_t kv,
                             void *u) {
  (void)s;
  mctx *c = u;
  c->slope_grad[b * c->H + h] += g * -dist(c, q, kv);
}

static float softcap_score(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  const float cap = ((mctx *)u)->cap;
  return cap * tanhf(s / cap);
}

static float softcap_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  const float t = tanhf(s / ((mctx *)u)->cap);
  return 1.0f - t * t;
}

#endif
