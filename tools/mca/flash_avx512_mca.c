/* The softmax of the AVX-512 f32 flash forward tile (one group of MR = 6
 * rows x BC = 64 keys, scores in 24 zmm, every key allowed), as a region for
 * llvm-mca: the kernel's own inlined code (this file includes the kernel
 * source; compiled with -S only by tools/mca/mca_flash.py, never linked). The
 * scores enter from memory here; in the tile they are the q·kᵀ
 * accumulators. */
#include "kernels/arch/avx512/sdpa_flash_avx512.c"

#define MCA_BEGIN(name) __asm__ volatile("# LLVM-MCA-BEGIN " name ::: "memory")
#define MCA_END(name) __asm__ volatile("# LLVM-MCA-END " name ::: "memory")

ATTN_AVX512 void mca_softmax_avx512(const float *t0, float *s, float scale, float *m, float *l,
                                    float *alpha) {
  __m512 t[MR][4];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      t[r][c] = _mm512_loadu_ps(t0 + r * BC + 16 * c);
  MCA_BEGIN("avx512_softmax");
  const __m512 vs = _mm512_set1_ps(scale);
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      t[r][c] = _mm512_mul_ps(vs, t[r][c]);
  softmax_rows(MR, t, s, m, l, alpha);
  MCA_END("avx512_softmax");
}
