/* The kernel seam: one table of micro-kernels per ISA level.
 *
 * dispatch.c alone reads the CPU features (once), decides the level
 * (ATTN_CPU=generic|avx2|avx512|neon|native caps it) and fills the active
 * table; every loop in kernels/, nn/ and train/ calls through attn_kern()
 * and never tests a CPU feature itself. Per-ISA files (gemm_avx2.c,
 * sdpa_flash_neon.c, row_ops_avx512.c, ...) each export one getter that
 * returns their kernel set, or NULL where the build has no such code (an
 * x86 file on arm64 and the reverse); dispatch.c calls a getter only when
 * the CPU has the level.
 *
 * Adding a level = one micro-kernel file per family below + its entries in
 * dispatch.c; no tile loop is copied. */
#ifndef ATTN_KERN_H
#define ATTN_KERN_H

#include <stdint.h>

#include "attn/kernels.h"
#include "kernels/gemm_internal.h"
#include "kernels/sdpa_flash.h"

/* ---- row and elementwise kernels ------------------------------------------
 * One set per level; an entry may be NULL, in which case the table takes the
 * generic one (attn_row_ops_generic, always complete). Arguments are
 * validated by the callers; n >= 0. */

/* Per-step Adam/AdamW scalars, pre-rounded to float as ATen rounds them.
 * decay = 0 parameters get wd = 0 and decay_mul = 1. */
typedef struct {
  int adamw;
  float wd, decay_mul, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, bc2_sqrt,
      eps;
} attn_adam_scalars;

typedef struct {
  const char *name;
  /* y[i] = e^x[i] within a few ulp of expf (-inf -> 0, x > 88.8 -> inf, NaN
   * -> NaN); in place allowed. */
  void (*vexp)(const float *x, float *y, int64_t n);
  /* y[j] = exp(x[j] - m) (y may be NULL, or x); returns the sum of those
   * values (any fixed summation order: deterministic, not thread-dependent). */
  float (*exp_sub_sum)(const float *x, float *y, int64_t n, float m);
  /* exact GELU y = x/2 erfc(-x/sqrt2) and its derivative times dy, a few ulp */
  void (*gelu)(const float *x, float *y, int64_t n);
  void (*gelu_backward)(const float *x, const float *dy, float *dx, int64_t n);
  /* Bit-identical to the portable Philox dropout: element i uses the stream
   * word at offset + i; y[i] = keep ? x[i] * scale : 0; mask may be NULL. */
  void (*dropout)(const float *x, float *y, uint8_t *mask, int64_t n, float p, float scale,
                  uint64_t seed, uint64_t offset);
  /* One Adam/AdamW update in place, bit-identical to the portable loop
   * (only IEEE-exact operations: mul, fma, sqrt, div, add). */
  void (*adam)(const attn_adam_scalars *k, float *p, const float *g, float *m, float *v,
               int64_t n);
  /* LayerNorm of one row: mean and biased variance accumulated in double
   * (two passes), rstd = 1/sqrtf(var + eps), y = (x - mean) rstd w + b (w, b
   * may be NULL). */
  void (*layernorm_row)(const float *x, const float *w, const float *b, float *y, float eps,
                        int64_t n, float *mean, float *rstd);
  /* dx of one row: dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w
   * (w NULL: g = dy), xhat = (x - mean) rstd; sums in f32, any fixed order. */
  void (*layernorm_backward_row)(const float *x, const float *w, float mean, float rstd,
                                 const float *dy, float *dx, int64_t n);
  /* min(x, 0) and max(x, 0) over a row; *bad = 1 if any value is NaN (exact) */
  void (*minmax_row)(const float *x, int64_t n, float *lo, float *hi, int *bad);
  /* q = clamp(round_half_even(x / s) + z, 0, 255), bit-identical to generic */
  void (*quantize_row_u8)(const float *x, int64_t n, float s, int32_t z, uint8_t *q);
  /* y[j] = (sx * sw[j]) * (float)(acc[j] - zx * cs[j]) (+ b[j]), no FMA,
   * wrapping int32 arithmetic; bit-identical to generic */
  void (*dequant_row)(const int32_t *acc, int64_t n, float sx, int32_t zx, const float *sw,
                      const int32_t *cs, const float *b, float *y);
  /* conversions, bit-identical to the portable ones (round to nearest even;
   * NaN stays NaN) */
  void (*f16_to_f32)(const uint16_t *x, float *y, int64_t n);
  void (*f32_to_f16)(const float *x, uint16_t *y, int64_t n);
  void (*f32_to_bf16)(const float *x, uint16_t *y, int64_t n);
  void (*bf16_to_f32)(const uint16_t *x, float *y, int64_t n);
} attn_row_ops;

/* ---- the getters of the per-ISA files (NULL: not in this build) --------- */
const attn_row_ops *attn_row_ops_generic(void); /* row_ops_generic.c, complete */
const attn_row_ops *attn_row_ops_avx2(void);    /* row_ops_avx2.c (AVX2 + FMA + F16C) */
const attn_row_ops *attn_row_ops_avx512(void);  /* row_ops_avx512.c */
const attn_row_ops *attn_row_ops_neon(void);    /* row_ops_neon.c (arm64) */

/* GEMM micro-kernels (attn_gemm_kernel_f32, gemm_internal.h) */
const attn_gemm_kernel_f32 *attn_gemm_kernel_generic_f32(void); /* gemm_generic.c */
const attn_gemm_kernel_f32 *attn_gemm_kernel_avx2_f32(void);    /* gemm_avx2.c */
const attn_gemm_kernel_f32 *attn_gemm_kernel_avx512_f32(void);  /* gemm_avx512.c */
const attn_gemm_kernel_f32 *attn_gemm_kernel_neon_f32(void);    /* gemm_neon.c */

/* Flash attention tile kernels (attn_flash_ops, sdpa_flash.h) */
const attn_flash_ops *attn_flash_ops_generic(void); /* sdpa_flash_generic.c */
const attn_flash_ops *attn_flash_ops_avx2(void);    /* sdpa_flash_avx2.c */
const attn_flash_ops *attn_flash_ops_avx512(void);  /* sdpa_flash_avx512.c */
const attn_flash_ops *attn_flash_ops_neon(void);    /* sdpa_flash_neon.c */

#endif
