/* The softmax phases of the AVX2 f32 flash forward tile (one group of MR = 6
 * rows x one key block of BC = 64 keys, every key allowed: the fused tile's
 * case), as straight-line regions for llvm-mca. This file includes the
 * kernel source, so the code analysed is the kernel's own inlined code,
 * compiled with the kernel's flags; it is never linked (tools/mca/mca_flash.sh
 * compiles it with -S only). The GEMM loops are taken from the kernel's own
 * object instead (they are loops; a marker inside would split them). */
#include "kernels/arch/avx2/sdpa_flash_avx2.c"

#define MCA_BEGIN(name) __asm__ volatile("# LLVM-MCA-BEGIN " name ::: "memory")
#define MCA_END(name) __asm__ volatile("# LLVM-MCA-END " name ::: "memory")

/* s [MR, BC]: raw scores in, p out; m, l [MR]; alpha [MR] */
ATTN_AVX2 void mca_softmax_avx2(float *s, float scale, float *m, float *l, float *alpha) {
  softmax_state st;
  MCA_BEGIN("avx2_max");
  softmax_max(MR, 1, 0, NULL, 0.0f, s, scale, NULL, NULL, m, &st);
  MCA_END("avx2_max");
  MCA_BEGIN("avx2_exp");
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
    softmax_exp_row(s, r, &st);
  MCA_END("avx2_exp");
  MCA_BEGIN("avx2_finish");
  softmax_finish(MR, &st, m, l, alpha);
  MCA_END("avx2_finish");
}
