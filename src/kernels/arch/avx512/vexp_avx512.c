/* Vectorised exp over an array, AVX-512 (the lane function is in vexp_avx512.h). */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include "kernels/arch/avx512/vexp_avx512.h"

ATTN_AVX512 void
attn_vexp_f32_avx512(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, attn_vexp16_avx512(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, attn_vexp16_avx512(_mm512_maskz_loadu_ps(m, x + i)));
  }
}
#endif
