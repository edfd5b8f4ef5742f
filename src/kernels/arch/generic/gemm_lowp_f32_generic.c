/* The portable micro-kernel of the fp16 GEMM and of the bf16 GEMM's
 * portable path (f16 / bf16 converted to f32 while packing, gemm_lowp.c):
 * the f32 GEMM's portable 4x16 (gemm_generic.c). The entry points are
 * gemm_f16.c's and gemm_bf16.c's. */
#include "kernels/kern.h"
#include "kernels/lowp/gemm_lowp_internal.h"

static void ukr_f32_portable(int64_t kcp, const void *a, const void *b, void *tile) {
  const attn_gemm_kernel_f32 *k = attn_gemm_kernel_generic_f32();
  k->ukr(kcp, a, b, tile, k->nr, 1.0f, 0.0f);
}

static const attn_lowp_kernel portable_kernel = {
    .name = "portable f32 4x16", .path = "portable",
    .mr = 4, .nr = 16, .ga = 1, .gb = 1, .kgroup = 1,
    .mc = 128, .kc = 256, .nc = 512,
    .pa = LOWP_F32, .pb = LOWP_F32, .int_acc = 0,
    .ukr = ukr_f32_portable,
};

const attn_lowp_kernel *attn_lowp_kernel_f32_portable(void) { return &portable_kernel; }
