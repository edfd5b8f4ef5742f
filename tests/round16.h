/* Test helper: f32 values rounded through 16 bits (bf16 or fp16), as a
 * caller holding bf16 / fp16 tensors would have them. */
#ifndef ATTN_TEST_ROUND16_H
#define ATTN_TEST_ROUND16_H

#include <stdint.h>

#include "attn/lowp.h"

/* x rounded through bf16 (bf: 1) or fp16 in place; u receives the bits. */
static inline void round16(float *x, uint16_t *u, int64_t n, int bf) {
  if (bf) {
    attn_f32_to_bf16_n(x, u, n);
    attn_bf16_to_f32_n(u, x, n);
  } else {
    attn_f32_to_f16_n(x, u, n);
    attn_f16_to_f32_n(u, x, n);
  }
}

#endif
