/* AVX-512 row helper for softmax / log-softmax / cross-entropy:
 * y = exp(x - m) 16 at a time with libmvec's expf, summed in 16 lanes then
 * reduced in a fixed order (see elementwise_internal.h). */
#include "kernels/rows/elementwise_internal.h"

#if ATTN_HAVE_LIBMVEC
#include <immintrin.h>

#include "kernels/arch/isa_targets.h"

ATTN_AVX512 __m512 _ZGVeN16v_expf(__m512 x); /* libmvec */

ATTN_AVX512 float attn_exp_sub_sum_f32_avx512(const float *x, float *y, int64_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
    if (y) _mm512_storeu_ps(y + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (j < n) {
    __mmask16 k = (__mmask16)((1u << (n - j)) - 1);
    /* lanes past the end: exp(-inf) = 0 */
    __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), k, x + j);
    __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(v, vm));
    if (y) _mm512_mask_storeu_ps(y + j, k, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

#endif
