/* Attention dropout's row kernel on AVX-512 (sdpa_dropout.h): 16 hash words
 * at a time, the same integers as the portable kernel (so the same mask),
 * the tail masked. */
#include "kernels/sdpa/sdpa_dropout.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/arch/isa_targets.h"

ATTN_AVX512_INLINE __m512i fmix16(__m512i h) {
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32((int)0x85EBCA6Bu));
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 13));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32((int)0xC2B2AE35u));
  return _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
}

ATTN_AVX512 void attn_sdpa_dropout_row_avx512(const uint32_t k[2], uint32_t thr, float scale,
                                              int64_t j0, int64_t n, float *x) {
  const __m512i g = _mm512_set1_epi32((int)ATTN_DROP_GOLDEN32), k0 = _mm512_set1_epi32((int)k[0]);
  const __m512i k1 = _mm512_set1_epi32((int)k[1]), vthr = _mm512_set1_epi32((int)thr);
  const __m512 vs = _mm512_set1_ps(scale);
  __m512i j = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)j0),
                               _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                                 15));
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 t = n - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - c)) - 1);
    __m512i w = fmix16(_mm512_add_epi32(fmix16(_mm512_xor_si512(_mm512_mullo_epi32(j, g), k0)), k1));
    __mmask16 keep = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(w, 8), vthr);
    __m512 y = _mm512_maskz_mul_ps(keep, _mm512_maskz_loadu_ps(t, x + c), vs);
    _mm512_mask_storeu_ps(x + c, t, y);
    j = _mm512_add_epi32(j, _mm512_set1_epi32(16));
  }
}
#endif
