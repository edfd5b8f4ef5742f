/* GEMM dispatch. (Placeholder: forwards to the reference until the packed
 * AVX-512 path lands.) */
#include "attn/kernels.h"

attn_status attn_gemm_f32(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc) {
  return attn_gemm_f32_ref(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
