/* fp16 GEMM entry points: f16 operands converted to f32 while packing, then
 * the f32 micro-kernels (AVX-512 14x32, AVX2 6x16 or the portable 4x16) —
 * f32 accumulation throughout (see include/attn/lowp.h for why not
 * AVX512_FP16 arithmetic). The f32 descriptors here also serve the bf16
 * GEMM where the level has no bf16 dot product (bf16 widened to f32 while
 * packing: the avx2 level, AVX-512 without AVX512_BF16) and its portable
 * path. */
#include "kernels/gemm/gemm_internal.h"
#include "kernels/lowp/gemm_lowp_internal.h"
#include "kernels/kern.h"

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
const attn_lowp_kernel *attn_lowp_kernel_f32_avx512(void) { return NULL; }
const attn_lowp_kernel *attn_lowp_kernel_f32_avx2(void) { return NULL; }
#endif

attn_status attn_gemm_f16_path(attn_lowp_path path, int transa, int transb, int64_t M, int64_t N,
                               int64_t K, float alpha, const uint16_t *A, int64_t lda,
                               const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  return attn_lowp_gemm_f32out("gemm_f16", "f16", path, transa, transb, M, N, K, alpha, A,
                               LOWP_F16, lda, B, LOWP_F16, ldb, beta, C, ldc);
}

attn_status attn_gemm_f16(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                          float beta, float *C, int64_t ldc) {
  return attn_gemm_f16_path(ATTN_LOWP_AUTO, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta,
                            C, ldc);
}
