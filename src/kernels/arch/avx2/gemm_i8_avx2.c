/* AVX2 int8 micro-kernel (u8 x s8 -> s32, exact): a 4x32 s32 block of C.
 *
 * AVX2 has no VPDPBUSD, and VPMADDUBSW saturates (a pair of u8 x s8
 * products reaches 2 * 255 * 128 > 32767), so both operands are widened to
 * 16 bits — a~ zero-extended, b~ sign-extended — and multiplied with
 * VPMADDWD, whose pair sums (at most 65280) and s32 lanes are exact: 16
 * multiply-adds per instruction, as many as an 8-wide FMA.
 *
 * Packed layouts (gemm_lowp_internal.h, g = 4): a~ [kcp/4][4 rows][4 u8],
 * b~ [kcp/4][32 columns][4 s8], the layout every int8 kernel reads (the
 * quantized Linear prepacks its weights once for all). A b~ depth quad of 4
 * columns sign-extends (VPMOVSXBW) into one ymm [c0: b0 b1 b2 b3, c1: ...];
 * a row's quad, zero-extended once per micro-panel into a16, is broadcast as
 * 64 bits [a0 a1 a2 a3] x 4; VPMADDWD of the two gives per column two s32
 * partial sums (depths 0-1 and 2-3), accumulated apart and added at the end
 * (VPHADDD). Columns go in 4 passes of 8 (4 rows x 2 accumulators, 2 b~
 * vectors: 12 of the 16 ymm), each reading its quarter of every b~ row. */
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"

enum { MR = 4, NR = 32, CH = 128 /* depth quads per a16 chunk: 4 KB */ };

/* acc[r][2 h + s]: partial sums (s = depths 0-1, 2-3) of columns 8 p + 4 h ..
 * + 3 of row r, 8 lanes per (r, p, h): [MR][NR / 4][8] s32 */
AVX2_TARGET static void ukr_i8_avx2_4x32(int64_t kcp, const void *av, const void *bv, void *tv) {
  const uint8_t *a = av;
  const int8_t *b = bv;
  int32_t *t = tv;
  int16_t a16[CH * MR * 4] __attribute__((aligned(32)));
  __m256i part[MR][NR / 4];
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < NR / 4; c++)
      part[r][c] = _mm256_setzero_si256();
  for (int64_t q0 = 0; q0 < kcp / 4; q0 += CH) {
    const int64_t nq = kcp / 4 - q0 < CH ? kcp / 4 - q0 : CH;
    for (int64_t q = 0; q < nq; q++) /* the 4 rows' quads of one depth step: 16 bytes */
      _mm256_store_si256((__m256i *)(a16 + q * 16),
                         _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(a + (q0 + q) * 16))));
    const int8_t *bq = b + q0 * 4 * NR;
#pragma GCC unroll 1
    for (int p = 0; p < NR / 8; p++) {
      __m256i c00 = part[0][2 * p], c01 = part[0][2 * p + 1], c10 = part[1][2 * p],
              c11 = part[1][2 * p + 1], c20 = part[2][2 * p], c21 = part[2][2 * p + 1],
              c30 = part[3][2 * p], c31 = part[3][2 * p + 1];
      const int8_t *bp = bq + 32 * p;
      const int16_t *ap = a16;
      for (int64_t q = 0; q < nq; q++, bp += 4 * NR, ap += 16) {
        __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)bp));
        __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bp + 16)));
        __m256i x;
        x = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(ap + 0)));
        c00 = _mm256_add_epi32(_mm256_madd_epi16(x, b0), c00);
        c01 = _mm256_add_epi32(_mm256_madd_epi16(x, b1), c01);
        x = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(ap + 4)));
        c10 = _mm256_add_epi32(_mm256_madd_epi16(x, b0), c10);
        c11 = _mm256_add_epi32(_mm256_madd_epi16(x, b1), c11);
        x = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(ap + 8)));
        c20 = _mm256_add_epi32(_mm256_madd_epi16(x, b0), c20);
        c21 = _mm256_add_epi32(_mm256_madd_epi16(x, b1), c21);
        x = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(ap + 12)));
        c30 = _mm256_add_epi32(_mm256_madd_epi16(x, b0), c30);
        c31 = _mm256_add_epi32(_mm256_madd_epi16(x, b1), c31);
      }
      part[0][2 * p] = c00, part[0][2 * p + 1] = c01, part[1][2 * p] = c10;
      part[1][2 * p + 1] = c11, part[2][2 * p] = c20, part[2][2 * p + 1] = c21;
      part[3][2 * p] = c30, part[3][2 * p + 1] = c31;
    }
  }
  /* VPHADDD of columns 0-3 and 4-7 gives [c0 c1 c4 c5 | c2 c3 c6 c7] */
  for (int r = 0; r < MR; r++)
    for (int p = 0; p < NR / 8; p++) {
      __m256i s = _mm256_hadd_epi32(part[r][2 * p], part[r][2 * p + 1]);
      _mm256_store_si256((__m256i *)(t + r * NR + 8 * p), _mm256_permute4x64_epi64(s, 0xD8));
    }
}

/* Row 0 of the tile alone (one-row tiles: one-token inference): its quad
 * widened and broadcast once per depth step, the 32 columns in 8
 * accumulators; the same sums as ukr_i8_avx2_4x32's row 0 (exact). */
AVX2_TARGET static void ukr_i8_avx2_1x32(int64_t kcp, const void *av, const void *bv, void *tv) {
  const uint8_t *a = av;
  const int8_t *b = bv;
  int32_t *t = tv;
  __m256i c[NR / 4];
  for (int i = 0; i < NR / 4; i++)
    c[i] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kcp / 4; q++, a += 4 * MR, b += 4 * NR) {
    int32_t quad;
    memcpy(&quad, a, 4);
    const __m256i x = _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(quad)));
#pragma GCC unroll 8
    for (int i = 0; i < NR / 4; i++) {
      __m256i bi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16 * i)));
      c[i] = _mm256_add_epi32(_mm256_madd_epi16(x, bi), c[i]);
    }
  }
  for (int p = 0; p < NR / 8; p++) {
    __m256i s = _mm256_hadd_epi32(c[2 * p], c[2 * p + 1]);
    _mm256_store_si256((__m256i *)(t + 8 * p), _mm256_permute4x64_epi64(s, 0xD8));
  }
}

static const attn_lowp_kernel kernel = {
    .name = "avx2 i8 4x32 (vpmaddwd)",
    .path = "avx2_i16",
    .mr = MR,
    .nr = NR,
    .ga = 4,
    .gb = 4,
    .kgroup = 4,
    .mc = 4 * 96,
    .kc = 512,
    .nc = 1024,
    .pa = LOWP_U8,
    .pb = LOWP_S8,
    .int_acc = 1,
    .ukr = ukr_i8_avx2_4x32,
    .ukr_row = ukr_i8_avx2_1x32,
};

const attn_lowp_kernel *attn_lowp_kernel_i8_avx2(void) { return &kernel; }
#else
const attn_lowp_kernel *attn_lowp_kernel_i8_avx2(void) { return NULL; }
#endif
