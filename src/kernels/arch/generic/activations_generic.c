/* The portable GELU rows, forward and backward (attn_row_ops.gelu and
 * gelu_backward at the generic level; the loops and the formulas' notes are
 * activations.c's): the exact-erf GELU, 0.5 x erfc(-x / sqrt 2). */
#include <math.h>

#include "kernels/rows/elementwise_internal.h"

#define SQRT1_2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

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
