/* The f32 flash loops' operand hooks by element type (attn_flash_in;
 * ggml's type_traits to_float for these loops): an element type whose
 * q, k, v change only the operands — the arithmetic is f32 once a block is
 * converted — is one case here, and the loops (sdpa_flash.c,
 * sdpa_flash_backward.c) run it unchanged. fp16 always goes this way;
 * bf16 where the level has no bf16 dot product (its own loops where it has
 * one: sdpa_flash_bf16.h says why). */
#include "attn/lowp.h"
#include "attn/tensor.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/kern.h"

int attn_flash_in_of(int dtype, int portable, const uint16_t *q, const uint16_t *k,
                     const uint16_t *v, attn_flash_in *in) {
  const attn_row_ops *level = &attn_kern_get()->row; /* the same values as the portable ones */
  switch (dtype) {
  case ATTN_F16: in->cvt = portable ? attn_f16_to_f32_n : level->f16_to_f32; break;
  case ATTN_BF16: in->cvt = portable ? attn_bf16_to_f32_n : level->bf16_to_f32; break;
  default: return 0;
  }
  in->q = in->k = in->v = NULL;
  in->q16 = q, in->k16 = k, in->v16 = v;
  return 1;
}
