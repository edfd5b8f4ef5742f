/* The AVX2 row and elementwise kernels (AVX2 + FMA + F16C, 8 floats at a
 * time) as one table, and the exp / softmax-sum / GELU / Adam / LayerNorm
 * kernels themselves; dropout, quantization and the f16 / bf16 conversions
 * are in dropout_avx2.c, quantize_avx2.c and convert_avx2.c, the tail loads
 * and stores in avx2_internal.h. Contracts in kern.h. The AVX-512 level
 * takes from here whatever its own set lacks (the LayerNorm rows). No
 * AVX-512 instruction: an AVX2-only CPU (Haswell, Zen 1-3) runs every
 * function of these files. */
#include <math.h>

#include "kernels/rows/elementwise_internal.h"
#include "kernels/sdpa/sdpa_dropout.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"
#include "kernels/arch/avx2/vexp_avx2.h"

/* ---- exp ----------------------------------------------------------------
 * attn_vexp8_avx2 (vexp_avx2.h): vexp_avx512.h's reduction and polynomial,
 * 2^n as two normal factors (AVX2 has no vscalefps), within 1 ulp of expf. */

AVX2_TARGET static void vexp_avx2(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, attn_vexp8_avx2(_mm256_loadu_ps(x + i)));
  if (i < n) attn_store8(y + i, n - i, attn_vexp8_avx2(attn_load8(x + i, n - i)));
}

/* sum of 8 lanes in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs */
AVX2_TARGET static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

AVX2_TARGET static inline double hsum4d(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* ---- softmax sums and GELU: glibc's libmvec AVX2 variants -------------- */
#if ATTN_HAVE_LIBMVEC
AVX2_TARGET __m256 _ZGVdN8v_expf(__m256 x); /* libmvec, x86-64 vector function ABI */
AVX2_TARGET __m256 _ZGVdN8v_erfcf(__m256 x);
#define EXP8 _ZGVdN8v_expf
#else
#define EXP8 vexp8 /* no libmvec: the polynomial above (within 3 ulp) */
#endif

/* y = exp(x - m) with 8 lane sums added in a fixed order at the end */
AVX2_TARGET static float exp_sub_sum_avx2(const float *x, float *y, int64_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 e = EXP8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
    if (y) _mm256_storeu_ps(y + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < n) {
    __m256i k = attn_tail_mask8(n - j);
    /* lanes past the end: exp(-inf) = 0 */
    __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), attn_load8(x + j, n - j),
                                _mm256_castsi256_ps(k));
    __m256 e = EXP8(_mm256_sub_ps(v, vm));
    if (y) _mm256_maskstore_ps(y + j, k, e);
    acc = _mm256_add_ps(acc, e);
  }
  return hsum8(acc);
}

#if ATTN_HAVE_LIBMVEC
#define SQRT1_2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

/* 0.5 x erfc(-x / sqrt 2), the portable loop's steps */
AVX2_TARGET static inline __m256 gelu8(__m256 v) {
  __m256 c = _ZGVdN8v_erfcf(_mm256_mul_ps(v, _mm256_set1_ps(-SQRT1_2)));
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), c);
}

/* dy (Phi(x) + x phi(x)) */
AVX2_TARGET static inline __m256 gelu_grad8(__m256 v, __m256 g) {
  __m256 cdf = _mm256_mul_ps(_mm256_set1_ps(0.5f),
                             _ZGVdN8v_erfcf(_mm256_mul_ps(v, _mm256_set1_ps(-SQRT1_2))));
  __m256 e = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), v), v);
  __m256 pdf = _mm256_mul_ps(_mm256_set1_ps(INV_SQRT_2PI), _ZGVdN8v_expf(e));
  return _mm256_mul_ps(g, _mm256_add_ps(cdf, _mm256_mul_ps(v, pdf)));
}

AVX2_TARGET static void gelu_avx2(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
  if (i < n) attn_store8(y + i, n - i, gelu8(attn_load8(x + i, n - i)));
}

AVX2_TARGET static void gelu_backward_avx2(const float *x, const float *dy, float *dx, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dx + i, gelu_grad8(_mm256_loadu_ps(x + i), _mm256_loadu_ps(dy + i)));
  if (i < n)
    attn_store8(dx + i, n - i, gelu_grad8(attn_load8(x + i, n - i), attn_load8(dy + i, n - i)));
}
#endif

/* ---- Adam ---------------------------------------------------------------
 * The portable loop's operations one for one (mul, fma where it calls fmaf,
 * sqrt, div, add: each correctly rounded), so the same bits. Lanes past a
 * tail compute on zeros and are not stored. */
AVX2_TARGET static inline void adam8(const attn_adam_scalars *k, float *p, const float *g, float *m,
                                     float *v, int64_t left) {
  __m256 pi = attn_load8(p, left), gi = attn_load8(g, left);
  __m256 mi = attn_load8(m, left), vi = attn_load8(v, left);
  if (k->adamw)
    pi = _mm256_mul_ps(pi, _mm256_set1_ps(k->decay_mul));
  else if (k->wd != 0.0f)
    gi = _mm256_fmadd_ps(_mm256_set1_ps(k->wd), pi, gi);
  mi = _mm256_fmadd_ps(_mm256_set1_ps(k->one_minus_beta1), gi,
                       _mm256_mul_ps(mi, _mm256_set1_ps(k->beta1)));
  vi = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(k->one_minus_beta2), gi), gi,
                       _mm256_mul_ps(vi, _mm256_set1_ps(k->beta2)));
  __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), _mm256_set1_ps(k->bc2_sqrt)),
                               _mm256_set1_ps(k->eps));
  __m256 upd = _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(k->neg_step_size), mi), denom);
  attn_store8(p, left, _mm256_add_ps(pi, upd));
  attn_store8(m, left, mi);
  attn_store8(v, left, vi);
}

AVX2_TARGET static void adam_avx2(const attn_adam_scalars *k, float *p, const float *g, float *m,
                                  float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 8)
    adam8(k, p + i, g + i, m + i, v + i, n - i);
}

/* ---- LayerNorm rows ------------------------------------------------------
 * Forward: mean and biased variance in double as the portable row (two
 * passes; each 8-float block widened to two 4-double vectors, the tail in a
 * scalar double, all added in a fixed order), then y with the portable
 * row's f32 operations. */
AVX2_TARGET static void layernorm_row_avx2(const float *x, const float *w, const float *b, float *y,
                                           float eps, int64_t n, float *mean_out, float *rstd_out) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double st = 0.0;
  for (int64_t t = j; t < n; t++)
    st += x[t];
  double s = hsum4d(_mm256_add_pd(s0, s1)) + st;
  float mean = n > 0 ? (float)(s / (double)n) : 0.0f;

  const __m256d md = _mm256_set1_pd((double)mean);
  s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (j = 0; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), md);
    __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), md);
    s0 = _mm256_fmadd_pd(d0, d0, s0);
    s1 = _mm256_fmadd_pd(d1, d1, s1);
  }
  st = 0.0;
  for (int64_t t = j; t < n; t++) {
    double d = (double)x[t] - (double)mean;
    st += d * d;
  }
  double ss = hsum4d(_mm256_add_pd(s0, s1)) + st;
  float var = n > 0 ? (float)(ss / (double)n) : 0.0f;
  float rstd = 1.0f / sqrtf(var + eps);

  /* y = (x - mean) rstd w + b, no FMA (the portable row's roundings) */
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
  for (j = 0; j < n; j += 8) {
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(attn_load8(x + j, n - j), vm), vr);
    if (w) v = _mm256_mul_ps(v, attn_load8(w + j, n - j));
    if (b) v = _mm256_add_ps(v, attn_load8(b + j, n - j));
    attn_store8(y + j, n - j, v);
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

/* Backward: g = dy w, sums of g and g xhat in 8 f32 lanes (lanes past a tail
 * zeroed), reduced in a fixed order; then dx with the portable expression. */
AVX2_TARGET static void layernorm_backward_row_avx2(const float *x, const float *w, float mean,
                                                    float rstd, const float *dy, float *dx,
                                                    int64_t n) {
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
  __m256 sg = _mm256_setzero_ps(), sgx = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += 8) {
    __m256 g = attn_load8(dy + j, n - j);
    if (w) g = _mm256_mul_ps(g, attn_load8(w + j, n - j));
    __m256 gx = _mm256_mul_ps(_mm256_mul_ps(g, _mm256_sub_ps(attn_load8(x + j, n - j), vm)), vr);
    sg = _mm256_add_ps(sg, g);
    /* a zero lane past the end times an infinite rstd would be NaN: only
     * the row's lanes count */
    if (n - j < 8) gx = _mm256_and_ps(gx, _mm256_castsi256_ps(attn_tail_mask8(n - j)));
    sgx = _mm256_add_ps(sgx, gx);
  }
  const __m256 a = _mm256_set1_ps(hsum8(sg) / (float)n), c = _mm256_set1_ps(hsum8(sgx) / (float)n);
  for (int64_t j = 0; j < n; j += 8) {
    __m256 g = attn_load8(dy + j, n - j);
    if (w) g = _mm256_mul_ps(g, attn_load8(w + j, n - j));
    __m256 xh = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(attn_load8(x + j, n - j), vm), vr), c);
    attn_store8(dx + j, n - j, _mm256_mul_ps(vr, _mm256_sub_ps(_mm256_sub_ps(g, a), xh)));
  }
}

static const attn_row_ops avx2_row_ops = {
    .name = "avx2",
    .vexp = vexp_avx2,
    .exp_sub_sum = exp_sub_sum_avx2,
#if ATTN_HAVE_LIBMVEC
    .gelu = gelu_avx2,
    .gelu_backward = gelu_backward_avx2,
#endif
    .dropout = attn_dropout_f32_avx2,
    .adam = adam_avx2,
    .layernorm_row = layernorm_row_avx2,
    .layernorm_backward_row = layernorm_backward_row_avx2,
    .minmax_row = attn_minmax_row_avx2,
    .quantize_row_u8 = attn_quantize_row_u8_avx2,
    .dequant_row = attn_dequant_row_avx2,
    .gemv_nt = attn_gemv_nt_avx2,
    .f16_to_f32 = attn_f16_to_f32_avx2,
    .f32_to_f16 = attn_f32_to_f16_avx2,
    .f32_to_bf16 = attn_f32_to_bf16_avx2,
    .bf16_to_f32 = attn_bf16_to_f32_avx2,
    .f32_round_bf16 = attn_f32_round_bf16_avx2,
    .sdpa_dropout = attn_sdpa_dropout_row_avx2,
};

const attn_row_ops *attn_row_ops_avx2(void) { return &avx2_row_ops; }
#else
const attn_row_ops *attn_row_ops_avx2(void) { return 0; }
#endif
