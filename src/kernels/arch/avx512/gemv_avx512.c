/* attn_row_ops.gemv_nt on AVX-512: one row times Bᵀ with each output's
 * products added in the order of p, as the small GEMM path adds them (mul,
 * then add: the same bits), 16 outputs a vector (lane l: output j0 + l). B's
 * rows lie along p, so 16 rows' next 16 values are loaded as they lie and
 * transposed in the registers (64 shuffles for 256 values), which leaves
 * one vector per p holding the 16 outputs' B values of that p. (Until
 * 2026-12-06 a gather read each such column: one instruction per 16 values
 * but ~12 cycles each on an Intel Xeon (EMR), against ~4 for the shuffles:
 * the demo LM's one-token Linears 2.0-2.4x faster, 6.5x where K = 512.) */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include <stdint.h>

#include "kernels/arch/avx512/transpose16_avx512.h"
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>

/* Software prefetch distance along B's rows, in floats: each of the 16
 * rows' line PF floats ahead, and past a row's end the same place in the
 * next block's rows. From memory the 16 rows (a few KB apart) are 16
 * streams the hardware prefetcher starts late on every row: one row of a
 * 50,257 x 768 matrix twice the L3 (Intel Xeon EMR, 1 thread) 7.9 GB/s
 * without, 12.1 with PF 256 (11.8 at 128, 10.6 at 512); 2 threads 20 ->
 * 28.9 GB/s. */
enum { PF = 256 };

/* outputs j0 .. j0 + n - 1 (n <= 16: B's rows from B, c from c); next: the
 * next block's first row, NULL when there is no whole next block */
ATTN_AVX512_INLINE void gemv_block(int64_t K, float alpha, const float *a, int64_t inca,
                                   const float *B, int64_t ldb, float beta, float *c, int n,
                                   const float *next) {
  __m512 s = _mm512_setzero_ps();
  for (int64_t p0 = 0; p0 < K; p0 += 16) {
    const int np = K - p0 < 16 ? (int)(K - p0) : 16;
    const float *pf = p0 + PF < K ? B + p0 + PF : next ? next + (p0 + PF - K) : NULL;
    if (pf && n == 16 && p0 + PF - K < K)
#pragma GCC unroll 16
      for (int l = 0; l < 16; l++)
        _mm_prefetch((const char *)(pf + l * ldb), _MM_HINT_T0);
    __m512 x[16];
    if (n == 16 && np == 16) {
#pragma GCC unroll 16
      for (int l = 0; l < 16; l++)
        x[l] = _mm512_loadu_ps(B + l * ldb + p0);
    } else { /* rows past n: 0 (not read); values past K: 0 (not read) */
      const __mmask16 km = (__mmask16)((1u << np) - 1);
#pragma GCC unroll 16
      for (int l = 0; l < 16; l++)
        x[l] = l < n ? _mm512_maskz_loadu_ps(km, B + l * ldb + p0) : _mm512_setzero_ps();
    }
    __m512 xt[16];
    attn_transpose16_ps(x, xt); /* xt[q]: the outputs' values at p0 + q */
    if (np == 16) {
#pragma GCC unroll 16
      for (int q = 0; q < 16; q++)
        s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(a[(p0 + q) * inca]), xt[q]));
    } else {
      for (int q = 0; q < np; q++)
        s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(a[(p0 + q) * inca]), xt[q]));
    }
  }
  const __mmask16 m = (__mmask16)((1u << n) - 1);
  __m512 y = _mm512_mul_ps(_mm512_set1_ps(alpha), s);
  if (beta != 0.0f)
    y = _mm512_add_ps(y, _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, c)));
  _mm512_mask_storeu_ps(c, m, y);
}

ATTN_AVX512 void attn_gemv_nt_avx512(int64_t N, int64_t K, float alpha, const float *a,
                                     int64_t inca, const float *B, int64_t ldb, float beta,
                                     float *c) {
  for (int64_t j = 0; j < N; j += 16)
    gemv_block(K, alpha, a, inca, B + j * ldb, ldb, beta, c + j, N - j < 16 ? (int)(N - j) : 16,
               j + 32 <= N ? B + (j + 16) * ldb : NULL);
}
#endif
