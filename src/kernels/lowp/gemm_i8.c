/* int8 GEMM entry points, u8 x s8 -> s32 (exact): AMX TDPBUSD > AVX512_VNNI
 * VPDPBUSD > the portable micro-kernel here; plus the integer reference.
 * Packed layouts (gemm_lowp_internal.h): b~ in depth quads of 32 columns
 * (g = 4) for every path; a~ in quads (g = 4) or 64-byte rows (AMX, g = 64). */
#include "kernels/lowp/gemm_lowp_internal.h"

enum { MR = 4, NR = 32 }; /* nr = 32 like the SIMD / AMX kernels: one prepacked B for all */

/* tile[4, 32] = a~[kcp/4][4][4] · b~[kcp/4][32][4] in s32 */
static void ukr_i8_portable(int64_t kcp, const void *av, const void *bv, void *tv) {
  const uint8_t *a = av;
  const int8_t *b = bv;
  int32_t acc[MR][NR] = {{0}};
  for (int64_t p = 0; p < kcp; p += 4) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++)
        for (int q = 0; q < 4; q++) acc[i][j] += (int32_t)a[i * 4 + q] * (int32_t)b[j * 4 + q];
    a += 4 * MR;
    b += 4 * NR;
  }
  int32_t *t = tv;
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) t[i * NR + j] = acc[i][j];
}

static const attn_lowp_kernel portable_kernel = {
    .name = "portable i8 4x32", .path = "portable",
    .mr = MR, .nr = NR, .ga = 4, .gb = 4, .kgroup = 4,
    .mc = 128, .kc = 512, .nc = 512,
    .pa = LOWP_U8, .pb = LOWP_S8, .int_acc = 1,
    .ukr = ukr_i8_portable,
};

const attn_lowp_kernel *attn_lowp_kernel_i8_portable(void) { return &portable_kernel; }

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
