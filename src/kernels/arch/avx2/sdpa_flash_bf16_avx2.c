/* bf16 flash-attention tile kernels on AVX2 + FMA (attn_flash_bf16_ops,
 * sdpa_flash_bf16.h), for levels without a bf16 dot product: the packed
 * bf16 operands (the layouts of sdpa_flash_bf16.h, the same as the portable
 * and AMX tiles) are widened to f32 by a 16-bit shift (exact) and multiplied
 * with FMA; p and ds are rounded to bf16 at the portable tiles' points, sums
 * and statistics stay in f32, exp is vexp_avx2.h's (a few ulp of expf). So
 * they agree with the portable tiles closely, not bit for bit (FMA and exp).
 *
 * A query is a lane, 16 queries two ymm. The B tiles (VNNI pairs: 32-bit
 * lane q of a pair row holds depth e in its low half and e + 1 in its high
 * half) widen to an even row (lane << 16) and an odd row (lane & 0xffff0000).
 * The products run 4 rows of the A side (keys, Vᵀ rows) x 16 lanes per step:
 * 8 accumulators, the B rows as 2 loads, 4 broadcasts of A widened
 * beforehand. The softmax and the backward probabilities run 16 lanes per
 * key row. */
#include <math.h>

#include "kernels/flash/sdpa_flash_bf16.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"
#include "kernels/arch/avx2/vexp_avx2.h"

enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT, DMAX = ATTN_BF16_DMAX };

#define INLINE AVX2_TARGET static inline __attribute__((always_inline))

static void nop(void) {}

/* rows[r][0..n) = n bf16 at x + r * ldx widened to f32 (n a multiple of 8) */
INLINE void widen_rows(const uint16_t *x, int64_t ldx, int rows, int n, float *y, int ldy) {
  for (int r = 0; r < rows; r++)
    for (int e = 0; e < n; e += 8) {
      __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + r * ldx + e)));
      _mm256_store_ps(y + r * ldy + e, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
}

/* A run of n / 2 pair rows of B tiles (16 columns each, tile after tile of
 * 16 pairs) widened to f32 rows: y[e][16], e < n */
INLINE void widen_pairs(const uint16_t *t, int n, float *y) {
  const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
  for (int e = 0; e < n; e += 2) {
    const uint16_t *row = t + (e >> 5) * 512 + ((e & 31) >> 1) * 32;
    for (int h = 0; h < 2; h++) {
      __m256i v = _mm256_loadu_si256((const __m256i *)(row + 16 * h));
      _mm256_store_ps(y + e * 16 + 8 * h, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      _mm256_store_ps(y + (e + 1) * 16 + 8 * h, _mm256_castsi256_ps(_mm256_and_si256(v, hi)));
    }
  }
}

/* c[4][16] (rows ldc apart) = a[4][n] (rows lda apart, f32) · b[n][16] (f32);
 * add: c += (else c =) */
INLINE void rows4x16(const float *a, int lda, const float *b, int n, float *c, int ldc, int add) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31;
  if (add) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm256_setzero_ps();
  }
  for (int e = 0; e < n; e++) {
    __m256 b0 = _mm256_load_ps(b + e * 16), b1 = _mm256_load_ps(b + e * 16 + 8), x;
    x = _mm256_broadcast_ss(a + e);
    c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + lda + e);
    c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2 * lda + e);
    c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3 * lda + e);
    c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
}

AVX2_TARGET static void scores_avx2(const uint16_t *k, int64_t ldk, int dc, int np,
                                    const uint16_t *qp, float *st) {
  float qf[DMAX * QT] __attribute__((aligned(32)));
  float kf[4 * DMAX] __attribute__((aligned(32)));
  /* the depth in use (pairs past np are zero), a multiple of 8 for widen_rows */
  const int D = (2 * np + 7) / 8 * 8 < 32 * dc ? (2 * np + 7) / 8 * 8 : 32 * dc;
  widen_pairs(qp, D, qf);
  for (int j = 0; j < BC; j += 4) {
    widen_rows(k + j * ldk, ldk, 4, D, kf, D);
    rows4x16(kf, D, qf, D, st + j * QT, QT, 0);
  }
}

/* 16 values (two ymm) rounded to bf16 and stored as 16 uint16 */
INLINE void store_bf16x16(uint16_t *y, __m256 v0, __m256 v1) {
  __m256i w = _mm256_packus_epi32(attn_bf16_bits8_avx2(v0), attn_bf16_bits8_avx2(v1)); /* [0-3 8-11 | 4-7 12-15] */
  _mm256_storeu_si256((__m256i *)y, _mm256_permute4x64_epi64(w, 0xD8));
}

/* Rows j and j + 1 (16 lanes each) rounded to bf16 into the pair row of a B
 * tile run (the layout of p and dsv): word q = bf16(row j) | bf16(row j+1) << 16 */
INLINE void store_pair(uint16_t *t, int j, __m256 e0, __m256 e1, __m256 o0, __m256 o1) {
  uint16_t *row = t + (j >> 5) * 512 + ((j & 31) >> 1) * 32;
  __m256i w0 = _mm256_or_si256(attn_bf16_bits8_avx2(e0), _mm256_slli_epi32(attn_bf16_bits8_avx2(o0), 16));
  __m256i w1 = _mm256_or_si256(attn_bf16_bits8_avx2(e1), _mm256_slli_epi32(attn_bf16_bits8_avx2(o1), 16));
  _mm256_storeu_si256((__m256i *)row, w0);
  _mm256_storeu_si256((__m256i *)(row + 16), w1);
}

/* lanes where lo <= j < hi (all-ones), as floats for blends */
INLINE __m256 in_range(__m256i lo, __m256i hi, int j) {
  const __m256i vj = _mm256_set1_epi32(j);
  __m256i ge = _mm256_cmpgt_epi32(_mm256_add_epi32(vj, _mm256_set1_epi32(1)), lo);
  return _mm256_castsi256_ps(_mm256_and_si256(ge, _mm256_cmpgt_epi32(hi, vj)));
}

AVX2_TARGET static int softmax_avx2(const float *st, float scale, const int *lo, const int *hi,
                                    float *m, float *l, float *alpha, uint16_t *p) {
  const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
  const __m256 pmin = _mm256_set1_ps(ATTN_BF16_PMIN_LOG), tau = _mm256_set1_ps(ATTN_BF16_TAU);
  __m256i vlo[2], vhi[2];
  for (int h = 0; h < 2; h++) {
    vlo[h] = lo ? _mm256_loadu_si256((const __m256i *)(lo + 8 * h)) : _mm256_setzero_si256();
    vhi[h] = hi ? _mm256_loadu_si256((const __m256i *)(hi + 8 * h)) : _mm256_set1_epi32(BC);
  }
  __m256 mb[2] = {ninf, ninf};
  for (int j = 0; j < BC; j++)
    for (int h = 0; h < 2; h++) {
      __m256 t = _mm256_blendv_ps(ninf, _mm256_mul_ps(vs, _mm256_loadu_ps(st + j * QT + 8 * h)),
                                  in_range(vlo[h], vhi[h], j));
      mb[h] = _mm256_max_ps(t, mb[h]); /* a NaN t leaves mb (the max skips NaN) */
    }
  int moved = 0;
  __m256 ms[2];
  for (int h = 0; h < 2; h++) {
    __m256 mo = _mm256_loadu_ps(m + 8 * h);
    __m256 up = _mm256_cmp_ps(mb[h], _mm256_add_ps(mo, tau), _CMP_GT_OQ);
    __m256 mn = _mm256_blendv_ps(mo, mb[h], up);
    moved |= _mm256_movemask_ps(up) != 0;
    /* e^(mo - mn) where m moved (mn > -inf there: mo - mn in [-inf, -8)) */
    __m256 a = _mm256_blendv_ps(_mm256_set1_ps(1.0f), attn_vexp8_avx2(_mm256_sub_ps(mo, mn)), up);
    _mm256_storeu_ps(alpha + 8 * h, a);
    _mm256_storeu_ps(m + 8 * h, mn);
    /* max still -inf: subtract 0 (-inf gives p = 0, NaN stays NaN) */
    ms[h] = _mm256_andnot_ps(_mm256_cmp_ps(mn, ninf, _CMP_EQ_OQ), mn);
  }
  __m256 se[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, so[2] = {se[0], se[1]};
  for (int j = 0; j < BC; j += 2) {
    __m256 pv[2][2];
    for (int u = 0; u < 2; u++)
      for (int h = 0; h < 2; h++) {
        __m256 t = _mm256_blendv_ps(
            ninf, _mm256_mul_ps(vs, _mm256_loadu_ps(st + (j + u) * QT + 8 * h)),
            in_range(vlo[h], vhi[h], j + u));
        __m256 x = _mm256_sub_ps(t, ms[h]);
        /* a NaN logit gives p = NaN: l and the row's out turn NaN (as math) */
        pv[u][h] = attn_vexp8_mask_avx2(_mm256_cmp_ps(x, pmin, _CMP_NLT_UQ), x);
      }
    for (int h = 0; h < 2; h++) {
      se[h] = _mm256_add_ps(se[h], pv[0][h]);
      so[h] = _mm256_add_ps(so[h], pv[1][h]);
    }
    store_pair(p, j, pv[0][0], pv[0][1], pv[1][0], pv[1][1]);
  }
  for (int h = 0; h < 2; h++) {
    __m256 a = _mm256_loadu_ps(alpha + 8 * h), lo8 = _mm256_loadu_ps(l + 8 * h);
    _mm256_storeu_ps(l + 8 * h, _mm256_add_ps(_mm256_mul_ps(a, lo8), _mm256_add_ps(se[h], so[h])));
  }
  return moved;
}

AVX2_TARGET static void accum_avx2(float *ot, int dvt, const float *alpha, const uint16_t *vt,
                                   const uint16_t *p) {
  float pf[BC * QT] __attribute__((aligned(32)));
  float vf[4 * BC] __attribute__((aligned(32)));
  float s[4 * QT] __attribute__((aligned(32)));
  widen_pairs(p, BC, pf);
  const __m256 a0 = alpha ? _mm256_loadu_ps(alpha) : _mm256_set1_ps(1.0f);
  const __m256 a1 = alpha ? _mm256_loadu_ps(alpha + 8) : _mm256_set1_ps(1.0f);
  for (int c = 0; c < dvt * 16; c += 4) {
    widen_rows(vt + c * BC, BC, 4, BC, vf, BC);
    rows4x16(vf, BC, pf, BC, s, QT, 0);
    for (int r = 0; r < 4; r++) { /* oc = (alpha oc) + s, as the portable tile */
      float *oc = ot + (c + r) * QT;
      __m256 o0 = _mm256_loadu_ps(oc), o1 = _mm256_loadu_ps(oc + 8);
      if (alpha) o0 = _mm256_mul_ps(a0, o0), o1 = _mm256_mul_ps(a1, o1);
      _mm256_storeu_ps(oc, _mm256_add_ps(o0, _mm256_load_ps(s + r * QT)));
      _mm256_storeu_ps(oc + 8, _mm256_add_ps(o1, _mm256_load_ps(s + r * QT + 8)));
    }
  }
}

AVX2_TARGET static void probs_grad_avx2(const float *st, const float *dpt, float scale,
                                        const int *lo, const int *hi, const float *lse,
                                        const float *di, float dscale, uint16_t *pt, uint16_t *dst,
                                        int64_t ldt, uint16_t *dsv) {
  const __m256 vs = _mm256_set1_ps(scale), vd = _mm256_set1_ps(dscale);
  const __m256 ninf = _mm256_set1_ps(-INFINITY), pmin = _mm256_set1_ps(ATTN_BF16_PMIN_LOG);
  const __m256 cap = _mm256_set1_ps(88.0f), zero = _mm256_setzero_ps();
  __m256i vlo[2], vhi[2];
  __m256 vl[2], vdi[2];
  for (int h = 0; h < 2; h++) {
    vl[h] = _mm256_loadu_ps(lse + 8 * h);
    vdi[h] = _mm256_loadu_ps(di + 8 * h);
    /* a row with no allowed key (lse = -inf): an empty range */
    __m256i none = _mm256_castps_si256(_mm256_cmp_ps(vl[h], ninf, _CMP_EQ_OQ));
    vlo[h] = lo ? _mm256_loadu_si256((const __m256i *)(lo + 8 * h)) : _mm256_setzero_si256();
    vhi[h] = hi ? _mm256_loadu_si256((const __m256i *)(hi + 8 * h)) : _mm256_set1_epi32(BC);
    vhi[h] = _mm256_andnot_si256(none, vhi[h]);
    vlo[h] = _mm256_andnot_si256(none, vlo[h]);
  }
  for (int j = 0; j < BC; j += 2) {
    __m256 ds[2][2];
    for (int u = 0; u < 2; u++) {
      __m256 pv[2];
      for (int h = 0; h < 2; h++) {
        __m256 ok = in_range(vlo[h], vhi[h], j + u);
        __m256 t = _mm256_blendv_ps(ninf, _mm256_mul_ps(vs, _mm256_loadu_ps(st + (j + u) * QT + 8 * h)), ok);
        __m256 x = _mm256_min_ps(cap, _mm256_sub_ps(t, vl[h])); /* a NaN x stays NaN */
        /* lse NaN: p = ds = NaN at the allowed keys; p = 0 gives ds = 0 */
        __m256 mask = _mm256_and_ps(_mm256_cmp_ps(t, ninf, _CMP_NEQ_UQ),
                                    _mm256_cmp_ps(x, pmin, _CMP_NLT_UQ));
        pv[h] = attn_vexp8_mask_avx2(mask, x);
        __m256 g = _mm256_mul_ps(_mm256_mul_ps(pv[h], _mm256_sub_ps(_mm256_loadu_ps(dpt + (j + u) * QT + 8 * h), vdi[h])), vd);
        ds[u][h] = _mm256_blendv_ps(g, zero, _mm256_cmp_ps(pv[h], zero, _CMP_EQ_OQ));
      }
      store_bf16x16(pt + (j + u) * ldt, pv[0], pv[1]);
      store_bf16x16(dst + (j + u) * ldt, ds[u][0], ds[u][1]);
    }
    store_pair(dsv, j, ds[0][0], ds[0][1], ds[1][0], ds[1][1]);
  }
}

AVX2_TARGET static void accum_t_avx2(float *acc, int ntc, const uint16_t *a, int64_t lda,
                                     const uint16_t *b, int nqc) {
  float bf[32 * 16] __attribute__((aligned(32)));
  float af[4 * 32] __attribute__((aligned(32)));
  for (int ct = 0; ct < ntc; ct++)
    for (int qc = 0; qc < nqc; qc++) {
      widen_pairs(b + (qc * ntc + ct) * 512, 32, bf);
      for (int kt = 0; kt < 4; kt++) {
        float *c = acc + (kt * ntc + ct) * 256;
        for (int r = 0; r < 16; r += 4) {
          widen_rows(a + (kt * 16 + r) * lda + qc * 32, lda, 4, 32, af, 32);
          rows4x16(af, 32, bf, 32, c + r * 16, 16, 1);
        }
      }
    }
}

static const attn_flash_bf16_ops avx2_ops = {
    "avx2 (bf16 widened, f32 fma)", nop, nop, scores_avx2, softmax_avx2, accum_avx2,
    probs_grad_avx2, accum_t_avx2};

const attn_flash_bf16_ops *attn_flash_bf16_ops_avx2(void) { return &avx2_ops; }
#else
const attn_flash_bf16_ops *attn_flash_bf16_ops_avx2(void) { return 0; }
#endif
