/* attn_row_ops.gemv_nt on AVX2: gemv_avx512.c's scheme with 8 outputs a
 * vector (lane l: output j0 + l), 8 B rows' next 8 values loaded as they
 * lie and transposed in the registers (24 shuffles for 64 values); the same
 * bits as the small GEMM path (mul, then add, in the order of p). (Until
 * 2026-12-06 a gather read each column of 8.) */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include <stdint.h>

#include "kernels/arch/avx2/avx2_internal.h"

#define GEMV_INLINE static inline __attribute__((always_inline)) AVX2_TARGET

/* Software prefetch PF floats ahead along the 8 rows, then into the next
 * block's (gemv_avx512.c: rows from memory are streams the hardware
 * prefetcher starts late); one line per row every 16 values. */
enum { PF = 256 };

/* outputs j0 .. j0 + n - 1 (n <= 8: B's rows from B, c from c); next: the
 * next block's first row, NULL when there is no whole next block */
GEMV_INLINE void gemv_block(int64_t K, float alpha, const float *a, int64_t inca, const float *B,
                            int64_t ldb, float beta, float *c, int n, const float *next) {
  const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  __m256 s = _mm256_setzero_ps();
  for (int64_t p0 = 0; p0 < K; p0 += 8) {
    const int np = K - p0 < 8 ? (int)(K - p0) : 8;
    const float *pf = p0 + PF < K ? B + p0 + PF : next ? next + (p0 + PF - K) : NULL;
    if (pf && n == 8 && !(p0 & 15) && p0 + PF - K < K)
#pragma GCC unroll 8
      for (int l = 0; l < 8; l++)
        _mm_prefetch((const char *)(pf + l * ldb), _MM_HINT_T0);
    __m256 x[8];
    if (n == 8 && np == 8) {
#pragma GCC unroll 8
      for (int l = 0; l < 8; l++)
        x[l] = _mm256_loadu_ps(B + l * ldb + p0);
    } else { /* rows past n: 0 (not read); values past K: 0 (not read) */
      const __m256i km = _mm256_cmpgt_epi32(_mm256_set1_epi32(np), lane);
#pragma GCC unroll 8
      for (int l = 0; l < 8; l++)
        x[l] = l < n ? _mm256_maskload_ps(B + l * ldb + p0, km) : _mm256_setzero_ps();
    }
    attn_transpose8_ps(x); /* x[q]: the outputs' values at p0 + q (avx2_internal.h) */
    if (np == 8) {
#pragma GCC unroll 8
      for (int q = 0; q < 8; q++)
        s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(a[(p0 + q) * inca]), x[q]));
    } else {
      for (int q = 0; q < np; q++)
        s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(a[(p0 + q) * inca]), x[q]));
    }
  }
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
  __m256 y = _mm256_mul_ps(_mm256_set1_ps(alpha), s);
  if (beta != 0.0f)
    y = _mm256_add_ps(y, _mm256_mul_ps(_mm256_set1_ps(beta), _mm256_maskload_ps(c, m)));
  _mm256_maskstore_ps(c, m, y);
}

AVX2_TARGET void attn_gemv_nt_avx2(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                                   const float *B, int64_t ldb, float beta, float *c) {
  for (int64_t j = 0; j < N; j += 8)
    gemv_block(K, alpha, a, inca, B + j * ldb, ldb, beta, c + j, N - j < 8 ? (int)(N - j) : 8,
               j + 16 <= N ? B + (j + 8) * ldb : NULL);
}
#endif
