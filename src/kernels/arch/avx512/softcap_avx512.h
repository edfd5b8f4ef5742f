/* Logit softcap on 16 lanes, AVX-512 (include only from files built for
 * AVX-512): softcap_avx2.h's formula (the rational of softcap_tanh.h) with
 * attn_vexp16_avx512 for the derivative, shared by the row op
 * (softcap_avx512.c) and the fused forward tiles (sdpa_flash_avx512.c), so
 * the two give the same bits. */
#ifndef ATTN_SOFTCAP_AVX512_H
#define ATTN_SOFTCAP_AVX512_H

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>
#include <math.h>

#include "kernels/sdpa/softcap_tanh.h"
#include "kernels/arch/avx512/vexp_avx512.h"

ATTN_AVX512_INLINE __m512 attn_softcap16_avx512(__m512 x, __m512 vinv, __m512 vcap, __m512 *g) {
  const __m512 y = _mm512_mul_ps(x, vinv);
  const __mmask16 masked = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
  if (g) { /* 1 - tanh^2 = 4e / (1 + e)^2, e = e^(-2|y|) */
    const __m512 ay = _mm512_abs_ps(y);
    const __m512 e = attn_vexp16_avx512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), ay));
    const __m512 ope = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
    *g = _mm512_maskz_div_ps((__mmask16)~masked, _mm512_mul_ps(_mm512_set1_ps(4.0f), e),
                             _mm512_mul_ps(ope, ope));
  }
  /* tanh y = y P(u) / Q(u), u = min(y^2, 9.1^2), clamped to [-1, 1]; the
   * min/max keep a NaN (second operand) */
  const __m512 u = _mm512_min_ps(_mm512_set1_ps(ATTN_SOFTCAP_U_MAX), _mm512_mul_ps(y, y));
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(ATTN_SOFTCAP_P4), u, _mm512_set1_ps(ATTN_SOFTCAP_P3));
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(ATTN_SOFTCAP_Q4), u, _mm512_set1_ps(ATTN_SOFTCAP_Q3));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(ATTN_SOFTCAP_P2));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(ATTN_SOFTCAP_Q2));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(ATTN_SOFTCAP_P1));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(ATTN_SOFTCAP_Q1));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(1.0f));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(1.0f));
  __m512 t = _mm512_div_ps(_mm512_mul_ps(y, p), q);
  t = _mm512_max_ps(_mm512_set1_ps(-1.0f), _mm512_min_ps(_mm512_set1_ps(1.0f), t));
  return _mm512_mask_blend_ps(masked, _mm512_mul_ps(vcap, t), _mm512_set1_ps(-INFINITY));
}
#endif
#endif
