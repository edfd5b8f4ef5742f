/* Logit softcap on 16 lanes, AVX-512 (include only from files built for
 * AVX-512): softcap_avx2.h's formula with attn_vexp16_avx512, shared by the
 * row op (softcap_avx512.c) and the fused forward tiles
 * (sdpa_flash_avx512.c), so the two give the same bits. */
#ifndef ATTN_SOFTCAP_AVX512_H
#define ATTN_SOFTCAP_AVX512_H

#if defined(__x86_64__)
#include "kernels/isa_targets.h"
#include <immintrin.h>
#include <math.h>

#include "kernels/vexp_avx512.h"

ATTN_AVX512_INLINE __m512 attn_softcap16_avx512(__m512 x, __m512 vinv, __m512 vcap, __m512 *g) {
  const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
  const __m512 y = _mm512_mul_ps(x, vinv), ay = _mm512_andnot_ps(sign, y);
  const __m512 e = attn_vexp16_avx512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), ay));
  const __m512 ope = _mm512_add_ps(one, e);
  const __mmask16 masked = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
  if (g)
    *g = _mm512_maskz_div_ps((__mmask16)~masked, _mm512_mul_ps(_mm512_set1_ps(4.0f), e),
                             _mm512_mul_ps(ope, ope));
  const __m512 y2 = _mm512_mul_ps(y, y);
  __m512 p = _mm512_add_ps(_mm512_set1_ps(2.0f / 15),
                           _mm512_mul_ps(y2, _mm512_set1_ps(-17.0f / 315)));
  p = _mm512_add_ps(_mm512_set1_ps(-1.0f / 3), _mm512_mul_ps(y2, p));
  p = _mm512_mul_ps(y, _mm512_add_ps(one, _mm512_mul_ps(y2, p)));
  __m512 t = _mm512_or_ps(_mm512_div_ps(_mm512_sub_ps(one, e), ope), _mm512_and_ps(sign, y));
  t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ay, _mm512_set1_ps(0.125f), _CMP_LT_OQ), t, p);
  return _mm512_mask_blend_ps(masked, _mm512_mul_ps(vcap, t), _mm512_set1_ps(-INFINITY));
}
#endif
#endif
