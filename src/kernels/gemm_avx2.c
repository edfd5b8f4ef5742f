/* AVX2 + FMA GEMM micro-kernel and packers (no AVX-512 instruction: this
 * code must run on Haswell-class CPUs).
 *
 * Register blocking 6x16: a 6-row by 16-column block of C lives in 12 ymm
 * accumulators; per k step two 8-wide loads of packed B and six broadcasts
 * of packed A feed 12 FMAs. That uses 15 of the 16 ymm registers (12
 * accumulators, 2 B vectors, 1 broadcast) and keeps 12 independent FMA
 * chains in flight, more than the 2 pipes x 4-5 cycles of FMA latency need.
 * Of the shapes that fit in 16 registers it has the best loads per FMA
 * except 4x24 (8 vs 7 per 12), and unlike 4x24 its b~ panel is one 64-byte
 * line per k step. */
#include "kernels/kern.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2,fma")))

enum { AVX2_MR = 6, AVX2_NR = 16 };

/* c[6, 16] = alpha * a~[kc, 6] · b~[kc, 16] + beta * c */
AVX2_TARGET static void ukr_avx2_6x16(int64_t kc, const float *a, const float *b, float *c,
                                      int64_t ldc, float alpha, float beta) {
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
    /* b~ streams from L2 one line per k step; a~ (6 kc floats) stays in L1 */
    _mm_prefetch((const char *)(b + 8 * AVX2_NR), _MM_HINT_T0);
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), ai;
    ai = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(ai, b0, c00);
    c01 = _mm256_fmadd_ps(ai, b1, c01);
    ai = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ai, b0, c10);
    c11 = _mm256_fmadd_ps(ai, b1, c11);
    ai = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ai, b0, c20);
    c21 = _mm256_fmadd_ps(ai, b1, c21);
    ai = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ai, b0, c30);
    c31 = _mm256_fmadd_ps(ai, b1, c31);
    ai = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ai, b0, c40);
    c41 = _mm256_fmadd_ps(ai, b1, c41);
    ai = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ai, b0, c50);
    c51 = _mm256_fmadd_ps(ai, b1, c51);
    a += AVX2_MR;
    b += AVX2_NR;
  }
  __m256 acc[AVX2_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                            {c30, c31}, {c40, c41}, {c50, c51}};
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

/* Lanes [0, n) set, for maskload (which reads nothing in the other lanes). */
AVX2_TARGET static __m256i lane_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), idx);
}

/* out[q] = column q of the 8x8 block r[row] (r[row][q]). */
AVX2_TARGET static void transpose8(const __m256 r[8], __m256 out[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; i++) { /* pairs of rows, interleaved within 128-bit lanes */
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; i++) { /* u[4i+q]: rows 4i..4i+3 at q (low lane) and q+4 (high) */
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int q = 0; q < 4; q++) {
    out[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    out[q + 4] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}

/* Loads rows src + i*ld (i < nrows, others zero) over k [p, p + np), np <= 8,
 * and transposes them: out[q][i] = src[i*ld + p + q]. */
AVX2_TARGET static void load_transposed8(const float *src, int64_t ld, int64_t nrows, int64_t p,
                                         int64_t np, __m256 out[8]) {
  __m256 r[8];
  if (np == 8) {
    for (int i = 0; i < 8; i++)
      r[i] = i < nrows ? _mm256_loadu_ps(src + i * ld + p) : _mm256_setzero_ps();
  } else {
    __m256i m = lane_mask(np);
    for (int i = 0; i < 8; i++)
      r[i] = i < nrows ? _mm256_maskload_ps(src + i * ld + p, m) : _mm256_setzero_ps();
  }
  transpose8(r, out);
}

/* mr = 6: a~[p*6 + r]. Rows are stored with 8-wide stores that spill two
 * lanes into the next row, which the next store overwrites; the panel's
 * last row is stored as 4 + 2 so nothing is written past the panel. */
AVX2_TARGET static void store6(float *dst, __m256 v, int last) {
  if (!last) {
    _mm256_storeu_ps(dst, v);
  } else {
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
    _mm_storel_pi((__m64 *)(dst + 4), _mm256_extractf128_ps(v, 1));
  }
}

AVX2_TARGET static void pack_a_avx2(int transa, const float *A, int64_t lda, int64_t i0, int64_t mc,
                                    int64_t p0, int64_t kc, int mr, float *dst) {
  for (int64_t ir = 0; ir < mc; ir += AVX2_MR, dst += AVX2_MR * kc) {
    int64_t n = mc - ir < AVX2_MR ? mc - ir : AVX2_MR;
    if (transa) { /* A [K, M]: op(A) column p is row p of A, contiguous */
      __m256i m = lane_mask(n);
      const float *src = A + p0 * lda + i0 + ir;
      for (int64_t p = 0; p < kc; p++)
        store6(dst + p * AVX2_MR, _mm256_maskload_ps(src + p * lda, m), p == kc - 1);
    } else { /* A [M, K]: rows ir.. transposed 8 k at a time */
      const float *src = A + (i0 + ir) * lda + p0;
      __m256 out[8];
      for (int64_t p = 0; p < kc; p += 8) {
        int64_t np = kc - p < 8 ? kc - p : 8;
        load_transposed8(src, lda, n, p, np, out);
        for (int64_t q = 0; q < np; q++)
          store6(dst + (p + q) * AVX2_MR, out[q], p + q == kc - 1);
      }
    }
  }
}

/* nr = 16: b~[p*16 + c], every row one aligned 64-byte line. */
AVX2_TARGET static void pack_b_avx2(int transb, const float *B, int64_t ldb, int64_t p0,
                                    int64_t kc, int64_t j0, int64_t nc, int nr, float *dst) {
  for (int64_t jr = 0; jr < nc; jr += AVX2_NR, dst += AVX2_NR * kc) {
    int64_t n = nc - jr < AVX2_NR ? nc - jr : AVX2_NR;
    if (transb) { /* B [N, K]: columns jr.. are rows of B, transposed 8 at a time */
      const float *src = B + (j0 + jr) * ldb + p0;
      __m256 out[8];
      for (int64_t p = 0; p < kc; p += 8) {
        int64_t np = kc - p < 8 ? kc - p : 8;
        for (int g = 0; g < 2; g++) {
          int64_t rows = n - 8 * g;
          load_transposed8(src + 8 * g * ldb, ldb, rows < 0 ? 0 : rows, p, np, out);
          for (int64_t q = 0; q < np; q++) _mm256_store_ps(dst + (p + q) * AVX2_NR + 8 * g, out[q]);
        }
      }
    } else { /* B [K, N]: rows contiguous */
      const float *src = B + p0 * ldb + j0 + jr;
      if (n == AVX2_NR) {
        for (int64_t p = 0; p < kc; p++) {
          _mm256_store_ps(dst + p * AVX2_NR, _mm256_loadu_ps(src + p * ldb));
          _mm256_store_ps(dst + p * AVX2_NR + 8, _mm256_loadu_ps(src + p * ldb + 8));
        }
      } else {
        __m256i m0 = lane_mask(n), m1 = lane_mask(n - 8);
        for (int64_t p = 0; p < kc; p++) {
          _mm256_store_ps(dst + p * AVX2_NR, _mm256_maskload_ps(src + p * ldb, m0));
          _mm256_store_ps(dst + p * AVX2_NR + 8, _mm256_maskload_ps(src + p * ldb + 8, m1));
        }
      }
    }
  }
}

static const attn_gemm_kernel_f32 avx2_kernel = {
    .name = "avx2 6x16",
    .mr = AVX2_MR,
    .nr = AVX2_NR,
    .mc = 6 * 128,
    .kc = 384,
    .nc = 640,
    .ukr = ukr_avx2_6x16,
    .pack_a = pack_a_avx2,
    .pack_b = pack_b_avx2,
};

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx2_f32(void) { return &avx2_kernel; }

#else

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx2_f32(void) { return 0; }

#endif
