/* bf16 GEMM entry points (f32 accumulation): bf16 operands, or f32 operands
 * rounded to bf16 while packing. Paths: gemm_lowp.c (AMX > AVX512_BF16 >
 * portable f32 on the converted values). */
#include "kernels/lowp/gemm_lowp_internal.h"

attn_status attn_gemm_bf16_path(attn_lowp_path path, int transa, int transb, int64_t M, int64_t N,
                                int64_t K, float alpha, const uint16_t *A, int64_t lda,
                                const uint16_t *B, int64_t ldb, float beta, float *C,
                                int64_t ldc) {
  return attn_lowp_gemm_f32out("gemm_bf16", "bf16", path, transa, transb, M, N, K, alpha, A,
                               LOWP_BF16, lda, B, LOWP_BF16, ldb, beta, C, ldc);
}

attn_status attn_gemm_bf16(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                           const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                           float beta, float *C, int64_t ldc) {
  return attn_gemm_bf16_path(ATTN_LOWP_AUTO, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta,
                             C, ldc);
}

attn_status attn_gemm_bf16_f32in_path(attn_lowp_path path, int transa, int transb, int64_t M,
                                      int64_t N, int64_t K, float alpha, const float *A,
                                      int64_t lda, const float *B, int64_t ldb, float beta,
                                      float *C, int64_t ldc) {
  return attn_lowp_gemm_f32out("gemm_bf16_f32in", "bf16", path, transa, transb, M, N, K, alpha,
                               A, LOWP_F32R, lda, B, LOWP_F32R, ldb, beta, C, ldc);
}

attn_status attn_gemm_bf16_f32in(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                 float alpha, const float *A, int64_t lda, const float *B,
                                 int64_t ldb, float beta, float *C, int64_t ldc) {
  return attn_gemm_bf16_f32in_path(ATTN_LOWP_AUTO, transa, transb, M, N, K, alpha, A, lda, B,
                                   ldb, beta, C, ldc);
}
