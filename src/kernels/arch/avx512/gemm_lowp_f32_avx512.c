/* The avx512 level's f32 micro-kernel (gemm_avx512.c, 14x32) as the kernel
 * of the fp16 GEMM and of the bf16 GEMM without AVX512_BF16 (f16 / bf16
 * converted to f32 while packing, gemm_lowp.c). NULL where the build has no
 * x86 code. */
#include "kernels/kern.h"
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
static void ukr_f32_avx512(int64_t kcp, const void *a, const void *b, void *tile) {
  const attn_gemm_kernel_f32 *k = attn_gemm_kernel_avx512_f32();
  k->ukr(kcp, a, b, tile, k->nr, 1.0f, 0.0f);
}

static const attn_lowp_kernel avx512_kernel = {
    .name = "avx512 f32 14x32", .path = "avx512_f32fma",
    .mr = 14, .nr = 32, .ga = 1, .gb = 1, .kgroup = 1,
    .mc = 14 * 144, .kc = 256, .nc = 960,
    .pa = LOWP_F32, .pb = LOWP_F32, .int_acc = 0,
    .ukr = ukr_f32_avx512,
};

const attn_lowp_kernel *attn_lowp_kernel_f32_avx512(void) {
  const attn_gemm_kernel_f32 *k = attn_gemm_kernel_avx512_f32();
  return k && k->mr == 14 && k->nr == 32 ? &avx512_kernel : NULL;
}
#else
const attn_lowp_kernel *attn_lowp_kernel_f32_avx512(void) { return NULL; }
#endif
