/* The portable int8 rows (attn_row_ops.quantize_row_u8, dequant_row and
 * minmax_row at the generic level; the loops are quantize.c's): round to
 * nearest even, clamp; int -> float, two multiplies, one add, no FMA. */
#include <math.h>

#include "kernels/rows/elementwise_internal.h"

/* (the same as quantize.c's) */
static int32_t clamp_i32(float v, int32_t lo, int32_t hi) {
  /* v is already rounded; compare in float so huge values cannot overflow */
  if (!(v >= (float)lo)) return lo; /* also NaN -> lo */
  if (v > (float)hi) return hi;
  return (int32_t)v;
}

void attn_quantize_row_u8_generic(const float *x, int64_t n, float s, int32_t z, uint8_t *q) {
  for (int64_t k = 0; k < n; k++) q[k] = (uint8_t)clamp_i32(nearbyintf(x[k] / s) + (float)z, 0, 255);
}

void attn_dequant_row_generic(const int32_t *acc, int64_t n, float sx, int32_t zx,
                              const float *sw, const int32_t *cs, const float *b, float *y) {
  for (int64_t j = 0; j < n; j++) {
    /* unsigned arithmetic: the same wrap as the vector code (never reached
     * for in <= ATTN_GEMM_I8_MAX_K) */
    int32_t d = (int32_t)((uint32_t)acc[j] - (uint32_t)zx * (uint32_t)cs[j]);
    float v = (sx * sw[j]) * (float)d;
    y[j] = b ? v + b[j] : v;
  }
}

void attn_minmax_row_generic(const float *x, int64_t n, float *lo, float *hi, int *bad) {
  float a = 0.0f, b = 0.0f;
  int nan = 0;
  for (int64_t k = 0; k < n; k++) {
    a = x[k] < a ? x[k] : a;
    b = x[k] > b ? x[k] : b;
    nan |= x[k] != x[k];
  }
  *lo = a, *hi = b, *bad = nan;
}
