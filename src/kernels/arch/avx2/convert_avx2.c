/* AVX2 + F16C conversions of rows: f16 <-> f32 with vcvtph2ps / vcvtps2ph
 * (round to nearest even; the same bits as attn_f16_to_f32 / attn_f32_to_f16
 * in tensor.c for every non-NaN value, overflow -> inf, subnormals rounded;
 * a NaN stays a NaN, its payload may differ), and bf16 <-> f32 with integer
 * operations (exactly attn_f32_to_bf16: round to nearest even on the dropped
 * 16 bits, NaN -> quiet NaN). Tails go through a small zeroed buffer or
 * masked loads / stores: nothing past n is read or written. */
#include <string.h>

#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

AVX2_TARGET void attn_f16_to_f32_avx2(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
  if (i < n) {
    uint16_t t[8] = {0};
    memcpy(t, x + i, (size_t)(n - i) * sizeof *t);
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
    _mm256_maskstore_ps(y + i, attn_tail_mask8(n - i), v);
  }
}

AVX2_TARGET void attn_f32_to_f16_avx2(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), RNE));
  if (i < n) {
    uint16_t t[8];
    _mm_storeu_si128((__m128i *)t, _mm256_cvtps_ph(attn_load8(x + i, n - i), RNE));
    memcpy(y + i, t, (size_t)(n - i) * sizeof *t);
  }
}

/* 8 lanes of values <= 0xffff to 8 uint16 (packusdw cannot saturate them) */
AVX2_TARGET static inline __m128i narrow16(__m256i v) {
  return _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

AVX2_TARGET void attn_f32_to_bf16_avx2(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i), narrow16(attn_bf16_bits8_avx2(_mm256_loadu_ps(x + i))));
  if (i < n) {
    uint16_t t[8];
    _mm_storeu_si128((__m128i *)t, narrow16(attn_bf16_bits8_avx2(attn_load8(x + i, n - i))));
    memcpy(y + i, t, (size_t)(n - i) * sizeof *t);
  }
}

AVX2_TARGET void attn_bf16_to_f32_avx2(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
  }
  if (i < n) {
    uint16_t t[8] = {0};
    memcpy(t, x + i, (size_t)(n - i) * sizeof *t);
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)t));
    _mm256_maskstore_ps(y + i, attn_tail_mask8(n - i),
                        _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
  }
}

/* y = (float)bf16(x): the bf16 bits shifted back into the top half */
AVX2_TARGET void attn_f32_round_bf16_avx2(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    __m256i h = attn_bf16_bits8_avx2(attn_load8(x + i, n - i));
    attn_store8(y + i, n - i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
}
#endif
