/* AVX-512 epilogue row of the bf16 Linear GEMMs (dense_bf16.h): the same
 * values as nn_bf16_epi_row_generic (f32 arithmetic in the same order;
 * bf16 rounding to nearest even, as attn_f32_to_bf16 for non-NaN). */
#include "nn/dense_bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

TARGET void nn_bf16_epi_row_avx512(const nn_bf16_row *r, int64_t n) {
  for (int64_t c = 0; c < n; c += 16) {
    __mmask16 m = n - c >= 16 ? 0xffff : (__mmask16)((1u << (n - c)) - 1u);
    __m512 v = _mm512_maskz_loadu_ps(m, r->t + c);
    if (r->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, r->bias + c));
    if (r->relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
    if (r->mask) {
      __m256i h = _mm256_maskz_loadu_epi16(m, r->mask + c);
      __mmask16 nz = _mm256_test_epi16_mask(h, _mm256_set1_epi16(0x7fff));
      v = _mm512_maskz_mov_ps(nz, v);
    }
    if (r->C) {
      __m512 o = r->add ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, r->C + c), v) : v;
      _mm512_mask_storeu_ps(r->C + c, m, o);
    }
    if (r->H) {
      __m512i u = _mm512_castps_si512(v);
      __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
      __m512i rr = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
      __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                              _mm512_set1_epi32(0x7f800000));
      __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
      _mm256_mask_storeu_epi16(r->H + c, m, _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rr, nan, q)));
    }
    if (r->sum) _mm512_mask_storeu_ps(r->sum + c, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, r->sum + c), v));
  }
}

TARGET void nn_colsum_block_avx512(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                   float *db) {
  __mmask16 m = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u);
  __m512 acc = _mm512_maskz_loadu_ps(m, db);
  for (int64_t r = 0; r < rows; r++) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, x + r * ldx));
  _mm512_mask_storeu_ps(db, m, acc);
}
#endif
