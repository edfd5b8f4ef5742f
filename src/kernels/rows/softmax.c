/* Softmax and log-softmax over the last dim, forward and backward.
 * x, y, dy, dx [rows, n]. Rows are independent: OpenMP splits rows, so the
 * result does not depend on the thread count. A row whose maximum is -inf
 * (every entry masked) gives zeros (softmax) / -inf (log-softmax), never NaN.
 * exp(x - max) and its sum go through attn_exp_sub_sum_f32 (AVX-512 or
 * portable, elementwise_internal.h). */
#include <math.h>
#include <stddef.h>

#include "attn/kernels.h"
#include "kernels/rows/elementwise_internal.h"

/* Parallelise only when a row loop has enough work to pay for the threads. */
#define PAR_MIN_ELEMS 32768

static attn_status check_args(const char *op, const void *a, const void *b, const void *c,
                              int64_t rows, int64_t n) {
  if (rows < 0 || n < 0)
    return attn_set_error(ATTN_EINVAL, "%s: negative size rows=%lld n=%lld", op,
                          (long long)rows, (long long)n);
  if (rows > 0 && n > 0 && (!a || !b || !c))
    return attn_set_error(ATTN_EINVAL, "%s: NULL pointer", op);
  return ATTN_OK;
}

float attn_exp_sub_sum_f32(const float *x, float *y, int64_t n, float m) {
  return attn_kern_get()->row.exp_sub_sum(x, y, n, m);
}

static inline float row_max(const float *x, int64_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}

// x, y [n]: y = exp(x - max) / sum
static void softmax_row(const float *x, float *y, int64_t n) {
  float m = row_max(x, n);
  if (m == -INFINITY) {
    for (int64_t j = 0; j < n; j++) y[j] = 0.0f;
    return;
  }
  float inv = 1.0f / attn_exp_sub_sum_f32(x, y, n, m);
#pragma omp simd
  for (int64_t j = 0; j < n; j++) y[j] *= inv;
}

attn_status attn_softmax_f32(const float *x, float *y, int64_t rows, int64_t n) {
  attn_status st = check_args("softmax", x, y, y, rows, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (rows * n >= PAR_MIN_ELEMS && rows > 1)
  for (int64_t r = 0; r < rows; r++) softmax_row(x + r * n, y + r * n, n);
  return ATTN_OK;
}

attn_status attn_softmax_backward_f32(const float *y, const float *dy, float *dx, int64_t rows,
                                      int64_t n) {
  attn_status st = check_args("softmax_backward", y, dy, dx, rows, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (rows * n >= PAR_MIN_ELEMS && rows > 1)
  for (int64_t r = 0; r < rows; r++) {
    const float *yr = y + r * n, *dyr = dy + r * n;
    float *dxr = dx + r * n;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; j++) dot += dyr[j] * yr[j];
#pragma omp simd
    for (int64_t j = 0; j < n; j++) dxr[j] = yr[j] * (dyr[j] - dot);
  }
  return ATTN_OK;
}

// x, y [n]: y = x - max - log(sum exp(x - max))
static void log_softmax_row(const float *x, float *y, int64_t n) {
  float m = row_max(x, n);
  if (m == -INFINITY) {
    for (int64_t j = 0; j < n; j++) y[j] = -INFINITY;
    return;
  }
  float lse = m + logf(attn_exp_sub_sum_f32(x, NULL, n, m));
#pragma omp simd
  for (int64_t j = 0; j < n; j++) y[j] = x[j] - lse;
}

attn_status attn_log_softmax_f32(const float *x, float *y, int64_t rows, int64_t n) {
  attn_status st = check_args("log_softmax", x, y, y, rows, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (rows * n >= PAR_MIN_ELEMS && rows > 1)
  for (int64_t r = 0; r < rows; r++) log_softmax_row(x + r * n, y + r * n, n);
  return ATTN_OK;
}

attn_status attn_log_softmax_backward_f32(const float *y, const float *dy, float *dx,
                                          int64_t rows, int64_t n) {
  attn_status st = check_args("log_softmax_backward", y, dy, dx, rows, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (rows * n >= PAR_MIN_ELEMS && rows > 1)
  for (int64_t r = 0; r < rows; r++) {
    const float *yr = y + r * n, *dyr = dy + r * n;
    float *dxr = dx + r * n;
    if (row_max(yr, n) == -INFINITY) { /* fully masked row: zero gradient */
      for (int64_t j = 0; j < n; j++) dxr[j] = 0.0f;
      continue;
    }
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++) s += dyr[j];
    for (int64_t j = 0; j < n; j++) dxr[j] = dyr[j] - expf(yr[j]) * s;
  }
  return ATTN_OK;
}
