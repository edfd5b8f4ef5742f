/* Internal: the row and elementwise kernels of each level, gathered into the
 * attn_row_ops tables (row_ops_generic.c, row_ops_avx2.c, row_ops_avx512.c; kern.h has the
 * contract of each; the portable kernels are in arch/generic/ (the *_generic.c files) and
 * rows/dropout_stream.c). The loops (softmax.c, activations.c, dropout.c,
 * layernorm.c, quantize.c, train/adamw.c through kernels/iface.h, ...) call them through
 * attn_kern_get()->row; tests call the functions of one level directly
 * through attn_kern_at(level)->row. */
#ifndef ATTN_ELEMENTWISE_INTERNAL_H
#define ATTN_ELEMENTWISE_INTERNAL_H

#include <stdint.h>

#include "kernels/kern.h"

/* glibc's libmvec (vector expf / erfcf for the x86-64 vector function ABI)
 * has the AVX2 and AVX-512 variants from glibc 2.35 on. */
#if defined(__x86_64__) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define ATTN_HAVE_LIBMVEC 1
#else
#define ATTN_HAVE_LIBMVEC 0
#endif

/* The active level's exp_sub_sum (softmax.c; used by cross_entropy.c too). */
float attn_exp_sub_sum_f32(const float *x, float *y, int64_t n, float m);

/* ---- portable (one thread each) ---- */
void attn_vexp_f32_generic(const float *x, float *y, int64_t n);
float attn_exp_sub_sum_f32_generic(const float *x, float *y, int64_t n, float m);
void attn_gelu_f32_generic(const float *x, float *y, int64_t n);
void attn_gelu_backward_f32_generic(const float *x, const float *dy, float *dx, int64_t n);
void attn_dropout_f32_generic(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                              float scale, uint64_t seed, uint64_t offset);
void attn_adam_f32_generic(const attn_adam_scalars *k, float *p, const float *g, float *m, float *v,
                           int64_t n);
void attn_layernorm_row_f32_generic(const float *x, const float *w, const float *b, float *y,
                                    float eps, int64_t n, float *mean, float *rstd);
void attn_layernorm_backward_row_f32_generic(const float *x, const float *w, float mean,
                                             float rstd, const float *dy, float *dx, int64_t n);
void attn_minmax_row_generic(const float *x, int64_t n, float *lo, float *hi, int *bad);
/* attn_row_ops.gemv_nt (gemm_generic.c; gemv_avx2.c, gemv_avx512.c, gemv_neon.c) */
void attn_gemv_nt_generic(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                          const float *B, int64_t ldb, float beta, float *c);
void attn_gemv_nt_avx2(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                       const float *B, int64_t ldb, float beta, float *c);
void attn_gemv_nt_avx512(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                         const float *B, int64_t ldb, float beta, float *c);
void attn_gemv_nt_neon(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                       const float *B, int64_t ldb, float beta, float *c);
void attn_quantize_row_u8_generic(const float *x, int64_t n, float s, int32_t z, uint8_t *q);
void attn_dequant_row_generic(const int32_t *acc, int64_t n, float sx, int32_t zx,
                              const float *sw, const int32_t *cs, const float *b, float *y);

/* ---- AVX2 + FMA + F16C (x86-64 builds): the kernels of dropout_avx2.c,
 * quantize_avx2.c and convert_avx2.c; row_ops_avx2.c holds the others and
 * the table ---- */
#if defined(__x86_64__)
void attn_dropout_f32_avx2(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                           float scale, uint64_t seed, uint64_t offset);
void attn_minmax_row_avx2(const float *x, int64_t n, float *lo, float *hi, int *bad);
void attn_quantize_row_u8_avx2(const float *x, int64_t n, float s, int32_t z, uint8_t *q);
void attn_dequant_row_avx2(const int32_t *acc, int64_t n, float sx, int32_t zx, const float *sw,
                           const int32_t *cs, const float *b, float *y);
void attn_f16_to_f32_avx2(const uint16_t *x, float *y, int64_t n);
void attn_f32_to_f16_avx2(const float *x, uint16_t *y, int64_t n);
void attn_f32_to_bf16_avx2(const float *x, uint16_t *y, int64_t n);
void attn_bf16_to_f32_avx2(const uint16_t *x, float *y, int64_t n);
void attn_f32_round_bf16_avx2(const float *x, float *y, int64_t n);
#endif

/* ---- AVX-512 (x86-64 builds; libmvec ones only with ATTN_HAVE_LIBMVEC) ---- */
#if defined(__x86_64__)
void attn_vexp_f32_avx512(const float *x, float *y, int64_t n);
float attn_exp_sub_sum_f32_avx512(const float *x, float *y, int64_t n, float m);
void attn_gelu_f32_avx512(const float *x, float *y, int64_t n);
void attn_gelu_backward_f32_avx512(const float *x, const float *dy, float *dx, int64_t n);
void attn_adam_f32_avx512(const attn_adam_scalars *k, float *p, const float *g, float *m, float *v,
                          int64_t n);
void attn_minmax_row_avx512(const float *x, int64_t n, float *lo, float *hi, int *bad);
void attn_quantize_row_u8_avx512(const float *x, int64_t n, float s, int32_t z, uint8_t *q);
void attn_dequant_row_avx512(const int32_t *acc, int64_t n, float sx, int32_t zx,
                             const float *sw, const int32_t *cs, const float *b, float *y);
void attn_f32_to_f16_avx512(const float *x, uint16_t *y, int64_t n);
/* bf16 Linear helpers (bf16_rows_avx512.c; contracts in kern.h, attn_lowp_ops) */
void attn_bf16_epi_piece_avx512(const attn_bf16_piece *p, int64_t rows, int64_t n);
void attn_bf16_convert_rows_avx512(const float *x, int64_t ldx, uint16_t *y, int64_t ldy,
                                   int64_t rows, int64_t cols, float *sum);
#endif

#endif
