/* Elementwise activations, forward and backward, over n values (in-place
 * allowed: y may be x, dx may be dy). ReLU' at 0 is 0, as torch.
 * GELU is the exact-erf one: gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)),
 * computed as 0.5 x erfc(-x / sqrt 2) (the same function, without the
 * cancellation of 1 + erf for x << 0); gelu'(x) = Phi(x) + x * phi(x), phi
 * the standard normal density. The avx2, avx512 and neon levels have their
 * own vector GELU (row_ops_avx2.c and activations_avx512.c with glibc's
 * libmvec, row_ops_neon.c), reached through the row-kernel table; chunks are
 * split over threads. */
#include <math.h>
#include <stddef.h>

#include "attn/kernels.h"
#include "kernels/elementwise_internal.h"

#define PAR_MIN_ELEMS 65536
#define CHUNK 4096 /* values per call of a vector path */
#define SQRT1_2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

static attn_status check_args(const char *op, const void *a, const void *b, const void *c,
                              int64_t n) {
  if (n < 0) return attn_set_error(ATTN_EINVAL, "%s: negative size n=%lld", op, (long long)n);
  if (n > 0 && (!a || !b || !c)) return attn_set_error(ATTN_EINVAL, "%s: NULL pointer", op);
  return ATTN_OK;
}

attn_status attn_relu_f32(const float *x, float *y, int64_t n) {
  attn_status st = check_args("relu", x, y, y, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for simd num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return ATTN_OK;
}

attn_status attn_relu_backward_f32(const float *x, const float *dy, float *dx, int64_t n) {
  attn_status st = check_args("relu_backward", x, dy, dx, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for simd num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    float g = dy[i]; /* loaded unconditionally: a select, not a branch */
    dx[i] = x[i] > 0.0f ? g : 0.0f;
  }
  return ATTN_OK;
}

void attn_gelu_f32_generic(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * erfcf(x[i] * -SQRT1_2);
}

void attn_gelu_backward_f32_generic(const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    float cdf = 0.5f * erfcf(v * -SQRT1_2);
    float pdf = INV_SQRT_2PI * expf(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

attn_status attn_gelu_f32(const float *x, float *y, int64_t n) {
  attn_status st = check_args("gelu", x, y, y, n);
  if (st != ATTN_OK) return st;
  void (*gelu)(const float *, float *, int64_t) = attn_kern_get()->row.gelu;
  int64_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
    gelu(x + i0, y + i0, len);
  }
  return ATTN_OK;
}

attn_status attn_gelu_backward_f32(const float *x, const float *dy, float *dx, int64_t n) {
  attn_status st = check_args("gelu_backward", x, dy, dx, n);
  if (st != ATTN_OK) return st;
  void (*grad)(const float *, const float *, float *, int64_t) =
      attn_kern_get()->row.gelu_backward;
  int64_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
    grad(x + i0, dy + i0, dx + i0, len);
  }
  return ATTN_OK;
}
