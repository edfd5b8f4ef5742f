/* fp16 GEMM entry points: f16 operands converted to f32 while packing, then
 * the f32 micro-kernels (AVX-512 14x32, AVX2 6x16 or the portable 4x16) —
 * f32 accumulation throughout (see include/attn/lowp.h for why not
 * AVX512_FP16 arithmetic). The f32 descriptors (gemm_lowp_f32_<isa>.c in
 * arch/) also serve the bf16 GEMM where the level has no bf16 dot product
 * (bf16 widened to f32 while packing: the avx2 level, AVX-512 without
 * AVX512_BF16) and its portable path. */
#include "kernels/gemm/gemm_internal.h"
#include "kernels/lowp/gemm_lowp_internal.h"
#include "kernels/kern.h"

attn_status attn_gemm_f16_path(attn_lowp_path path, int transa, int transb, int64_t M, int64_t N,
                               int64_t K, float alpha, const uint16_t *A, int64_t lda,
                               const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  return attn_lowp_gemm_f32out("gemm_f16", "f16", path, transa, transb, M, N, K, alpha, A,
                               LOWP_F16, lda, B, LOWP_F16, ldb, beta, C, ldc);
}

attn_status attn_gemm_f16(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                          float beta, float *C, int64_t ldc) {
  return attn_gemm_f16_path(ATTN_LOWP_AUTO, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta,
                            C, ldc);
}
