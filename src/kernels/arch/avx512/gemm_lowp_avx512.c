/* AVX-512 pieces of the low-precision GEMMs: the bf16 / f16 conversions the
 * packers run (same bits as the scalar conversions in tensor.c, except that
 * a signalling f16 NaN comes out quiet) and the f32 alpha/beta epilogue. */
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>


/* round to nearest even on the dropped 16 bits; NaN -> quiet NaN */
ATTN_AVX512 static __m256i f32_to_bf16_16(__m512 x) {
  __m512i u = _mm512_castps_si512(x);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q));
}

ATTN_AVX512 void attn_lowp_f32_to_bf16_avx512(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(y + i), f32_to_bf16_16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(y + i, m, f32_to_bf16_16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

ATTN_AVX512 void attn_lowp_bf16_to_f32_avx512(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(v, 16));
  }
  for (; i < n; i++) y[i] = attn_bf16_to_f32(x[i]);
}

ATTN_AVX512 void attn_lowp_f16_to_f32_avx512(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
  for (; i < n; i++) y[i] = attn_f16_to_f32(x[i]);
}

/* f32 through bf16 (the portable path of the bf16 GEMM from f32 operands) */
ATTN_AVX512 void attn_lowp_f32_round_bf16_avx512(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i h = _mm512_cvtepu16_epi32(f32_to_bf16_16(_mm512_loadu_ps(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(h, 16));
  }
  for (; i < n; i++) y[i] = attn_bf16_to_f32(attn_f32_to_bf16(x[i]));
}

ATTN_AVX512 void attn_lowp_interleave_avx512(const void *t, int g, int64_t w, int64_t n,
                                             uint32_t *out) {
  for (int64_t r = 0; r < n; r += 16) {
    __mmask16 m = n - r >= 16 ? 0xffff : (__mmask16)((1u << (n - r)) - 1);
    __m512i v;
    if (g == 2) {
      const uint16_t *a = (const uint16_t *)t + r;
      __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, a));
      __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, a + w));
      v = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
    } else {
      const uint8_t *a = (const uint8_t *)t + r;
      __m512i b0 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a));
      __m512i b1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a + w));
      __m512i b2 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a + 2 * w));
      __m512i b3 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a + 3 * w));
      v = _mm512_or_si512(_mm512_or_si512(b0, _mm512_slli_epi32(b1, 8)),
                          _mm512_or_si512(_mm512_slli_epi32(b2, 16), _mm512_slli_epi32(b3, 24)));
    }
    _mm512_mask_storeu_epi32(out + r, m, v);
  }
}

/* c = alpha * t + beta * c (beta == 0: c = alpha * t), as the scalar epilogue */
ATTN_AVX512 void attn_lowp_epi_f32_avx512(const attn_lowp_epi *e, const void *t, int ldt,
                                          int64_t i0, int64_t j0, int64_t rows, int64_t cols,
                                          int first) {
  const float *tile = t;
  float beta = first ? e->beta : 1.0f;
  __m512 va = _mm512_set1_ps(e->alpha), vb = _mm512_set1_ps(beta);
  for (int64_t r = 0; r < rows; r++) {
    float *c = (float *)e->C + (i0 + r) * e->ldc + j0;
    const float *tr = tile + r * ldt;
    for (int64_t j = 0; j < cols; j += 16) {
      __mmask16 m = cols - j >= 16 ? 0xffff : (__mmask16)((1u << (cols - j)) - 1);
      __m512 v = _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, tr + j));
      if (beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, c + j)));
      _mm512_mask_storeu_ps(c + j, m, v);
    }
  }
}

/* ---- AMX A panels from a row-contiguous source (op(A) stored K x M) ----- */

/* r[j] (16 words each) <- the 16 x 16 transpose of r[i] (32-bit words) */
ATTN_AVX512 static void transpose16_epi32(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) { /* u[i + c]: column 4l + c of rows i..i+3, lane l */
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; c++) {
    __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
    __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
    __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
    r[4 + c] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
  }
}

/* 16 values of source depth row p (rows r .. r+15, n valid) as 16 bf16 in
 * the low halves of 32-bit lanes (zeros past n) */
ATTN_AVX512 static __m512i load_row16(const void *x, int f32, int64_t off, int64_t n) {
  if (n <= 0) return _mm512_setzero_si512();
  __mmask16 m = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
  if (f32) return _mm512_cvtepu16_epi32(f32_to_bf16_16(_mm512_maskz_loadu_ps(m, (const float *)x + off)));
  return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)x + off));
}

ATTN_AVX512 void attn_lowp_pack_t32_avx512(const void *x, int f32, int64_t sp, int64_t nrows,
                                           int64_t kc, int64_t kcp, uint16_t *dst) {
  for (int64_t rb = 0; rb < nrows; rb += 32) {
    uint16_t *panel = dst + rb * kcp;
    for (int64_t q = 0; q < kcp; q += 32) {
      uint16_t *blk = panel + q * 32;
      for (int64_t rr = 0; rr < 32; rr += 16) {
        int64_t n = nrows - rb - rr;
        __m512i w[16];
        for (int i = 0; i < 16; i++) { /* depth pair (q + 2i, q + 2i + 1) */
          int64_t p = q + 2 * i;
          __m512i lo = p < kc ? load_row16(x, f32, p * sp + rb + rr, n) : _mm512_setzero_si512();
          __m512i hi = p + 1 < kc ? load_row16(x, f32, (p + 1) * sp + rb + rr, n)
                                  : _mm512_setzero_si512();
          w[i] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
        }
        transpose16_epi32(w); /* w[j]: row rb + rr + j, its 32 depth values */
        for (int j = 0; j < 16; j++) _mm512_storeu_si512(blk + (rr + j) * 32, w[j]);
      }
    }
  }
}
#endif
