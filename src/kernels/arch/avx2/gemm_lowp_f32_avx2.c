/* The avx2 level's f32 micro-kernel (gemm_avx2.c, 6x16) as the kernel of
 * the fp16 and bf16 GEMMs (f16 / bf16 converted to f32 while packing,
 * gemm_lowp.c). NULL where the build has no x86 code. */
#include "kernels/kern.h"
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
/* The avx2 level's 6x16 (gemm_avx2.c) with its blocking: a~ 6 x 384 (9 KB)
 * in L1, b~ 384 x 512 (768 KB) in L2; a~ blocks twice the f32 GEMM's (2.4
 * MB, streamed from L3 once per b~ block: b~ is packed half as often). Its
 * own packer converts in registers (attn_lowp_pack_f32_avx2) and whole
 * tiles go straight into C (ukr_c), so the bf16 / fp16 GEMM does the f32
 * GEMM's work. Measured on Zen 4, one thread: a~ blocks of 6 x 128 (the
 * f32 GEMM's) 1-3 % slower; kc 256 or 512, nc 320-512, or the ir loop
 * inside jr (b~ micro-panel in L1, a~ from L2) no faster, within noise or
 * (the last) 4-6 % slower. */
static void ukr_f32_avx2(int64_t kcp, const void *a, const void *b, void *tile) {
  attn_gemm_ukr_avx2_6x16(kcp, a, b, tile, 16, 1.0f, 0.0f);
}

static const attn_lowp_kernel avx2_kernel = {
    .name = "avx2 f32 6x16", .path = "avx2_f32fma",
    .mr = 6, .nr = 16, .ga = 1, .gb = 1, .kgroup = 1,
    .mc = 6 * 256, .kc = 384, .nc = 512,
    .pa = LOWP_F32, .pb = LOWP_F32, .int_acc = 0,
    .ukr = ukr_f32_avx2,
    .ukr_c = attn_gemm_ukr_avx2_6x16,
    .pack = attn_lowp_pack_f32_avx2,
};

const attn_lowp_kernel *attn_lowp_kernel_f32_avx2(void) {
  const attn_gemm_kernel_f32 *k = attn_gemm_kernel_avx2_f32();
  return k && k->mr == 6 && k->nr == 16 ? &avx2_kernel : NULL;
}
#else
const attn_lowp_kernel *attn_lowp_kernel_f32_avx2(void) { return NULL; }
#endif
