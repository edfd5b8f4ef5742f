/* The attention's per-head products (attn_nn_head_mm, nn_internal.h): a
 * few dozen rows and columns, head_dim deep, one per (batch row, head).
 * attn_gemm_f32 sends such shapes to its one-element-at-a-time small path;
 * here the same sums run across a row's columns at once (one vector lane
 * per column, a transposed copy of B when it is given as [N, K]). Every
 * element is still acc = 0, acc += a * b for p = 0 .. K-1 in order, then
 * alpha * acc (+ beta * c): the small path's result to the bit. */
#include "nn/nn_internal.h"

/* the small path's choice (kernels/gemm.c: K > 0, M == 1 or M*N*K < 32768),
 * with room here for the transposed B and the sums of ROWS rows */
enum { SMALL_WORK = 32768, MAX_N = 256, MAX_BT = 8192 };

/* rows i0 .. i0+R-1 (R <= ROWS) of C: R independent chains of sums per column
 * keep the core busy (one row alone waits on each sum's previous step) */
enum { ROWS = 4 };

ATTN_NN_CLONES
static void head_mm(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                    int64_t ldc) {
  float acc[ROWS][MAX_N], bt[MAX_BT];
  if (transb) /* bt [K, N] := B [N, K] transposed */
    for (int64_t j = 0; j < N; j++)
      for (int64_t p = 0; p < K; p++) bt[p * N + j] = B[j * ldb + p];
  for (int64_t i0 = 0; i0 < M; i0 += ROWS) {
    const int64_t R = M - i0 < ROWS ? M - i0 : ROWS;
    for (int64_t r = 0; r < R; r++)
      for (int64_t j = 0; j < N; j++) acc[r][j] = 0.0f;
    for (int64_t p = 0; p < K; p++) {
      const float *b = transb ? bt + p * N : B + p * ldb;
      for (int64_t r = 0; r < R; r++) {
        const int64_t i = i0 + r;
        const float a = transa ? A[p * lda + i] : A[i * lda + p];
        float *ar = acc[r];
#pragma omp simd
        for (int64_t j = 0; j < N; j++) ar[j] += a * b[j];
      }
    }
    for (int64_t r = 0; r < R; r++) {
      float *c = C + (i0 + r) * ldc;
      const float *ar = acc[r];
      if (beta == 0.0f) {
#pragma omp simd
        for (int64_t j = 0; j < N; j++) c[j] = alpha * ar[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < N; j++) c[j] = alpha * ar[j] + beta * c[j];
      }
    }
  }
}

attn_status attn_nn_head_mm(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                            const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                            float *C, int64_t ldc) {
  const double work = (double)M * (double)N * (double)K;
  if (M < 1 || K < 1 || N < 1 || N > MAX_N || (transb && N * K > MAX_BT) ||
      !(M == 1 || work < SMALL_WORK) || !A || !B || !C || lda < (transa ? M : K) ||
      ldb < (transb ? K : N) || ldc < N)
    return attn_gemm_f32(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  head_mm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  return ATTN_OK;
}
