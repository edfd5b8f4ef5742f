/* AVX512_VNNI scores of the int8 flash attention: per 16 keys, 16
 * accumulators (one per key, 16 query lanes each); per depth quad the Q row
 * of the B tile (16 queries x 4 s8) is one zmm and each key's 4 bytes are
 * broadcast. VPDPBUSD multiplies u8 x s8, so the keys go in as k + 128 (xor
 * 0x80) and 128 * sum(q) (the query sums of the packed group) is taken off:
 * the exact s32 of s8 x s8. Dequantized as the other paths. */
#include <string.h>

#include "kernels/sdpa_flash_i8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

VNNI_TARGET static void scores_vnni(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                    const float *sk, float *st) {
  const __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(qp + dc * 1024), 7);
  const __m512 vsq = _mm512_loadu_ps(qp + dc * 1024 + 64);
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
    for (int jj = 0; jj < 16; jj++) {
      __m512 s = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[jj], corr));
      _mm512_storeu_ps(st + (jb + jj) * 16,
                       _mm512_mul_ps(s, _mm512_mul_ps(_mm512_set1_ps(sk[jb + jj]), vsq)));
    }
  }
}

attn_i8_scores_fn attn_flash_i8_scores_vnni(void) { return scores_vnni; }
#else
attn_i8_scores_fn attn_flash_i8_scores_vnni(void) { return 0; }
#endif
