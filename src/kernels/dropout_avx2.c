/* AVX2 dropout: Philox-4x32-10 for 8 consecutive counters at once, one
 * 32-bit lane each, giving exactly the words rng.c gives, so the same mask
 * and values as the portable dropout (dropout.c). AVX2 has no 32x32->64
 * high multiply: vpmuludq multiplies the even lanes (and, after a shift,
 * the odd ones) into 64-bit products, recombined with blends. */
#include "kernels/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/avx2_internal.h"

/* lo, hi = low and high halves of a * m per 32-bit lane (m the same 32-bit
 * constant in every lane) */
AVX2_TARGET static inline void mulhilo8(__m256i a, __m256i m, __m256i *lo, __m256i *hi) {
  __m256i even = _mm256_mul_epu32(a, m);                       /* lanes 0, 2, 4, 6 */
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m); /* lanes 1, 3, 5, 7 */
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* word 0 of Philox-4x32-10 for the counters base + 0..7 (counter = (low,
 * high, 0, 0) of the 64-bit index, key = the seed's two halves) */
AVX2_TARGET static inline __m256i philox8_word0(uint64_t seed, uint64_t base) {
  const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
  __m256i lo = _mm256_set1_epi32((int)(uint32_t)base);
  __m256i c0 = _mm256_add_epi32(lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  /* the low word wrapped (c0 < lo unsigned: signed compare with the sign bits
   * flipped) carries one into the high word; the compare gives -1 there */
  __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(lo, sign), _mm256_xor_si256(c0, sign));
  __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(base >> 32)), carry);
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    __m256i lo0, hi0, lo1, hi1;
    mulhilo8(c0, m0, &lo0, &hi0);
    mulhilo8(c2, m1, &lo1, &hi1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}

AVX2_TARGET void attn_dropout_f32_avx2(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                                       float scale, uint64_t seed, uint64_t offset) {
  const __m256 vp = _mm256_set1_ps(p), vs = _mm256_set1_ps(scale);
  const __m256 inv24 = _mm256_set1_ps(0x1p-24f);
  for (int64_t i = 0; i < n; i += 8) {
    __m256i w = philox8_word0(seed, offset + (uint64_t)i);
    /* the top 24 bits times 2^-24, exactly as attn_rng_uniform */
    __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 8)), inv24);
    __m256 keep = _mm256_cmp_ps(u, vp, _CMP_GE_OQ);
    /* keep ? x scale : +0 */
    attn_store8(y + i, n - i, _mm256_and_ps(_mm256_mul_ps(attn_load8(x + i, n - i), vs), keep));
    if (mask) {
      /* the lanes' 0 / -1 narrowed to 8 bytes (saturating packs keep the order
       * when the two 128-bit halves are packed together), then 0 / 1 */
      __m256i ki = _mm256_castps_si256(keep);
      __m128i k16 = _mm_packs_epi32(_mm256_castsi256_si128(ki), _mm256_extracti128_si256(ki, 1));
      __m128i k8 = _mm_and_si128(_mm_packs_epi16(k16, k16), _mm_set1_epi8(1));
      if (n - i >= 8) {
        _mm_storel_epi64((__m128i *)(mask + i), k8);
      } else {
        uint8_t b[16];
        _mm_storeu_si128((__m128i *)b, k8);
        for (int64_t t = 0; t < n - i; t++)
          mask[i + t] = b[t];
      }
    }
  }
}
#endif
