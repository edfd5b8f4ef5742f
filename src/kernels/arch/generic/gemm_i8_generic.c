/* The portable int8 micro-kernel, u8 x s8 -> s32 (exact), of the int8 GEMM
 * (gemm_i8.c, its packed layouts in gemm_lowp_internal.h). */
#include "kernels/lowp/gemm_lowp_internal.h"

enum { MR = 4, NR = 32 }; /* nr = 32 like the SIMD / AMX kernels: one prepacked B for all */

/* tile[4, 32] = a~[kcp/4][4][4] · b~[kcp/4][32][4] in s32 */
static void ukr_i8_portable(int64_t kcp, const void *av, const void *bv, void *tv) {
  const uint8_t *a = av;
  const int8_t *b = bv;
  int32_t acc[MR][NR] = {{0}};
  for (int64_t p = 0; p < kcp; p += 4) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++)
        for (int q = 0; q < 4; q++) acc[i][j] += (int32_t)a[i * 4 + q] * (int32_t)b[j * 4 + q];
    a += 4 * MR;
    b += 4 * NR;
  }
  int32_t *t = tv;
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) t[i * NR + j] = acc[i][j];
}

static const attn_lowp_kernel portable_kernel = {
    .name = "portable i8 4x32", .path = "portable",
    .mr = MR, .nr = NR, .ga = 4, .gb = 4, .kgroup = 4,
    .mc = 128, .kc = 512, .nc = 512,
    .pa = LOWP_U8, .pb = LOWP_S8, .int_acc = 1,
    .ukr = ukr_i8_portable,
};

const attn_lowp_kernel *attn_lowp_kernel_i8_portable(void) { return &portable_kernel; }
