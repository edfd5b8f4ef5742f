/* AVX2 + FMA GEMM micro-kernel and packers (no AVX-512 instruction: this
 * code must run on Haswell-class CPUs).
 *
 * Register blocking 6x16: a 6-row by 16-column block of C lives in 12 ymm
 * accumulators; per k step two 8-wide loads of packed B and six broadcasts
 * of packed A feed 12 FMAs. That uses 15 of the 16 ymm registers (12
 * accumulators, 2 B vectors, 1 broadcast) and keeps 12 independent FMA
 * chains in flight, more than the 2 pipes x 4-5 cycles of FMA latency need.
 * Of the shapes that fit in 16 registers only 4x24 needs fewer loads per
 * FMA (7 vs 8 per 12), and 6x16's b~ row is one 64-byte line per k step.
 *
 * Measured on the 2-core Zen 4 (32 KB L1d, 1 MB L2 per core, whose 256-bit
 * FMA peak equals its AVX-512 one): the micro-kernel alone runs at ~99% of
 * the FMA peak with its panels in L1 and ~95% with b~ streaming from L2;
 * whole 1024^3 and Transformer-shaped products at 84-90% on one thread, as
 * fast as the AVX-512 14x32 kernel there. */
#include "kernels/kern.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"
#include "kernels/util.h"


enum { AVX2_MR = 6, AVX2_NR = 16 };

#define INLINE_AVX2 ATTN_AVX2 static inline __attribute__((always_inline))

/* c[6, 16] = alpha * A · b~[kc, 16] + beta * c, A(r, p) = a[r*rs + p*cs]
 * (r < 6, p < kc): the packed a~ [kc, 6] (rs 1, cs 6) or six rows of A
 * itself (rs lda, cs 1). The same FMAs in the same order either way. */
INLINE_AVX2 void ukr_6x16(int64_t kc, const float *a, int64_t rs, int64_t cs, const float *b,
                          float *c, int64_t ldc, float alpha, float beta) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  /* C rows are 64 bytes but need not be line-aligned: two lines each */
  for (int i = 0; i < AVX2_MR; i++) {
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + 15), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; p++) {
    /* b~ streams from L2 one line per k step, in order: the hardware
     * prefetcher keeps up (a software prefetch here measured no gain) */
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), ai;
    ai = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(ai, b0, c00);
    c01 = _mm256_fmadd_ps(ai, b1, c01);
    ai = _mm256_broadcast_ss(a + rs);
    c10 = _mm256_fmadd_ps(ai, b0, c10);
    c11 = _mm256_fmadd_ps(ai, b1, c11);
    ai = _mm256_broadcast_ss(a + 2 * rs);
    c20 = _mm256_fmadd_ps(ai, b0, c20);
    c21 = _mm256_fmadd_ps(ai, b1, c21);
    ai = _mm256_broadcast_ss(a + 3 * rs);
    c30 = _mm256_fmadd_ps(ai, b0, c30);
    c31 = _mm256_fmadd_ps(ai, b1, c31);
    ai = _mm256_broadcast_ss(a + 4 * rs);
    c40 = _mm256_fmadd_ps(ai, b0, c40);
    c41 = _mm256_fmadd_ps(ai, b1, c41);
    ai = _mm256_broadcast_ss(a + 5 * rs);
    c50 = _mm256_fmadd_ps(ai, b0, c50);
    c51 = _mm256_fmadd_ps(ai, b1, c51);
    a += cs;
    b += AVX2_NR;
  }
  __m256 acc[AVX2_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  __m256 va = _mm256_set1_ps(alpha);
  if (beta == 0.0f) { /* C is write-only: NaN there must not leak in */
#pragma GCC unroll 6
    for (int i = 0; i < AVX2_MR; i++) {
      _mm256_storeu_ps(c + i * ldc, _mm256_mul_ps(va, acc[i][0]));
      _mm256_storeu_ps(c + i * ldc + 8, _mm256_mul_ps(va, acc[i][1]));
    }
  } else {
    __m256 vb = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int i = 0; i < AVX2_MR; i++) {
      float *ci = c + i * ldc;
      _mm256_storeu_ps(ci, _mm256_fmadd_ps(va, acc[i][0], _mm256_mul_ps(vb, _mm256_loadu_ps(ci))));
      _mm256_storeu_ps(ci + 8,
                       _mm256_fmadd_ps(va, acc[i][1], _mm256_mul_ps(vb, _mm256_loadu_ps(ci + 8))));
    }
  }
}

/* c[6, 16] = alpha * a~[kc, 6] · b~[kc, 16] + beta * c */
ATTN_AVX2 void attn_gemm_ukr_avx2_6x16(int64_t kc, const float *a, const float *b, float *c,
                                       int64_t ldc, float alpha, float beta) {
  ukr_6x16(kc, a, 1, AVX2_MR, b, c, ldc, alpha, beta);
}

/* The same from 6 rows of A in place, lda apart (gemm_ukr.h ukr_rows) */
ATTN_AVX2 static void ukr_rows_avx2_6x16(int64_t kc, const float *a, int64_t lda, const float *b,
                                         float *c, int64_t ldc, float alpha, float beta) {
  ukr_6x16(kc, a, lda, 1, b, c, ldc, alpha, beta);
}

/* Lanes [0, n) set (n clamped to [0, 8]), for maskload, which reads nothing
 * in the other lanes and zeroes them. */
ATTN_AVX2 static inline __m256i lane_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n < 8 ? n : 8)), idx);
}

/* r[i] = src[i*ld + 0..7] for i < nrows, zero for the others. The rows of a
 * panel are 8 streams a page or more apart, which the hardware prefetcher
 * follows late: ask for the lines PF_AHEAD floats on. */
enum { PF_AHEAD = 64 };
INLINE_AVX2 void load_rows8(const float *src, int64_t ld, int64_t nrows, __m256 r[8]) {
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    if (i < nrows) {
      _mm_prefetch((const char *)(src + i * ld + PF_AHEAD), _MM_HINT_T0);
      r[i] = _mm256_loadu_ps(src + i * ld);
    } else {
      r[i] = _mm256_setzero_ps();
    }
  }
}

/* The k tail (np < 8) of a transposed pack, off the hot path: t[q][i] =
 * src[i*ld + q] for i < nrows and q < np, zero elsewhere. */
ATTN_AVX2 static void transpose_tail(const float *src, int64_t ld, int64_t nrows, int64_t np,
                                       float t[8][8]) {
  __m256 r[8];
  __m256i m = lane_mask(np);
  for (int i = 0; i < 8; i++)
    r[i] = i < nrows ? _mm256_maskload_ps(src + i * ld, m) : _mm256_setzero_ps();
  attn_transpose8_ps(r);
  for (int q = 0; q < 8; q++)
    _mm256_storeu_ps(t[q], r[q]);
}

/* Line p of each of nrows rows a stride ld apart. A transposed pack walks a
 * panel's rows only kc floats each, too short for the hardware prefetcher
 * to ramp up: while it packs one panel it asks for the lines of the next
 * (a whole panel of lead time; ~3.8 cycles per float without, Zen 3). */
INLINE_AVX2 void prefetch_rows(const float *src, int64_t ld, int64_t nrows) {
  for (int64_t i = 0; i < nrows; i++)
    _mm_prefetch((const char *)(src + i * ld), _MM_HINT_T0);
}

/* mr = 6: a~[p*6 + r]. A row of a~ is stored with one 8-wide store whose
 * two extra lanes land on the next row, which its own store overwrites
 * later; the panel's last row is stored as 4 + 2 so nothing is written
 * past the panel. */
INLINE_AVX2 void store6(float *dst, __m256 v, int last) {
  if (!last) {
    _mm256_storeu_ps(dst, v);
  } else {
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
    _mm_storel_pi((__m64 *)(dst + 4), _mm256_extractf128_ps(v, 1));
  }
}

/* Contiguous sources are packed a group of panels at a time, row by row of
 * the source: each source row is read a few lines at once and each panel
 * is written in order, with only a few streams open on either side. */
enum { A_GROUP = 8, B_GROUP = 4 };

/* Successive source rows of a group are a row stride apart, often a page or
 * more, where the hardware prefetcher does not follow: without help each
 * row's few lines are a demand miss, and the copy waits on memory latency
 * (~4 cycles per float measured on Zen 3). Ask for the row PF_ROWS on. */
enum { PF_ROWS = 8 };
INLINE_AVX2 void prefetch_span(const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm_prefetch((const char *)(src + i), _MM_HINT_T0);
  _mm_prefetch((const char *)(src + n - 1), _MM_HINT_T0);
}

ATTN_AVX2 static void pack_a_avx2(int transa, const float *A, int64_t lda, int64_t i0, int64_t mc,
                                    int64_t p0, int64_t kc, int mr, float *dst) {
  if (transa) { /* A [K, M]: op(A) column p is row p of A */
    for (int64_t ig = 0; ig < mc; ig += A_GROUP * AVX2_MR) {
      int64_t iend = mc - ig < A_GROUP * AVX2_MR ? mc : ig + A_GROUP * AVX2_MR;
      for (int64_t p = 0; p < kc; p++) {
        const float *src = A + (p0 + p) * lda + i0;
        if (p + PF_ROWS < kc) prefetch_span(src + PF_ROWS * lda + ig, iend - ig);
        for (int64_t ir = ig; ir < iend; ir += AVX2_MR) {
          /* 8 wide while that stays inside op(A); rows past mc read as zero */
          __m256 v = ir + 8 <= mc ? _mm256_loadu_ps(src + ir)
                                  : _mm256_maskload_ps(src + ir, lane_mask(mc - ir));
          store6(dst + ir * kc + p * AVX2_MR, v, p == kc - 1);
        }
      }
    }
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += AVX2_MR, dst += AVX2_MR * kc) { /* A [M, K]: transposed */
    int64_t n = mc - ir < AVX2_MR ? mc - ir : AVX2_MR;
    const float *src = A + (i0 + ir) * lda + p0;
    int64_t next = attn_min64(AVX2_MR, mc - ir - AVX2_MR), p = 0;
    for (; p + 8 <= kc; p += 8) {
      if (!(p & 15)) prefetch_rows(src + AVX2_MR * lda + p, lda, next);
      __m256 r[8];
      load_rows8(src + p, lda, n, r);
      attn_transpose8_ps(r);
      float *d = dst + p * AVX2_MR;
#pragma GCC unroll 7
      for (int q = 0; q < 7; q++)
        _mm256_storeu_ps(d + q * AVX2_MR, r[q]);
      store6(d + 7 * AVX2_MR, r[7], p + 8 == kc);
    }
    if (p < kc) {
      float t[8][8];
      transpose_tail(src + p, lda, n, kc - p, t);
      for (int64_t q = 0; q < kc - p; q++)
        for (int i = 0; i < AVX2_MR; i++)
          dst[(p + q) * AVX2_MR + i] = t[q][i];
    }
  }
}

/* nr = 16: b~[p*16 + c], every row one aligned 64-byte line. */
ATTN_AVX2 static void pack_b_avx2(int transb, const float *B, int64_t ldb, int64_t p0, int64_t kc,
                                    int64_t j0, int64_t nc, int nr, float *dst) {
  if (!transb) { /* B [K, N]: row p of B holds row p of every panel */
    for (int64_t jg = 0; jg < nc; jg += B_GROUP * AVX2_NR) {
      int64_t jend = nc - jg < B_GROUP * AVX2_NR ? nc : jg + B_GROUP * AVX2_NR;
      for (int64_t p = 0; p < kc; p++) {
        const float *src = B + (p0 + p) * ldb + j0;
        if (p + PF_ROWS < kc) prefetch_span(src + PF_ROWS * ldb + jg, jend - jg);
        for (int64_t jr = jg; jr < jend; jr += AVX2_NR) {
          float *d = dst + jr * kc + p * AVX2_NR;
          if (jr + AVX2_NR <= nc) {
            _mm256_store_ps(d, _mm256_loadu_ps(src + jr));
            _mm256_store_ps(d + 8, _mm256_loadu_ps(src + jr + 8));
          } else { /* columns past nc zero */
            _mm256_store_ps(d, _mm256_maskload_ps(src + jr, lane_mask(nc - jr)));
            _mm256_store_ps(d + 8, _mm256_maskload_ps(src + jr + 8, lane_mask(nc - jr - 8)));
          }
        }
      }
    }
    return;
  }
  for (int64_t jr = 0; jr < nc; jr += AVX2_NR, dst += AVX2_NR * kc) {
    /* B [N, K]: columns jr.. are rows of B, transposed as two 8-row halves */
    int64_t n = nc - jr < AVX2_NR ? nc - jr : AVX2_NR;
    const float *src = B + (j0 + jr) * ldb + p0;
    int64_t next = attn_min64(AVX2_NR, nc - jr - AVX2_NR), p = 0;
    for (; p + 8 <= kc; p += 8) {
      if (!(p & 15)) prefetch_rows(src + AVX2_NR * ldb + p, ldb, next);
#pragma GCC unroll 2
      for (int g = 0; g < 2; g++) {
        __m256 r[8];
        load_rows8(src + 8 * g * ldb + p, ldb, n - 8 * g, r);
        attn_transpose8_ps(r);
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++)
          _mm256_store_ps(dst + (p + q) * AVX2_NR + 8 * g, r[q]);
      }
    }
    if (p < kc) {
      for (int g = 0; g < 2; g++) {
        float t[8][8];
        transpose_tail(src + 8 * g * ldb + p, ldb, n - 8 * g, kc - p, t);
        for (int64_t q = 0; q < kc - p; q++)
          _mm256_store_ps(dst + (p + q) * AVX2_NR + 8 * g, _mm256_loadu_ps(t[q]));
      }
    }
  }
}

static const attn_gemm_kernel_f32 avx2_kernel = {
    .name = "avx2 6x16",
    .mr = AVX2_MR,
    .nr = AVX2_NR,
    .mc = 6 * 192, /* a~ block 1.7 MB (L3), packed once per k block: 1024 rows (the
                    * Transformer layer's tokens) in one block, so that one thread
                    * packs b~ once, not twice */
    .kc = 384,     /* a~ micro-panel 9 KB stays in L1; b~ micro-panel 24 KB streams from L2 */
    .nc = 512,     /* b~ block 768 KB of the 1 MB L2 (less on a smaller L2: gemm_internal.h) */
    .ukr = attn_gemm_ukr_avx2_6x16,
    .ukr_rows = ukr_rows_avx2_6x16,
    .pack_a = pack_a_avx2,
    .pack_b = pack_b_avx2,
};

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx2_f32(void) { return &avx2_kernel; }

#else

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx2_f32(void) { return 0; }

#endif
