/* GELU, tanh approximation (torch.nn.GELU(approximate='tanh'), Hugging Face's
 * "gelu_new" / "gelu_pytorch_tanh", GPT-2's activation):
 *   gelu_tanh(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 * computed as x * sigmoid(2u) = x / (1 + exp(-2u)) — the same function
 * (1 + tanh(u) = 2 sigmoid(2u)) without the cancellation of 1 + tanh(u) for
 * x << 0. Derivative, s = sigmoid(2u):
 *   gelu_tanh'(x) = s + x * 2 s (1 - s) * sqrt(2/pi) (1 + 3 * 0.044715 x^2).
 * Scalar and portable (no vector twin): inference of GPT-2 checkpoints is
 * its use. Chunks are split over threads; results do not depend on their
 * number. */
#include <math.h>

#include "attn/kernels.h"

#define PAR_MIN_ELEMS 65536
#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_TANH_C 0.044715f

static attn_status check_args(const char *op, const void *a, const void *b, const void *c,
                              int64_t n) {
  if (n < 0) return attn_set_error(ATTN_EINVAL, "%s: negative size n=%lld", op, (long long)n);
  if (n > 0 && (!a || !b || !c)) return attn_set_error(ATTN_EINVAL, "%s: NULL pointer", op);
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
