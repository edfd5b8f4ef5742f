/* The AVX-512 row and elementwise kernels as one table. The kernels live in
 * their own files (softmax_avx512.c, activations_avx512.c, ...); GELU and
 * the softmax's exp need glibc's libmvec (entries NULL without it: the table
 * then takes the level below's). Dropout is the avx2 level's kernel
 * (dropout_avx2.c). */
#include "kernels/rows/elementwise_internal.h"
#include "kernels/lowp/gemm_lowp_internal.h"
#include "kernels/sdpa/sdpa_dropout.h"

#if defined(__x86_64__)
static const attn_row_ops avx512_row_ops = {
    .name = "avx512",
    .vexp = attn_vexp_f32_avx512,
#if ATTN_HAVE_LIBMVEC
    .exp_sub_sum = attn_exp_sub_sum_f32_avx512,
    .gelu = attn_gelu_f32_avx512,
    .gelu_backward = attn_gelu_backward_f32_avx512,
#endif
    .adam = attn_adam_f32_avx512,
    .minmax_row = attn_minmax_row_avx512,
    .quantize_row_u8 = attn_quantize_row_u8_avx512,
    .dequant_row = attn_dequant_row_avx512,
    .gemv_nt = attn_gemv_nt_avx512,
    .f16_to_f32 = attn_lowp_f16_to_f32_avx512,
    .f32_to_f16 = attn_f32_to_f16_avx512,
    .f32_to_bf16 = attn_lowp_f32_to_bf16_avx512,
    .bf16_to_f32 = attn_lowp_bf16_to_f32_avx512,
    .f32_round_bf16 = attn_lowp_f32_round_bf16_avx512,
    .sdpa_dropout = attn_sdpa_dropout_row_avx512,
};

const attn_row_ops *attn_row_ops_avx512(void) { return &avx512_row_ops; }
#else
const attn_row_ops *attn_row_ops_avx512(void) { return 0; }
#endif
