/* Portable C tile kernels of the flash backend (the fallback, and the
 * reference the AVX-512 kernels are tested against). */
#include <math.h>
#include <string.h>

#include "kernels/flash/flash_tiles.h"

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR };

/* c [R, n] (=|+=) A·B; see attn_flash_ops.gemm. Row by row, 16 columns at a
 * time in a fixed-size accumulator the compiler keeps in vector registers
 * (omp simd: every lane is its own column, so the sums run in the same order
 * k = 0..K-1 as a scalar loop and the bits do not depend on the vector width). */
enum { CW = 16 };
static void gemm_generic(int R, int n, int64_t K, const float *a, int64_t ars, int64_t acs,
                         const float *b, int64_t ldb, float *c, int64_t ldc, const float *cs,
                         int acc) {
  for (int r = 0; r < R; r++) {
    const float *ar = a + r * ars;
    float *cr = c + r * ldc;
    const float f = cs ? cs[r] : 1.0f;
    for (int j0 = 0; j0 < n; j0 += CW) {
      const int w = n - j0 < CW ? n - j0 : CW;
      float t[CW] = {0};
      if (w == CW) {
        for (int64_t k = 0; k < K; k++) {
          const float x = ar[k * acs], *bk = b + k * ldb + j0;
#pragma omp simd
          for (int j = 0; j < CW; j++)
            t[j] += x * bk[j];
        }
      } else {
        for (int64_t k = 0; k < K; k++) {
          const float x = ar[k * acs], *bk = b + k * ldb + j0;
          for (int j = 0; j < w; j++)
            t[j] += x * bk[j];
        }
      }
      if (!acc)
        for (int j = 0; j < w; j++)
          cr[j0 + j] = t[j];
      else
        for (int j = 0; j < w; j++)
          cr[j0 + j] = f * cr[j0 + j] + t[j];
    }
  }
}

static void logits_generic(int R, float *s, float scale, const int *lo, const int *hi) {
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC;
    for (int j = 0; j < BC; j++)
      sr[j] = (j >= lo[r] && j < hi[r]) ? scale * sr[j] : -INFINITY;
  }
}

static void softmax_update_generic(int R, float *s, float scale, const int *lo, const int *hi,
                                   float *m, float *l, float *alpha) {
  logits_generic(R, s, scale, lo, hi);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC;
    float mx = -INFINITY;
    for (int j = 0; j < BC; j++)
      if (sr[j] > mx) mx = sr[j];
    float mn = mx > m[r] ? mx : m[r]; /* the max skips NaN */
    /* max still -inf (nothing allowed yet): subtract 0, so -inf gives p = 0
     * and NaN stays NaN */
    const float ms = mn == -INFINITY ? 0.0f : mn;
    float sum = 0.0f;
    for (int j = 0; j < BC; j++) {
      float x = sr[j] - ms;
      /* no denormal p; a NaN logit gives p = NaN: l and the row's out turn
       * NaN, as in the math path (never dropped like a masked key) */
      sr[j] = !(x < ATTN_FLASH_PMIN_LOG) ? expf(x) : 0.0f;
      sum += sr[j];
    }
    alpha[r] = m[r] == mn ? 1.0f : expf(m[r] - mn);
    l[r] = l[r] * alpha[r] + sum;
    m[r] = mn;
  }
}

static void probs_grad_generic(int R, const float *s, float scale, const int *lo, const int *hi,
                               const float *dp, const float *lse, const float *di, float dscale,
                               float *p, float *ds, int64_t ldp) {
  for (int r = 0; r < R; r++) {
    const float *sr = s + r * BC, *dpr = dp + r * BC;
    float *pr = p + r * ldp, *dsr = ds + r * ldp;
    if (lse[r] == -INFINITY) {
      memset(pr, 0, BC * sizeof(float));
      memset(dsr, 0, BC * sizeof(float));
      continue;
    }
    /* lse NaN (a NaN logit in the forward): p = ds = NaN at the allowed
     * keys; ds = 0 where p = 0 (as math), even for a NaN dp or D_i */
    for (int j = 0; j < BC; j++) {
      float t = scale * sr[j], x = t - lse[r];
      float pj = (j >= lo[r] && j < hi[r] && t != -INFINITY && !(x < ATTN_FLASH_PMIN_LOG))
                     ? expf(x)
                     : 0.0f;
      pr[j] = pj;
      dsr[j] = pj == 0.0f ? 0.0f : pj * (dpr[j] - di[r]) * dscale;
    }
  }
}

void attn_flash_pack_t_generic(int64_t n, int64_t D, const float *x, int64_t ldx, float *kt) {
  for (int64_t dd = 0; dd < D; dd++) {
    float *row = kt + dd * BC;
    for (int64_t j = 0; j < n; j++)
      row[j] = x[j * ldx + dd];
    for (int64_t j = n; j < attn_flash_cols8(n); j++)
      row[j] = 0.0f;
  }
}

static void add_rows_generic(int R, int n, float *s, int64_t lds, const float *b, int64_t brs,
                             int bcs, int skip) {
  for (int r = 0; r < R; r++) {
    float *sr = s + r * lds;
    const float *br = b + r * brs;
    for (int c = 0; c < n; c++)
      if (!skip || sr[c] != -INFINITY) sr[c] += br[c * bcs];
  }
}

/* four partial sums (as the vector kernel's lanes would, roughly) */
static float sum_generic(int n, const float *x) {
  float p[4] = {0, 0, 0, 0};
  int c = 0;
  for (; c + 4 <= n; c += 4)
    for (int e = 0; e < 4; e++)
      p[e] += x[c + e];
  for (; c < n; c++)
    p[0] += x[c];
  return (p[0] + p[1]) + (p[2] + p[3]);
}

static const attn_flash_ops generic_ops = {
    "generic",          gemm_generic,   logits_generic,   softmax_update_generic,
    probs_grad_generic, attn_flash_pack_t_generic, add_rows_generic, sum_generic,
    NULL /* tile_forward: the steps one by one */, NULL /* tile_forward_mod */};

const attn_flash_ops *attn_flash_ops_generic(void) { return &generic_ops; }
