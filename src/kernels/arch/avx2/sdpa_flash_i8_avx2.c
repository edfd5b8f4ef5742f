/* AVX2 pieces of the int8 flash attention (sdpa_flash_i8.c) for the avx2
 * level: the exact int32 scores, the dequantization, the row quantizer and
 * the key-mean column sums, each giving the bits of the portable code.
 *
 * Scores without VPDPBUSD: s8 x s8 products widened to 16 bits and
 * VPMADDWD (pair sums <= 2 * 128 * 128, exact). The Q row of a B tile
 * (sdpa_flash_i8.h: 16 queries x a depth quad) sign-extends into 4 ymm
 * [r: q0 q1 q2 q3, ...]; a key's quad, widened once per key pair into k16,
 * is broadcast as 64 bits; VPMADDWD gives per query two partial sums
 * (depths 0-1, 2-3), added at the end (VPHADDD). Two keys at a time: 8
 * accumulators + 4 Q vectors + a broadcast. */
#include <string.h>

#include "kernels/flash/sdpa_flash_i8.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"

enum { BC = 64, QT = 16, DPMAX = 256 };

/* v[0..3]: 16 queries' partial sums -> 16 s32 in query order */
AVX2_TARGET static inline void store_sums(int32_t *s, const __m256i v[4]) {
  __m256i lo = _mm256_hadd_epi32(v[0], v[1]), hi = _mm256_hadd_epi32(v[2], v[3]);
  _mm256_storeu_si256((__m256i *)s, _mm256_permute4x64_epi64(lo, 0xD8));
  _mm256_storeu_si256((__m256i *)(s + 8), _mm256_permute4x64_epi64(hi, 0xD8));
}

AVX2_TARGET static void scores_avx2(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                    int32_t *st) {
  const int nq = 16 * dc; /* depth quads */
  int16_t q16[DPMAX / 4 * 64] __attribute__((aligned(32)));
  int16_t k16[2][DPMAX] __attribute__((aligned(32)));
  for (int e4 = 0; e4 < nq; e4++) /* quad e4 of every query: 64 bytes of the B tiles */
    for (int h = 0; h < 4; h++)
      _mm256_store_si256((__m256i *)(q16 + e4 * 64 + h * 16),
                         _mm256_cvtepi8_epi16(_mm_loadu_si128(
                             (const __m128i *)(qp + (e4 >> 4) * 1024 + (e4 & 15) * 64 + h * 16))));
  for (int j = 0; j < BC; j += 2) {
    for (int u = 0; u < 2; u++)
      for (int e = 0; e < 64 * dc; e += 16)
        _mm256_store_si256((__m256i *)(k16[u] + e),
                           _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(k + (j + u) * ldk + e))));
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    __m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int e4 = 0; e4 < nq; e4++) {
      const int16_t *qe = q16 + e4 * 64;
      __m256i q0 = _mm256_load_si256((const __m256i *)qe);
      __m256i q1 = _mm256_load_si256((const __m256i *)(qe + 16));
      __m256i q2 = _mm256_load_si256((const __m256i *)(qe + 32));
      __m256i q3 = _mm256_load_si256((const __m256i *)(qe + 48));
      __m256i x = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(k16[0] + 4 * e4)));
      a0 = _mm256_add_epi32(_mm256_madd_epi16(x, q0), a0);
      a1 = _mm256_add_epi32(_mm256_madd_epi16(x, q1), a1);
      a2 = _mm256_add_epi32(_mm256_madd_epi16(x, q2), a2);
      a3 = _mm256_add_epi32(_mm256_madd_epi16(x, q3), a3);
      x = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(k16[1] + 4 * e4)));
      b0 = _mm256_add_epi32(_mm256_madd_epi16(x, q0), b0);
      b1 = _mm256_add_epi32(_mm256_madd_epi16(x, q1), b1);
      b2 = _mm256_add_epi32(_mm256_madd_epi16(x, q2), b2);
      b3 = _mm256_add_epi32(_mm256_madd_epi16(x, q3), b3);
    }
    const __m256i va[4] = {a0, a1, a2, a3}, vb[4] = {b0, b1, b2, b3};
    store_sums(st + j * QT, va);
    store_sums(st + (j + 1) * QT, vb);
  }
}

attn_i8_scores_fn attn_flash_i8_scores_avx2(void) { return scores_avx2; }

/* st = (float)s * (sk[j] * sq[r]): the scalar's two multiplies, no FMA */
AVX2_TARGET static void dequant_avx2(const int32_t *s, const float *sk, const float *sq, float *st) {
  const __m256 q0 = _mm256_loadu_ps(sq), q1 = _mm256_loadu_ps(sq + 8);
  for (int j = 0; j < BC; j++) {
    const __m256 kj = _mm256_set1_ps(sk[j]);
    __m256 x0 = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(s + j * QT)));
    __m256 x1 = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(s + j * QT + 8)));
    _mm256_storeu_ps(st + j * QT, _mm256_mul_ps(x0, _mm256_mul_ps(kj, q0)));
    _mm256_storeu_ps(st + j * QT + 8, _mm256_mul_ps(x1, _mm256_mul_ps(kj, q1)));
  }
}

attn_i8_dequant_fn attn_i8_dequant_avx2(void) { return dequant_avx2; }

/* The scalar quantizer's bits: an exact max, an IEEE division, round to
 * nearest even (vroundps as nearbyintf), clamp, narrow. */
AVX2_TARGET static int quantize_row_avx2(const float *x, int64_t n, int8_t *q, float *scale) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_set1_ps(3.40282347e38f);
  __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  for (int64_t e = 0; e < n; e += 8) {
    __m256 a = _mm256_and_ps(attn_load8(x + e, n - e), absmask);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* inf or NaN */
    m = _mm256_max_ps(m, a);
  }
  if (_mm256_movemask_ps(bad)) return 1;
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float s = _mm_cvtss_f32(h) / 127.0f;
  *scale = s;
  if (!(s > 0.0f)) {
    memset(q, 0, (size_t)n);
    return 0;
  }
  const __m256 vs = _mm256_set1_ps(s), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t e = 0; e < n; e += 8) {
    __m256 r = _mm256_round_ps(_mm256_div_ps(attn_load8(x + e, n - e), vs),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i i32 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
    __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
    __m128i i8 = _mm_packs_epi16(i16, i16);
    if (n - e >= 8) {
      _mm_storel_epi64((__m128i *)(q + e), i8);
    } else {
      int8_t t[16];
      _mm_storeu_si128((__m128i *)t, i8);
      memcpy(q + e, t, (size_t)(n - e));
    }
  }
  return 0;
}

attn_i8_quantize_fn attn_i8_quantize_row_avx2(void) { return quantize_row_avx2; }

/* 16 columns at a time in four f64 accumulators, rows in order; the last
 * D % 4 columns by the scalar loop (the same order per column) */
AVX2_TARGET static void colsum_avx2(const float *x, int64_t ld, int64_t n, int64_t D, double *acc) {
  int64_t e0 = 0;
  for (; e0 + 4 <= D; e0 += 16) {
    const int nv = D - e0 >= 16 ? 4 : (int)((D - e0) / 4);
    __m256d a[4];
    for (int c = 0; c < nv; c++)
      a[c] = _mm256_loadu_pd(acc + e0 + 4 * c);
    for (int64_t j = 0; j < n; j++)
      for (int c = 0; c < nv; c++)
        a[c] = _mm256_add_pd(a[c], _mm256_cvtps_pd(_mm_loadu_ps(x + j * ld + e0 + 4 * c)));
    for (int c = 0; c < nv; c++)
      _mm256_storeu_pd(acc + e0 + 4 * c, a[c]);
    if (nv < 4) {
      e0 += 4 * nv;
      break;
    }
  }
  for (int64_t j = 0; j < n; j++)
    for (int64_t e = e0; e < D; e++)
      acc[e] += x[j * ld + e];
}

attn_i8_colsum_fn attn_i8_colsum_avx2(void) { return colsum_avx2; }
#else
attn_i8_scores_fn attn_flash_i8_scores_avx2(void) { return 0; }
attn_i8_dequant_fn attn_i8_dequant_avx2(void) { return 0; }
attn_i8_quantize_fn attn_i8_quantize_row_avx2(void) { return 0; }
attn_i8_colsum_fn attn_i8_colsum_avx2(void) { return 0; }
#endif
