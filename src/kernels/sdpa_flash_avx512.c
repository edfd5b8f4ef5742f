/* AVX-512 tile kernels of the flash backend (selected at run time).
 *
 * gemm: c [R, n] (=|+=) A·B with R <= 6 rows and n <= 64 columns held in at
 * most 6 x 4 zmm accumulators; per k step up to 4 loads of B (the last one
 * masked for n % 16) and R broadcasts of A feed R x 4 FMAs. Every (R, number
 * of vectors) pair is its own fully unrolled instance.
 * The softmax kernels work on 64-column score tiles, 4 zmm per row, with the
 * vectorised exp of vexp_avx512.h. */
#include "kernels/sdpa_flash.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/vexp_avx512.h"

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define AVX512_INLINE                                                                              \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"), always_inline)) static inline

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR, NV = ATTN_FLASH_NC / 16 };

/* The body every gemm instance inlines, with R and V (vectors) constants. */
AVX512_INLINE void gemm_body(const int R, const int V, __mmask16 last, int64_t K, const float *a,
                             int64_t ars, int64_t acs, const float *b, int64_t ldb, float *c,
                             int64_t ldc, const float *cs, int acc) {
  __m512 t[MR][NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++)
      t[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m512 bv[NV];
    const float *bk = b + k * ldb;
#pragma GCC unroll 4
    for (int v = 0; v < V; v++)
      bv[v] = v == V - 1 ? _mm512_maskz_loadu_ps(last, bk + 16 * v) : _mm512_loadu_ps(bk + 16 * v);
    const float *ak = a + k * acs;
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m512 ar = _mm512_set1_ps(ak[r * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < V; v++)
        t[r][v] = _mm512_fmadd_ps(ar, bv[v], t[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *cr = c + r * ldc;
    __m512 f = _mm512_set1_ps(cs ? cs[r] : 1.0f);
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      __mmask16 mk = v == V - 1 ? last : (__mmask16)0xffff;
      __m512 y = t[r][v];
      if (acc) y = _mm512_fmadd_ps(f, _mm512_maskz_loadu_ps(mk, cr + 16 * v), y);
      _mm512_mask_storeu_ps(cr + 16 * v, mk, y);
    }
  }
}

/* Dispatches to the body inlined with constant (R, V): one fully unrolled
 * copy per case. */
AVX512_TARGET static void gemm_avx512(int R, int n, int64_t K, const float *a, int64_t ars,
                                      int64_t acs, const float *b, int64_t ldb, float *c,
                                      int64_t ldc, const float *cs, int acc) {
  int V = (n + 15) / 16, rem = n - 16 * (V - 1);
  __mmask16 last = (__mmask16)(rem == 16 ? 0xffff : (1u << rem) - 1);
  switch (R * 8 + V) {
  case 9: gemm_body(1, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 10: gemm_body(1, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 11: gemm_body(1, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 12: gemm_body(1, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 17: gemm_body(2, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 18: gemm_body(2, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 19: gemm_body(2, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 20: gemm_body(2, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 25: gemm_body(3, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 26: gemm_body(3, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 27: gemm_body(3, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 28: gemm_body(3, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 33: gemm_body(4, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 34: gemm_body(4, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 35: gemm_body(4, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 36: gemm_body(4, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 41: gemm_body(5, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 42: gemm_body(5, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 43: gemm_body(5, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 44: gemm_body(5, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 49: gemm_body(6, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 50: gemm_body(6, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 51: gemm_body(6, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 52: gemm_body(6, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  default: break;
  }
}

/* Columns lo <= j < hi of a 16-column slice v of a row. */
AVX512_INLINE __mmask16 allowed_cols(int v, int lo, int hi) {
  __m512i j =
      _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                       _mm512_set1_epi32(16 * v));
  return _mm512_cmpge_epi32_mask(j, _mm512_set1_epi32(lo)) &
         _mm512_cmplt_epi32_mask(j, _mm512_set1_epi32(hi));
}

/* Lanes with x >= ATTN_FLASH_PMIN_LOG: the others give p = 0 (no denormal
 * reaches the GEMMs; see sdpa_flash.h). */
AVX512_INLINE __mmask16 normal_exp(__m512 x) {
  return _mm512_cmp_ps_mask(x, _mm512_set1_ps(ATTN_FLASH_PMIN_LOG), _CMP_GE_OQ);
}

AVX512_TARGET static void logits_avx512(int R, float *s, float scale, const int *lo,
                                        const int *hi) {
  __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC;
#pragma GCC unroll 4
    for (int v = 0; v < BC / 16; v++)
      _mm512_storeu_ps(sr + 16 * v, _mm512_mask_mul_ps(ninf, allowed_cols(v, lo[r], hi[r]), vs,
                                                       _mm512_loadu_ps(sr + 16 * v)));
  }
}

/* Two passes over the rows so that the rows' dependency chains (horizontal
 * max, exp, horizontal sum) sit side by side for the out-of-order core:
 * first the logits and each row's max, then the exponentials and sums. */
AVX512_TARGET static void softmax_update_avx512(int R, float *s, float scale, const int *lo,
                                                const int *hi, float *m, float *l, float *alpha) {
  __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
  float mn[MR];
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC;
    __m512 x[BC / 16];
#pragma GCC unroll 4
    for (int v = 0; v < BC / 16; v++) {
      x[v] =
          _mm512_mask_mul_ps(ninf, allowed_cols(v, lo[r], hi[r]), vs, _mm512_loadu_ps(sr + 16 * v));
      _mm512_storeu_ps(sr + 16 * v, x[v]);
    }
    float mx =
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(x[0], x[1]), _mm512_max_ps(x[2], x[3])));
    mn[r] = mx > m[r] ? mx : m[r];
  }
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC, mo = m[r];
    if (mn[r] == -INFINITY) { /* nothing allowed yet */
#pragma GCC unroll 4
      for (int v = 0; v < BC / 16; v++)
        _mm512_storeu_ps(sr + 16 * v, _mm512_setzero_ps());
      alpha[r] = 1.0f;
      continue;
    }
    __m512 vm = _mm512_set1_ps(mn[r]), sum = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int v = 0; v < BC / 16; v++) {
      __m512 x = _mm512_sub_ps(_mm512_loadu_ps(sr + 16 * v), vm);
      __m512 p = _mm512_maskz_mov_ps(normal_exp(x), attn_vexp16_avx512(x));
      _mm512_storeu_ps(sr + 16 * v, p);
      sum = _mm512_add_ps(sum, p);
    }
    float a = mo == mn[r] ? 1.0f : mo == -INFINITY ? 0.0f : expf(mo - mn[r]);
    alpha[r] = a;
    l[r] = l[r] * a + _mm512_reduce_add_ps(sum);
    m[r] = mn[r];
  }
}

AVX512_TARGET static void probs_grad_avx512(int R, const float *s, float scale, const int *lo,
                                            const int *hi, const float *dp, const float *lse,
                                            const float *di, float dscale, float *p, float *ds,
                                            int64_t ldp) {
  __m512 vs = _mm512_set1_ps(scale), vg = _mm512_set1_ps(dscale);
  for (int r = 0; r < R; r++) {
    const float *sr = s + r * BC, *dpr = dp + r * BC;
    float *pr = p + r * ldp, *dsr = ds + r * ldp;
    int dead = lse[r] == -INFINITY;
    __m512 vl = _mm512_set1_ps(dead ? 0.0f : lse[r]), vd = _mm512_set1_ps(di[r]);
#pragma GCC unroll 4
    for (int v = 0; v < BC / 16; v++) {
      __mmask16 ok = dead ? 0 : allowed_cols(v, lo[r], hi[r]);
      __m512 t = _mm512_fmsub_ps(_mm512_loadu_ps(sr + 16 * v), vs, vl);
      ok &= normal_exp(t);
      __m512 pv = _mm512_maskz_mov_ps(ok, attn_vexp16_avx512(t));
      _mm512_storeu_ps(pr + 16 * v, pv);
      __m512 g = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(dpr + 16 * v), vd), vg);
      _mm512_storeu_ps(dsr + 16 * v, _mm512_mul_ps(pv, g));
    }
  }
}

AVX512_TARGET static void pack_t_avx512(int64_t n, int64_t D, const float *x, int64_t ldx,
                                        float *kt) {
  for (int64_t dd = 0; dd < D; dd++) {
    float *row = kt + dd * BC;
    for (int64_t j = 0; j < n; j++)
      row[j] = x[j * ldx + dd];
    for (int64_t j = n; j < BC; j++)
      row[j] = 0.0f;
  }
}

/* 16 columns at a time; the reversed band (bcs = -1) is a masked load of
 * the 16 floats ending at b[-c0] and a lane reversal. */
AVX512_TARGET static void add_rows_avx512(int R, int n, float *s, int64_t lds, const float *b,
                                          int64_t brs, int bcs, int skip) {
  const __m512i rev = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * lds;
    const float *br = b + r * brs;
    for (int c0 = 0; c0 < n; c0 += 16) {
      int cnt = n - c0 < 16 ? n - c0 : 16;
      __mmask16 m = (__mmask16)(cnt == 16 ? 0xffff : (1u << cnt) - 1);
      __m512 x = _mm512_maskz_loadu_ps(m, sr + c0), y;
      if (bcs == 1)
        y = _mm512_maskz_loadu_ps(m, br + c0);
      else if (bcs == 0)
        y = _mm512_set1_ps(br[0]);
      else /* lanes l' = 15 - l of br - c0 - 15 */
        y = _mm512_permutexvar_ps(
            rev, _mm512_maskz_loadu_ps((__mmask16)(m << (16 - cnt)), br - c0 - 15));
      __mmask16 ok = skip ? _mm512_mask_cmp_ps_mask(m, x, ninf, _CMP_NEQ_UQ) : m;
      _mm512_mask_storeu_ps(sr + c0, ok, _mm512_add_ps(x, y));
    }
  }
}

AVX512_TARGET static float sum_avx512(int n, const float *x) {
  __m512 acc = _mm512_setzero_ps();
  for (int c0 = 0; c0 < n; c0 += 16) {
    int cnt = n - c0 < 16 ? n - c0 : 16;
    __mmask16 m = (__mmask16)(cnt == 16 ? 0xffff : (1u << cnt) - 1);
    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, x + c0));
  }
  return _mm512_reduce_add_ps(acc);
}

/* One whole tile in a single pass: the scores stay in the 24 accumulators
 * through the softmax (max, exp, sum in registers; p stored once, for the
 * broadcasts of p·v), then o = alpha o + p·v. The arithmetic is that of
 * gemm_body + softmax_update_avx512 + gemm_body step for step, so the result
 * is the same to the bit; what goes is the calls, the dispatch, the store
 * and two reloads of the scores and the masks. */
AVX512_TARGET static void tile_forward_avx512(int64_t D, int64_t Dv, const float *q, int64_t ldq,
                                              const float *kt, const float *v, int64_t ldv,
                                              float scale, float *s, float *o, int64_t ldo,
                                              float *m, float *l, const float *qn,
                                              const float *on) {
  __m512 t[MR][4];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      t[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < D; k++) {
    const float *bk = kt + k * BC;
    __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16), b2 = _mm512_loadu_ps(bk + 32),
           b3 = _mm512_loadu_ps(bk + 48);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      __m512 ar = _mm512_set1_ps(q[r * ldq + k]);
      t[r][0] = _mm512_fmadd_ps(ar, b0, t[r][0]);
      t[r][1] = _mm512_fmadd_ps(ar, b1, t[r][1]);
      t[r][2] = _mm512_fmadd_ps(ar, b2, t[r][2]);
      t[r][3] = _mm512_fmadd_ps(ar, b3, t[r][3]);
    }
  }
  /* softmax_update_avx512 with every column allowed */
  const __m512 vs = _mm512_set1_ps(scale);
  float mn[MR], alpha[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      t[r][c] = _mm512_mul_ps(vs, t[r][c]);
    float mx = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_max_ps(t[r][0], t[r][1]), _mm512_max_ps(t[r][2], t[r][3])));
    mn[r] = mx > m[r] ? mx : m[r];
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    float *sr = s + r * BC, mo = m[r];
    if (mn[r] == -INFINITY) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        _mm512_storeu_ps(sr + 16 * c, _mm512_setzero_ps());
      alpha[r] = 1.0f;
      continue;
    }
    __m512 vm = _mm512_set1_ps(mn[r]), sum = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      __m512 x = _mm512_sub_ps(t[r][c], vm);
      __m512 p = _mm512_maskz_mov_ps(normal_exp(x), attn_vexp16_avx512(x));
      _mm512_storeu_ps(sr + 16 * c, p);
      sum = _mm512_add_ps(sum, p);
    }
    float a = mo == mn[r] ? 1.0f : mo == -INFINITY ? 0.0f : expf(mo - mn[r]);
    alpha[r] = a;
    l[r] = l[r] * a + _mm512_reduce_add_ps(sum);
    m[r] = mn[r];
  }
  /* o = alpha o + p·v, 64 columns at a time */
  int64_t c0 = 0;
  for (; c0 + 64 <= Dv; c0 += 64) {
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        t[r][c] = _mm512_setzero_ps();
    for (int j = 0; j < BC; j++) {
      const float *bj = v + j * ldv + c0;
      __m512 b0 = _mm512_loadu_ps(bj), b1 = _mm512_loadu_ps(bj + 16),
             b2 = _mm512_loadu_ps(bj + 32), b3 = _mm512_loadu_ps(bj + 48);
#pragma GCC unroll 6
      for (int r = 0; r < MR; r++) {
        __m512 ar = _mm512_set1_ps(s[r * BC + j]);
        t[r][0] = _mm512_fmadd_ps(ar, b0, t[r][0]);
        t[r][1] = _mm512_fmadd_ps(ar, b1, t[r][1]);
        t[r][2] = _mm512_fmadd_ps(ar, b2, t[r][2]);
        t[r][3] = _mm512_fmadd_ps(ar, b3, t[r][3]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      float *orow = o + r * ldo + c0;
      __m512 f = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        _mm512_storeu_ps(orow + 16 * c,
                         _mm512_fmadd_ps(f, _mm512_loadu_ps(orow + 16 * c), t[r][c]));
    }
  }
  if (c0 < Dv) /* the last columns, fewer than 64 */
    gemm_avx512(MR, (int)(Dv - c0), BC, s, BC, 1, v + c0, ldv, o + c0, ldo, alpha, 1);
}

static const attn_flash_ops avx512_ops = {
    "avx512",          gemm_avx512,   logits_avx512,   softmax_update_avx512,
    probs_grad_avx512, pack_t_avx512, add_rows_avx512, sum_avx512,
    tile_forward_avx512};

const attn_flash_ops *attn_flash_ops_avx512(void) { return &avx512_ops; }
#else
const attn_flash_ops *attn_flash_ops_avx512(void) { return 0; }
#endif
