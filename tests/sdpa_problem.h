/* Random SDPA problems for the flash tests (test_flash.c, test_sdpa_bf16.c,
 * test_sdpa_f16.c, test_sdpa_i8.c): the descriptor, layouts, q, k, v, dout,
 * key lengths and masks from a small config and a seed (the same data for
 * the same config and seed in every file), 16-bit copies of q, k, v for the
 * bf16 and fp16 paths, and small helpers their comparisons share. */
#ifndef ATTN_TEST_SDPA_PROBLEM_H
#define ATTN_TEST_SDPA_PROBLEM_H

#include <stdint.h>

#include "harness.h"

typedef struct {
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  int causal, wl, wr, q_offset;
  int key_lens;  /* 1: seeded per-batch lengths (sdpa_make_problem) */
  int bool_mask; /* [B, 1, Lq, Lk] broadcast over heads */
  int add_mask;  /* [1, Hq, Lq, Lk] broadcast over batch, some -inf */
  int strided;   /* [B, L, H, D] layouts with padding */
  float scale;   /* 0 = default */
  float qmul;    /* q in [-qmul, qmul] (large logits) */
  float koff;    /* k[..., e] += koff (1 + cos(e) / 2): a common offset per channel */
} sdpa_cfg;

typedef struct {
  attn_sdpa_desc d;
  int32_t *kl;
  uint8_t *bm;
  float *am;
  float *q, *k, *v, *dout;
  uint16_t *qh, *kh, *vh;     /* after sdpa_problem_to_bf16 / _f16: q, k, v in 16 bits */
  uint16_t (*half)(float x);  /* the rounding of qh, kh, vh (sdpa_set) */
  int64_t nq, nk, nv, no, nl; /* elements of q, k, v, out (with padding) and lse */
} sdpa_problem;

/* B 1, 2 query and 2 K/V heads, Dv = D, no causal, window, mask or scale. */
static inline sdpa_cfg sdpa_plain(int Lq, int Lk, int D) {
  sdpa_cfg c = {.B = 1,
                .Hq = 2,
                .Hkv = 2,
                .Lq = Lq,
                .Lk = Lk,
                .D = D,
                .Dv = D,
                .wl = -1,
                .wr = -1,
                .qmul = 1.0f};
  return c;
}

/* Elements of a [B, H, L, X] tensor and its strides st (b, h, row):
 * contiguous (strides 0), or [B, L, H, X + 3] with 5 more per batch. */
static inline int64_t sdpa_layout(int strided, int64_t B, int64_t H, int64_t L, int64_t X,
                                  int64_t st[3]) {
  if (!strided) {
    st[0] = st[1] = st[2] = 0;
    return B * H * L * X;
  }
  int64_t row = X + 3;
  st[2] = H * row;
  st[1] = row;
  st[0] = L * H * row + 5;
  return B * st[0];
}

/* The seeded key length of batch b (before the fixed ones below). */
static inline int32_t sdpa_seeded_key_len(unsigned seed, int b, int Lk) {
  return (int32_t)((seed * 7 + b * 13) % (Lk + 1));
}

/* q uniform in [-qmul, qmul] (seed), k, v, dout in [-1, 1] (seed + 1, 2, 3);
 * key lengths (key_lens): seeded, batch 0 gets 0 when B > 1, batch 1 gets
 * Lk - 1 when B > 2, the last batch Lk; bool mask (seed + 4) keeps ~80% of
 * the keys; additive mask (seed + 5) in [-2, 2] with every 7th entry -inf. */
static inline void sdpa_make_problem(const sdpa_cfg *c, unsigned seed, sdpa_problem *p) {
  memset(p, 0, sizeof *p);
  attn_sdpa_desc *d = &p->d;
  attn_sdpa_desc_init(d, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv);
  d->causal = c->causal;
  d->window_left = c->wl;
  d->window_right = c->wr;
  d->q_offset = c->q_offset;
  if (c->scale != 0) {
    d->has_scale = 1;
    d->scale = c->scale;
  }
  p->nq = sdpa_layout(c->strided, c->B, c->Hq, c->Lq, c->D, d->q_stride);
  p->nk = sdpa_layout(c->strided, c->B, c->Hkv, c->Lk, c->D, d->k_stride);
  p->nv = sdpa_layout(c->strided, c->B, c->Hkv, c->Lk, c->Dv, d->v_stride);
  p->no = sdpa_layout(c->strided, c->B, c->Hq, c->Lq, c->Dv, d->o_stride);
  p->nl = (int64_t)c->B * c->Hq * c->Lq;
  p->q = malloc((p->nq + 1) * sizeof(float));
  p->k = malloc((p->nk + 1) * sizeof(float));
  p->v = malloc((p->nv + 1) * sizeof(float));
  p->dout = malloc((p->no + 1) * sizeof(float));
  fill_uniform(p->q, p->nq, seed, -c->qmul, c->qmul);
  fill_uniform(p->k, p->nk, seed + 1, -1, 1);
  fill_uniform(p->v, p->nv, seed + 2, -1, 1);
  fill_uniform(p->dout, p->no, seed + 3, -1, 1);
  for (int64_t i = 0; i < p->nk && c->koff != 0; i++) /* contiguous layouts only */
    p->k[i] += c->koff * (1.0f + 0.5f * cosf((float)(i % c->D)));
  if (c->key_lens) {
    p->kl = malloc(c->B * sizeof(int32_t));
    for (int b = 0; b < c->B; b++)
      p->kl[b] = sdpa_seeded_key_len(seed, b, c->Lk);
    if (c->B > 1) p->kl[0] = 0;
    p->kl[c->B - 1] = c->Lk; /* one full batch */
    if (c->B > 2) p->kl[1] = c->Lk > 0 ? c->Lk - 1 : 0;
    d->key_lens = p->kl;
  }
  int64_t n2 = (int64_t)c->Lq * c->Lk;
  if (c->bool_mask) {
    p->bm = malloc(c->B * n2 + 1);
    float *u = malloc((c->B * n2 + 1) * sizeof(float));
    fill_uniform(u, c->B * n2, seed + 4, 0, 1);
    for (int64_t i = 0; i < c->B * n2; i++)
      p->bm[i] = u[i] > 0.2f;
    free(u);
    d->bool_mask = p->bm;
    d->bool_mask_stride[0] = n2;
    d->bool_mask_stride[2] = c->Lk;
    d->bool_mask_stride[3] = 1;
  }
  if (c->add_mask) {
    p->am = malloc((c->Hq * n2 + 1) * sizeof(float));
    fill_uniform(p->am, c->Hq * n2, seed + 5, -2, 2);
    for (int64_t i = 0; i < c->Hq * n2; i += 7)
      p->am[i] = -INFINITY;
    d->add_mask = p->am;
    d->add_mask_stride[1] = n2;
    d->add_mask_stride[2] = c->Lk;
    d->add_mask_stride[3] = 1;
  }
}

static inline void sdpa_free_problem(sdpa_problem *p) {
  free(p->kl), free(p->bm), free(p->am);
  free(p->q), free(p->k), free(p->v), free(p->dout);
  free(p->qh), free(p->kh), free(p->vh);
}

/* x rounded through 16 bits (to, from) in place, the 16-bit values into h */
static inline void sdpa_round16(float *x, uint16_t *h, int64_t n, uint16_t (*to)(float),
                                float (*from)(uint16_t)) {
  for (int64_t i = 0; i < n; i++) {
    h[i] = to(x[i]);
    x[i] = from(h[i]);
  }
}

static inline void sdpa_problem_to_half(sdpa_problem *p, uint16_t (*to)(float),
                                        float (*from)(uint16_t)) {
  p->half = to;
  p->qh = malloc((p->nq + 1) * sizeof(uint16_t));
  p->kh = malloc((p->nk + 1) * sizeof(uint16_t));
  p->vh = malloc((p->nv + 1) * sizeof(uint16_t));
  sdpa_round16(p->q, p->qh, p->nq, to, from);
  sdpa_round16(p->k, p->kh, p->nk, to, from);
  sdpa_round16(p->v, p->vh, p->nv, to, from);
}

/* q, k, v and dout rounded to bf16 (the f32 arrays then hold the bf16
 * values, so a reference sees what the kernel sees; dout as the bf16
 * backward rounds it); qh, kh, vh the bf16 copies. */
static inline void sdpa_problem_to_bf16(sdpa_problem *p) {
  sdpa_problem_to_half(p, attn_f32_to_bf16, attn_bf16_to_f32);
  uint16_t *tmp = malloc((p->no + 1) * sizeof(uint16_t));
  sdpa_round16(p->dout, tmp, p->no, attn_f32_to_bf16, attn_bf16_to_f32);
  free(tmp);
}

/* q, k, v rounded to fp16 as above (dout stays f32). */
static inline void sdpa_problem_to_f16(sdpa_problem *p) {
  sdpa_problem_to_half(p, attn_f32_to_f16, attn_f16_to_f32);
}

/* x[i] = val, and h[i] its 16-bit value when the problem has 16-bit copies
 * (x, h: p->q and p->qh, or k, or v). */
static inline void sdpa_set(const sdpa_problem *p, float *x, uint16_t *h, int64_t i, float val) {
  x[i] = val;
  if (h) h[i] = p->half(val);
}

/* A bool mask [B, 1, Lq, Lk] (contiguous problem) allowing every key but
 * none to row i of batch b (replaces any mask the config made). */
static inline void sdpa_hide_row(sdpa_problem *p, int64_t b, int64_t i) {
  const int64_t Lq = p->d.Lq, Lk = p->d.Lk;
  free(p->bm);
  p->bm = malloc((size_t)(p->d.B * Lq * Lk));
  memset(p->bm, 1, (size_t)(p->d.B * Lq * Lk));
  memset(p->bm + b * Lq * Lk + i * Lk, 0, (size_t)Lk);
  p->d.bool_mask = p->bm;
  p->d.bool_mask_stride[0] = Lq * Lk;
  p->d.bool_mask_stride[2] = Lk;
  p->d.bool_mask_stride[3] = 1;
}

static inline float *sdpa_zeros(int64_t n) { return calloc((size_t)n + 1, sizeof(float)); }

static inline int sdpa_any_nan(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (isnan(x[i])) return 1;
  return 0;
}

/* the largest finite |x| */
static inline float sdpa_max_abs(const float *x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(x[i]) && fabsf(x[i]) > m) m = fabsf(x[i]);
  return m;
}

/* The line after a failed case: its path or kernel set, config and seed. */
static inline void sdpa_print_case(const char *path, const sdpa_cfg *c, unsigned seed) {
  printf("  ^ %s B%d Hq%d Hkv%d Lq%d Lk%d D%d Dv%d causal%d w(%d,%d) qoff%d kl%d bm%d am%d st%d "
         "scale%g qmul%g koff%g seed %u\n",
         path, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv, c->causal, c->wl, c->wr, c->q_offset,
         c->key_lens, c->bool_mask, c->add_mask, c->strided, (double)c->scale, (double)c->qmul,
         (double)c->koff, seed);
}

#endif
