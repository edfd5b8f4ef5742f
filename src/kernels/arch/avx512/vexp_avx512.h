/* e^x on 16 lanes, AVX-512 (include only from files built for AVX-512).
 * x = n ln2 + r, |r| <= ln2/2 (ln2 split in two for an exact reduction);
 * e^r by a degree-6 polynomial (Horner, 6 FMAs), fitted for relative error
 * on that interval (1.7e-8 with f32 coefficients, ~0.15 ulp; the f32
 * evaluation adds about one ulp); 2^n applied with vscalefps, which rounds correctly into
 * denormals and overflows to inf. Inputs are clamped to [-104, 88.8] first:
 * e^-104 is below half the smallest denormal, so -inf and very negative x
 * give exactly 0. max/min keep NaN (operand order). */
#ifndef ATTN_VEXP_AVX512_H
#define ATTN_VEXP_AVX512_H

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>

ATTN_AVX512_INLINE __m512
attn_vexp16_avx512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), x);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(0.0013841403415426612f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.008374841883778572f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.04166814312338829f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.16666419804096222f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.49999991059303284f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

/* e^x on the lanes of k and 0 on the others, for lanes of k with x in
 * [-87, 88] (no clamping: the caller's mask excludes -inf, NaN and the far
 * tail). n = round(x log2e) in one rounding (x log2e + 1.5 2^23 - 1.5 2^23),
 * so |r| <= ln2/2 exactly as the fit assumes; the same polynomial as above. */
ATTN_AVX512_INLINE __m512
attn_vexp16_maskz_avx512(__mmask16 k, __m512 x) {
  const __m512 shift = _mm512_set1_ps(12582912.0f);
  __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shift), shift);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(0.0013841403415426612f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.008374841883778572f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.04166814312338829f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.16666419804096222f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.49999991059303284f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(k, y, n);
}
#endif
#endif
