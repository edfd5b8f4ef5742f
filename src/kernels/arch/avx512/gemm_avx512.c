/* AVX-512 GEMM micro-kernel and packers: a 14x32 block of C held in 28 zmm
 * accumulators; per k step two 16-wide loads from packed B and 14
 * broadcasts from packed A feed 28 FMAs. Selected at run time by gemm.c.
 * Blocking measured on the 2-core Xeon (48 KB L1d, 2 MB L2 per core): in L1
 * the kernel runs at ~85% of the FMA peak, ~80% with b~ streaming from L2. */
#include "kernels/gemm/gemm_ukr.h"

#if defined(__x86_64__)
#include "kernels/arch/avx512/transpose16_avx512.h"
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>


enum { AVX_MR = 14, AVX_NR = 32 };

/* c[14, 32] = alpha * a · b~[kc, 32] + beta * c, where row i of a at depth
 * p is a[i * rs + p * cs]: a~ packed (rs 1, cs 14) or A's rows in place (rs
 * lda, cs 1) */
ATTN_AVX512_INLINE void ukr_14x32(int64_t kc, const float *a, int64_t rs, int64_t cs,
                                  const float *b, float *c, int64_t ldc, float alpha, float beta) {
  __m512 acc0[AVX_MR], acc1[AVX_MR];
#pragma GCC unroll 14
  for (int i = 0; i < AVX_MR; i++) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kc; p++) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    _mm_prefetch((const char *)(b + 8 * AVX_NR), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < AVX_MR; i++) {
      __m512 ai = _mm512_set1_ps(a[i * rs]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
    a += cs;
    b += AVX_NR;
  }
  __m512 va = _mm512_set1_ps(alpha);
  if (beta == 0.0f) {
#pragma GCC unroll 14
    for (int i = 0; i < AVX_MR; i++) {
      _mm512_storeu_ps(c + i * ldc, _mm512_mul_ps(va, acc0[i]));
      _mm512_storeu_ps(c + i * ldc + 16, _mm512_mul_ps(va, acc1[i]));
    }
  } else {
    __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 14
    for (int i = 0; i < AVX_MR; i++) {
      float *ci = c + i * ldc;
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, acc0[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci))));
      _mm512_storeu_ps(ci + 16,
                       _mm512_fmadd_ps(va, acc1[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci + 16))));
    }
  }
}

/* c[14, 32] = alpha * a~[kc, 14] · b~[kc, 32] + beta * c */
ATTN_AVX512 static void ukr_avx512_14x32(int64_t kc, const float *a, const float *b, float *c,
                                         int64_t ldc, float alpha, float beta) {
  ukr_14x32(kc, a, 1, AVX_MR, b, c, ldc, alpha, beta);
}

/* The same from 14 rows of A in place, lda apart (gemm_ukr.h ukr_rows): the
 * same products in the same order */
ATTN_AVX512 static void ukr_rows_avx512_14x32(int64_t kc, const float *a, int64_t lda,
                                              const float *b, float *c, int64_t ldc, float alpha,
                                              float beta) {
  ukr_14x32(kc, a, lda, 1, b, c, ldc, alpha, beta);
}

/* Up to 16 rows of a row-major matrix (rows src + r*ld, r < nrows) over
 * depth [0, kc), written transposed: dst[p*dst_ld + r] for r < width (rows
 * past nrows zero), in 16x16 blocks so every row is read a line at a time. */
ATTN_AVX512 static void pack_transposed(const float *src, int64_t ld, int64_t nrows, int64_t kc,
                                          float *dst, int64_t dst_ld, int width) {
  const __mmask16 wmask = (__mmask16)((1u << width) - 1);
  __m512 r[16], out[16];
  for (int64_t p = 0; p < kc; p += 16) {
    int64_t np = kc - p < 16 ? kc - p : 16;
    __mmask16 pm = (__mmask16)((1u << np) - 1);
    for (int i = 0; i < 16; i++)
      r[i] = i < nrows ? _mm512_maskz_loadu_ps(pm, src + i * ld + p) : _mm512_setzero_ps();
    attn_transpose16_ps(r, out);
    for (int64_t q = 0; q < np; q++) _mm512_mask_storeu_ps(dst + (p + q) * dst_ld, wmask, out[q]);
  }
}

/* Packers for mr = 14, nr = 32: masked 16-wide copies where op(X) rows are
 * contiguous, 16x16 transposes where they are not. Lanes past the edge are
 * zero. */
ATTN_AVX512 static void pack_a_avx512(int transa, const float *A, int64_t lda, int64_t i0,
                                        int64_t mc, int64_t p0, int64_t kc, int mr, float *dst) {
  const __mmask16 store = (1u << AVX_MR) - 1;
  for (int64_t ir = 0; ir < mc; ir += AVX_MR, dst += AVX_MR * kc) {
    int64_t n = mc - ir < AVX_MR ? mc - ir : AVX_MR;
    if (transa) { /* A [K, M]: op(A) column p is row p of A, contiguous */
      __mmask16 m = (__mmask16)((1u << n) - 1);
      const float *src = A + p0 * lda + i0 + ir;
      for (int64_t p = 0; p < kc; p++)
        _mm512_mask_storeu_ps(dst + p * AVX_MR, store, _mm512_maskz_loadu_ps(m, src + p * lda));
    } else { /* A [M, K]: rows ir.. transposed */
      pack_transposed(A + (i0 + ir) * lda + p0, lda, n, kc, dst, AVX_MR, AVX_MR);
    }
  }
}

ATTN_AVX512 static void pack_b_avx512(int transb, const float *B, int64_t ldb, int64_t p0,
                                        int64_t kc, int64_t j0, int64_t nc, int nr, float *dst) {
  for (int64_t jr = 0; jr < nc; jr += AVX_NR, dst += AVX_NR * kc) {
    int64_t n = nc - jr < AVX_NR ? nc - jr : AVX_NR;
    if (transb) { /* B [N, K]: columns jr.. are rows of B, transposed 16 at a time */
      const float *src = B + (j0 + jr) * ldb + p0;
      pack_transposed(src, ldb, n < 16 ? n : 16, kc, dst, AVX_NR, 16);
      pack_transposed(src + 16 * ldb, ldb, n > 16 ? n - 16 : 0, kc, dst + 16, AVX_NR, 16);
    } else { /* B [K, N]: rows contiguous */
      __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
      __mmask16 m1 = n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
      const float *src = B + p0 * ldb + j0 + jr;
      for (int64_t p = 0; p < kc; p++) {
        _mm512_store_ps(dst + p * AVX_NR, _mm512_maskz_loadu_ps(m0, src + p * ldb));
        _mm512_store_ps(dst + p * AVX_NR + 16, _mm512_maskz_loadu_ps(m1, src + p * ldb + 16));
      }
    }
  }
}

static const attn_gemm_kernel_f32 avx512_kernel = {
    .name = "avx512 14x32",
    .mr = AVX_MR,
    .nr = AVX_NR,
    .mc = 14 * 144, /* a~ block 2 MB (L3), packed once per k block */
    .kc = 256,      /* b~ micro-panel 32 KB streams from L2 while a~'s 14 KB stays in L1 */
    .nc = 960,      /* b~ block 1 MB of the 2 MB L2 */
    .ukr = ukr_avx512_14x32,
    .ukr_rows = ukr_rows_avx512_14x32,
    .pack_a = pack_a_avx512,
    .pack_b = pack_b_avx512,
};

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx512_f32(void) { return &avx512_kernel; }

#else

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx512_f32(void) { return 0; }

#endif
