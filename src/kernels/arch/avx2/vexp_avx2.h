/* e^x on 8 lanes, AVX2 + FMA (include only from files built for AVX2).
 *
 * x = n ln2 + r with n = round(x log2e) taken in one rounding
 * (x log2e + 1.5 2^23, whose low mantissa bits are then n as an integer),
 * |r| <= ln2/2, r from two FMAs (ln2 split in two, so the reduction is
 * exact); e^r by the degree-6 polynomial of vexp_avx512.h (Horner, 6 FMAs,
 * ~0.15 ulp fit, about one ulp with the f32 evaluation). AVX2 has no
 * vscalefps, so 2^n is built in the exponent field ((n + 127) << 23), which
 * only holds normal powers, -126 <= n <= 127:
 *
 * attn_vexp8_avx2: any x. Clamped to [-104, 88.8] first (e^-104 is below
 * half the smallest denormal; e^88.8 overflows), which maps -inf to 0 and
 * +inf to inf; max/min keep a NaN (operand order) and NaN reaches the
 * result through r. n then spans [-150, 128], so 2^n is applied as two
 * normal halves 2^(n/2) 2^(n - n/2): the first product is exact (y stays
 * normal), the second rounds once, correctly into denormals or to inf.
 *
 * attn_vexp8_mask_avx2: e^x on the lanes of mask (all-ones lanes) and +0 on
 * the others, for mask lanes with x in [-87, 88] or NaN (no clamping, one
 * scale: the caller's mask excludes -inf and the far tail, as for
 * attn_vexp16_maskz_avx512). Lanes outside the mask may hold anything. */
#ifndef ATTN_VEXP_AVX2_H
#define ATTN_VEXP_AVX2_H

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>


/* e^r for |r| <= ln2/2 and the integer n (in the low bits of k) with x = n
 * ln2 + r; k = x log2e + 1.5 2^23 as rounded. */
ATTN_AVX2_INLINE __m256 attn_vexp8_reduce_avx2(__m256 x, __m256 *k) {
  const __m256 shift = _mm256_set1_ps(12582912.0f);
  __m256 kk = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), shift);
  __m256 n = _mm256_sub_ps(kk, shift);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(0.0013841403415426612f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(0.008374841883778572f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(0.04166814312338829f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(0.16666419804096222f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(0.49999991059303284f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
  *k = kk;
  return y;
}

/* 2^n as a float for integer lanes n in [-126, 127] */
ATTN_AVX2_INLINE __m256 attn_vexp8_pow2i_avx2(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

ATTN_AVX2_INLINE __m256 attn_vexp8_avx2(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
  x = _mm256_min_ps(_mm256_set1_ps(88.8f), x);
  __m256 k;
  __m256 y = attn_vexp8_reduce_avx2(x, &k);
  /* k's bits are 0x4B400000 + n */
  __m256i n = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(0x4B400000));
  __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  return _mm256_mul_ps(_mm256_mul_ps(y, attn_vexp8_pow2i_avx2(n1)), attn_vexp8_pow2i_avx2(n2));
}

ATTN_AVX2_INLINE __m256 attn_vexp8_mask_avx2(__m256 mask, __m256 x) {
  __m256 k;
  __m256 y = attn_vexp8_reduce_avx2(x, &k);
  /* (0x4B400000 + n + 127) << 23 keeps the low 9 bits, n + 127 in [1, 254]
   * here (for a NaN lane y is NaN whatever the scale) */
  __m256 s = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(127)), 23));
  return _mm256_and_ps(mask, _mm256_mul_ps(y, s));
}
#endif
#endif
