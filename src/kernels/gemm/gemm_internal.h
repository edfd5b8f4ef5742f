/* Internal to the GEMM driver (gemm.c; the micro-kernel contract is in
 * gemm_ukr.h, the portable micro-kernel and small path in gemm_generic.c).
 * Not part of the public API; tests and benches use it to run one path
 * explicitly. */
#ifndef ATTN_GEMM_INTERNAL_H
#define ATTN_GEMM_INTERNAL_H

#include <stdint.h>

#include "attn/kernels.h"
#include "kernels/gemm/gemm_ukr.h"


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

/* The b~ block width used: the kernel's nc (tuned for its CPU), cut to a
 * multiple of nr (at least nr) so that a kc x nc block of b~ takes at most
 * 3/4 of an L2 of l2 bytes (0: unknown, nc kept). With the rest of L2 left
 * for the a~ micro-panel and the C tiles, b~ streams from L2 and not from
 * L3 (Zen 3, 512 KB L2: the AVX2 kernel's 768 KB block ran ~5% slower on
 * the Transformer layer's shapes). */
int64_t attn_gemm_nc_fit(int64_t nc, int64_t nr, int64_t kc, int64_t l2);

/* The small path (gemm_generic.c), arguments already validated, M,N,K > 0. */
void attn_gemm_small_f32(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc);

#endif
