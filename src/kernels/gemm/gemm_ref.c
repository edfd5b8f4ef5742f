/* Reference GEMM: the plain triple loop every fast path is tested against. */
#include "attn/kernels.h"

attn_status attn_gemm_f32_ref(int transa, int transb, int64_t M, int64_t N, int64_t K,
                              float alpha, const float *A, int64_t lda, const float *B,
                              int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0)
    return attn_set_error(ATTN_EINVAL, "gemm: negative size M=%lld N=%lld K=%lld",
                          (long long)M, (long long)N, (long long)K);
  if (M == 0 || N == 0) return ATTN_OK;
  if (!C || (K > 0 && (!A || !B))) return attn_set_error(ATTN_EINVAL, "gemm: NULL operand");
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) {
      float acc = 0.0f;
      for (int64_t p = 0; p < K; p++) {
        float a = transa ? A[p * lda + i] : A[i * lda + p];
        float b = transb ? B[j * ldb + p] : B[p * ldb + j];
        acc += a * b;
      }
      float *c = &C[i * ldc + j];
      *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
    }
  }
  return ATTN_OK;
}
