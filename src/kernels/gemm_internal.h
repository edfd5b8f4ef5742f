/* Internal to the GEMM paths (driver and packing in gemm.c, portable
 * micro-kernel and small path in gemm_generic.c, one micro-kernel per ISA
 * level in gemm_<isa>.c, registered in dispatch.c). Not part of the public API; tests and benches use it to
 * run one path explicitly. */
#ifndef ATTN_GEMM_INTERNAL_H
#define ATTN_GEMM_INTERNAL_H

#include <stdint.h>

#include "attn/kernels.h"

/* Micro-kernel: c[mr, nr] (row stride ldc) = alpha * a~ · b~ + beta * c over
 * kc steps, where a~ [kc, mr] and b~ [kc, nr] are packed panels (k-major).
 * beta == 0 means c is write-only. Always computes the full mr x nr tile. */
typedef void (*attn_gemm_ukr_f32)(int64_t kc, const float *a, const float *b, float *c,
                                  int64_t ldc, float alpha, float beta);

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
  attn_gemm_pack_a_f32 pack_a;
  attn_gemm_pack_b_f32 pack_b;
} attn_gemm_kernel_f32;

/* Which path attn_gemm_f32_path runs. AUTO is what attn_gemm_f32 does:
 * SMALL below a size threshold, else PACKED (the active level's micro-kernel,
 * kern.h). */
typedef enum {
  ATTN_GEMM_AUTO = 0,
  ATTN_GEMM_SMALL,   /* no packing; same k-order and rounding as the reference */
  ATTN_GEMM_GENERIC, /* packed, portable C micro-kernel */
  ATTN_GEMM_PACKED   /* packed, the active level's micro-kernel */
} attn_gemm_path;

/* M*N*K below this goes through the small path under AUTO. */
#define ATTN_GEMM_SMALL_WORK 32768

attn_status attn_gemm_f32_path(attn_gemm_path path, int transa, int transb, int64_t M,
                               int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                               const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The small path (gemm_generic.c), arguments already validated, M,N,K > 0. */
void attn_gemm_small_f32(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc);

#endif
