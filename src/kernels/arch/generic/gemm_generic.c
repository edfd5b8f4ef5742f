/* Portable GEMM pieces: the C micro-kernel the packed driver uses when the
 * CPU has no AVX-512 (or ATTN_CPU=generic), the packers, and the unpacked
 * small path. */
#include <math.h>
#include <string.h>

#include "kernels/gemm/gemm_internal.h"
#include "kernels/rows/elementwise_internal.h"
#include "kernels/util.h"


enum { GEN_MR = 4, GEN_NR = 16 };

/* One multiply-add of the micro-kernel: fused where the target has a fast
 * fmaf (arm64; x86-64 built with FMA), since gcc does not contract a*b+c in
 * ISO C mode; a separate multiply and add elsewhere (x86-64 baseline: SSE2
 * has no FMA, and a library fmaf would be slow). Either way a given build
 * always rounds the same way. */
#if defined(FP_FAST_FMAF) || defined(__FP_FAST_FMAF)
#define GEN_MADD(a, b, c) fmaf(a, b, c)
#else
#define GEN_MADD(a, b, c) ((a) * (b) + (c))
#endif

/* c[4, 16] = alpha * a~[kc, 4] · b~[kc, 16] + beta * c.
 * The k step is unrolled completely so that gcc -O2 keeps the 64
 * accumulators in registers and vectorises them as 16 4-wide vectors
 * (straight-line SLP): on arm64 16 fmla by lane per k step plus three
 * loads, in 21 of the 32 vector registers; with SSE2 (16 xmm) some
 * accumulators spill to L1, which still beats the memory-resident
 * accumulator block a loop nest gives. The store loops are left as loops:
 * unrolling them too makes gcc split one accumulator vector into lanes. */
static void ukr_generic_4x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                             float alpha, float beta) {
  float acc[GEN_MR][GEN_NR];
#pragma GCC unroll 4
  for (int i = 0; i < GEN_MR; i++)
#pragma GCC unroll 16
    for (int j = 0; j < GEN_NR; j++) acc[i][j] = 0.0f;
  for (int64_t p = 0; p < kc; p++) {
#pragma GCC unroll 4
    for (int i = 0; i < GEN_MR; i++)
#pragma GCC unroll 16
      for (int j = 0; j < GEN_NR; j++) acc[i][j] = GEN_MADD(a[i], b[j], acc[i][j]);
    a += GEN_MR;
    b += GEN_NR;
  }
  for (int i = 0; i < GEN_MR; i++) {
    float *ci = c + i * ldc;
    if (beta == 0.0f)
      for (int j = 0; j < GEN_NR; j++) ci[j] = alpha * acc[i][j];
    else
      for (int j = 0; j < GEN_NR; j++) ci[j] = alpha * acc[i][j] + beta * ci[j];
  }
}

void attn_gemm_pack_a_generic_f32(int transa, const float *A, int64_t lda, int64_t i0, int64_t mc,
                                  int64_t p0, int64_t kc, int mr, float *dst) {
  for (int64_t ir = 0; ir < mc; ir += mr, dst += (int64_t)mr * kc) {
    int rows = (int)attn_min64(mr, mc - ir);
    if (rows < mr) memset(dst, 0, sizeof(float) * (size_t)(mr * kc));
    if (transa) { /* A [K, M]: row p holds A(., p) contiguously */
      for (int64_t p = 0; p < kc; p++) {
        const float *src = A + (p0 + p) * lda + i0 + ir;
        for (int r = 0; r < rows; r++) dst[p * mr + r] = src[r];
      }
    } else { /* A [M, K] */
      for (int r = 0; r < rows; r++) {
        const float *src = A + (i0 + ir + r) * lda + p0;
        for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = src[p];
      }
    }
  }
}

void attn_gemm_pack_b_generic_f32(int transb, const float *B, int64_t ldb, int64_t p0, int64_t kc,
                                  int64_t j0, int64_t nc, int nr, float *dst) {
  for (int64_t jr = 0; jr < nc; jr += nr, dst += (int64_t)nr * kc) {
    int cols = (int)attn_min64(nr, nc - jr);
    if (cols < nr) memset(dst, 0, sizeof(float) * (size_t)(nr * kc));
    if (transb) { /* B [N, K]: row j holds B(., j) contiguously */
      for (int c = 0; c < cols; c++) {
        const float *src = B + (j0 + jr + c) * ldb + p0;
        for (int64_t p = 0; p < kc; p++) dst[p * nr + c] = src[p];
      }
    } else { /* B [K, N] */
      for (int64_t p = 0; p < kc; p++)
        memcpy(dst + p * nr, B + (p0 + p) * ldb + j0 + jr, sizeof(float) * (size_t)cols);
    }
  }
}

static const attn_gemm_kernel_f32 generic_kernel = {
    .name = "generic 4x16",
    .mr = GEN_MR,
    .nr = GEN_NR,
    .mc = 512, /* a~ block 512 KB: b~ is repacked once per 512 rows, not per 128 */
    .kc = 256,
    .nc = 512,
    .ukr = ukr_generic_4x16,
    .pack_a = attn_gemm_pack_a_generic_f32,
    .pack_b = attn_gemm_pack_b_generic_f32,
};

const attn_gemm_kernel_f32 *attn_gemm_kernel_generic_f32(void) { return &generic_kernel; }

/* Small path: no packing, one f32 accumulator per element summed in order
 * p = 0..K-1 and the same alpha/beta expression as the reference, so the
 * result is bit-identical to attn_gemm_f32_ref. Columns go in chunks so the
 * inner loop runs over contiguous accumulators. */
enum { SMALL_CHUNK = 64 };

void attn_gemm_small_f32(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc) {
  float acc[SMALL_CHUNK];
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j0 = 0; j0 < N; j0 += SMALL_CHUNK) {
      int64_t nj = N - j0 < SMALL_CHUNK ? N - j0 : SMALL_CHUNK;
      for (int64_t j = 0; j < nj; j++) acc[j] = 0.0f;
      for (int64_t p = 0; p < K; p++) {
        float a = transa ? A[p * lda + i] : A[i * lda + p];
        if (transb) {
          const float *bp = B + j0 * ldb + p; /* column p of B [N, K] */
          for (int64_t j = 0; j < nj; j++) acc[j] += a * bp[j * ldb];
        } else {
          const float *bp = B + p * ldb + j0; /* row p of B [K, N] */
          for (int64_t j = 0; j < nj; j++) acc[j] += a * bp[j];
        }
      }
      float *c = C + i * ldc + j0;
      if (beta == 0.0f)
        for (int64_t j = 0; j < nj; j++) c[j] = alpha * acc[j];
      else
        for (int64_t j = 0; j < nj; j++) c[j] = alpha * acc[j] + beta * c[j];
    }
  }
}

/* attn_row_ops.gemv_nt: the small path on one row (a at stride inca) */
void attn_gemv_nt_generic(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                          const float *B, int64_t ldb, float beta, float *c) {
  attn_gemm_small_f32(inca != 1, 1, 1, N, K, alpha, a, inca != 1 ? inca : K, B, ldb, beta, c, N);
}
