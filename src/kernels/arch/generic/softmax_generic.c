/* The portable exp-and-sum row of softmax / log-softmax / cross-entropy
 * (attn_row_ops.exp_sub_sum at the generic level; the loops are softmax.c's). */
#include <math.h>

#include "kernels/rows/elementwise_internal.h"

float attn_exp_sub_sum_f32_generic(const float *x, float *y, int64_t n, float m) {
  float s = 0.0f;
  for (int64_t j = 0; j < n; j++) {
    float e = expf(x[j] - m);
    if (y) y[j] = e;
    s += e;
  }
  return s;
}
