/* e^x on 4 lanes, arm64 NEON (baseline on every arm64 core: no target
 * attributes; on other machines this header defines nothing).
 *
 * The method of vexp_avx512.h: x = n ln2 + r, |r| <= ln2/2 (ln2 split in a
 * 9-bit head and a tail, so n * head is exact and the reduction loses
 * nothing), e^r by the same degree-6 polynomial (Horner, 6 FMAs, relative
 * error 1.7e-8 ~0.15 ulp; the f32 evaluation adds about one ulp), then 2^n.
 *
 * NEON has no vscalef, so 2^n is built in the exponent field:
 *   attn_vexp4_neon: the full range. Inputs clamped to [-104, 88.8] first
 *     (FMAX/FMIN propagate NaN, so NaN stays NaN; -inf -> -104 -> 0; e^-104
 *     is below half the smallest denormal). n in [-150, 128] does not fit
 *     one f32 power of two, so the scale is two: 2^(n/2) and 2^(n - n/2),
 *     each in [2^-75, 2^64] (normal). y 2^n1 is exact; the second product
 *     rounds once, correctly into the denormals (Linux runs arm64 with
 *     FPCR.FZ = 0) or up to inf (x > 88.72 -> y 2^128 overflows).
 *   attn_vexp4_inrange_neon: the softmax's variant, for lanes with x in
 *     [-87, 88] or NaN, which the caller masks afterwards (the flash kernels
 *     zero the lanes below ATTN_FLASH_PMIN_LOG = -64 and the masked keys).
 *     No clamp; one integer add of n << 23 to y's bits (y in [0.7, 1.42],
 *     so the exponent stays normal for n in [-126, 127]). A NaN x gives NaN
 *     (n converts to 0, y is NaN). Outside the range the result is garbage,
 *     not a trap.
 * Cost per 4 lanes: full 16 vector ops (2 FRINTN/FCVT, 8 FMA/FMUL, 4 integer,
 * 2 FMUL for the scale); inrange 13. */
#ifndef ATTN_VEXP_NEON_H
#define ATTN_VEXP_NEON_H

#if defined(__aarch64__)
#include <arm_neon.h>

/* e^r on |r| <= ln2/2 (about), and r itself; shared by both variants */
static inline float32x4_t attn_vexp4_neon_poly_(float32x4_t x, float32x4_t n) {
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f)); /* x - n ln2_hi, exact */
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));          /* - n ln2_lo */
  float32x4_t y = vdupq_n_f32(0.0013841403415426612f);
  y = vfmaq_f32(vdupq_n_f32(0.008374841883778572f), y, r);
  y = vfmaq_f32(vdupq_n_f32(0.04166814312338829f), y, r);
  y = vfmaq_f32(vdupq_n_f32(0.16666419804096222f), y, r);
  y = vfmaq_f32(vdupq_n_f32(0.49999991059303284f), y, r);
  y = vfmaq_f32(vdupq_n_f32(1.0f), y, r);
  return vfmaq_f32(vdupq_n_f32(1.0f), y, r);
}

/* e^x within 3 ulp of expf for normal results (denormal results within one
 * step), -inf -> 0, x > 88.72 and +inf -> inf, NaN -> NaN. */
static inline float32x4_t attn_vexp4_neon(float32x4_t x) {
  x = vmaxq_f32(x, vdupq_n_f32(-104.0f));
  x = vminq_f32(x, vdupq_n_f32(88.8f));
  /* round to nearest even; NaN gives NaN here and 0 in the conversion */
  float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t y = attn_vexp4_neon_poly_(x, n);
  int32x4_t ni = vcvtq_s32_f32(n);
  int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1); /* both in [-75, 64] */
  const int32x4_t bias = vdupq_n_s32(127);
  float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
  float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
  return vmulq_f32(vmulq_f32(y, s1), s2);
}

/* e^x for x in [-87, 88] or NaN (see above); the caller zeroes the lanes it
 * does not want. */
static inline float32x4_t attn_vexp4_inrange_neon(float32x4_t x) {
  float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t y = attn_vexp4_neon_poly_(x, n);
  int32x4_t e = vshlq_n_s32(vcvtq_s32_f32(n), 23);
  return vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(y), e));
}

/* Lanes of v where m is all ones, 0 elsewhere. */
static inline float32x4_t attn_vmaskz4_neon(uint32x4_t m, float32x4_t v) {
  return vreinterpretq_f32_u32(vandq_u32(m, vreinterpretq_u32_f32(v)));
}
#endif
#endif
