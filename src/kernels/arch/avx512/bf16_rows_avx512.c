/* AVX-512 epilogue piece of the bf16 Linear GEMMs (dense_bf16.h): the same
 * values as attn_nn_bf16_epi_piece_generic (f32 arithmetic in the same order;
 * bf16 rounding to nearest even, as attn_f32_to_bf16 for non-NaN). */
#include "kernels/rows/elementwise_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>


/* f32 -> bf16, round to nearest even; NaN -> quiet NaN (attn_f32_to_bf16) */
ATTN_AVX512 static inline __m256i to_bf16(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q));
}

ATTN_AVX512 void attn_bf16_epi_piece_avx512(const attn_bf16_piece *p, int64_t rows, int64_t n) {
  for (int64_t c = 0; c < n; c += 16) {
    __mmask16 m = n - c >= 16 ? 0xffff : (__mmask16)((1u << (n - c)) - 1u);
    __m512 b = p->bias ? _mm512_maskz_loadu_ps(m, p->bias + c) : _mm512_setzero_ps();
    __m512 sum = _mm512_setzero_ps();
    const float *t = p->t + c;
    const uint16_t *mk = p->mask ? p->mask + c : NULL;
    float *C = p->C ? p->C + c : NULL;
    uint16_t *H = p->H ? p->H + c : NULL;
    for (int64_t r = 0; r < rows; r++) {
      __m512 v = _mm512_maskz_loadu_ps(m, t);
      if (p->bias) v = _mm512_add_ps(v, b);
      if (p->relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      if (mk) {
        __m256i h = _mm256_maskz_loadu_epi16(m, mk);
        v = _mm512_maskz_mov_ps(_mm256_test_epi16_mask(h, _mm256_set1_epi16(0x7fff)), v);
        mk += p->ldm;
      }
      if (C) {
        _mm512_mask_storeu_ps(C, m, p->add ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, C), v) : v);
        C += p->ldc;
      }
      if (H) {
        _mm256_mask_storeu_epi16(H, m, to_bf16(v));
        H += p->ldh;
      }
      if (p->sum) sum = _mm512_add_ps(sum, v);
      t += p->ldt;
    }
    if (p->sum) _mm512_mask_storeu_ps(p->sum + c, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, p->sum + c), sum));
  }
}

ATTN_AVX512 void attn_bf16_convert_rows_avx512(const float *x, int64_t ldx, uint16_t *y, int64_t ldy,
                                        int64_t rows, int64_t cols, float *sum) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    uint16_t *yr = y + r * ldy;
    for (int64_t c = 0; c < cols; c += 16) {
      __mmask16 m = cols - c >= 16 ? 0xffff : (__mmask16)((1u << (cols - c)) - 1u);
      __m512 v = _mm512_maskz_loadu_ps(m, xr + c);
      _mm256_mask_storeu_epi16(yr + c, m, to_bf16(v));
      if (sum) _mm512_mask_storeu_ps(sum + c, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, sum + c), v));
    }
  }
}
#endif
