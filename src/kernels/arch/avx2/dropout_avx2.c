/* AVX2 dropout (dropout_stream.h): Philox-4x32-10 for 8 consecutive
 * counters at once, one 32-bit lane each, then each counter's four words
 * interleaved into stream order: exactly the portable fill's words, so the
 * same mask and values. AVX2 has no 32x32->64 high multiply: vpmuludq
 * multiplies the even lanes (and, after a shift, the odd ones) into 64-bit
 * products, recombined with blends. The AVX-512 level runs this kernel too:
 * with one Philox block per four values, the words cost about as much as
 * the loads and stores, and one kernel for both levels cannot drift. */
#include "kernels/rows/dropout_stream.h"
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"

/* lo, hi = low and high halves of a * m per 32-bit lane (m the same 32-bit
 * constant in every lane) */
AVX2_TARGET static inline void mulhilo8(__m256i a, __m256i m, __m256i *lo, __m256i *hi) {
  __m256i even = _mm256_mul_epu32(a, m);                       /* lanes 0, 2, 4, 6 */
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m); /* lanes 1, 3, 5, 7 */
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* The counter words (low, high) of base + 0..7 */
AVX2_TARGET static inline void counters8(uint64_t base, __m256i *c0, __m256i *c1) {
  const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
  __m256i lo = _mm256_set1_epi32((int)(uint32_t)base);
  *c0 = _mm256_add_epi32(lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  /* the low word wrapped (c0 < lo unsigned: signed compare with the sign bits
   * flipped) carries one into the high word; the compare gives -1 there */
  __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(lo, sign), _mm256_xor_si256(*c0, sign));
  *c1 = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(base >> 32)), carry);
}

/* One Philox round on the state c[4] of 8 blocks */
AVX2_TARGET static inline __attribute__((always_inline)) void round8(__m256i c[4], __m256i k0,
                                                                      __m256i k1) {
  const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
  __m256i lo0, hi0, lo1, hi1;
  mulhilo8(c[0], m0, &lo0, &hi0);
  mulhilo8(c[2], m1, &lo1, &hi1);
  c[0] = _mm256_xor_si256(_mm256_xor_si256(hi1, c[1]), k0);
  c[1] = lo1;
  c[2] = _mm256_xor_si256(_mm256_xor_si256(hi0, c[3]), k1);
  c[3] = lo0;
}

/* a[q], b[q] = word q of Philox-4x32-10 for the counters base + 0..7 and
 * base + 8..15 (counter = (low, high, tag, 0) of the 64-bit index, key = the
 * seed's two halves). The two sets of 8 blocks go through the rounds side
 * by side: one alone waits on the multiplies' latency. */
AVX2_TARGET static inline void philox16(uint64_t seed, uint64_t base, __m256i a[4], __m256i b[4]) {
  counters8(base, &a[0], &a[1]);
  counters8(base + 8, &b[0], &b[1]);
  a[2] = b[2] = _mm256_set1_epi32((int)ATTN_DROPOUT_TAG);
  a[3] = b[3] = _mm256_setzero_si256();
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    const __m256i vk0 = _mm256_set1_epi32((int)k0), vk1 = _mm256_set1_epi32((int)k1);
    round8(a, vk0, vk1);
    round8(b, vk0, vk1);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

_Static_assert(ATTN_DROPOUT_FILL == 16, "fill_avx2 writes 16 blocks");

AVX2_TARGET static void fill_avx2(uint64_t seed, uint64_t c0, uint32_t *words) {
  __m256i w[2][4];
  philox16(seed, c0, w[0], w[1]);
  for (int g = 0; g < 2; g++) {
    attn_interleave4x8_epi32(w[g]);
    for (int q = 0; q < 4; q++)
      _mm256_storeu_si256((__m256i *)(words + 32 * g + 8 * q), w[g][q]);
  }
}

AVX2_TARGET static void apply_avx2(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                                   float scale, const uint32_t *words) {
  const __m256 vp = _mm256_set1_ps(p), vs = _mm256_set1_ps(scale);
  const __m256 inv24 = _mm256_set1_ps(0x1p-24f);
  for (int64_t i = 0; i < n; i += 8) {
    __m256i w = attn_load8i((const int32_t *)(words + i), n - i);
    /* the top 24 bits times 2^-24, exactly as the portable apply */
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

void attn_dropout_f32_avx2(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                           float scale, uint64_t seed, uint64_t offset) {
  attn_dropout_run(fill_avx2, apply_avx2, x, y, mask, n, p, scale, seed, offset);
}
#endif
