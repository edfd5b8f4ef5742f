/* A 16 x 16 block of floats transposed in the registers (64 shuffles):
 * out[p] lane r = in[r] lane p. The GEMM's packing of a transposed operand
 * (gemm_avx512.c) and the one-row product with Bᵀ (gemv_avx512.c). x86-64
 * only; inlined into each caller. */
#ifndef ATTN_TRANSPOSE16_AVX512_H
#define ATTN_TRANSPOSE16_AVX512_H

#include <immintrin.h>

#include "kernels/arch/isa_targets.h"

ATTN_AVX512_INLINE void attn_transpose16_ps(const __m512 *in, __m512 *out) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) { /* pairs of rows, interleaved within 128-bit lanes */
    t[2 * i] = _mm512_unpacklo_ps(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(in[2 * i], in[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) { /* u[4i+q]: rows 4i..4i+3 at p = q, q+4, q+8, q+12 */
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) { /* the four 4-row groups of p = q, q+4, q+8, q+12 */
    const __m512 v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88); /* p = q, q+8 */
    const __m512 v1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xDD); /* p = q+4, q+12 */
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xDD);
    out[q] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    out[q + 8] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    out[q + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    out[q + 12] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

#endif
