/* The portable LayerNorm rows, forward and backward (attn_row_ops.layernorm_row
 * and layernorm_backward_row at the generic level; the loops are
 * layernorm.c's). */
#include <math.h>

#include "kernels/rows/elementwise_internal.h"

// x, y [n]; writes *mean_out, *rstd_out
void attn_layernorm_row_f32_generic(const float *x, const float *w, const float *b, float *y,
                                    float eps, int64_t n, float *mean_out, float *rstd_out) {
  /* f32 data, double accumulators: a row with a large common offset (|x| ~
   * 1e3, spread ~ 1) would lose ~1e-4 of its mean in an f32 sum. */
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; j++) s += x[j];
  float mean = n > 0 ? (float)(s / (double)n) : 0.0f;
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < n; j++) {
    double d = (double)x[j] - (double)mean;
    ss += d * d;
  }
  float var = n > 0 ? (float)(ss / (double)n) : 0.0f;
  float rstd = 1.0f / sqrtf(var + eps);
  if (w && b) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mean) * rstd * w[j] + b[j];
  } else if (w) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mean) * rstd * w[j];
  } else if (b) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mean) * rstd + b[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mean) * rstd;
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

// dx [n] of one row: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w
// (w NULL: g = dy). Separate loops per case keep each one branch-free.
void attn_layernorm_backward_row_f32_generic(const float *x, const float *w, float mean,
                                             float rstd, const float *dy, float *dx, int64_t n) {
  float sg = 0.0f, sgx = 0.0f;
  if (w) {
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < n; j++) {
      float g = dy[j] * w[j];
      sg += g;
      sgx += g * (x[j] - mean) * rstd;
    }
  } else {
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < n; j++) {
      sg += dy[j];
      sgx += dy[j] * (x[j] - mean) * rstd;
    }
  }
  float a = sg / (float)n, c = sgx / (float)n;
  if (w) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
      dx[j] = rstd * (dy[j] * w[j] - a - (x[j] - mean) * rstd * c);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) dx[j] = rstd * (dy[j] - a - (x[j] - mean) * rstd * c);
  }
}
