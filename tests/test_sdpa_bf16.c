/* bf16 flash attention (attn/sdpa_bf16.h), AMX and portable paths, against
 * the f32 math path run on the same bf16-valued inputs (q, k, v rounded to
 * bf16 first, so only the kernel's own rounding is measured).
 *
 * Tolerances (|v| <= 1, |dout| <= 1):
 *   out: p is rounded to bf16 (relative 2^-9) before P·V while l sums the
 *        f32 p, so |out - ref| <= 2^-9 max|v| ~ 2e-3, plus f32 noise: 2.5e-3.
 *   lse: f32 throughout (exp and summation order only): 2e-5 + 2e-5 |lse|.
 *   grads: dout, P and dS are rounded to bf16 (2^-9 each) as GEMM operands:
 *        2^-7 of each gradient tensor's largest magnitude, + 1e-4.
 * AMX against portable: both within the tolerances above of math (they
 * differ in summation order and exp only); 1 vs 2 threads: bit-identical. */
#include <stdint.h>

#include "attn/sdpa_bf16.h"
#include "harness.h"
#include "kernels/amx.h"

static int have_amx(void) { return attn_sdpa_bf16_path_available(ATTN_LOWP_AMX); }

typedef struct {
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  int causal, wl, wr;
  int key_lens;  /* 1: per-batch lengths, batch 0 gets 0 when B > 1 */
  int bool_mask; /* [B, 1, Lq, Lk] broadcast over heads */
  int add_mask;  /* [1, Hq, Lq, Lk] broadcast over batch, some -inf */
  int strided;   /* [B, L, H, D] layouts with padding */
  float scale;   /* 0 = default */
  float qmul;    /* q values times this (large logits) */
  int q_offset;
} cfg;

typedef struct {
  attn_sdpa_desc d;
  int32_t *kl;
  uint8_t *bm;
  float *am;
  float *q, *k, *v, *dout; /* bf16-valued f32 */
  uint16_t *qh, *kh, *vh;  /* the same as bf16 */
  int64_t nq, nk, nv, no, nl;
} problem;

static int64_t layout(int strided, int64_t B, int64_t H, int64_t L, int64_t X, int64_t st[3]) {
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

static void to_bf16(float *x, uint16_t *h, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    h[i] = attn_f32_to_bf16(x[i]);
    x[i] = attn_bf16_to_f32(h[i]);
  }
}

static void make_problem(const cfg *c, unsigned seed, problem *p) {
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
  p->nq = layout(c->strided, c->B, c->Hq, c->Lq, c->D, d->q_stride);
  p->nk = layout(c->strided, c->B, c->Hkv, c->Lk, c->D, d->k_stride);
  p->nv = layout(c->strided, c->B, c->Hkv, c->Lk, c->Dv, d->v_stride);
  p->no = layout(c->strided, c->B, c->Hq, c->Lq, c->Dv, d->o_stride);
  p->nl = (int64_t)c->B * c->Hq * c->Lq;
  p->q = malloc((p->nq + 1) * sizeof(float));
  p->k = malloc((p->nk + 1) * sizeof(float));
  p->v = malloc((p->nv + 1) * sizeof(float));
  p->dout = malloc((p->no + 1) * sizeof(float));
  p->qh = malloc((p->nq + 1) * sizeof(uint16_t));
  p->kh = malloc((p->nk + 1) * sizeof(uint16_t));
  p->vh = malloc((p->nv + 1) * sizeof(uint16_t));
  fill_uniform(p->q, p->nq, seed, -c->qmul, c->qmul);
  fill_uniform(p->k, p->nk, seed + 1, -1, 1);
  fill_uniform(p->v, p->nv, seed + 2, -1, 1);
  fill_uniform(p->dout, p->no, seed + 3, -1, 1);
  to_bf16(p->q, p->qh, p->nq);
  to_bf16(p->k, p->kh, p->nk);
  to_bf16(p->v, p->vh, p->nv);
  { /* dout as the backward rounds it: the reference sees the same values */
    uint16_t *tmp = malloc((p->no + 1) * sizeof(uint16_t));
    to_bf16(p->dout, tmp, p->no);
    free(tmp);
  }
  if (c->key_lens) {
    p->kl = malloc(c->B * sizeof(int32_t));
    for (int b = 0; b < c->B; b++)
      p->kl[b] = (int32_t)((seed * 7 + b * 13) % (c->Lk + 1));
    if (c->B > 1) p->kl[0] = 0;
    p->kl[c->B - 1] = c->Lk;
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

static void free_problem(problem *p) {
  free(p->kl), free(p->bm), free(p->am);
  free(p->q), free(p->k), free(p->v), free(p->dout);
  free(p->qh), free(p->kh), free(p->vh);
}

static float *zeros(int64_t n) { return calloc((size_t)n + 1, sizeof(float)); }

static float max_abs(const float *x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(x[i]) && fabsf(x[i]) > m) m = fabsf(x[i]);
  return m;
}

static int any_nan(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (isnan(x[i])) return 1;
  return 0;
}

static int backward_on; /* set once the backward exists for this run */

/* Runs the bf16 path and math on one problem and compares. */
static void compare_case(attn_lowp_path path, const cfg *c, unsigned seed, int backward) {
  problem p;
  make_problem(c, seed, &p);
  float *o0 = zeros(p.no), *o1 = zeros(p.no), *l0 = zeros(p.nl), *l1 = zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o1, l1));
  int before = h_case_failed;
  h_case_failed = 0;
  CHECK_CLOSE("out", o1, o0, p.no, 2.5e-3, 0);
  CHECK_CLOSE("lse", l1, l0, p.nl, 2e-5, 2e-5);
  CHECK(!any_nan(o1, p.no));
  if (backward && backward_on) {
    float *g0[3] = {zeros(p.nq), zeros(p.nk), zeros(p.nv)};
    float *g1[3] = {zeros(p.nq), zeros(p.nk), zeros(p.nv)};
    int64_t n[3] = {p.nq, p.nk, p.nv};
    static const char *name[3] = {"dq", "dk", "dv"};
    CHECK_OK(attn_sdpa_backward_math(&p.d, p.q, p.k, p.v, o0, l0, p.dout, g0[0], g0[1], g0[2]));
    CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o0, l0, p.dout, g1[0],
                                          g1[1], g1[2]));
    for (int i = 0; i < 3; i++) {
      CHECK_CLOSE(name[i], g1[i], g0[i], n[i], 1e-4 + max_abs(g0[i], n[i]) / 128, 0);
      CHECK(!any_nan(g1[i], n[i]));
      free(g0[i]), free(g1[i]);
    }
  }
  if (h_case_failed)
    printf("  ^ %s B%d Hq%d Hkv%d Lq%d Lk%d D%d Dv%d causal%d w(%d,%d) kl%d bm%d am%d st%d "
           "qoff%d seed %u\n",
           path == ATTN_LOWP_AMX ? "amx" : "portable", c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D,
           c->Dv, c->causal, c->wl, c->wr, c->key_lens, c->bool_mask, c->add_mask, c->strided,
           c->q_offset, seed);
  h_case_failed |= before;
  free(o0), free(o1), free(l0), free(l1);
  free_problem(&p);
}

static void for_each_path(const cfg *c, unsigned seed, int backward) {
  compare_case(ATTN_LOWP_PORTABLE, c, seed, backward);
  if (have_amx()) compare_case(ATTN_LOWP_AMX, c, seed, backward);
}

static cfg plain(int Lq, int Lk, int D) {
  cfg c = {1, 2, 2, Lq, Lk, D, D, 0, -1, -1, 0, 0, 0, 0, 0.0f, 1.0f, 0};
  return c;
}

static void test_head_dims(void) {
  static const int dims[] = {1, 2, 7, 32, 40, 64, 80, 128, 129, 256};
  for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    cfg c = plain(37, 70, dims[i]);
    c.Dv = dims[(i + 3) % 10];
    for_each_path(&c, 100 + i, 1);
    c.Dv = dims[i];
    for_each_path(&c, 200 + i, 1);
  }
}

static void test_lengths_and_tails(void) {
  static const int L[][2] = {{1, 1},    {1, 65},   {5, 3},    {64, 64},  {16, 16},
                             {65, 129}, {130, 63}, {97, 200}, {200, 97}, {17, 300}};
  for (unsigned i = 0; i < sizeof L / sizeof L[0]; i++) {
    cfg c = plain(L[i][0], L[i][1], 64);
    for_each_path(&c, 300 + i, 1);
    c.D = c.Dv = 128;
    for_each_path(&c, 400 + i, 1);
  }
}

static void test_causal_windows_offset(void) {
  static const int W[][3] = {{1, -1, -1}, {0, 5, -1},  {0, 20, 0},
                             {0, -1, 3},  {1, 70, -1}, {0, 0, 0}};
  static const int L[][2] = {{150, 150}, {100, 190}, {190, 100}};
  for (unsigned w = 0; w < sizeof W / sizeof W[0]; w++)
    for (unsigned i = 0; i < 3; i++) {
      cfg c = plain(L[i][0], L[i][1], 64);
      c.causal = W[w][0];
      c.wl = W[w][1];
      c.wr = W[w][2];
      for_each_path(&c, 500 + w * 3 + i, 1);
    }
  cfg c = plain(40, 150, 64); /* decoder: new queries after a cache */
  c.causal = 1;
  c.q_offset = 110;
  for_each_path(&c, 520, 1);
}

static void test_masks_key_lens_gqa(void) {
  cfg c = plain(70, 90, 64);
  c.B = 3;
  c.Hq = 4;
  c.Hkv = 2;
  c.key_lens = 1;
  for_each_path(&c, 600, 1);
  c.bool_mask = 1;
  for_each_path(&c, 601, 1);
  c.add_mask = 1;
  c.causal = 1;
  for_each_path(&c, 602, 1);
  c.Hkv = 1;
  c.Dv = 48;
  c.key_lens = 0;
  for_each_path(&c, 603, 1);
  cfg g = plain(33, 129, 128); /* 8 query heads on 2 K/V heads */
  g.Hq = 8;
  g.Hkv = 2;
  g.Dv = 64;
  for_each_path(&g, 604, 1);
}

static void test_strided_scale_large_logits(void) {
  cfg c = plain(50, 77, 40);
  c.B = 2;
  c.Hq = 4;
  c.Hkv = 2;
  c.strided = 1;
  c.causal = 1;
  for_each_path(&c, 700, 1);
  c.scale = 0.37f;
  c.qmul = 8.0f; /* logits ~ +-40: exercises the lazy max (TAU) */
  for_each_path(&c, 701, 1);
}

static void test_random_shapes(void) {
  unsigned s = 12345;
  for (int t = 0; t < 24; t++) {
    s = s * 1103515245u + 12345u;
    cfg c = plain(1 + (int)((s >> 8) % 150), 1 + (int)((s >> 16) % 150), 1 + (int)((s >> 4) % 96));
    c.Dv = 1 + (int)((s >> 12) % 96);
    c.B = 1 + (int)((s >> 20) % 2);
    c.Hkv = 1 + (int)((s >> 22) % 2);
    c.Hq = c.Hkv * (1 + (int)((s >> 24) % 3));
    c.causal = (s >> 26) & 1;
    c.key_lens = (s >> 27) & 1;
    c.bool_mask = ((s >> 28) & 3) == 0;
    c.add_mask = ((s >> 29) & 3) == 1;
    c.strided = (s >> 30) & 1;
    if (((s >> 3) & 3) == 0) c.wl = (int)((s >> 5) % 40);
    for_each_path(&c, 800 + t, 1);
  }
}

/* Rows with no allowed key: out 0, lse -inf, zero gradient, never NaN. */
static void test_fully_masked_rows(void) {
  cfg c = plain(40, 50, 64);
  c.B = 2;
  c.key_lens = 1; /* batch 0: no keys at all */
  c.causal = 1;
  c.q_offset = 0;
  c.wl = 0;
  c.wr = -1;
  for (int pth = 0; pth < 2; pth++) {
    attn_lowp_path path = pth ? ATTN_LOWP_AMX : ATTN_LOWP_PORTABLE;
    if (pth && !have_amx()) continue;
    problem p;
    make_problem(&c, 900, &p);
    /* every key of batch 1's row 3 masked by the bool mask too */
    p.bm = malloc((size_t)(2 * 40 * 50));
    memset(p.bm, 1, 2 * 40 * 50);
    memset(p.bm + 40 * 50 + 3 * 50, 0, 50);
    p.d.bool_mask = p.bm;
    p.d.bool_mask_stride[0] = 40 * 50;
    p.d.bool_mask_stride[2] = 50;
    p.d.bool_mask_stride[3] = 1;
    float *o = zeros(p.no), *l = zeros(p.nl);
    for (int64_t i = 0; i < p.no; i++)
      o[i] = NAN;
    CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o, l));
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < 40; i++) {
        CHECK(l[h * 40 + i] == -INFINITY); /* batch 0 */
        for (int e = 0; e < 64; e++)
          CHECK(o[(h * 40 + i) * 64 + e] == 0.0f);
      }
    CHECK(l[2 * 40 + 3] == -INFINITY && o[(2 * 40 + 3) * 64] == 0.0f);
    CHECK(!any_nan(o, p.no));
    if (backward_on) {
      float *g[3] = {zeros(p.nq), zeros(p.nk), zeros(p.nv)};
      CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o, l, p.dout, g[0], g[1],
                                            g[2]));
      for (int e = 0; e < 2 * 40 * 64; e++)
        CHECK(g[0][e] == 0.0f); /* batch 0 dq */
      for (int e = 0; e < 64; e++)
        CHECK(g[0][(2 * 40 + 3) * 64 + e] == 0.0f);
      CHECK(!any_nan(g[0], p.nq) && !any_nan(g[1], p.nk) && !any_nan(g[2], p.nv));
      free(g[0]), free(g[1]), free(g[2]);
    }
    free(o), free(l);
    free_problem(&p);
  }
}

/* ---- NaN / inf in the data: NaN where math has it for a NaN logit
 * (attn/sdpa.h), never out 0 / lse -inf as for a masked row ------------- */

/* CHECK_CLOSE where math is not NaN (flash must agree, finite where math
 * is); where math is NaN, 0·NaN in its GEMMs may reach entries that no
 * allowed key connects, flash's tiles fewer: no requirement. */
static void close_where_math_defined(const char *what, const float *got, const float *want,
                                     int64_t n, double atol, double rtol) {
  float *g = malloc((size_t)(n + 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    g[i] = isnan(want[i]) ? want[i] : got[i];
  CHECK_CLOSE(what, g, want, n, atol, rtol);
  free(g);
}

/* Rows r0..r1 of a [L, X] slice all NaN (any = 0) or with some NaN (any = 1). */
static int nan_rows(const float *x, int64_t X, int r0, int r1, int any) {
  for (int r = r0; r <= r1; r++) {
    int all = 1, some = 0;
    for (int64_t c = 0; c < X; c++)
      all &= isnan(x[r * X + c]), some |= isnan(x[r * X + c]);
    if (any ? !some : !all) return 0;
  }
  return 1;
}

static void set_both(float *x, uint16_t *h, int64_t i, float val) {
  x[i] = val;
  h[i] = attn_f32_to_bf16(val);
}

/* Batch 0, head 0 gets the bad value (rows of [L, 16] from the start):
 *   0 NaN in q row 70           1 NaN in k key 100 (causal, window 40)
 *   2 +inf in k key 100 (q·k = +inf at row 110, -inf at row 120)
 *   3 NaN in v key 100          4 NaN/inf only where masked (fully masked
 *     row, keys past key_lens, a key the bool mask hides)
 *   5 NaN in k key 50 under an additive -inf (NaN + -inf = NaN, as math) */
static void nan_case(attn_lowp_path path, int kind, int causal) {
  cfg c = plain(150, 150, 16);
  c.B = 2;
  c.causal = causal;
  if (kind == 1 || kind == 2 || kind == 3) c.wl = 40;
  if (kind == 4) c.key_lens = 1, c.bool_mask = 1;
  if (kind == 5) c.add_mask = 1;
  problem p;
  make_problem(&c, 1300 + kind, &p);
  const int X = 16, L = 150;
  if (kind == 0) set_both(p.q, p.qh, 70 * X + 3, NAN);
  if (kind == 1) set_both(p.k, p.kh, 100 * X + 3, NAN);
  if (kind == 2) {
    set_both(p.k, p.kh, 100 * X + 3, INFINITY);
    set_both(p.q, p.qh, 110 * X + 3, 0.5f);
    set_both(p.q, p.qh, 120 * X + 3, -0.5f);
  }
  if (kind == 3) set_both(p.v, p.vh, 100 * X + 5, NAN);
  if (kind == 4) {
    p.kl[0] = 0, p.kl[1] = 90;
    set_both(p.q, p.qh, 5 * X + 1, NAN);               /* b0 h0 row 5: no key at all */
    set_both(p.k, p.kh, 2 * L * X + 120 * X + 2, NAN); /* b1 h0: past key_lens */
    set_both(p.k, p.kh, 2 * L * X + 130 * X, INFINITY);
    set_both(p.k, p.kh, 2 * L * X + 30 * X + 4, NAN); /* hidden by the bool mask */
    for (int i = 0; i < L; i++)
      p.bm[(int64_t)L * L + i * L + 30] = 0;
  }
  if (kind == 5) {
    set_both(p.k, p.kh, 50 * X + 3, NAN);
    for (int i = 0; i < L; i++)
      p.am[i * L + 50] = -INFINITY;
  }
  float *o0 = zeros(p.no), *o1 = zeros(p.no), *l0 = zeros(p.nl), *l1 = zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o1, l1));
  int before = h_case_failed;
  h_case_failed = 0;
  CHECK_CLOSE("lse", l1, l0, p.nl, 2e-5, 2e-5); /* NaN exactly where math has it */
  if (kind == 3)
    close_where_math_defined("out", o1, o0, p.no, 2.5e-3, 0);
  else
    CHECK_CLOSE("out", o1, o0, p.no, 2.5e-3, 0);
  if (kind == 0) CHECK(isnan(l1[70]) && nan_rows(o1, X, 70, 70, 0));
  if (kind == 1) CHECK(nan_rows(l1, 1, 100, 140, 0) && nan_rows(o1, X, 100, 140, 0));
  if (kind == 1) CHECK(isfinite(l1[99]) && isfinite(l1[141]) && !nan_rows(o1, X, 99, 99, 1));
  if (kind == 2) CHECK(isnan(l1[110]) && isfinite(l1[120]) && nan_rows(o1, X, 110, 110, 0));
  if (kind == 3) {
    int ok = 1;
    for (int i = 100; i <= 140; i++)
      ok &= isnan(o1[i * X + 5]) && isfinite(l1[i]) && isfinite(o1[i * X + 4]);
    CHECK(ok);
  }
  if (kind == 4) {
    int ok = 1;
    for (int64_t e = 0; e < 2 * L; e++)
      ok &= l1[e] == -INFINITY;
    for (int64_t e = 0; e < 2 * L * X; e++)
      ok &= o1[e] == 0.0f;
    CHECK(ok && !any_nan(o1, p.no));
  }
  if (kind == 5) CHECK(nan_rows(l1, 1, 50, 149, 0) && isfinite(l1[49]));
  if (backward_on) {
    float *g0[3] = {zeros(p.nq), zeros(p.nk), zeros(p.nv)};
    float *g1[3] = {zeros(p.nq), zeros(p.nk), zeros(p.nv)};
    CHECK_OK(attn_sdpa_backward_math(&p.d, p.q, p.k, p.v, o0, l0, p.dout, g0[0], g0[1], g0[2]));
    CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o1, l1, p.dout, g1[0],
                                          g1[1], g1[2]));
    const char *gn[3] = {"dq", "dk", "dv"};
    const int64_t gsz[3] = {p.nq, p.nk, p.nv};
    for (int t = 0; t < 3; t++)
      close_where_math_defined(gn[t], g1[t], g0[t], gsz[t], 1e-4 + max_abs(g0[t], gsz[t]) / 128,
                               0);
    const int rows_lo = kind == 0 ? 70 : kind == 2 ? 110 : 100;
    const int rows_hi = kind == 0 ? 70 : kind == 2 ? 110 : 140;
    if (kind <= 3) CHECK(nan_rows(g1[0], X, rows_lo, rows_hi, 0));
    if (kind == 0) CHECK(nan_rows(g1[1], X, 0, causal ? 70 : 149, 0));
    if (kind == 0) CHECK(nan_rows(g1[2], X, 0, causal ? 70 : 149, 0));
    if (kind == 1) CHECK(nan_rows(g1[1], X, 60, 140, 0) && nan_rows(g1[2], X, 60, 140, 0));
    if (kind == 2) CHECK(nan_rows(g1[2], X, 70, 110, 0) && nan_rows(g1[1], X, 100, 100, 0));
    if (kind == 3) CHECK(!nan_rows(g1[2], X, 0, 149, 1)); /* dv never reads v */
    if (kind == 4) { /* batch 0: zero gradients; batch 1: dk, dv finite */
      int ok = 1;
      for (int64_t e = 0; e < 2 * L * X; e++)
        ok &= g1[0][e] == 0.0f && g1[1][e] == 0.0f && g1[2][e] == 0.0f;
      CHECK(ok);
      CHECK(!any_nan(g1[1] + 2 * L * X, 2 * L * X) && !any_nan(g1[2] + 2 * L * X, 2 * L * X));
    }
    for (int t = 0; t < 3; t++)
      free(g0[t]), free(g1[t]);
  }
  if (h_case_failed)
    printf("  ^ %s kind %d causal %d\n", path == ATTN_LOWP_AMX ? "amx" : "portable", kind, causal);
  h_case_failed |= before;
  free(o0), free(o1), free(l0), free(l1);
  free_problem(&p);
}

static void test_nan_and_inf_propagate(void) {
  for (int pth = 0; pth < 2; pth++) {
    attn_lowp_path path = pth ? ATTN_LOWP_AMX : ATTN_LOWP_PORTABLE;
    if (pth && !have_amx()) continue;
    nan_case(path, 0, 0);
    nan_case(path, 0, 1);
    for (int kind = 1; kind <= 5; kind++)
      nan_case(path, kind, 1);
  }
}

static void test_no_keys_no_queries(void) {
  cfg c = plain(5, 0, 64);
  problem p;
  make_problem(&c, 950, &p);
  float o[2 * 5 * 64], l[10];
  for (int i = 0; i < 2 * 5 * 64; i++)
    o[i] = NAN;
  CHECK_OK(attn_sdpa_forward_bf16(&p.d, p.qh, NULL, NULL, o, l));
  CHECK(o[0] == 0.0f && o[2 * 5 * 64 - 1] == 0.0f && l[9] == -INFINITY);
  free_problem(&p);
  c = plain(0, 7, 64);
  make_problem(&c, 951, &p);
  CHECK_OK(attn_sdpa_forward_bf16(&p.d, NULL, p.kh, p.vh, NULL, NULL));
  free_problem(&p);
}

/* Same results for 1 and 2 threads, bit for bit, on both paths. */
static void test_threads_bit_identical(void) {
  cfg c = plain(300, 333, 64);
  c.Hq = 4;
  c.Hkv = 2;
  c.causal = 1;
  c.key_lens = 1;
  c.B = 2;
  int saved = attn_get_num_threads();
  for (int pth = 0; pth < 2; pth++) {
    attn_lowp_path path = pth ? ATTN_LOWP_AMX : ATTN_LOWP_PORTABLE;
    if (pth && !have_amx()) continue;
    problem p;
    make_problem(&c, 990, &p);
    float *o[2], *l[2], *g[2][3];
    for (int t = 0; t < 2; t++) {
      attn_set_num_threads(t + 1);
      o[t] = zeros(p.no), l[t] = zeros(p.nl);
      CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o[t], l[t]));
      g[t][0] = zeros(p.nq), g[t][1] = zeros(p.nk), g[t][2] = zeros(p.nv);
      if (backward_on)
        CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o[0], l[0], p.dout,
                                              g[t][0], g[t][1], g[t][2]));
    }
    CHECK(!memcmp(o[0], o[1], p.no * sizeof(float)));
    CHECK(!memcmp(l[0], l[1], p.nl * sizeof(float)));
    CHECK(!memcmp(g[0][0], g[1][0], p.nq * sizeof(float)));
    CHECK(!memcmp(g[0][1], g[1][1], p.nk * sizeof(float)));
    CHECK(!memcmp(g[0][2], g[1][2], p.nv * sizeof(float)));
    for (int t = 0; t < 2; t++) {
      free(o[t]), free(l[t]);
      for (int i = 0; i < 3; i++)
        free(g[t][i]);
    }
    free_problem(&p);
  }
  attn_set_num_threads(saved);
}

static void test_errors(void) {
  cfg c = plain(8, 8, 64);
  problem p;
  make_problem(&c, 1000, &p);
  float o[2 * 8 * 64], l[16];
  CHECK_ERR(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, NULL, l), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, o, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_bf16_path(ATTN_LOWP_SIMD, &p.d, p.qh, p.kh, p.vh, o, l),
            ATTN_EUNSUPPORTED);
  if (!have_amx())
    CHECK_ERR(attn_sdpa_forward_bf16_path(ATTN_LOWP_AMX, &p.d, p.qh, p.kh, p.vh, o, l),
              ATTN_EUNSUPPORTED);
  attn_sdpa_desc d = p.d;
  float slopes[2] = {0.5f, 0.25f};
  d.alibi_slopes = slopes;
  CHECK_ERR(attn_sdpa_forward_bf16(&d, p.qh, p.kh, p.vh, o, l), ATTN_EUNSUPPORTED);
  d = p.d;
  d.Hkv = 3; /* 2 % 3 */
  CHECK_ERR(attn_sdpa_forward_bf16(&d, p.qh, p.kh, p.vh, o, l), ATTN_EINVAL);
  free_problem(&p);
  cfg big = plain(4, 4, 257);
  make_problem(&big, 1001, &p);
  float *ob = zeros(p.no), lb[8];
  CHECK_ERR(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, ob, lb), ATTN_EUNSUPPORTED);
  free(ob);
  free_problem(&p);
}

/* A refused tile permission: the AMX path is unavailable, AUTO runs the
 * portable kernels (bit for bit), and asking for AMX is an error. */
static int refuse(void) { return -1; }
static void test_amx_refused_falls_back(void) {
  cfg c = plain(45, 77, 64);
  c.causal = 1;
  problem p;
  make_problem(&c, 1100, &p);
  float *o0 = zeros(p.no), *o1 = zeros(p.no), *l0 = zeros(p.nl), *l1 = zeros(p.nl);
  float *g0 = zeros(p.nq), *g1 = zeros(p.nq), *k0 = zeros(p.nk), *k1 = zeros(p.nk);
  float *v0 = zeros(p.nv), *v1 = zeros(p.nv);
  CHECK_OK(attn_sdpa_forward_bf16_path(ATTN_LOWP_PORTABLE, &p.d, p.qh, p.kh, p.vh, o0, l0));
  CHECK_OK(attn_sdpa_backward_bf16_path(ATTN_LOWP_PORTABLE, &p.d, p.qh, p.kh, p.vh, o0, l0, p.dout,
                                        g0, k0, v0));
  attn_amx_set_request_hook(refuse);
  CHECK(!attn_sdpa_bf16_path_available(ATTN_LOWP_AMX));
  CHECK_ERR(attn_sdpa_forward_bf16_path(ATTN_LOWP_AMX, &p.d, p.qh, p.kh, p.vh, o1, l1),
            ATTN_EUNSUPPORTED);
  CHECK_OK(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, o1, l1));
  CHECK_OK(attn_sdpa_backward_bf16(&p.d, p.qh, p.kh, p.vh, o0, l0, p.dout, g1, k1, v1));
  attn_amx_set_request_hook(NULL);
  CHECK(!memcmp(o0, o1, p.no * sizeof(float)) && !memcmp(l0, l1, p.nl * sizeof(float)));
  CHECK(!memcmp(g0, g1, p.nq * sizeof(float)) && !memcmp(k0, k1, p.nk * sizeof(float)) &&
        !memcmp(v0, v1, p.nv * sizeof(float)));
  free(o0), free(o1), free(l0), free(l1), free(g0), free(g1), free(k0), free(k1), free(v0),
      free(v1);
  free_problem(&p);
}

int main(void) {
  printf("# bf16 flash: AMX path %s\n", have_amx() ? "available" : "not available (portable only)");
  backward_on = 1;
  /* one thread for the shape sweeps (many small calls: no barrier waits on a
   * busy machine); test_threads_bit_identical runs 1 and 2 */
  attn_set_num_threads(1);
  RUN(test_head_dims);
  RUN(test_lengths_and_tails);
  RUN(test_causal_windows_offset);
  RUN(test_masks_key_lens_gqa);
  RUN(test_strided_scale_large_logits);
  RUN(test_random_shapes);
  RUN(test_fully_masked_rows);
  RUN(test_nan_and_inf_propagate);
  RUN(test_no_keys_no_queries);
  RUN(test_threads_bit_identical);
  RUN(test_errors);
  RUN(test_amx_refused_falls_back);
  HARNESS_END();
}
