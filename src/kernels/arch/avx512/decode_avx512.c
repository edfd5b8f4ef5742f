/* Decode attention's AVX-512 micro-kernels (decode_ukr.h). A K row is
 * loaded 16 lanes at a time and widened in the register (f16: VCVTPH2PS;
 * bf16: a 16-bit shift; int8: VPMOVSXBD + VCVTDQ2PS), then multiplied into
 * up to 8 query rows' accumulators (one horizontal sum per row and key); a
 * V row likewise into up to 8 rows' output accumulators, which stay in
 * registers across the block's keys. Each row of the cache is thus read
 * and converted once per tile of 8 query rows (once per group for GQA with
 * Hq / Hkv x Lq <= 8). Tails: masked loads. */
#include "kernels/kern.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "attn/tensor.h"
#include "kernels/arch/isa_targets.h"

enum { NB = ATTN_DECODE_NB };

/* elements c..c+15 of a row (lanes of m; others 0), widened to f32 */
ATTN_AVX512_INLINE __m512 load16(int dt, const void *row, int64_t c, __mmask16 m) {
  switch (dt) {
  case ATTN_F16:
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + c));
  case ATTN_BF16:
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + c)), 16));
  case ATTN_I8:
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, (const int8_t *)row + c)));
  default:
    return _mm512_maskz_loadu_ps(m, (const float *)row + c);
  }
}

ATTN_AVX512_INLINE __m512 load16_full(int dt, const void *row, int64_t c) {
  switch (dt) {
  case ATTN_F16:
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + c)));
  case ATTN_BF16:
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + c))),
        16));
  case ATTN_I8:
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const int8_t *)row + c))));
  default:
    return _mm512_loadu_ps((const float *)row + c);
  }
}

/* scores of RT query rows (q: their first) against the block's keys */
ATTN_AVX512_INLINE void scores_tile(const attn_decode_block *b, const float *q, float *s, int dt,
                                    int RT) {
  const int64_t D = b->D, Df = D & ~(int64_t)15;
  const __mmask16 tm = (__mmask16)((1u << (D - Df)) - 1);
  for (int j = 0; j < b->n; j++) {
    const void *kr = b->k[j];
    __m512 a[8];
    for (int r = 0; r < RT; r++) a[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < Df; c += 16) {
      const __m512 kv = load16_full(dt, kr, c);
      for (int r = 0; r < RT; r++) a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(q + r * D + c), kv, a[r]);
    }
    if (Df < D) {
      const __m512 kv = load16(dt, kr, Df, tm);
      for (int r = 0; r < RT; r++)
        a[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, q + r * D + Df), kv, a[r]);
    }
    for (int r = 0; r < RT; r++) s[r * NB + j] = _mm512_reduce_add_ps(a[r]);
  }
}

/* RT rows' output accumulators (acc: their first) += p · the block's values */
ATTN_AVX512_INLINE void pv_tile(const attn_decode_block *b, const float *p, const float *corr,
                                float *acc, int dt, int RT) {
  const int64_t Dv = b->Dv;
  for (int64_t c = 0; c < Dv; c += 16) {
    const int full = Dv - c >= 16;
    const __mmask16 m = full ? (__mmask16)0xFFFF : (__mmask16)((1u << (Dv - c)) - 1);
    __m512 a[8];
    for (int r = 0; r < RT; r++)
      a[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + r * Dv + c), _mm512_set1_ps(corr[r]));
    for (int j = 0; j < b->n; j++) {
      const __m512 vv = full ? load16_full(dt, b->v[j], c) : load16(dt, b->v[j], c, m);
      for (int r = 0; r < RT; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(p[r * NB + j]), vv, a[r]);
    }
    for (int r = 0; r < RT; r++) _mm512_mask_storeu_ps(acc + r * Dv + c, m, a[r]);
  }
}

/* all R rows in tiles of 8, 4, 2, 1 */
ATTN_AVX512_INLINE void scores_rows(const attn_decode_block *b, const float *q, int64_t R, float *s,
                                    int dt) {
  int64_t r = 0;
  for (; R - r >= 8; r += 8) scores_tile(b, q + r * b->D, s + r * NB, dt, 8);
  if (R - r >= 4) scores_tile(b, q + r * b->D, s + r * NB, dt, 4), r += 4;
  if (R - r >= 2) scores_tile(b, q + r * b->D, s + r * NB, dt, 2), r += 2;
  if (R - r >= 1) scores_tile(b, q + r * b->D, s + r * NB, dt, 1);
}

ATTN_AVX512_INLINE void pv_rows(const attn_decode_block *b, const float *p, const float *corr,
                                int64_t R, float *acc, int dt) {
  int64_t r = 0;
  for (; R - r >= 8; r += 8) pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 8);
  if (R - r >= 4) pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 4), r += 4;
  if (R - r >= 2) pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 2), r += 2;
  if (R - r >= 1) pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 1);
}

/* one instance per dtype (the constant makes the compiler drop the others' loads) */
ATTN_AVX512 static void scores_avx512(const attn_decode_block *b, const float *q, int64_t R,
                                      float *s) {
  switch (b->dtype) {
  case ATTN_F16: scores_rows(b, q, R, s, ATTN_F16); break;
  case ATTN_BF16: scores_rows(b, q, R, s, ATTN_BF16); break;
  case ATTN_I8: scores_rows(b, q, R, s, ATTN_I8); break;
  default: scores_rows(b, q, R, s, ATTN_F32);
  }
}

ATTN_AVX512 static void pv_avx512(const attn_decode_block *b, const float *p, const float *corr,
                                  int64_t R, float *acc) {
  switch (b->dtype) {
  case ATTN_F16: pv_rows(b, p, corr, R, acc, ATTN_F16); break;
  case ATTN_BF16: pv_rows(b, p, corr, R, acc, ATTN_BF16); break;
  case ATTN_I8: pv_rows(b, p, corr, R, acc, ATTN_I8); break;
  default: pv_rows(b, p, corr, R, acc, ATTN_F32);
  }
}

static const attn_decode_ops ops = {"avx512", scores_avx512, pv_avx512};

const attn_decode_ops *attn_decode_ops_avx512(void) { return &ops; }
#else
const attn_decode_ops *attn_decode_ops_avx512(void) { return 0; }
#endif
