/* The AVX-512 vector op of the logit softcap unit (mod_softcap.c's vec[]):
 * attn_softcap16_avx512 (scoremod_avx512.h) over a row, the tail masked. */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/avx512/scoremod_avx512.h"
#include "kernels/sdpa/softcap_tanh.h"

ATTN_AVX512 void attn_softcap_row_avx512(float cap, float *s, float *g, int64_t n) {
  const __m512 vinv = _mm512_set1_ps(1.0f / cap), vcap = _mm512_set1_ps(cap);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
    __m512 gv, y = attn_softcap16_avx512(_mm512_maskz_loadu_ps(k, s + j), vinv, vcap, g ? &gv : NULL);
    _mm512_mask_storeu_ps(s + j, k, y);
    if (g) _mm512_mask_storeu_ps(g + j, k, gv);
  }
}
#endif
