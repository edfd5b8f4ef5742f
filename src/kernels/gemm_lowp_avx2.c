/* AVX2 pieces of the low-precision GEMM driver (gemm_lowp.c): the f32
 * alpha/beta epilogue and the interleave of depth pairs / quads that packs
 * a row-contiguous operand. Same results as the portable code (the
 * epilogue's multiplies and add are not fused, as there). */
#include "kernels/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include "kernels/avx2_internal.h"

/* c = alpha * t + beta * c (beta == 0: c = alpha * t), as the scalar
 * epilogue. The driver's next tile is most often the next ldt columns of
 * the same rows: their lines of C are fetched now, while the next
 * micro-kernel runs (the f32 GEMM's micro-kernel prefetches its own C). */
AVX2_TARGET void attn_lowp_epi_f32_avx2(const attn_lowp_epi *e, const void *t, int ldt,
                                        int64_t i0, int64_t j0, int64_t rows, int64_t cols,
                                        int first) {
  const float *tile = t;
  const float beta = first ? e->beta : 1.0f;
  const __m256 va = _mm256_set1_ps(e->alpha), vb = _mm256_set1_ps(beta);
  for (int64_t r = 0; r < rows; r++) {
    float *c = (float *)e->C + (i0 + r) * e->ldc + j0;
    _mm_prefetch((const char *)(c + ldt), _MM_HINT_T1);
    _mm_prefetch((const char *)(c + 2 * ldt - 1), _MM_HINT_T1);
    const float *tr = tile + r * ldt;
    for (int64_t j = 0; j < cols; j += 8) {
      __m256 v = _mm256_mul_ps(va, attn_load8(tr + j, cols - j));
      if (beta != 0.0f) v = _mm256_add_ps(v, _mm256_mul_ps(vb, attn_load8(c + j, cols - j)));
      attn_store8(c + j, cols - j, v);
    }
  }
}

/* out[r] = the g runs at t (run i at t + i*w elements) interleaved: g = 2
 * runs of 16-bit values or g = 4 runs of bytes, element r of run i in bits
 * [i*32/g, (i+1)*32/g) of word r */
AVX2_TARGET void attn_lowp_interleave_avx2(const void *t, int g, int64_t w, int64_t n,
                                           uint32_t *out) {
  int64_t r = 0;
  if (g == 2) {
    const uint16_t *a = t, *b = a + w;
    for (; r + 16 <= n; r += 16) {
      __m256i lo = _mm256_loadu_si256((const __m256i *)(a + r));
      __m256i hi = _mm256_loadu_si256((const __m256i *)(b + r));
      __m256i x = _mm256_permute4x64_epi64(lo, 0xD8), y = _mm256_permute4x64_epi64(hi, 0xD8);
      _mm256_storeu_si256((__m256i *)(out + r), _mm256_unpacklo_epi16(x, y));
      _mm256_storeu_si256((__m256i *)(out + r + 8), _mm256_unpackhi_epi16(x, y));
    }
    for (; r < n; r++) out[r] = (uint32_t)a[r] | (uint32_t)b[r] << 16;
  } else {
    const uint8_t *a = t, *b = a + w, *c = b + w, *d = c + w;
    for (; r + 16 <= n; r += 16) {
      __m128i va = _mm_loadu_si128((const __m128i *)(a + r));
      __m128i vb = _mm_loadu_si128((const __m128i *)(b + r));
      __m128i vc = _mm_loadu_si128((const __m128i *)(c + r));
      __m128i vd = _mm_loadu_si128((const __m128i *)(d + r));
      __m128i ab0 = _mm_unpacklo_epi8(va, vb), ab1 = _mm_unpackhi_epi8(va, vb);
      __m128i cd0 = _mm_unpacklo_epi8(vc, vd), cd1 = _mm_unpackhi_epi8(vc, vd);
      _mm_storeu_si128((__m128i *)(out + r), _mm_unpacklo_epi16(ab0, cd0));
      _mm_storeu_si128((__m128i *)(out + r + 4), _mm_unpackhi_epi16(ab0, cd0));
      _mm_storeu_si128((__m128i *)(out + r + 8), _mm_unpacklo_epi16(ab1, cd1));
      _mm_storeu_si128((__m128i *)(out + r + 12), _mm_unpackhi_epi16(ab1, cd1));
    }
    for (; r < n; r++)
      out[r] = (uint32_t)a[r] | (uint32_t)b[r] << 8 | (uint32_t)c[r] << 16 | (uint32_t)d[r] << 24;
  }
}
#endif
