/* The flash tiles' pack_t on AVX2 (flash_tiles.h): kt [D, BC] = the key (or
 * value) block x [n, D] transposed, columns n..BC-1 zero. 8 keys x 8
 * dimensions at a time through the packers' 8x8 transpose; a copy, so the
 * portable pack_t's bits. One key block per (batch, head) of short
 * sequences costs as much as its tiles: the portable loop's strided
 * gathers and BC - n zero columns per row showed at 1.6 % of g2p training. */
#include "kernels/flash_tiles.h"

#if defined(__x86_64__)
#include "kernels/avx2_internal.h"

enum { BC = ATTN_FLASH_BC };

AVX2_TARGET void attn_flash_pack_t_avx2(int64_t n, int64_t D, const float *x, int64_t ldx,
                                        float *kt) {
  for (int64_t j0 = 0; j0 < BC; j0 += 8) {
    int64_t rows = n - j0 < 0 ? 0 : n - j0 < 8 ? n - j0 : 8;
    int64_t dd = 0;
    if (rows > 0)
      for (; dd + 8 <= D; dd += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; i++)
          r[i] = i < rows ? _mm256_loadu_ps(x + (j0 + i) * ldx + dd) : _mm256_setzero_ps();
        attn_transpose8_ps(r);
        for (int q = 0; q < 8; q++)
          _mm256_storeu_ps(kt + (dd + q) * BC + j0, r[q]);
      }
    for (; dd < D; dd++) { /* the dimensions past a multiple of 8; keys past n: zeros */
      float t[8];
      for (int i = 0; i < 8; i++)
        t[i] = i < rows ? x[(j0 + i) * ldx + dd] : 0.0f;
      _mm256_storeu_ps(kt + dd * BC + j0, _mm256_loadu_ps(t));
    }
  }
}
#endif
