/* Logit softcap on 8 lanes, AVX2 + FMA (include only from files built for
 * AVX2): the vector form of sdpa_softcap_sinks.c's tanh_from, shared by the
 * row op (softcap_avx2.c) and the fused forward tiles (sdpa_flash_avx2.c),
 * so the two give the same bits.
 *
 * y = x / cap (as x * (1/cap)), e = e^(-2|y|) (attn_vexp8_avx2);
 * tanh |y| = (1 - e) / (1 + e) with y's sign, below |y| = 1/8 the odd
 * series to y^7; result cap * tanh y, -inf kept (a masked key), NaN stays
 * NaN, +inf -> cap. *g (when g is not NULL) := 1 - tanh^2 = 4e / (1 + e)^2,
 * 0 at -inf. Plain multiplies and adds in the scalar code's order (no FMA
 * contraction), IEEE divisions. */
#ifndef ATTN_SOFTCAP_AVX2_H
#define ATTN_SOFTCAP_AVX2_H

#if defined(__x86_64__)
#include "kernels/isa_targets.h"
#include <immintrin.h>
#include <math.h>

#include "kernels/vexp_avx2.h"

ATTN_AVX2_INLINE __m256 attn_softcap8_avx2(__m256 x, __m256 vinv, __m256 vcap, __m256 *g) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  const __m256 y = _mm256_mul_ps(x, vinv), ay = _mm256_andnot_ps(sign, y);
  const __m256 e = attn_vexp8_avx2(_mm256_mul_ps(_mm256_set1_ps(-2.0f), ay));
  const __m256 ope = _mm256_add_ps(one, e);
  const __m256 masked = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
  if (g)
    *g = _mm256_andnot_ps(masked, _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(4.0f), e),
                                                _mm256_mul_ps(ope, ope)));
  const __m256 y2 = _mm256_mul_ps(y, y);
  __m256 p = _mm256_add_ps(_mm256_set1_ps(2.0f / 15),
                           _mm256_mul_ps(y2, _mm256_set1_ps(-17.0f / 315)));
  p = _mm256_add_ps(_mm256_set1_ps(-1.0f / 3), _mm256_mul_ps(y2, p));
  p = _mm256_mul_ps(y, _mm256_add_ps(one, _mm256_mul_ps(y2, p)));
  __m256 t = _mm256_or_ps(_mm256_div_ps(_mm256_sub_ps(one, e), ope), _mm256_and_ps(sign, y));
  t = _mm256_blendv_ps(t, p, _mm256_cmp_ps(ay, _mm256_set1_ps(0.125f), _CMP_LT_OQ));
  return _mm256_blendv_ps(_mm256_mul_ps(vcap, t), _mm256_set1_ps(-INFINITY), masked);
}
#endif
#endif
