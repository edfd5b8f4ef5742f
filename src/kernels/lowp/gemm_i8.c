/* int8 GEMM entry points, u8 x s8 -> s32 (exact): AMX TDPBUSD > AVX512_VNNI
 * VPDPBUSD > the portable micro-kernel (gemm_i8_generic.c); plus the integer
 * reference.
 * Packed layouts (gemm_lowp_internal.h): b~ in depth quads of 32 columns
 * (g = 4) for every path; a~ in quads (g = 4) or 64-byte rows (AMX, g = 64). */
#include "kernels/lowp/gemm_lowp_internal.h"

attn_status attn_gemm_u8s8s32_path(attn_lowp_path path, int transa, int transb, int64_t M,
                                   int64_t N, int64_t K, const uint8_t *A, int64_t lda,
                                   const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc) {
  attn_status st =
      attn_lowp_validate("gemm_u8s8s32", transa, transb, M, N, K, A, lda, B, ldb, C, ldc);
  if (st != ATTN_OK) return st;
  if (K > ATTN_GEMM_I8_MAX_K)
    return attn_set_error(ATTN_EINVAL, "gemm_u8s8s32: K=%lld > %d (s32 sums could overflow)",
                          (long long)K, ATTN_GEMM_I8_MAX_K);
  const attn_lowp_kernel *kr;
  st = attn_lowp_select(path, "i8", &kr);
  if (st != ATTN_OK) return st;
  if (M == 0 || N == 0) return ATTN_OK;
  if (K == 0) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0;
    return ATTN_OK;
  }
  attn_lowp_src a = attn_lowp_src_a(A, LOWP_U8, transa, lda);
  attn_lowp_src b = attn_lowp_src_b(B, LOWP_S8, transb, ldb);
  attn_lowp_epi e = {attn_lowp_epi_s32, C, ldc, 1.0f, 0.0f, NULL, 0};
  return attn_lowp_gemm_run(kr, &a, &b, M, N, K, &e, 0);
}

attn_status attn_gemm_u8s8s32(int transa, int transb, int64_t M, int64_t N, int64_t K,
                              const uint8_t *A, int64_t lda, const int8_t *B, int64_t ldb,
                              int32_t *C, int64_t ldc) {
  return attn_gemm_u8s8s32_path(ATTN_LOWP_AUTO, transa, transb, M, N, K, A, lda, B, ldb, C, ldc);
}

attn_status attn_gemm_u8s8s32_ref(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                  const uint8_t *A, int64_t lda, const int8_t *B, int64_t ldb,
                                  int32_t *C, int64_t ldc) {
  attn_status st =
      attn_lowp_validate("gemm_u8s8s32_ref", transa, transb, M, N, K, A, lda, B, ldb, C, ldc);
  if (st != ATTN_OK) return st;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      int64_t s = 0;
      for (int64_t p = 0; p < K; p++) {
        int64_t a = transa ? A[p * lda + i] : A[i * lda + p];
        int64_t b = transb ? B[j * ldb + p] : B[p * ldb + j];
        s += a * b;
      }
      C[i * ldc + j] = (int32_t)s;
    }
  return ATTN_OK;
}
