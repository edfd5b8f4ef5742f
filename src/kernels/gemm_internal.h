/* Internal to the GEMM driver (gemm.c; the micro-kernel contract is in
 * gemm_ukr.h, the portable micro-kernel and small path in gemm_generic.c).
 * Not part of the public API; tests and benches use it to run one path
 * explicitly. */
#ifndef ATTN_GEMM_INTERNAL_H
#define ATTN_GEMM_INTERNAL_H

#include <stdint.h>

#include "attn/kernels.h"
#include "kernels/gemm_ukr.h"


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
