/* fp16 GEMM entry points: f16 operands converted to f32 while packing, then
 * the f32 micro-kernels (AVX-512 14x32 or the portable 4x16 of gemm.c) —
 * f32 accumulation throughout (see include/attn/lowp.h for why not
 * AVX512_FP16 arithmetic). The two f32 descriptors here also serve the
 * portable bf16 path. */
#include "kernels/gemm_internal.h"
#include "kernels/gemm_lowp_internal.h"
#include "kernels/kern.h"

static void ukr_f32_portable(int64_t kcp, const void *a, const void *b, void *tile) {
  const attn_gemm_kernel_f32 *k = attn_gemm_kernel_generic_f32();
  k->ukr(kcp, a, b, tile, k->nr, 1.0f, 0.0f);
}

static const attn_lowp_kernel portable_kernel = {
    .name = "portable f32 4x16",
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
    .name = "avx512 f32 14x32",
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
