/* NaN and inf in the data (attn/sdpa.h: they propagate to the rows they
 * touch, as in math; never out 0 / lse -inf as for a masked row): the cases
 * and the NaN pattern each must give, shared by the f32 and bf16 flash tests
 * (test_flash.c, test_sdpa_bf16.c), which add their own comparisons with
 * math. Problem: 2 batches, 2 heads, Lq = Lk = 150, D = Dv = 16; batch 0,
 * head 0 (rows of [L, 16] from the start of the arrays) gets the bad value;
 * head 1 and batch 1 stay clean. kinds:
 *   0 NaN in q row 70           1 NaN in k key 100 (causal, window 40)
 *   2 +inf in k key 100 (q·k = +inf at row 110, -inf at row 120)
 *   3 NaN in v key 100          4 NaN/inf only where masked: a fully masked
 *     row (key_lens 0), keys past key_lens, a key the bool mask hides: the
 *     forward as if the data were clean (math too); the backward's GEMMs
 *     may multiply a masked key's k by ds = 0 (0·NaN), as math's do
 *   5 NaN in k key 50 under an additive -inf (NaN + -inf = NaN, as math) */
#ifndef ATTN_TEST_SDPA_NAN_CASES_H
#define ATTN_TEST_SDPA_NAN_CASES_H

#include "sdpa_problem.h"

enum { SDPA_NAN_L = 150, SDPA_NAN_X = 16 };

/* CHECK_CLOSE where math is not NaN: there flash must agree (finite where
 * math is); where math is NaN, flash may be NaN or not (0·NaN in the math
 * GEMMs reaches entries that no allowed key connects, flash's tiles fewer). */
static inline void close_where_math_defined(const char *what, const float *got, const float *want,
                                            int64_t n, double atol, double rtol) {
  float *g = malloc((size_t)(n + 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    g[i] = isnan(want[i]) ? want[i] : got[i];
  CHECK_CLOSE(what, g, want, n, atol, rtol);
  free(g);
}

/* Rows r0..r1 (inclusive) of a [L, X] slice all NaN (any = 0) or with some
 * NaN (any = 1). */
static inline int nan_rows(const float *x, int64_t X, int r0, int r1, int any) {
  for (int r = r0; r <= r1; r++) {
    int all = 1, some = 0;
    for (int64_t c = 0; c < X; c++)
      all &= isnan(x[r * X + c]), some |= isnan(x[r * X + c]);
    if (any ? !some : !all) return 0;
  }
  return 1;
}

/* The problem of kind (seeded), the bad values in place; the 16-bit copies,
 * if wanted (sdpa_problem_to_bf16 / _f16 in to_half), made before the bad
 * values go in (both copies get them). */
static inline void sdpa_nan_problem(int kind, int causal, unsigned seed,
                                    void (*to_half)(sdpa_problem *), sdpa_problem *p) {
  sdpa_cfg c = sdpa_plain(SDPA_NAN_L, SDPA_NAN_L, SDPA_NAN_X);
  c.B = 2;
  c.causal = causal;
  if (kind == 1 || kind == 2 || kind == 3) c.wl = 40;
  if (kind == 4) c.key_lens = 1, c.bool_mask = 1;
  if (kind == 5) c.add_mask = 1;
  sdpa_make_problem(&c, seed, p);
  if (to_half) to_half(p);
  const int X = SDPA_NAN_X, L = SDPA_NAN_L;
  if (kind == 0) sdpa_set(p, p->q, p->qh, 70 * X + 3, NAN);
  if (kind == 1) sdpa_set(p, p->k, p->kh, 100 * X + 3, NAN);
  if (kind == 2) {
    sdpa_set(p, p->k, p->kh, 100 * X + 3, INFINITY);
    sdpa_set(p, p->q, p->qh, 110 * X + 3, 0.5f);
    sdpa_set(p, p->q, p->qh, 120 * X + 3, -0.5f);
  }
  if (kind == 3) sdpa_set(p, p->v, p->vh, 100 * X + 5, NAN);
  if (kind == 4) {
    const int64_t b1 = 2 * L * X;                    /* batch 1, head 0 */
    p->kl[0] = 0, p->kl[1] = 90;                     /* batch 0: no key at all */
    sdpa_set(p, p->q, p->qh, 5 * X + 1, NAN);        /* b0 h0 row 5: fully masked */
    sdpa_set(p, p->k, p->kh, b1 + 120 * X + 2, NAN); /* past key_lens */
    sdpa_set(p, p->k, p->kh, b1 + 130 * X, INFINITY);
    sdpa_set(p, p->k, p->kh, b1 + 30 * X + 4, NAN); /* hidden by the bool mask: */
    for (int i = 0; i < L; i++)
      p->bm[(int64_t)L * L + i * L + 30] = 0;
  }
  if (kind == 5) {
    sdpa_set(p, p->k, p->kh, 50 * X + 3, NAN);
    for (int i = 0; i < L; i++)
      p->am[i * L + 50] = -INFINITY; /* head 0, every row */
  }
}

/* The forward (o1, l1) against math's (o0, l0): lse within (lse_atol,
 * lse_rtol) and NaN exactly where math has it; out within (out_atol,
 * out_rtol), where math is defined for kind 3; then the NaN rows (out all
 * NaN with lse, or column 5 for v) and the finite ones. */
static inline void sdpa_nan_check_forward(int kind, const sdpa_problem *p, const float *o1,
                                          const float *o0, const float *l1, const float *l0,
                                          double out_atol, double out_rtol, double lse_atol,
                                          double lse_rtol) {
  const int X = SDPA_NAN_X, L = SDPA_NAN_L;
  CHECK_CLOSE("lse", l1, l0, p->nl, lse_atol, lse_rtol);
  if (kind == 3)
    close_where_math_defined("out", o1, o0, p->no, out_atol, out_rtol);
  else
    CHECK_CLOSE("out", o1, o0, p->no, out_atol, out_rtol);
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
    for (int64_t e = 0; e < 2 * L; e++) /* batch 0: out 0, lse -inf */
      ok &= l1[e] == -INFINITY;
    for (int64_t e = 0; e < 2 * L * X; e++)
      ok &= o1[e] == 0.0f;
    CHECK(ok && !sdpa_any_nan(o1, p->no));
  }
  if (kind == 5) CHECK(nan_rows(l1, 1, 50, 149, 0) && isfinite(l1[49]));
}

/* The backward's NaN gradients g1 (dq, dk, dv) for the NaN rows and the
 * keys they attend; kind 4: batch 0 (no allowed key) has zero gradients
 * (math: 0·NaN of q row 5 in dk). */
static inline void sdpa_nan_check_backward(int kind, int causal, float *const g1[3]) {
  const int X = SDPA_NAN_X, L = SDPA_NAN_L;
  const int rows_lo = kind == 0 ? 70 : kind == 2 ? 110 : 100;
  const int rows_hi = kind == 0 ? 70 : kind == 2 ? 110 : 140;
  if (kind <= 3) CHECK(nan_rows(g1[0], X, rows_lo, rows_hi, 0));
  if (kind == 0) CHECK(nan_rows(g1[1], X, 0, causal ? 70 : 149, 0));
  if (kind == 0) CHECK(nan_rows(g1[2], X, 0, causal ? 70 : 149, 0));
  if (kind == 1) CHECK(nan_rows(g1[1], X, 60, 140, 0) && nan_rows(g1[2], X, 60, 140, 0));
  if (kind == 2) CHECK(nan_rows(g1[2], X, 70, 110, 0) && nan_rows(g1[1], X, 100, 100, 0));
  if (kind == 3) CHECK(!nan_rows(g1[2], X, 0, 149, 1)); /* dv never reads v */
  if (kind == 4) {
    int ok = 1;
    for (int64_t e = 0; e < 2 * L * X; e++)
      ok &= g1[0][e] == 0.0f && g1[1][e] == 0.0f && g1[2][e] == 0.0f;
    CHECK(ok);
  }
}

#endif
