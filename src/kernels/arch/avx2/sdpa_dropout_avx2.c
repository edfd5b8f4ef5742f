/* Attention dropout's row kernel on AVX2 (sdpa_dropout.h): the hash words
 * of 8 keys at a time in 32-bit lanes (vpmulld), the same integers as the
 * portable kernel, so the same mask; the tail (short rows: a row holds the
 * keys of one block) as one more vector, loaded and stored in part. */
#include "kernels/sdpa/sdpa_dropout.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"

ATTN_AVX2_INLINE __m256i fmix8(__m256i h) {
  h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
  h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0x85EBCA6Bu));
  h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
  h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0xC2B2AE35u));
  return _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
}

AVX2_TARGET void attn_sdpa_dropout_row_avx2(const uint32_t k[2], uint32_t thr, float scale,
                                            int64_t j0, int64_t n, float *x) {
  const __m256i g = _mm256_set1_epi32((int)ATTN_DROP_GOLDEN32), k0 = _mm256_set1_epi32((int)k[0]);
  const __m256i k1 = _mm256_set1_epi32((int)k[1]), vthr = _mm256_set1_epi32((int)thr);
  const __m256 vs = _mm256_set1_ps(scale);
  __m256i j = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)j0),
                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int64_t c = 0; c < n; c += 8) {
    __m256i w = fmix8(_mm256_add_epi32(fmix8(_mm256_xor_si256(_mm256_mullo_epi32(j, g), k0)), k1));
    /* w >> 8 and thr are below 2^24: a signed compare; thr > w >> 8 drops */
    __m256i drop = _mm256_cmpgt_epi32(vthr, _mm256_srli_epi32(w, 8));
    __m256 y = _mm256_mul_ps(attn_load8(x + c, n - c), vs);
    attn_store8(x + c, n - c, _mm256_andnot_ps(_mm256_castsi256_ps(drop), y));
    j = _mm256_add_epi32(j, _mm256_set1_epi32(8));
  }
}
#endif
