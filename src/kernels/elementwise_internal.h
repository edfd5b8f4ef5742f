/* Internal: the two paths of the elementwise kernels, so tests can run each.
 * attn_gelu_f32 etc. pick the AVX-512 one (activations_avx512.c,
 * dropout_avx512.c) when attn_cpu()->avx512f and the build has it
 * (ATTN_CPU=generic forces the portable C), split into chunks over threads.
 * The AVX-512 functions return 1 when they did the work, 0 (doing nothing)
 * where the build has no such code (not x86-64, or for GELU no libmvec vector
 * erfc/exp: glibc < 2.35); call them only when attn_cpu()->avx512f. Arguments
 * are not checked here. */
#ifndef ATTN_ELEMENTWISE_INTERNAL_H
#define ATTN_ELEMENTWISE_INTERNAL_H

#include <stdint.h>

/* Portable, one thread (activations.c, dropout.c). */
void attn_gelu_f32_generic(const float *x, float *y, int64_t n);
void attn_gelu_backward_f32_generic(const float *x, const float *dy, float *dx, int64_t n);
void attn_dropout_f32_generic(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                              float scale, uint64_t seed, uint64_t offset);

/* Same formulas, rounding steps and order as the portable loops; erfc and
 * exp come from glibc's libmvec (a few ulp, like erfcf/expf), so results
 * agree with the portable path to a few ulp. */
int attn_gelu_f32_avx512(const float *x, float *y, int64_t n);
int attn_gelu_backward_f32_avx512(const float *x, const float *dy, float *dx, int64_t n);

/* Bit-identical to the portable dropout (the same Philox words, 16 at once):
 * y[i] = keep ? x[i] * scale : 0, mask[i] = keep (mask may be NULL) for
 * element i of the stream at offset + i. */
int attn_dropout_f32_avx512(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                            float scale, uint64_t seed, uint64_t offset);

/* Row helper of softmax, log-softmax and cross-entropy (softmax.c,
 * softmax_avx512.c): y[j] = exp(x[j] - m) (y may be NULL, or x), returns the
 * sum of those values. The dispatcher picks the AVX-512 path (16 partial
 * sums, libmvec expf) or the portable loop (sequential sum); each is
 * deterministic. */
float attn_exp_sub_sum_f32(const float *x, float *y, int64_t n, float m);
float attn_exp_sub_sum_f32_generic(const float *x, float *y, int64_t n, float m);
/* 1 with *sum set when done, 0 where the build lacks the path */
int attn_exp_sub_sum_f32_avx512(const float *x, float *y, int64_t n, float m, float *sum);

#endif
