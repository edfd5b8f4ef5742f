/* The arm64 NEON row op of the logit softcap (kern.h's
 * attn_row_ops.softcap): softcap_avx2.h's formula on 4 lanes with
 * attn_vexp4_neon (vexp_neon.h); the tail through a padded copy. */
#include "kernels/elementwise_internal.h"

#if defined(__aarch64__)
#include <math.h>
#include <string.h>

#include "kernels/vexp_neon.h"

static inline float32x4_t softcap4(float32x4_t x, float32x4_t vinv, float32x4_t vcap,
                                   float32x4_t *g) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  const float32x4_t y = vmulq_f32(x, vinv), ay = vabsq_f32(y);
  const float32x4_t e = attn_vexp4_neon(vmulq_f32(vdupq_n_f32(-2.0f), ay));
  const float32x4_t ope = vaddq_f32(one, e);
  const uint32x4_t masked = vceqq_f32(x, vdupq_n_f32(-INFINITY));
  *g = vbslq_f32(masked, vdupq_n_f32(0.0f),
                 vdivq_f32(vmulq_f32(vdupq_n_f32(4.0f), e), vmulq_f32(ope, ope)));
  const float32x4_t y2 = vmulq_f32(y, y);
  float32x4_t p = vaddq_f32(vdupq_n_f32(2.0f / 15), vmulq_f32(y2, vdupq_n_f32(-17.0f / 315)));
  p = vaddq_f32(vdupq_n_f32(-1.0f / 3), vmulq_f32(y2, p));
  p = vmulq_f32(y, vaddq_f32(one, vmulq_f32(y2, p)));
  const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(y), vdupq_n_u32(0x80000000u));
  float32x4_t t = vreinterpretq_f32_u32(
      vorrq_u32(vreinterpretq_u32_f32(vdivq_f32(vsubq_f32(one, e), ope)), sign));
  t = vbslq_f32(vcltq_f32(ay, vdupq_n_f32(0.125f)), p, t);
  return vbslq_f32(masked, vdupq_n_f32(-INFINITY), vmulq_f32(vcap, t));
}

void attn_softcap_row_neon(float cap, float *s, float *g, int64_t n) {
  const float32x4_t vinv = vdupq_n_f32(1.0f / cap), vcap = vdupq_n_f32(cap);
  for (int64_t j = 0; j < n; j += 4) {
    const int64_t m = n - j < 4 ? n - j : 4;
    float xs[4] = {0}, gs[4];
    memcpy(xs, s + j, (size_t)m * sizeof(float));
    float32x4_t gv, y = softcap4(vld1q_f32(xs), vinv, vcap, &gv);
    vst1q_f32(xs, y);
    vst1q_f32(gs, gv);
    memcpy(s + j, xs, (size_t)m * sizeof(float));
    if (g) memcpy(g + j, gs, (size_t)m * sizeof(float));
  }
}
#endif
