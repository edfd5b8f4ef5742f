/* Internal to the precision GEMMs (gemm_prec.c): the row conversion to fp16,
 * portable and AVX-512 (gemm_prec_avx512.c; same bits for non-NaN values,
 * tested). */
#ifndef ATTN_NN_PREC_INTERNAL_H
#define ATTN_NN_PREC_INTERNAL_H

#include <stdint.h>

/* y[i] = fp16 bits of x[i] (round to nearest even), i < n */
void nn_f32_to_f16_generic(const float *x, uint16_t *y, int64_t n);
#if defined(__x86_64__)
void nn_f32_to_f16_avx512(const float *x, uint16_t *y, int64_t n);
#endif
/* The one attn_cpu() selects (ATTN_CPU=generic: the portable one). */
void nn_f32_to_f16(const float *x, uint16_t *y, int64_t n);

#endif
