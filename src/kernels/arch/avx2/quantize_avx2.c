/* AVX2 row quantization helpers: min/max of a row (with 0), u8
 * quantization, dequantization of int32 GEMM sums. The same IEEE
 * operations as the portable code in quantize.c (division, round to
 * nearest even, clamp; int -> float, two multiplies, one add, no FMA), so
 * the same bits. */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"

/* lanes' min / max in the portable loop's form a = x < a ? x : a: vminps
 * returns its second operand unless the first is less, so a NaN or a -0 never
 * enters a lane (as in the portable loop). The lanes then hold +0 or finite
 * values, so any reduction order gives the same bits. */
AVX2_TARGET void attn_minmax_row_avx2(const float *x, int64_t n, float *lo, float *hi, int *bad) {
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
  for (int64_t k = 0; k < n; k += 8) {
    /* lanes past the end load 0, which changes neither a min nor a max with 0 */
    __m256 v = attn_load8(x + k, n - k);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    vlo = _mm256_min_ps(v, vlo);
    vhi = _mm256_max_ps(v, vhi);
  }
  __m128 l = _mm_min_ps(_mm256_castps256_ps128(vlo), _mm256_extractf128_ps(vlo, 1));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(vhi), _mm256_extractf128_ps(vhi, 1));
  l = _mm_min_ps(l, _mm_movehl_ps(l, l));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  *lo = _mm_cvtss_f32(_mm_min_ss(l, _mm_movehdup_ps(l)));
  *hi = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  *bad = _mm256_movemask_ps(nan) != 0;
}

/* q = clamp(round_even(x / s) + z, 0, 255); vmaxps(v, 0) returns 0 for a NaN
 * v, as the portable clamp maps NaN to 0 */
AVX2_TARGET void attn_quantize_row_u8_avx2(const float *x, int64_t n, float s, int32_t z,
                                           uint8_t *q) {
  const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps((float)z);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
  for (int64_t k = 0; k < n; k += 8) {
    __m256 v = _mm256_div_ps(attn_load8(x + k, n - k), vs);
    v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    v = _mm256_min_ps(_mm256_max_ps(v, zero), top);
    __m256i i32 = _mm256_cvtps_epi32(v); /* exact: v is an integer in [0, 255] */
    __m128i i16 = _mm_packus_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
    __m128i i8 = _mm_packus_epi16(i16, i16);
    if (n - k >= 8) {
      _mm_storel_epi64((__m128i *)(q + k), i8);
    } else {
      uint8_t b[16];
      _mm_storeu_si128((__m128i *)b, i8);
      for (int64_t t = 0; t < n - k; t++)
        q[k + t] = b[t];
    }
  }
}

/* y = (sx sw) (float)(acc - zx cs) (+ b), wrapping int32 (vpmulld, vpsubd) */
AVX2_TARGET void attn_dequant_row_avx2(const int32_t *acc, int64_t n, float sx, int32_t zx,
                                       const float *sw, const int32_t *cs, const float *b,
                                       float *y) {
  const __m256 vsx = _mm256_set1_ps(sx);
  const __m256i vzx = _mm256_set1_epi32(zx);
  for (int64_t j = 0; j < n; j += 8) {
    __m256i d = _mm256_sub_epi32(attn_load8i(acc + j, n - j),
                                 _mm256_mullo_epi32(vzx, attn_load8i(cs + j, n - j)));
    __m256 s = _mm256_mul_ps(vsx, attn_load8(sw + j, n - j));
    __m256 v = _mm256_mul_ps(s, _mm256_cvtepi32_ps(d));
    if (b) v = _mm256_add_ps(v, attn_load8(b + j, n - j));
    attn_store8(y + j, n - j, v);
  }
}
#endif
