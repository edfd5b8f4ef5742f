/* A 4 x 4 block of floats transposed in the registers: o[k] = lane k of
 * r0 .. r3. The GEMM's packing of a transposed operand (gemm_neon.c) and
 * the one-row product with Bᵀ (gemv_neon.c). arm64 only. */
#ifndef ATTN_TRANSPOSE4_NEON_H
#define ATTN_TRANSPOSE4_NEON_H

#include <arm_neon.h>

static inline void attn_transpose4_neon(float32x4_t r0, float32x4_t r1, float32x4_t r2,
                                        float32x4_t r3, float32x4_t o[4]) {
  float32x4_t t0 = vtrn1q_f32(r0, r1), t1 = vtrn2q_f32(r0, r1); /* (r0,r1) at lanes 0,2 / 1,3 */
  float32x4_t t2 = vtrn1q_f32(r2, r3), t3 = vtrn2q_f32(r2, r3);
  float64x2_t d0 = vreinterpretq_f64_f32(t0), d1 = vreinterpretq_f64_f32(t1);
  float64x2_t d2 = vreinterpretq_f64_f32(t2), d3 = vreinterpretq_f64_f32(t3);
  o[0] = vreinterpretq_f32_f64(vtrn1q_f64(d0, d2));
  o[1] = vreinterpretq_f32_f64(vtrn1q_f64(d1, d3));
  o[2] = vreinterpretq_f32_f64(vtrn2q_f64(d0, d2));
  o[3] = vreinterpretq_f32_f64(vtrn2q_f64(d1, d3));
}

#endif
