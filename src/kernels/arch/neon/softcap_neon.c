/* The arm64 NEON vector op of the logit softcap unit (mod_softcap.c's
 * vec[]): scoremod_avx2.h's formula (the rational of
 * softcap_tanh.h) on 4 lanes, the derivative with attn_vexp4_neon
 * (vexp_neon.h); the tail through a padded copy. */
#include "kernels/rows/elementwise_internal.h"

#if defined(__aarch64__)
#include <math.h>
#include <string.h>

#include "kernels/sdpa/softcap_tanh.h"
#include "kernels/arch/neon/vexp_neon.h"

static inline float32x4_t softcap4(float32x4_t x, float32x4_t vinv, float32x4_t vcap,
                                   float32x4_t *g) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  const float32x4_t y = vmulq_f32(x, vinv);
  const uint32x4_t masked = vceqq_f32(x, vdupq_n_f32(-INFINITY));
  /* 1 - tanh^2 = 4e / (1 + e)^2, e = e^(-2|y|) */
  const float32x4_t e = attn_vexp4_neon(vmulq_f32(vdupq_n_f32(-2.0f), vabsq_f32(y)));
  const float32x4_t ope = vaddq_f32(one, e);
  *g = vbslq_f32(masked, vdupq_n_f32(0.0f),
                 vdivq_f32(vmulq_f32(vdupq_n_f32(4.0f), e), vmulq_f32(ope, ope)));
  /* tanh y = y P(u) / Q(u), u = min(y^2, 9.1^2), clamped to [-1, 1] (FMIN
   * and FMAX keep a NaN) */
  const float32x4_t u = vminq_f32(vmulq_f32(y, y), vdupq_n_f32(ATTN_SOFTCAP_U_MAX));
  float32x4_t p = vfmaq_f32(vdupq_n_f32(ATTN_SOFTCAP_P3), vdupq_n_f32(ATTN_SOFTCAP_P4), u);
  float32x4_t q = vfmaq_f32(vdupq_n_f32(ATTN_SOFTCAP_Q3), vdupq_n_f32(ATTN_SOFTCAP_Q4), u);
  p = vfmaq_f32(vdupq_n_f32(ATTN_SOFTCAP_P2), p, u);
  q = vfmaq_f32(vdupq_n_f32(ATTN_SOFTCAP_Q2), q, u);
  p = vfmaq_f32(vdupq_n_f32(ATTN_SOFTCAP_P1), p, u);
  q = vfmaq_f32(vdupq_n_f32(ATTN_SOFTCAP_Q1), q, u);
  p = vfmaq_f32(one, p, u);
  q = vfmaq_f32(one, q, u);
  float32x4_t t = vdivq_f32(vmulq_f32(y, p), q);
  t = vmaxq_f32(vminq_f32(t, one), vdupq_n_f32(-1.0f));
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
