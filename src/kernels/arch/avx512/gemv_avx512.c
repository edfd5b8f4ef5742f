/* attn_row_ops.gemv_nt on AVX-512: one row times Bᵀ with each output's
 * products added in the order of p, as the small GEMM path adds them (mul,
 * then add: the same bits), 16 outputs a vector. Output j's B row is read a
 * column at a time by a gather (lane l: row j0 + l), so a vector holds 16
 * outputs' products of the same p; 64 outputs run together (four chains of
 * adds against the add's latency). Before it, the decode steps' Linears (M
 * = 1) ran the portable loop, compiled for the baseline ISA. */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include <stdint.h>

#include "kernels/arch/isa_targets.h"
#include <immintrin.h>

/* T vectors of outputs j0 .. j0 + 16 T - 1 (lanes of m in the last one) */
ATTN_AVX512_INLINE void gemv_block(int64_t K, float alpha, const float *a, int64_t inca,
                                   const float *B, int64_t ldb, float beta, float *c, __m512i idx,
                                   __mmask16 m, int T) {
  __m512 s[4];
  for (int t = 0; t < T; t++)
    s[t] = _mm512_setzero_ps();
  for (int64_t p = 0; p < K; p++) {
    const __m512 ap = _mm512_set1_ps(a[p * inca]);
    for (int t = 0; t < T; t++) {
      const float *b = B + 16 * t * ldb + p;
      const __mmask16 k = t == T - 1 ? m : (__mmask16)0xffff;
      const __m512 x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, idx, b, 4);
      s[t] = _mm512_add_ps(s[t], _mm512_mul_ps(ap, x));
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int t = 0; t < T; t++) {
    const __mmask16 k = t == T - 1 ? m : (__mmask16)0xffff;
    __m512 y = _mm512_mul_ps(va, s[t]);
    if (beta != 0.0f) y = _mm512_add_ps(y, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(k, c + 16 * t)));
    _mm512_mask_storeu_ps(c + 16 * t, k, y);
  }
}

ATTN_AVX512 void attn_gemv_nt_avx512(int64_t N, int64_t K, float alpha, const float *a,
                                     int64_t inca, const float *B, int64_t ldb, float beta,
                                     float *c) {
  if (ldb > INT32_MAX / 16) { /* a gather's offsets are 32-bit */
    attn_gemv_nt_generic(N, K, alpha, a, inca, B, ldb, beta, c);
    return;
  }
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32((int)ldb));
  int64_t j = 0;
  for (; j + 64 <= N; j += 64)
    gemv_block(K, alpha, a, inca, B + j * ldb, ldb, beta, c + j, idx, 0xffff, 4);
  for (; j < N; j += 16) {
    const int64_t left = N - j;
    const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    gemv_block(K, alpha, a, inca, B + j * ldb, ldb, beta, c + j, idx, m, 1);
  }
}
#endif
