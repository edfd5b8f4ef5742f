/* The arm64 NEON row and elementwise kernels as one table (contracts in
 * kern.h). Advanced SIMD is part of the arm64 base architecture: no target
 * attributes, no run-time test beyond cpu.c's.
 *
 * Bit-identical to the portable code: dropout (the same Philox-4x32-10
 * words, 4 counters per vector, dropout_stream.h), Adam (the same IEEE operations in the same
 * order, FMA exactly where adam_generic.c calls fmaf), the int8 row quantizer and
 * dequantizer, min/max, and the f16 / bf16 conversions (NaN handled as
 * tensor.c does). This file, like the portable one, relies on -std=c11's
 * -ffp-contract=off: a vmulq_f32 followed by a vaddq_f32 must stay two
 * roundings. exp and exp_sub_sum use vexp_neon.h (a few ulp of expf);
 * LayerNorm rows accumulate as the contract says (mean and variance in
 * double, the backward's sums in f32) in a fixed vector order, and their
 * elementwise parts are the portable expressions. GELU and its derivative
 * use a rational fit of the normal tail times vexp (within ~1e-6 relative
 * of the exact function; see the GELU section). */
#include "kernels/rows/elementwise_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "attn/lowp.h"
#include "attn/tensor.h"
#include "kernels/rows/dropout_stream.h"
#include "kernels/arch/neon/vexp_neon.h"

/* ---- exp ------------------------------------------------------------------ */

static void vexp_neon(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t a = attn_vexp4_neon(vld1q_f32(x + i));
    float32x4_t b = attn_vexp4_neon(vld1q_f32(x + i + 4));
    vst1q_f32(y + i, a);
    vst1q_f32(y + i + 4, b);
  }
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, attn_vexp4_neon(vld1q_f32(x + i)));
  if (i < n) {
    float t[4] = {0, 0, 0, 0};
    memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
    vst1q_f32(t, attn_vexp4_neon(vld1q_f32(t)));
    memcpy(y + i, t, (size_t)(n - i) * sizeof(float));
  }
}

/* Sum order: two 4-lane accumulators over blocks of 8, then one block of 4,
 * then the tail's lanes (the others zeroed), reduced pairwise at the end. */
static float exp_sub_sum_neon(const float *x, float *y, int64_t n, float m) {
  const float32x4_t vm = vdupq_n_f32(m);
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float32x4_t a = attn_vexp4_neon(vsubq_f32(vld1q_f32(x + j), vm));
    float32x4_t b = attn_vexp4_neon(vsubq_f32(vld1q_f32(x + j + 4), vm));
    if (y) vst1q_f32(y + j, a), vst1q_f32(y + j + 4, b);
    s0 = vaddq_f32(s0, a);
    s1 = vaddq_f32(s1, b);
  }
  if (j + 4 <= n) {
    float32x4_t a = attn_vexp4_neon(vsubq_f32(vld1q_f32(x + j), vm));
    if (y) vst1q_f32(y + j, a);
    s0 = vaddq_f32(s0, a);
    j += 4;
  }
  if (j < n) {
    int64_t r = n - j;
    float t[4] = {0, 0, 0, 0};
    memcpy(t, x + j, (size_t)r * sizeof(float));
    static const uint32_t lanes[4] = {0, 1, 2, 3};
    uint32x4_t live = vcltq_u32(vld1q_u32(lanes), vdupq_n_u32((uint32_t)r));
    float32x4_t a = attn_vmaskz4_neon(live, attn_vexp4_neon(vsubq_f32(vld1q_f32(t), vm)));
    if (y) {
      vst1q_f32(t, a);
      memcpy(y + j, t, (size_t)r * sizeof(float));
    }
    s1 = vaddq_f32(s1, a);
  }
  return vaddvq_f32(vaddq_f32(s0, s1));
}

/* ---- GELU ------------------------------------------------------------------
 * gelu(x) = x Phi(x), gelu'(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi).
 * With a = |x| and the upper tail T(a) = Phi(-a) = erfc(a / sqrt 2) / 2:
 *   Phi(x) = T(a) for x < 0, 1 - T(a) for x >= 0 (T <= 1/2: no cancellation),
 *   T(a) = e^(-a^2/2) S(a), S(a) = P(a) / Q(a) (degrees 4 / 5, P(0)/Q(0) = 1/2
 *   exactly, all coefficients positive, so Horner is stable on a >= 0).
 * S was fitted (tools/fit_gelu_tail.py) for near-minimax relative error on
 * [0, 14]: 5.8e-9 in exact arithmetic, 3e-7 evaluated in f32 with these
 * rounded coefficients. e^(-a^2/2) uses the exact square (a^2 = h + l, l by
 * FMA): e^(-h/2) (1 - l/2), so large |x| lose nothing to rounding a^2. a is
 * clamped to 20 (e^-200 -> 0; NaN stays NaN through FMIN), which gives what
 * the portable formula gives at the ends: gelu(+inf) = inf, gelu(-inf) = NaN
 * (-inf * 0), NaN -> NaN; gelu'(+-inf) = NaN (inf * 0, below). */

/* e^(-a^2/2), a >= 0 or NaN */
static inline float32x4_t exp_neg_half_sq4(float32x4_t a) {
  float32x4_t h = vmulq_f32(a, a);
  float32x4_t l = vfmaq_f32(vnegq_f32(h), a, a); /* a^2 - h, exact */
  float32x4_t e = attn_vexp4_neon(vmulq_f32(h, vdupq_n_f32(-0.5f)));
  return vfmaq_f32(e, e, vmulq_f32(l, vdupq_n_f32(-0.5f)));
}

/* S(a) = Phi(-a) e^(a^2/2) of 4 lanes */
static inline float32x4_t normal_tail_ratio4(float32x4_t a) {
  float32x4_t p = vdupq_n_f32(4.047473427e-03f);
  p = vfmaq_f32(vdupq_n_f32(4.018392041e-02f), p, a);
  p = vfmaq_f32(vdupq_n_f32(1.819235086e-01f), p, a);
  p = vfmaq_f32(vdupq_n_f32(4.365574718e-01f), p, a);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, a);
  float32x4_t q = vdupq_n_f32(1.014538016e-02f);
  q = vfmaq_f32(vdupq_n_f32(1.007331014e-01f), q, a);
  q = vfmaq_f32(vdupq_n_f32(4.660015106e-01f), q, a);
  q = vfmaq_f32(vdupq_n_f32(1.197108150e+00f), q, a);
  q = vfmaq_f32(vdupq_n_f32(1.670999765e+00f), q, a);
  q = vfmaq_f32(vdupq_n_f32(1.0f), q, a);
  return vdivq_f32(p, q);
}

/* x Phi(x): x < 0: x e S, x >= 0: x (1 - e S) */
static inline float32x4_t gelu4(float32x4_t x) {
  float32x4_t a = vminq_f32(vabsq_f32(x), vdupq_n_f32(20.0f));
  float32x4_t t = vmulq_f32(exp_neg_half_sq4(a), normal_tail_ratio4(a)); /* Phi(-|x|) */
  float32x4_t cdf = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), t, vsubq_f32(vdupq_n_f32(1.0f), t));
  return vmulq_f32(x, cdf);
}

/* dy (Phi(x) + x phi(x)) = dy r for x < 0, dy (1 - r) for x >= 0, with
 * r = e (S - |x| / sqrt(2 pi)): one factor e, so the zero of gelu' (x = -0.75)
 * only sees the error of S. |x| unclamped in w: +-inf give r = 0 (-inf) =
 * NaN, as the portable formula does; any finite |x| > 20 has e = 0. */
static inline float32x4_t gelu_grad4(float32x4_t x, float32x4_t dy) {
  float32x4_t ax = vabsq_f32(x), a = vminq_f32(ax, vdupq_n_f32(20.0f));
  float32x4_t w = vfmsq_f32(normal_tail_ratio4(a), ax, vdupq_n_f32(0.39894228040143267794f));
  float32x4_t r = vmulq_f32(exp_neg_half_sq4(a), w);
  float32x4_t g = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), r, vsubq_f32(vdupq_n_f32(1.0f), r));
  return vmulq_f32(dy, g);
}

static void gelu_neon(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t a = gelu4(vld1q_f32(x + i)), b = gelu4(vld1q_f32(x + i + 4));
    vst1q_f32(y + i, a);
    vst1q_f32(y + i + 4, b);
  }
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, gelu4(vld1q_f32(x + i)));
  if (i < n) {
    float t[4] = {0, 0, 0, 0};
    memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
    vst1q_f32(t, gelu4(vld1q_f32(t)));
    memcpy(y + i, t, (size_t)(n - i) * sizeof(float));
  }
}

static void gelu_backward_neon(const float *x, const float *dy, float *dx, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t a = gelu_grad4(vld1q_f32(x + i), vld1q_f32(dy + i));
    float32x4_t b = gelu_grad4(vld1q_f32(x + i + 4), vld1q_f32(dy + i + 4));
    vst1q_f32(dx + i, a);
    vst1q_f32(dx + i + 4, b);
  }
  for (; i + 4 <= n; i += 4) vst1q_f32(dx + i, gelu_grad4(vld1q_f32(x + i), vld1q_f32(dy + i)));
  if (i < n) {
    float t[4] = {0, 0, 0, 0}, g[4] = {0, 0, 0, 0};
    memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
    memcpy(g, dy + i, (size_t)(n - i) * sizeof(float));
    vst1q_f32(t, gelu_grad4(vld1q_f32(t), vld1q_f32(g)));
    memcpy(dx + i, t, (size_t)(n - i) * sizeof(float));
  }
}

/* ---- dropout (dropout_stream.h): Philox-4x32-10 for 8 counters ------------ */

static inline uint32x4_t mulhi_u32(uint32x4_t a, uint32x4_t m) {
  uint64x2_t lo = vmull_u32(vget_low_u32(a), vget_low_u32(m));
  uint64x2_t hi = vmull_high_u32(a, m);
  return vuzp2q_u32(vreinterpretq_u32_u64(lo), vreinterpretq_u32_u64(hi));
}

/* the four words of the blocks for counters base + 0..3 (wa) and base +
 * 4..7 (wb) (counter = (i low, i high, tag, 0), key = (seed low, seed high)) */
static inline void philox8(uint64_t seed, uint64_t base, uint32x4x4_t *wa, uint32x4x4_t *wb) {
  static const uint64_t steps[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  uint64x2_t vb = vdupq_n_u64(base);
  uint64x2_t i0 = vaddq_u64(vb, vld1q_u64(steps)), i1 = vaddq_u64(vb, vld1q_u64(steps + 2));
  uint64x2_t i2 = vaddq_u64(vb, vld1q_u64(steps + 4)), i3 = vaddq_u64(vb, vld1q_u64(steps + 6));
  uint32x4_t a0 = vuzp1q_u32(vreinterpretq_u32_u64(i0), vreinterpretq_u32_u64(i1));
  uint32x4_t a1 = vuzp2q_u32(vreinterpretq_u32_u64(i0), vreinterpretq_u32_u64(i1));
  uint32x4_t b0 = vuzp1q_u32(vreinterpretq_u32_u64(i2), vreinterpretq_u32_u64(i3));
  uint32x4_t b1 = vuzp2q_u32(vreinterpretq_u32_u64(i2), vreinterpretq_u32_u64(i3));
  uint32x4_t a2 = vdupq_n_u32(ATTN_DROPOUT_TAG), a3 = vdupq_n_u32(0), b2 = a2, b3 = a3;
  const uint32x4_t m0 = vdupq_n_u32(0xD2511F53u), m1 = vdupq_n_u32(0xCD9E8D57u);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    const uint32x4_t vk0 = vdupq_n_u32(k0), vk1 = vdupq_n_u32(k1);
    uint32x4_t alo0 = vmulq_u32(a0, m0), ahi0 = mulhi_u32(a0, m0);
    uint32x4_t alo1 = vmulq_u32(a2, m1), ahi1 = mulhi_u32(a2, m1);
    uint32x4_t blo0 = vmulq_u32(b0, m0), bhi0 = mulhi_u32(b0, m0);
    uint32x4_t blo1 = vmulq_u32(b2, m1), bhi1 = mulhi_u32(b2, m1);
    a0 = veorq_u32(veorq_u32(ahi1, a1), vk0);
    a1 = alo1;
    a2 = veorq_u32(veorq_u32(ahi0, a3), vk1);
    a3 = alo0;
    b0 = veorq_u32(veorq_u32(bhi1, b1), vk0);
    b1 = blo1;
    b2 = veorq_u32(veorq_u32(bhi0, b3), vk1);
    b3 = blo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  wa->val[0] = a0, wa->val[1] = a1, wa->val[2] = a2, wa->val[3] = a3;
  wb->val[0] = b0, wb->val[1] = b1, wb->val[2] = b2, wb->val[3] = b3;
}

static void dropout_fill_neon(uint64_t seed, uint64_t c0, uint32_t *words) {
  for (int g = 0; g < ATTN_DROPOUT_FILL; g += 8) {
    uint32x4x4_t wa, wb;
    philox8(seed, c0 + (uint64_t)g, &wa, &wb);
    vst4q_u32(words + 4 * g, wa); /* interleaved: each counter's four words in turn */
    vst4q_u32(words + 4 * g + 16, wb);
  }
}

static void dropout_apply_neon(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                               float scale, const uint32_t *w) {
  const float32x4_t vp = vdupq_n_f32(p), vs = vdupq_n_f32(scale), inv24 = vdupq_n_f32(0x1p-24f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    /* the top 24 bits times 2^-24, exactly as the portable apply */
    float32x4_t ua = vmulq_f32(vcvtq_f32_u32(vshrq_n_u32(vld1q_u32(w + i), 8)), inv24);
    float32x4_t ub = vmulq_f32(vcvtq_f32_u32(vshrq_n_u32(vld1q_u32(w + i + 4), 8)), inv24);
    uint32x4_t ka = vcgeq_f32(ua, vp), kb = vcgeq_f32(ub, vp);
    float32x4_t ya = vmulq_f32(vld1q_f32(x + i), vs), yb = vmulq_f32(vld1q_f32(x + i + 4), vs);
    vst1q_f32(y + i, vreinterpretq_f32_u32(vandq_u32(ka, vreinterpretq_u32_f32(ya))));
    vst1q_f32(y + i + 4, vreinterpretq_f32_u32(vandq_u32(kb, vreinterpretq_u32_f32(yb))));
    if (mask) {
      uint16x8_t k16 = vcombine_u16(vmovn_u32(ka), vmovn_u32(kb));
      vst1_u8(mask + i, vand_u8(vmovn_u16(k16), vdup_n_u8(1)));
    }
  }
  if (i < n)
    attn_dropout_apply_generic(x + i, y + i, mask ? mask + i : NULL, n - i, p, scale, w + i);
}

static void dropout_neon(const float *x, float *y, uint8_t *mask, int64_t n, float p, float scale,
                         uint64_t seed, uint64_t offset) {
  attn_dropout_run(dropout_fill_neon, dropout_apply_neon, x, y, mask, n, p, scale, seed, offset);
}

/* ---- Adam / AdamW: adam_generic.c's operations, 4 lanes at a time --------- */

static void adam_neon(const attn_adam_scalars *k, float *p, const float *g, float *m, float *v,
                      int64_t n) {
  const float32x4_t decay_mul = vdupq_n_f32(k->decay_mul), wd = vdupq_n_f32(k->wd);
  const float32x4_t b1 = vdupq_n_f32(k->beta1), omb1 = vdupq_n_f32(k->one_minus_beta1);
  const float32x4_t b2 = vdupq_n_f32(k->beta2), omb2 = vdupq_n_f32(k->one_minus_beta2);
  const float32x4_t bc2 = vdupq_n_f32(k->bc2_sqrt), eps = vdupq_n_f32(k->eps);
  const float32x4_t nss = vdupq_n_f32(k->neg_step_size);
  const int mode = k->adamw ? 1 : k->wd != 0.0f ? 2 : 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    float32x4_t gi = vld1q_f32(g + i), pi = vld1q_f32(p + i);
    if (mode == 1) pi = vmulq_f32(pi, decay_mul);
    else if (mode == 2) gi = vfmaq_f32(gi, wd, pi); /* fmaf(wd, p, g) */
    float32x4_t mi = vfmaq_f32(vmulq_f32(vld1q_f32(m + i), b1), omb1, gi);
    float32x4_t vi = vfmaq_f32(vmulq_f32(vld1q_f32(v + i), b2), vmulq_f32(omb2, gi), gi);
    float32x4_t denom = vaddq_f32(vdivq_f32(vsqrtq_f32(vi), bc2), eps);
    vst1q_f32(p + i, vaddq_f32(pi, vdivq_f32(vmulq_f32(nss, mi), denom)));
    vst1q_f32(m + i, mi);
    vst1q_f32(v + i, vi);
  }
  if (i < n) attn_adam_f32_generic(k, p + i, g + i, m + i, v + i, n - i);
}

/* ---- LayerNorm rows ------------------------------------------------------- */

static void layernorm_row_neon(const float *x, const float *w, const float *b, float *y, float eps,
                               int64_t n, float *mean_out, float *rstd_out) {
  float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, s2 = s0, s3 = s0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float32x4_t a = vld1q_f32(x + j), c = vld1q_f32(x + j + 4);
    s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(a)));
    s1 = vaddq_f64(s1, vcvt_high_f64_f32(a));
    s2 = vaddq_f64(s2, vcvt_f64_f32(vget_low_f32(c)));
    s3 = vaddq_f64(s3, vcvt_high_f64_f32(c));
  }
  double s = vaddvq_f64(vaddq_f64(vaddq_f64(s0, s1), vaddq_f64(s2, s3)));
  for (; j < n; j++) s += x[j];
  float mean = n > 0 ? (float)(s / (double)n) : 0.0f;
  const float64x2_t md = vdupq_n_f64((double)mean);
  s0 = s1 = s2 = s3 = vdupq_n_f64(0.0);
  for (j = 0; j + 8 <= n; j += 8) {
    float32x4_t a = vld1q_f32(x + j), c = vld1q_f32(x + j + 4);
    float64x2_t d0 = vsubq_f64(vcvt_f64_f32(vget_low_f32(a)), md);
    float64x2_t d1 = vsubq_f64(vcvt_high_f64_f32(a), md);
    float64x2_t d2 = vsubq_f64(vcvt_f64_f32(vget_low_f32(c)), md);
    float64x2_t d3 = vsubq_f64(vcvt_high_f64_f32(c), md);
    s0 = vaddq_f64(s0, vmulq_f64(d0, d0));
    s1 = vaddq_f64(s1, vmulq_f64(d1, d1));
    s2 = vaddq_f64(s2, vmulq_f64(d2, d2));
    s3 = vaddq_f64(s3, vmulq_f64(d3, d3));
  }
  double ss = vaddvq_f64(vaddq_f64(vaddq_f64(s0, s1), vaddq_f64(s2, s3)));
  for (; j < n; j++) {
    double d = (double)x[j] - (double)mean;
    ss += d * d;
  }
  float var = n > 0 ? (float)(ss / (double)n) : 0.0f;
  float rstd = 1.0f / sqrtf(var + eps);
  /* y = (x - mean) rstd w + b, the portable expression's roundings */
  const float32x4_t vmean = vdupq_n_f32(mean), vr = vdupq_n_f32(rstd);
  for (j = 0; j + 4 <= n; j += 4) {
    float32x4_t t = vmulq_f32(vsubq_f32(vld1q_f32(x + j), vmean), vr);
    if (w) t = vmulq_f32(t, vld1q_f32(w + j));
    if (b) t = vaddq_f32(t, vld1q_f32(b + j));
    vst1q_f32(y + j, t);
  }
  for (; j < n; j++) {
    float t = (x[j] - mean) * rstd;
    if (w) t = t * w[j];
    if (b) t = t + b[j];
    y[j] = t;
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

static void layernorm_backward_row_neon(const float *x, const float *w, float mean, float rstd,
                                        const float *dy, float *dx, int64_t n) {
  const float32x4_t vmean = vdupq_n_f32(mean), vr = vdupq_n_f32(rstd);
  float32x4_t sg0 = vdupq_n_f32(0.0f), sg1 = sg0, sx0 = sg0, sx1 = sg0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float32x4_t g0 = vld1q_f32(dy + j), g1 = vld1q_f32(dy + j + 4);
    if (w) g0 = vmulq_f32(g0, vld1q_f32(w + j)), g1 = vmulq_f32(g1, vld1q_f32(w + j + 4));
    float32x4_t h0 = vsubq_f32(vld1q_f32(x + j), vmean), h1 = vsubq_f32(vld1q_f32(x + j + 4), vmean);
    sg0 = vaddq_f32(sg0, g0);
    sg1 = vaddq_f32(sg1, g1);
    sx0 = vaddq_f32(sx0, vmulq_f32(vmulq_f32(g0, h0), vr)); /* g (x - mean) rstd */
    sx1 = vaddq_f32(sx1, vmulq_f32(vmulq_f32(g1, h1), vr));
  }
  float sg = vaddvq_f32(vaddq_f32(sg0, sg1)), sgx = vaddvq_f32(vaddq_f32(sx0, sx1));
  for (; j < n; j++) {
    float g = w ? dy[j] * w[j] : dy[j];
    sg += g;
    sgx += g * (x[j] - mean) * rstd;
  }
  float a = sg / (float)n, c = sgx / (float)n;
  const float32x4_t va = vdupq_n_f32(a), vc = vdupq_n_f32(c);
  /* dx = rstd (g - a - (x - mean) rstd c), the portable expression */
  for (j = 0; j + 4 <= n; j += 4) {
    float32x4_t g = vld1q_f32(dy + j);
    if (w) g = vmulq_f32(g, vld1q_f32(w + j));
    float32x4_t h = vmulq_f32(vmulq_f32(vsubq_f32(vld1q_f32(x + j), vmean), vr), vc);
    vst1q_f32(dx + j, vmulq_f32(vr, vsubq_f32(vsubq_f32(g, va), h)));
  }
  for (; j < n; j++) {
    float g = w ? dy[j] * w[j] : dy[j];
    dx[j] = rstd * (g - a - (x[j] - mean) * rstd * c);
  }
}

/* ---- int8 rows ------------------------------------------------------------ */

static void minmax_row_neon(const float *x, int64_t n, float *lo, float *hi, int *bad) {
  const float32x4_t zero = vdupq_n_f32(0.0f);
  float32x4_t a = zero, b = zero;
  uint32x4_t ok = vdupq_n_u32(0xffffffffu);
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    float32x4_t v = vld1q_f32(x + k);
    uint32x4_t num = vceqq_f32(v, v); /* not NaN */
    ok = vandq_u32(ok, num);
    v = vbslq_f32(num, v, zero); /* a NaN lane counts as 0, as the compares skip it */
    a = vminq_f32(a, v);
    b = vmaxq_f32(b, v);
  }
  float fa = vminvq_f32(a), fb = vmaxvq_f32(b);
  int nan = vminvq_u32(ok) == 0;
  for (; k < n; k++) {
    fa = x[k] < fa ? x[k] : fa;
    fb = x[k] > fb ? x[k] : fb;
    nan |= x[k] != x[k];
  }
  /* FMIN orders -0 below +0 where the portable compares keep +0 */
  *lo = fa + 0.0f, *hi = fb + 0.0f, *bad = nan;
}

static void quantize_row_u8_neon(const float *x, int64_t n, float s, int32_t z, uint8_t *q) {
  const float32x4_t vs = vdupq_n_f32(s), vz = vdupq_n_f32((float)z);
  const float32x4_t zero = vdupq_n_f32(0.0f), top = vdupq_n_f32(255.0f);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    uint32x4_t r[2];
    for (int h = 0; h < 2; h++) {
      /* nearbyintf(x / s) + z (round to nearest even, then one f32 add) */
      float32x4_t v = vaddq_f32(vrndnq_f32(vdivq_f32(vld1q_f32(x + k + 4 * h), vs)), vz);
      /* clamp to [0, 255], NaN -> 0 (FMAXNM returns the number) */
      v = vminq_f32(vmaxnmq_f32(v, zero), top);
      r[h] = vcvtq_u32_f32(v);
    }
    vst1_u8(q + k, vmovn_u16(vcombine_u16(vmovn_u32(r[0]), vmovn_u32(r[1]))));
  }
  if (k < n) attn_quantize_row_u8_generic(x + k, n - k, s, z, q + k);
}

static void dequant_row_neon(const int32_t *acc, int64_t n, float sx, int32_t zx, const float *sw,
                             const int32_t *cs, const float *b, float *y) {
  const float32x4_t vsx = vdupq_n_f32(sx);
  const int32x4_t vzx = vdupq_n_s32(zx);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    /* acc - zx cs, wrapping (MLS is modular) */
    int32x4_t d = vmlsq_s32(vld1q_s32(acc + j), vzx, vld1q_s32(cs + j));
    float32x4_t v = vmulq_f32(vmulq_f32(vsx, vld1q_f32(sw + j)), vcvtq_f32_s32(d));
    if (b) v = vaddq_f32(v, vld1q_f32(b + j));
    vst1q_f32(y + j, v);
  }
  if (j < n) attn_dequant_row_generic(acc + j, n - j, sx, zx, sw + j, cs + j, b ? b + j : NULL, y + j);
}

/* ---- f16 / bf16 conversions ----------------------------------------------- */

/* FCVTL, except NaNs: tensor.c keeps the payload and does not set the quiet
 * bit (a signalling f16 NaN stays signalling). */
static void f16_to_f32_neon(const uint16_t *x, float *y, int64_t n) {
  const uint32x4_t mag = vdupq_n_u32(0x7fffu), inf16 = vdupq_n_u32(0x7c00u);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    uint16x4_t h = vld1_u16(x + i);
    float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(h));
    uint32x4_t u = vmovl_u16(h);
    uint32x4_t nan = vcgtq_u32(vandq_u32(u, mag), inf16);
    uint32x4_t nb = vorrq_u32(vorrq_u32(vshlq_n_u32(vandq_u32(u, vdupq_n_u32(0x8000u)), 16),
                                        vdupq_n_u32(0x7f800000u)),
                              vshlq_n_u32(vandq_u32(u, vdupq_n_u32(0x3ffu)), 13));
    vst1q_f32(y + i, vbslq_f32(nan, vreinterpretq_f32_u32(nb), f));
  }
  for (; i < n; i++) y[i] = attn_f16_to_f32(x[i]);
}

/* FCVTN (round to nearest even, overflow to inf, exact denormals with
 * FPCR.FZ16 = 0 as Linux runs), except NaNs: tensor.c gives sign | 0x7e00. */
static void f32_to_f16_neon(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    float32x4_t f = vld1q_f32(x + i);
    uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(f));
    uint16x4_t nan = vmovn_u32(vmvnq_u32(vceqq_f32(f, f)));
    uint16x4_t sign = vmovn_u32(vshrq_n_u32(vreinterpretq_u32_f32(f), 16));
    uint16x4_t qn = vorr_u16(vand_u16(sign, vdup_n_u16(0x8000u)), vdup_n_u16(0x7e00u));
    vst1_u16(y + i, vbsl_u16(nan, qn, h));
  }
  for (; i < n; i++) y[i] = attn_f32_to_f16(x[i]);
}

/* bf16 bits of 4 floats in the low halves of 32-bit lanes: round to nearest
 * even on the dropped 16 bits; NaN -> (u >> 16) | 0x40 */
static inline uint32x4_t bf16_bits4(float32x4_t f) {
  uint32x4_t u = vreinterpretq_u32_f32(f);
  uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  uint32x4_t r = vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fffu)), lsb), 16);
  uint32x4_t q = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40u));
  return vbslq_u32(vceqq_f32(f, f), r, q);
}

static void f32_to_bf16_neon(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32x4_t a = bf16_bits4(vld1q_f32(x + i)), b = bf16_bits4(vld1q_f32(x + i + 4));
    vst1q_u16(y + i, vcombine_u16(vmovn_u32(a), vmovn_u32(b)));
  }
  for (; i + 4 <= n; i += 4) vst1_u16(y + i, vmovn_u32(bf16_bits4(vld1q_f32(x + i))));
  for (; i < n; i++) y[i] = attn_f32_to_bf16(x[i]);
}

static void bf16_to_f32_neon(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint16x8_t h = vld1q_u16(x + i);
    vst1q_f32(y + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
    vst1q_f32(y + i + 4, vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)));
  }
  for (; i < n; i++) y[i] = attn_bf16_to_f32(x[i]);
}

static void f32_round_bf16_neon(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vreinterpretq_f32_u32(vshlq_n_u32(bf16_bits4(vld1q_f32(x + i)), 16)));
  for (; i < n; i++) y[i] = attn_bf16_to_f32(attn_f32_to_bf16(x[i]));
}

static const attn_row_ops neon_row_ops = {
    .name = "neon",
    .vexp = vexp_neon,
    .exp_sub_sum = exp_sub_sum_neon,
    .gelu = gelu_neon,
    .gelu_backward = gelu_backward_neon,
    .dropout = dropout_neon,
    .adam = adam_neon,
    .layernorm_row = layernorm_row_neon,
    .layernorm_backward_row = layernorm_backward_row_neon,
    .minmax_row = minmax_row_neon,
    .quantize_row_u8 = quantize_row_u8_neon,
    .dequant_row = dequant_row_neon,
    .gemv_nt = attn_gemv_nt_neon,
    .f16_to_f32 = f16_to_f32_neon,
    .f32_to_f16 = f32_to_f16_neon,
    .f32_to_bf16 = f32_to_bf16_neon,
    .bf16_to_f32 = bf16_to_f32_neon,
    .f32_round_bf16 = f32_round_bf16_neon,
};

const attn_row_ops *attn_row_ops_neon(void) { return &neon_row_ops; }
#else
const attn_row_ops *attn_row_ops_neon(void) { return 0; }
#endif
