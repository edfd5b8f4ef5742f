/* AVX-512 dropout: Philox-4x32-10 for 16 consecutive counters at once, one
 * 32-bit lane each, giving exactly the words rng.c gives (see
 * elementwise_internal.h). 32x32->64 products come from two vpmuludq (even
 * and odd lanes) recombined with blends. */
#include "kernels/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/isa_targets.h"
#include <immintrin.h>


// lo, hi [16] = low and high halves of a * m (m a 32-bit constant in every lane)
ATTN_AVX512 static inline void mulhilo16(__m512i a, __m512i m, __m512i *lo, __m512i *hi) {
  __m512i even = _mm512_mul_epu32(a, m);                       /* lanes 0, 2, ... */
  __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m); /* lanes 1, 3, ... */
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

// word 0 of Philox-4x32-10 for counters base + 0..15 (upper counter words 0)
ATTN_AVX512 static inline __m512i philox16_word0(uint64_t seed, uint64_t base) {
  const __m512i step = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  __m512i a = _mm512_add_epi64(_mm512_set1_epi64((long long)base), step);
  __m512i b = _mm512_add_epi64(_mm512_set1_epi64((long long)(base + 8)), step);
  __m512i c0 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a)),
                                  _mm512_cvtepi64_epi32(b), 1);
  __m512i c1 = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(a, 32))),
      _mm512_cvtepi64_epi32(_mm512_srli_epi64(b, 32)), 1);
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  const __m512i m0 = _mm512_set1_epi32((int)0xD2511F53u), m1 = _mm512_set1_epi32((int)0xCD9E8D57u);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    __m512i lo0, hi0, lo1, hi1;
    mulhilo16(c0, m0, &lo0, &hi0);
    mulhilo16(c2, m1, &lo1, &hi1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}

ATTN_AVX512 void attn_dropout_f32_avx512(const float *x, float *y, uint8_t *mask, int64_t n,
                                          float p, float scale, uint64_t seed, uint64_t offset) {
  const __m512 vp = _mm512_set1_ps(p), vs = _mm512_set1_ps(scale);
  const __m512 inv24 = _mm512_set1_ps(0x1p-24f);
  const __m128i one = _mm_set1_epi8(1);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
    __m512i w = philox16_word0(seed, offset + (uint64_t)i);
    /* top 24 bits, exactly as attn_rng_uniform */
    __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 8)), inv24);
    __mmask16 keep = _mm512_mask_cmp_ps_mask(m, u, vp, _CMP_GE_OQ);
    __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_maskz_mul_ps(keep, v, vs));
    if (mask) _mm_mask_storeu_epi8(mask + i, m, _mm_maskz_mov_epi8(keep, one));
  }
}

#endif
