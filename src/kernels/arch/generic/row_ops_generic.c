/* The portable row and elementwise kernels as one table (the reference every
 * level's vector kernels are tested against), and the portable exp. */
#include <math.h>

#include "attn/lowp.h"
#include "kernels/rows/elementwise_internal.h"
#include "kernels/sdpa/sdpa_dropout.h"

void attn_vexp_f32_generic(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = expf(x[i]);
}

static void f32_round_bf16_generic(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = attn_bf16_to_f32(attn_f32_to_bf16(x[i]));
}

static const attn_row_ops generic_row_ops = {
    .name = "generic",
    .vexp = attn_vexp_f32_generic,
    .exp_sub_sum = attn_exp_sub_sum_f32_generic,
    .gelu = attn_gelu_f32_generic,
    .gelu_backward = attn_gelu_backward_f32_generic,
    .dropout = attn_dropout_f32_generic,
    .adam = attn_adam_f32_generic,
    .layernorm_row = attn_layernorm_row_f32_generic,
    .layernorm_backward_row = attn_layernorm_backward_row_f32_generic,
    .minmax_row = attn_minmax_row_generic,
    .quantize_row_u8 = attn_quantize_row_u8_generic,
    .dequant_row = attn_dequant_row_generic,
    .gemv_nt = attn_gemv_nt_generic,
    .f16_to_f32 = attn_f16_to_f32_n,
    .f32_to_f16 = attn_f32_to_f16_n,
    .f32_to_bf16 = attn_f32_to_bf16_n,
    .bf16_to_f32 = attn_bf16_to_f32_n,
    .f32_round_bf16 = f32_round_bf16_generic,
    .sdpa_dropout = attn_sdpa_dropout_row_generic,
};

const attn_row_ops *attn_row_ops_generic(void) { return &generic_row_ops; }
