/* Vectorised exp for the fused kernels: y[i] = e^x[i] within a few ulp of
 * expf (results below FLT_MIN may flush differently by one denormal step),
 * -inf -> 0, +inf and x > 88.8 -> inf, NaN -> NaN. In-place allowed. */
#ifndef ATTN_VEXP_H
#define ATTN_VEXP_H

#include <stdint.h>

/* Picks the AVX-512 version when attn_cpu() has it, else the portable one. */
void attn_vexp_f32(const float *x, float *y, int64_t n);
/* Portable: expf per element. */
void attn_vexp_f32_generic(const float *x, float *y, int64_t n);
/* AVX-512 (vexp_avx512.c); call only when attn_cpu()->avx512f. Returns 0 (and
 * does nothing) where the build has no AVX-512 code. */
int attn_vexp_f32_avx512(const float *x, float *y, int64_t n);

#endif
