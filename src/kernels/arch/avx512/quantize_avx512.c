/* AVX-512 row quantization and dequantization: the same operations as the
 * scalar code (IEEE division, round to nearest even, clamp; int -> float,
 * two multiplies, one add, no FMA), so the same bits. */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>


static __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

ATTN_AVX512 void attn_quantize_row_u8_avx512(const float *x, int64_t n, float s, int32_t z,
                                          uint8_t *q) {
  __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps((float)z);
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = tail_mask(n - k);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + k), vs);
    v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm_mask_storeu_epi8(q + k, m, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
  }
}

ATTN_AVX512 void attn_minmax_row_avx512(const float *x, int64_t n, float *lo, float *hi, int *bad) {
  __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = tail_mask(n - k);
    __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    /* the portable a = x < a ? x : a: vminps returns its second operand
     * unless the first is less, so neither a -0 nor a NaN enters a lane */
    vlo = _mm512_min_ps(v, vlo);
    vhi = _mm512_max_ps(v, vhi);
  }
  *lo = _mm512_reduce_min_ps(vlo);
  *hi = _mm512_reduce_max_ps(vhi);
  *bad = nan != 0;
}

ATTN_AVX512 void attn_dequant_row_avx512(const int32_t *acc, int64_t n, float sx, int32_t zx,
                                      const float *sw, const int32_t *cs, const float *b,
                                      float *y) {
  __m512 vsx = _mm512_set1_ps(sx);
  __m512i vzx = _mm512_set1_epi32(zx);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 m = tail_mask(n - j);
    __m512i d = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, acc + j),
                                 _mm512_mullo_epi32(vzx, _mm512_maskz_loadu_epi32(m, cs + j)));
    __m512 s = _mm512_mul_ps(vsx, _mm512_maskz_loadu_ps(m, sw + j));
    __m512 v = _mm512_mul_ps(s, _mm512_cvtepi32_ps(d));
    if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + j));
    _mm512_mask_storeu_ps(y + j, m, v);
  }
}
#else
void attn_quantize_row_u8_avx512(const float *x, int64_t n, float s, int32_t z, uint8_t *q) {
  attn_quantize_row_u8_generic(x, n, s, z, q);
}
void attn_minmax_row_avx512(const float *x, int64_t n, float *lo, float *hi, int *bad) {
  (void)x, (void)n, *lo = *hi = 0, *bad = 1;
}
void attn_dequant_row_avx512(const int32_t *acc, int64_t n, float sx, int32_t zx,
                             const float *sw, const int32_t *cs, const float *b, float *y) {
  attn_dequant_row_generic(acc, n, sx, zx, sw, cs, b, y);
}
#endif
