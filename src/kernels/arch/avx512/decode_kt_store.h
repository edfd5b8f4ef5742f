/* The end of the K-tiled scores' pass (decode_avx512.c's scores_kt,
 * decode_avx512_bf16.c's scores_kt_bf16): the H interleaved accumulators of
 * each row and tile, a[(h RT + r) T + t], added in the order of h into
 * a[r T + t]; then tile i0 + t's 16 scores of row r stored at the block's
 * keys, s[r NB + j] (lanes of keys outside [0, n) not stored). x86-64 only;
 * inlined into each caller, so that a stays in registers. */
#ifndef ATTN_DECODE_KT_STORE_H
#define ATTN_DECODE_KT_STORE_H

#include <immintrin.h>

#include "kernels/arch/isa_targets.h"
#include "kernels/decode/decode_ukr.h"

ATTN_AVX512_INLINE void attn_decode_kt_store(const attn_decode_block *b, __m512 *a, float *s,
                                             int i0, int H, int RT, int T) {
  enum { NB = ATTN_DECODE_NB };
  DECODE_UNROLL(4)
  for (int h = 1; h < H; h++) {
    DECODE_UNROLL(16)
    for (int i = 0; i < RT * T; i++)
      a[i] = _mm512_add_ps(a[i], a[h * RT * T + i]);
  }
  DECODE_UNROLL(2)
  for (int t = 0; t < T; t++) {
    const int j0 = 16 * (i0 + t) - b->toff; /* the block's key at lane 0 of this tile */
    if (j0 >= 0 && j0 + 16 <= b->n) {
      DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++)
        _mm512_storeu_ps(s + r * NB + j0, a[r * T + t]);
    } else { /* lanes of keys in [0, n) */
      const int lo = j0 < 0 ? -j0 : 0, hi = b->n - j0 < 16 ? b->n - j0 : 16;
      float tmp[16];
      for (int r = 0; r < RT; r++) {
        _mm512_storeu_ps(tmp, a[r * T + t]);
        for (int l = lo; l < hi; l++)
          s[r * NB + j0 + l] = tmp[l];
      }
    }
  }
}

#endif
