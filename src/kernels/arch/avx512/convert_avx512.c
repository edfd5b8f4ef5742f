/* AVX-512 f32 -> fp16 conversion (row op f32_to_f16; the fp16 Linear GEMMs, flash inputs):
 * VCVTPS2PH with round-to-nearest-even, the same bits as attn_f32_to_f16
 * for every non-NaN value (overflow -> ±inf, subnormals rounded); a NaN
 * stays a NaN (its payload may differ). */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>

ATTN_AVX512 void attn_f32_to_f16_avx512(
    const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT |
                                                            _MM_FROUND_NO_EXC);
    _mm256_storeu_si256((__m256i *)(y + i), h);
  }
  if (i < n) {  // tail: masked load / store
    __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
    __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, x + i), _MM_FROUND_TO_NEAREST_INT |
                                                                     _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(y + i, k, h);
  }
}
#endif
