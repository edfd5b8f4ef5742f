/* Vectorised exp: dispatch and the portable version. */
#include <math.h>

#include "attn/kernels.h"
#include "kernels/vexp.h"

void attn_vexp_f32_generic(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = expf(x[i]);
}

void attn_vexp_f32(const float *x, float *y, int64_t n) {
  if (attn_cpu()->avx512f && attn_vexp_f32_avx512(x, y, n)) return;
  attn_vexp_f32_generic(x, y, n);
}
