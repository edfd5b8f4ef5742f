/* bf16 <-> f32 conversions of n values (the scalar ones are in tensor.c):
 * bf16 is the top half of an f32, rounded to nearest even. */
#include "attn/lowp.h"

void attn_f32_to_bf16_n(const float *x, uint16_t *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = attn_f32_to_bf16(x[i]);
}

void attn_bf16_to_f32_n(const uint16_t *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = attn_bf16_to_f32(x[i]);
}
