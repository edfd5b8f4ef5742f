/* arm64 NEON GEMM micro-kernel and packers: an 8x12 block of C held in 24
 * q-register accumulators (8 rows x 3 vectors of 4 columns).
 *
 * Per k step the kernel loads 2 q-registers of packed A (8 rows) and 3 of
 * packed B (12 columns) and issues 24 FMLA (by element: row i of C takes
 * lane i % 4 of A's register i / 4 times each B vector), so 24 FMAs of 4
 * lanes (96 multiply-adds) per 5 loads (80 bytes). Registers: 24 accumulators
 * + 2 A + 3 B = 29 of the 32 v-registers, nothing spilled. objdump of the
 * loop (gcc 12, -O2): 32 instructions per k step: LDP q + LDP q + LDR q (the
 * 5 registers), 24 FMLA, 3 adds (two pointers, the counter), CMP, B.NE.
 *
 * Expected fraction of peak, with the panels in L1 (loads are never the
 * limit: 3 load instructions, 80 bytes, per k step):
 *  - Neoverse N1 / N2, Cortex-A76 (2 x 128-bit FMA pipes, FMLA latency 4):
 *    the 24 FMAs take 12 cycles; 24 independent chains cover the 8 FMAs in
 *    flight the pipes need; 32 instructions in 12 cycles is 2.7 per cycle on
 *    a 4-5 wide front end; the loads take 3 of 24 load-pipe slots: ~95%
 *    of peak (16 flop/cycle).
 *  - Neoverse V1 / V2, Apple M1 (4 x 128-bit FMA pipes, latency 4): 6
 *    cycles of FMA per k step, 16 chains needed (24 available), 32
 *    instructions in 6 cycles (5.3 per cycle) on an 8-wide front end, 3
 *    loads on 3 load pipes: ~85-90% of peak (32 flop/cycle); there the loop
 *    overhead (5 of the 32) is what a 2-step unroll would trim.
 * The edge of the driver's loops (the C tile loaded and stored once per kc
 * steps: 24 loads and stores against 24 kc FMAs) costs ~2% at kc = 256.
 *
 * Blocking (the driver in gemm.c loops ir over rows outside jr over
 * columns): the a~ micro-panel [kc, 8] (8 KB at kc = 256) stays in L1 while
 * the b~ micro-panels [kc, 12] (12 KB each) stream from L2 through the 64 KB
 * L1d; the b~ block [kc, nc] = 256 x 480 floats (480 KB) sits in half of a
 * 1 MB L2 (N1, V1; M1's 12 MB L2 takes it easily); the a~ block [mc, kc]
 * (384 KB) is read once per b~ pass and may live in L2 or the L3 / SLC.
 *
 * Packers: contiguous rows of op(X) are copied 4 lanes at a time; the
 * transposed cases go through 4x4 register transposes (TRN1/TRN2 on 32 and
 * 64 bits), so every row of the source is read 16 bytes at a time. Partial
 * panels (the last rows / columns) use the portable packers. */
#include "kernels/kern.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "kernels/arch/neon/transpose4_neon.h"

enum { NEON_MR = 8, NEON_NR = 12 };

/* rows i of C: c[i][0..2] += b0..b2 * lane L of A register av */
#define NEON_ROW(i, av, L)                                                                         \
  c##i##0 = vfmaq_laneq_f32(c##i##0, b0, av, L);                                                   \
  c##i##1 = vfmaq_laneq_f32(c##i##1, b1, av, L);                                                   \
  c##i##2 = vfmaq_laneq_f32(c##i##2, b2, av, L)

/* row i of C := alpha acc (+ beta c) */
#define NEON_STORE(i)                                                                              \
  do {                                                                                             \
    float *ci = c + (i)*ldc;                                                                       \
    if (beta == 0.0f) {                                                                            \
      vst1q_f32(ci, vmulq_f32(va, c##i##0));                                                       \
      vst1q_f32(ci + 4, vmulq_f32(va, c##i##1));                                                   \
      vst1q_f32(ci + 8, vmulq_f32(va, c##i##2));                                                   \
    } else {                                                                                       \
      vst1q_f32(ci, vfmaq_f32(vmulq_f32(vb, vld1q_f32(ci)), va, c##i##0));                         \
      vst1q_f32(ci + 4, vfmaq_f32(vmulq_f32(vb, vld1q_f32(ci + 4)), va, c##i##1));                 \
      vst1q_f32(ci + 8, vfmaq_f32(vmulq_f32(vb, vld1q_f32(ci + 8)), va, c##i##2));                 \
    }                                                                                              \
  } while (0)

/* c[8, 12] = alpha * a~[kc, 8] · b~[kc, 12] + beta * c. Named accumulators
 * (not an array) so that the lane arguments are constants and the compiler
 * keeps all 24 in registers. */
static void ukr_neon_8x12(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          float alpha, float beta) {
  float32x4_t c00 = vdupq_n_f32(0), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
  float32x4_t c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
  float32x4_t c40 = c00, c41 = c00, c42 = c00, c50 = c00, c51 = c00, c52 = c00;
  float32x4_t c60 = c00, c61 = c00, c62 = c00, c70 = c00, c71 = c00, c72 = c00;
  for (int64_t p = 0; p < kc; p++) {
    float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
    float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
    NEON_ROW(0, a0, 0);
    NEON_ROW(1, a0, 1);
    NEON_ROW(2, a0, 2);
    NEON_ROW(3, a0, 3);
    NEON_ROW(4, a1, 0);
    NEON_ROW(5, a1, 1);
    NEON_ROW(6, a1, 2);
    NEON_ROW(7, a1, 3);
    a += NEON_MR;
    b += NEON_NR;
  }
  const float32x4_t va = vdupq_n_f32(alpha), vb = vdupq_n_f32(beta);
  NEON_STORE(0);
  NEON_STORE(1);
  NEON_STORE(2);
  NEON_STORE(3);
  NEON_STORE(4);
  NEON_STORE(5);
  NEON_STORE(6);
  NEON_STORE(7);
}

/* 4 rows src + r*ld (r < 4) over depth [0, kc), written transposed:
 * dst[p*dst_ld + r]; depth in steps of 4 through attn_transpose4_neon, the rest one
 * element at a time. */
static void pack4_transposed(const float *src, int64_t ld, int64_t kc, float *dst, int64_t dst_ld) {
  const float *s0 = src, *s1 = src + ld, *s2 = src + 2 * ld, *s3 = src + 3 * ld;
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    float32x4_t o[4];
    attn_transpose4_neon(vld1q_f32(s0 + p), vld1q_f32(s1 + p), vld1q_f32(s2 + p), vld1q_f32(s3 + p),
                         o);
    vst1q_f32(dst + (p + 0) * dst_ld, o[0]);
    vst1q_f32(dst + (p + 1) * dst_ld, o[1]);
    vst1q_f32(dst + (p + 2) * dst_ld, o[2]);
    vst1q_f32(dst + (p + 3) * dst_ld, o[3]);
  }
  for (; p < kc; p++) {
    float *d = dst + p * dst_ld;
    d[0] = s0[p];
    d[1] = s1[p];
    d[2] = s2[p];
    d[3] = s3[p];
  }
}

static void pack_a_neon(int transa, const float *A, int64_t lda, int64_t i0, int64_t mc, int64_t p0,
                        int64_t kc, int mr, float *dst) {
  for (int64_t ir = 0; ir < mc; ir += NEON_MR, dst += NEON_MR * kc) {
    if (mc - ir < NEON_MR) { /* last, partial panel: zero rows past mc */
      attn_gemm_pack_a_generic_f32(transa, A, lda, i0 + ir, mc - ir, p0, kc, NEON_MR, dst);
      break;
    }
    if (transa) { /* A [K, M]: op(A) column p is row p of A, contiguous */
      const float *src = A + p0 * lda + i0 + ir;
      for (int64_t p = 0; p < kc; p++) {
        vst1q_f32(dst + p * NEON_MR, vld1q_f32(src + p * lda));
        vst1q_f32(dst + p * NEON_MR + 4, vld1q_f32(src + p * lda + 4));
      }
    } else { /* A [M, K]: rows ir.. transposed, 4 at a time */
      const float *src = A + (i0 + ir) * lda + p0;
      pack4_transposed(src, lda, kc, dst, NEON_MR);
      pack4_transposed(src + 4 * lda, lda, kc, dst + 4, NEON_MR);
    }
  }
}

static void pack_b_neon(int transb, const float *B, int64_t ldb, int64_t p0, int64_t kc, int64_t j0,
                        int64_t nc, int nr, float *dst) {
  for (int64_t jr = 0; jr < nc; jr += NEON_NR, dst += NEON_NR * kc) {
    if (nc - jr < NEON_NR) { /* last, partial panel: zero columns past nc */
      attn_gemm_pack_b_generic_f32(transb, B, ldb, p0, kc, j0 + jr, nc - jr, NEON_NR, dst);
      break;
    }
    if (transb) { /* B [N, K]: columns jr.. are rows of B, transposed 4 at a time */
      const float *src = B + (j0 + jr) * ldb + p0;
      for (int q = 0; q < NEON_NR / 4; q++)
        pack4_transposed(src + 4 * q * ldb, ldb, kc, dst + 4 * q, NEON_NR);
    } else { /* B [K, N]: rows contiguous */
      const float *src = B + p0 * ldb + j0 + jr;
      for (int64_t p = 0; p < kc; p++) {
        const float *s = src + p * ldb;
        float *d = dst + p * NEON_NR;
        vst1q_f32(d, vld1q_f32(s));
        vst1q_f32(d + 4, vld1q_f32(s + 4));
        vst1q_f32(d + 8, vld1q_f32(s + 8));
      }
    }
  }
}

static const attn_gemm_kernel_f32 neon_kernel = {
    .name = "neon 8x12",
    .mr = NEON_MR,
    .nr = NEON_NR,
    .mc = 8 * 48, /* a~ block 384 KB (L2 or L3), packed once per k block */
    .kc = 256,    /* a~ micro-panel 8 KB stays in L1; b~ micro-panels of 12 KB stream */
    .nc = 480,    /* b~ block 480 KB, half of a 1 MB L2 */
    .ukr = ukr_neon_8x12,
    .pack_a = pack_a_neon,
    .pack_b = pack_b_neon,
};

const attn_gemm_kernel_f32 *attn_gemm_kernel_neon_f32(void) { return &neon_kernel; }

#else

const attn_gemm_kernel_f32 *attn_gemm_kernel_neon_f32(void) { return 0; }

#endif
