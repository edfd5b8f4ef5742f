/* Adam/AdamW update, AVX-512: the same operations as the portable loop in
 * adamw.c, 16 lanes at a time (fma, sqrt and div are exact, so the bits agree). */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>

ATTN_AVX512 static inline void adam16(
    const attn_adam_scalars *k, float *p, const float *g, float *m, float *v, __mmask16 mask) {
  __m512 pi = _mm512_maskz_loadu_ps(mask, p), gi = _mm512_maskz_loadu_ps(mask, g);
  __m512 mi = _mm512_maskz_loadu_ps(mask, m), vi = _mm512_maskz_loadu_ps(mask, v);
  if (k->adamw) pi = _mm512_mul_ps(pi, _mm512_set1_ps(k->decay_mul));
  else if (k->wd != 0.0f) gi = _mm512_fmadd_ps(_mm512_set1_ps(k->wd), pi, gi);
  mi = _mm512_fmadd_ps(_mm512_set1_ps(k->one_minus_beta1), gi,
                       _mm512_mul_ps(mi, _mm512_set1_ps(k->beta1)));
  vi = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(k->one_minus_beta2), gi), gi,
                       _mm512_mul_ps(vi, _mm512_set1_ps(k->beta2)));
  __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), _mm512_set1_ps(k->bc2_sqrt)),
                               _mm512_set1_ps(k->eps));
  __m512 upd = _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(k->neg_step_size), mi), denom);
  _mm512_mask_storeu_ps(p, mask, _mm512_add_ps(pi, upd));
  _mm512_mask_storeu_ps(m, mask, mi);
  _mm512_mask_storeu_ps(v, mask, vi);
}

ATTN_AVX512 void attn_adam_f32_avx512(
    const attn_adam_scalars *k, float *p, const float *g, float *m, float *v, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) adam16(k, p + i, g + i, m + i, v + i, (__mmask16)0xffff);
  if (i < n) adam16(k, p + i, g + i, m + i, v + i, (__mmask16)((1u << (n - i)) - 1));
}
#endif
