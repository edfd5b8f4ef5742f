/* Elementwise activations, forward and backward, over n values (in-place
 * allowed: y may be x, dx may be dy). ReLU' at 0 is 0, as torch.
 * GELU is the exact-erf one: gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)),
 * computed as 0.5 x erfc(-x / sqrt 2) (the same function, without the
 * cancellation of 1 + erf for x << 0); gelu'(x) = Phi(x) + x * phi(x), phi
 * the standard normal density. The avx2, avx512 and neon levels have their
 * own vector GELU (row_ops_avx2.c and activations_avx512.c with glibc's
 * libmvec, row_ops_neon.c), reached through the row-kernel table; chunks are
 * split over threads.
 * GELU tanh (torch's approximate='tanh', Hugging Face's "gelu_new" / GPT-2):
 *   gelu_tanh(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 * computed as x * sigmoid(2u) = x / (1 + exp(-2u)) — the same function
 * (1 + tanh(u) = 2 sigmoid(2u)) without the cancellation of 1 + tanh(u) for
 * x << 0; with s = sigmoid(2u),
 *   gelu_tanh'(x) = s + x * 2 s (1 - s) * sqrt(2/pi) (1 + 3 * 0.044715 x^2).
 * Scalar and portable (no vector twin): GPT-2 inference is its use. */
#include <math.h>
#include <stddef.h>

#include "attn/kernels.h"
#include "kernels/rows/elementwise_internal.h"

#define PAR_MIN_ELEMS 65536
#define CHUNK 4096 /* values per call of a vector path */
#define SQRT1_2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_TANH_C 0.044715f

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

attn_status attn_gelu_tanh_f32(const float *x, float *y, int64_t n) {
  attn_status st = check_args("gelu_tanh", x, y, y, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], u = SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v);
    y[i] = v / (1.0f + expf(-2.0f * u));
  }
  return ATTN_OK;
}

attn_status attn_gelu_tanh_backward_f32(const float *x, const float *dy, float *dx, int64_t n) {
  attn_status st = check_args("gelu_tanh_backward", x, dy, dx, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], u = SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
    float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_C * v * v);
    dx[i] = dy[i] * (s + v * 2.0f * s * (1.0f - s) * du);
  }
  return ATTN_OK;
}

/* tanh (torch.tanh): tanh'(x) = 1 - tanh(x)^2. */
attn_status attn_tanh_f32(const float *x, float *y, int64_t n) {
  attn_status st = check_args("tanh", x, y, y, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
  return ATTN_OK;
}

attn_status attn_tanh_backward_f32(const float *x, const float *dy, float *dx, int64_t n) {
  attn_status st = check_args("tanh_backward", x, dy, dx, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    float t = tanhf(x[i]);
    dx[i] = dy[i] * (1.0f - t * t);
  }
  return ATTN_OK;
}

/* SiLU / swish (torch.nn.SiLU, F.silu): silu(x) = x s, s = sigmoid(x);
 * silu'(x) = s (1 + x (1 - s)). */
attn_status attn_silu_f32(const float *x, float *y, int64_t n) {
  attn_status st = check_args("silu", x, y, y, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
  return ATTN_OK;
}

attn_status attn_silu_backward_f32(const float *x, const float *dy, float *dx, int64_t n) {
  attn_status st = check_args("silu_backward", x, dy, dx, n);
  if (st != ATTN_OK) return st;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], s = 1.0f / (1.0f + expf(-v));
    dx[i] = dy[i] * s * (1.0f + v * (1.0f - s));
  }
  return ATTN_OK;
}
