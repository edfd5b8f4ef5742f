/* The f32 GEMM micro-kernel contract: what one ISA level's file
 * (gemm_generic.c, gemm_avx2.c, gemm_avx512.c, gemm_neon.c) provides to the
 * packed driver (gemm.c) through the kernel table (kern.h). */
#ifndef ATTN_GEMM_UKR_H
#define ATTN_GEMM_UKR_H

#include <stdint.h>

/* Micro-kernel: c[mr, nr] (row stride ldc) = alpha * a~ · b~ + beta * c over
 * kc steps, where a~ [kc, mr] and b~ [kc, nr] are packed panels (k-major).
 * beta == 0 means c is write-only. Always computes the full mr x nr tile. */
typedef void (*attn_gemm_ukr_f32)(int64_t kc, const float *a, const float *b, float *c,
                                  int64_t ldc, float alpha, float beta);

/* Optional: the same with A's mr rows read in place, a [mr, kc] with rows
 * lda apart, the same products summed in the same order (so the same bits
 * as packing them): op(A) = A needs no a~ then. */
typedef void (*attn_gemm_ukr_rows_f32)(int64_t kc, const float *a, int64_t lda, const float *b,
                                       float *c, int64_t ldc, float alpha, float beta);

/* Packing. pack_a: a~ for rows [i0, i0+mc) and depth [p0, p0+kc) of op(A),
 * as panels of mr rows stored k-major (a~[p*mr + r]), rows past mc zero.
 * pack_b: b~ for depth [p0, p0+kc) and columns [j0, j0+nc) of op(B), as
 * panels of nr columns stored k-major (b~[p*nr + c]), columns past nc zero.
 * dst of pack_b is 64-byte aligned. */
typedef void (*attn_gemm_pack_a_f32)(int transa, const float *A, int64_t lda, int64_t i0,
                                     int64_t mc, int64_t p0, int64_t kc, int mr, float *dst);
typedef void (*attn_gemm_pack_b_f32)(int transb, const float *B, int64_t ldb, int64_t p0,
                                     int64_t kc, int64_t j0, int64_t nc, int nr, float *dst);
/* The portable packers (gemm_generic.c), for any mr / nr. */
void attn_gemm_pack_a_generic_f32(int transa, const float *A, int64_t lda, int64_t i0, int64_t mc,
                                  int64_t p0, int64_t kc, int mr, float *dst);
void attn_gemm_pack_b_generic_f32(int transb, const float *B, int64_t ldb, int64_t p0, int64_t kc,
                                  int64_t j0, int64_t nc, int nr, float *dst);

/* A micro-kernel, its packers and the cache blocking it was tuned with.
 * mc: rows of A packed at once (multiple of mr); kc: depth of one block;
 * nc: columns of B packed at once, sized for L2 (multiple of nr). */
typedef struct {
  const char *name;
  int mr, nr;
  int64_t mc, kc, nc;
  attn_gemm_ukr_f32 ukr;
  attn_gemm_ukr_rows_f32 ukr_rows; /* NULL: A always packed */
  attn_gemm_pack_a_f32 pack_a;
  attn_gemm_pack_b_f32 pack_b;
} attn_gemm_kernel_f32;

#endif
