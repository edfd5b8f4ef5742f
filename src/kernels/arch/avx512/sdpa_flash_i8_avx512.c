/* AVX512_VNNI scores of the int8 flash attention: per 16 keys, 16
 * accumulators (one per key, 16 query lanes each); per depth quad the Q row
 * of the B tile (16 queries x 4 s8) is one zmm and each key's 4 bytes are
 * broadcast. VPDPBUSD multiplies u8 x s8, so the keys go in as k + 128 (xor
 * 0x80) and 128 * sum(q) (the query sums of the packed group) is taken off:
 * the exact s32 of s8 x s8. Also the AVX-512 dequantization and row
 * quantizer, which give the bits of the scalar ones (sdpa_flash_i8.c). */
#include <string.h>

#include "kernels/flash/sdpa_flash_i8.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

VNNI_TARGET static void scores_vnni(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                    int32_t *st) {
  const __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(qp + dc * 1024), 7);
  const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
  for (int jb = 0; jb < 64; jb += 16) {
    __m512i acc[16];
    for (int jj = 0; jj < 16; jj++)
      acc[jj] = _mm512_setzero_si512();
    for (int e4 = 0; e4 < 16 * dc; e4++) {
      const __m512i b = _mm512_loadu_si512(qp + (e4 >> 4) * 1024 + (e4 & 15) * 64);
      const int8_t *kc = k + jb * ldk + 4 * e4;
      for (int jj = 0; jj < 16; jj++) {
        int32_t w;
        memcpy(&w, kc + jj * ldk, sizeof w);
        acc[jj] = _mm512_dpbusd_epi32(acc[jj], _mm512_xor_si512(_mm512_set1_epi32(w), flip), b);
      }
    }
    for (int jj = 0; jj < 16; jj++)
      _mm512_storeu_si512(st + (jb + jj) * 16, _mm512_sub_epi32(acc[jj], corr));
  }
}

attn_i8_scores_fn attn_flash_i8_scores_vnni(void) { return scores_vnni; }

__attribute__((target("avx512f"))) static void dequant(const int32_t *s, const float *sk,
                                                       const float *sq, float *st) {
  const __m512 vsq = _mm512_loadu_ps(sq);
  for (int j = 0; j < 64; j++) {
    __m512 x = _mm512_cvtepi32_ps(_mm512_loadu_si512(s + j * 16));
    _mm512_storeu_ps(st + j * 16, _mm512_mul_ps(x, _mm512_mul_ps(_mm512_set1_ps(sk[j]), vsq)));
  }
}

attn_i8_dequant_fn attn_i8_dequant_avx512(void) { return dequant; }


/* The same bits as the scalar quantizer: an exact max, an IEEE division,
 * round to nearest even (vroundscaleps as nearbyintf), clamp, narrow. */
ATTN_AVX512 static int quantize_row(const float *x, int64_t n, int8_t *q, float *scale) {
  const __m512 big = _mm512_set1_ps(3.40282347e38f);
  __m512 m = _mm512_setzero_ps();
  __mmask16 bad = 0;
  int64_t e = 0;
  for (; e < n; e += 16) {
    __mmask16 k = n - e >= 16 ? 0xffff : (__mmask16)((1u << (n - e)) - 1);
    __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(k, x + e));
    bad |= _mm512_cmp_ps_mask(a, big, _CMP_NLE_UQ); /* inf or NaN */
    m = _mm512_max_ps(m, a);
  }
  if (bad) return 1;
  const float s = _mm512_reduce_max_ps(m) / 127.0f;
  *scale = s;
  if (!(s > 0.0f)) {
    memset(q, 0, (size_t)n);
    return 0;
  }
  const __m512 vs = _mm512_set1_ps(s), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (e = 0; e < n; e += 16) {
    __mmask16 k = n - e >= 16 ? 0xffff : (__mmask16)((1u << (n - e)) - 1);
    __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(k, x + e), vs),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
    _mm_mask_storeu_epi8(q + e, k, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(r)));
  }
  return 0;
}

attn_i8_quantize_fn attn_i8_quantize_row_avx512(void) { return quantize_row; }

/* 64 columns at a time in eight f64 accumulators, rows in order. */
__attribute__((target("avx512f,avx512vl"))) static void colsum(const float *x, int64_t ld, int64_t n,
                                                      int64_t D, double *acc) {
  for (int64_t e0 = 0; e0 < D; e0 += 64) {
    __m512d a[8];
    __mmask8 m[8];
    for (int c = 0; c < 8; c++) {
      int64_t left = D - e0 - 8 * c;
      m[c] = left >= 8 ? 0xff : left > 0 ? (__mmask8)((1u << left) - 1) : 0;
      a[c] = _mm512_maskz_loadu_pd(m[c], acc + e0 + 8 * c);
    }
    for (int64_t j = 0; j < n; j++)
      for (int c = 0; c < 8; c++)
        a[c] = _mm512_add_pd(a[c], _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m[c], x + j * ld + e0 + 8 * c)));
    for (int c = 0; c < 8; c++)
      _mm512_mask_storeu_pd(acc + e0 + 8 * c, m[c], a[c]);
  }
}

attn_i8_colsum_fn attn_i8_colsum_avx512(void) { return colsum; }
#else
attn_i8_scores_fn attn_flash_i8_scores_vnni(void) { return 0; }
attn_i8_quantize_fn attn_i8_quantize_row_avx512(void) { return 0; }
attn_i8_dequant_fn attn_i8_dequant_avx512(void) { return 0; }
attn_i8_colsum_fn attn_i8_colsum_avx512(void) { return 0; }
#endif
