/* attn_row_ops.gemv_nt on AVX2: gemv_avx512.c's scheme with 8 outputs a
 * vector (lane l: B row j0 + l, read a column at a time by a gather), 32
 * outputs together; the same bits as the small GEMM path (mul, then add, in
 * the order of p). */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include <stdint.h>

#include "kernels/arch/avx2/avx2_internal.h"

/* T vectors of outputs j0 .. j0 + 8 T - 1 (the first n of the last one) */
static inline __attribute__((always_inline)) AVX2_TARGET void
gemv_block(int64_t K, float alpha, const float *a, int64_t inca, const float *B, int64_t ldb,
           float beta, float *c, __m256i idx, int n, int T) {
  const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  const __m256 last = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  __m256 s[4];
  for (int t = 0; t < T; t++)
    s[t] = _mm256_setzero_ps();
  for (int64_t p = 0; p < K; p++) {
    const __m256 ap = _mm256_set1_ps(a[p * inca]);
    for (int t = 0; t < T; t++) {
      const float *b = B + 8 * t * ldb + p;
      const __m256 x =
          _mm256_mask_i32gather_ps(_mm256_setzero_ps(), b, idx, t == T - 1 ? last : all, 4);
      s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(ap, x));
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  for (int t = 0; t < T; t++) {
    const __m256i k = _mm256_castps_si256(t == T - 1 ? last : all);
    __m256 y = _mm256_mul_ps(va, s[t]);
    if (beta != 0.0f) y = _mm256_add_ps(y, _mm256_mul_ps(vb, _mm256_maskload_ps(c + 8 * t, k)));
    _mm256_maskstore_ps(c + 8 * t, k, y);
  }
}

AVX2_TARGET void attn_gemv_nt_avx2(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                                   const float *B, int64_t ldb, float beta, float *c) {
  if (ldb > INT32_MAX / 8) { /* a gather's offsets are 32-bit */
    attn_gemv_nt_generic(N, K, alpha, a, inca, B, ldb, beta, c);
    return;
  }
  const __m256i idx =
      _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32((int)ldb));
  int64_t j = 0;
  for (; j + 32 <= N; j += 32)
    gemv_block(K, alpha, a, inca, B + j * ldb, ldb, beta, c + j, idx, 8, 4);
  for (; j < N; j += 8) {
    const int64_t left = N - j;
    gemv_block(K, alpha, a, inca, B + j * ldb, ldb, beta, c + j, idx, left >= 8 ? 8 : (int)left, 1);
  }
}
#endif
