/* The AVX2 vector op of the logit softcap unit (mod_softcap.c's vec[]):
 * attn_softcap8_avx2 (scoremod_avx2.h) over a row, the tail masked. */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"
#include "kernels/arch/avx2/scoremod_avx2.h"
#include "kernels/sdpa/softcap_tanh.h"

AVX2_TARGET void attn_softcap_row_avx2(float cap, float *s, float *g, int64_t n) {
  const __m256 vinv = _mm256_set1_ps(1.0f / cap), vcap = _mm256_set1_ps(cap);
  for (int64_t j = 0; j < n; j += 8) {
    __m256 gv, y = attn_softcap8_avx2(attn_load8(s + j, n - j), vinv, vcap, g ? &gv : NULL);
    attn_store8(s + j, n - j, y);
    if (g) attn_store8(g + j, n - j, gv);
  }
}
#endif
