/* Internal to the AVX2 kernel files (row_ops_avx2.c, dropout_avx2.c,
 * quantize_avx2.c, convert_avx2.c, gemm_avx2.c, gemm_lowp_avx2.c, ...): their
 * target attribute, the loads and stores of a short tail and the 8x8
 * transpose of the packers. Include only from files whose functions carry AVX2_TARGET
 * (the helpers are inlined into them). AVX2 level = AVX2 + FMA + F16C, no
 * AVX-512 instruction (an AVX2-only CPU such as Haswell or Zen 1-3 runs it). */
#ifndef ATTN_AVX2_INTERNAL_H
#define ATTN_AVX2_INTERNAL_H

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define AVX2_TARGET ATTN_AVX2

/* bf16 bits of 8 floats (as attn_f32_to_bf16) in 32-bit lanes: (u + 0x7fff + lsb) >> 16, or for a
 * NaN (|u| > inf as a signed compare: both sides are below 2^31) its top half
 * with the quiet bit set */
AVX2_TARGET static inline __m256i attn_bf16_bits8_avx2(__m256 x) {
  __m256i u = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                   _mm256_set1_epi32(0x7f800000));
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(r, q, nan);
}


/* Lanes 0 .. left-1 set (all ones), the others clear, for left in [0, 8]:
 * the mask of _mm256_maskstore_ps on a tail, which writes no clear lane. */
AVX2_TARGET static inline __m256i attn_tail_mask8(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The first min(left, 8) values at p, zeros in the other lanes; never reads
 * past p + left. A tail goes through a zeroed copy rather than
 * _mm256_maskload_ps: real CPUs ignore the clear lanes of a masked load, but
 * qemu-user (7.2, the Haswell emulation the tests run under) faults when
 * they reach into an unmapped page. Masked stores are fine there. */
AVX2_TARGET static inline __m256 attn_load8(const float *p, int64_t left) {
  if (left >= 8) return _mm256_loadu_ps(p);
  float t[8] = {0};
  memcpy(t, p, (size_t)left * sizeof *t);
  return _mm256_loadu_ps(t);
}

AVX2_TARGET static inline __m256i attn_load8i(const int32_t *p, int64_t left) {
  if (left >= 8) return _mm256_loadu_si256((const __m256i *)p);
  int32_t t[8] = {0};
  memcpy(t, p, (size_t)left * sizeof *t);
  return _mm256_loadu_si256((const __m256i *)t);
}

/* v's first min(left, 8) lanes to p; nothing past p + left is written */
AVX2_TARGET static inline void attn_store8(float *p, int64_t left, __m256 v) {
  if (left >= 8)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, attn_tail_mask8(left), v);
}

/* w[q] holds word q of 8 items (lane j = item j); afterwards w[q] holds the
 * four words of items 2q and 2q + 1 in item-major order: the 32 words
 * stored w[0], w[1], w[2], w[3] read item 0's words 0..3, item 1's, ... */
AVX2_TARGET static inline __attribute__((always_inline)) void attn_interleave4x8_epi32(
    __m256i w[4]) {
  __m256i t0 = _mm256_unpacklo_epi32(w[0], w[1]); /* 0: w0 w1 of items 0, 1 | 4, 5 */
  __m256i t1 = _mm256_unpacklo_epi32(w[2], w[3]); /* w2 w3 of items 0, 1 | 4, 5 */
  __m256i t2 = _mm256_unpackhi_epi32(w[0], w[1]); /* w0 w1 of items 2, 3 | 6, 7 */
  __m256i t3 = _mm256_unpackhi_epi32(w[2], w[3]);
  __m256i u0 = _mm256_unpacklo_epi64(t0, t1); /* items 0 | 4, four words each */
  __m256i u1 = _mm256_unpackhi_epi64(t0, t1); /* items 1 | 5 */
  __m256i u2 = _mm256_unpacklo_epi64(t2, t3); /* items 2 | 6 */
  __m256i u3 = _mm256_unpackhi_epi64(t2, t3); /* items 3 | 7 */
  w[0] = _mm256_permute2x128_si256(u0, u1, 0x20); /* items 0, 1 */
  w[1] = _mm256_permute2x128_si256(u2, u3, 0x20); /* items 2, 3 */
  w[2] = _mm256_permute2x128_si256(u0, u1, 0x31); /* items 4, 5 */
  w[3] = _mm256_permute2x128_si256(u2, u3, 0x31); /* items 6, 7 */
}

/* r[q] := column q of the 8x8 block whose rows are r[0..7]. Always inlined
 * and unrolled so that the block stays in registers. */
AVX2_TARGET static inline __attribute__((always_inline)) void attn_transpose8_ps(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) { /* pairs of rows, interleaved within 128-bit lanes */
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) { /* u[4i+q]: rows 4i..4i+3 at q (low lane) and q+4 (high) */
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}
#endif

#endif
