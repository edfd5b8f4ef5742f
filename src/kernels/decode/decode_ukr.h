/* Decode attention's micro-kernels (kern.h's attn_decode_ops, one set per
 * ISA level in kernels/arch/<isa>/decode_<isa>.c): the two loops that touch
 * the cache. The portable loop (decode.c) gathers a block of up to
 * ATTN_DECODE_NB key/value rows (pointers: a block may span pages), calls
 * `scores`, applies the scales, modifiers and the online softmax to the
 * small score tile, then calls `pv`. Each K and V row of the block is
 * converted to f32 once per call and used for all R query rows while it is
 * in registers (R = the group's query heads x Lq). */
#ifndef ATTN_DECODE_UKR_H
#define ATTN_DECODE_UKR_H

#include <stdint.h>

/* key rows per block: the score tile's width, the keys of one online-softmax
 * step and of one pass over the accumulators (32: the per-block work, the
 * rows' maxima and sums, the accumulators' load, correction and store, over
 * twice the keys of 16) */
enum { ATTN_DECODE_NB = 32 };
/* tiles of 16 keys a block of NB keys may touch (it may start mid-tile) */
enum { ATTN_DECODE_NT = ATTN_DECODE_NB / 16 + 1 };

typedef struct {
  int dtype; /* attn_dtype of the rows: ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_I8 */
  int n;     /* rows in the block, 1..ATTN_DECODE_NB */
  int64_t D, Dv;
  const void *k[ATTN_DECODE_NB]; /* row j: D elements */
  const void *v[ATTN_DECODE_NB]; /* row j: Dv elements */
  /* The next block's rows, for micro-kernels that prefetch them while they
   * run (attn_decode_ops.prefetches): pn rows (0: none), pk[j], pv[j]. */
  int pn;
  const void *const *pk, *const *pv;
  float ks[ATTN_DECODE_NB], vs[ATTN_DECODE_NB]; /* int8: the rows' scales (the loop's) */
  /* A tiled cache (attn/decode.h). The int8 tiled layout: k, v, pk, pv unset;
   * key j of the block is lane (toff + j) % 16 of tile (toff + j) / 16; kt[i]
   * that tile's K bytes (16 D), vt[i] its 16 rows of V (4 quads, 16 Dv
   * bytes), i < nt = (toff + n + 15) / 16. The next block's tiles, for the
   * kernels' prefetches: pnt of them (0: none), pkt[i], pvt[i]. The K-tiled
   * layout (f16, bf16): kt[i] the tile of 16 keys, [D][16] elements, key j
   * at lane (toff + j) % 16 of tile (toff + j) / 16; v, pv rows as above, k
   * and pk unset, vt and pvt unset, pkt the next block's tiles. */
  int toff, nt, pnt;
  const void *kt[ATTN_DECODE_NT], *vt[ATTN_DECODE_NT];
  const void *pkt[ATTN_DECODE_NT], *pvt[ATTN_DECODE_NT];
  /* 1: the micro-kernels' prefetches into L2 only (T1), not L1 (the call
   * reads its cache from memory on a CPU that gains by it:
   * attn_cpu_decode_pf_l2); levels may ignore it. Never changes a result. */
  int pf_l2;
} attn_decode_block;

typedef struct {
  const char *name;
  /* 1: scores and pv prefetch the block's pk / pv rows, spread over their
   * arithmetic (the loop then issues no prefetches of its own after the
   * first block); 0: the loop prefetches a block ahead itself */
  int prefetches;
  /* s[r * ATTN_DECODE_NB + j] = sum_d q[r * D + d] * k_j[d] (k_j widened
   * to f32; int8 as its integer value) for r < R, j < n; other entries of s
   * untouched. Any fixed summation order. */
  void (*scores)(const attn_decode_block *b, const float *q, int64_t R, float *s);
  /* acc[r * Dv + c] = acc[r * Dv + c] * corr[r] + sum_{j < n} p[r *
   * ATTN_DECODE_NB + j] * v_j[c] for r < R, c < Dv (v_j widened as above).
   * Any fixed order. */
  void (*pv)(const attn_decode_block *b, const float *p, const float *corr, int64_t R, float *acc);
  /* May be NULL. The online softmax of a plain block (every key of it
   * allowed for every row; no ALiBi, no score-modifier unit) from the score tile s, as
   * decode.c's portable one does it: int8 scores times ks[j]; per row r the
   * max bm over the finite keys (a row whose keys are all -inf and none NaN
   * is left alone: corr[r] = 1, p 0); m' = max(m, bm), corr[r] = e^(m -
   * m') (expf, or the level's exp; exactly 1 where m' = m), p[r * NB + j] =
   * e^(s - m') (times vs[j] for int8; 0 for j >= n), l[r] = l[r] corr[r] +
   * the sum of e^(s - m') (before vs), m[r] = m'. Returns 1 if any row
   * changed. s may be overwritten. */
  int (*softmax)(const attn_decode_block *b, float *s, float *p, int64_t R, float *m, float *l,
                 float *corr);
  /* May be NULL. int8 blocks with D <= ATTN_DECODE_I8DOT_MAX_D through an
   * integer dot product: the R query rows quantised (q8, int8, row r at q8 +
   * r * ldq, zero from D to ldq = D rounded up to 64; qsum[r] = the sum of
   * row r's q8, exact), s[r * NB + j] = (sum_d q8[r][d] k_j[d]) * qscale[r],
   * the integer sum exact. */
  void (*scores_i8)(const attn_decode_block *b, const int8_t *q8, int64_t ldq, const float *qsum,
                    const float *qscale, int64_t R, float *s);
  /* May be NULL. pv's contract for an int8 block through an integer dot
   * product, each row's weights quantised per group of 16 keys (keys 16 g ..
   * 16 g + 15 below n): per row r and group g, w = max over the group of
   * p[r * NB + j] (p >= 0: the softmax's e^(s - m) times vs[j]); if every
   * such w is 0 or in [ATTN_DECODE_I8PV_MIN_W, FLT_MAX] and no weight is
   * negative, then u_j = round-to-nearest-even of p_j (255 / w), an integer
   * in 0..255, and, starting from x = acc[r * Dv + c] corr[r], for each group
   * in order x = fmaf(sum_{j in g} u_j v_j[c], w / 255, x) (the integer sum
   * exact; |error| per key <= w / 510 |v_j[c]|), acc[r * Dv + c] = x;
   * returns 1. Otherwise (NaN, inf, a negative weight, a w too small for
   * 255 / w) nothing is touched and it returns 0: the caller runs pv. */
  int (*pv_i8)(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
               float *acc);
  /* May be NULL. scores_i8 and pv_i8 (the same contracts, the same bits) on
   * a block of the int8 tiled layout (kt, vt, toff, nt; D % 4 == 0, Dv % 16
   * == 0): K's dwords of 16 keys are one vector, V's bytes of 4 keys per
   * column one dword, as VPDPBUSD takes them. */
  void (*scores_i8t)(const attn_decode_block *b, const int8_t *q8, int64_t ldq, const float *qsum,
                     const float *qscale, int64_t R, float *s);
  int (*pv_i8t)(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
                float *acc);
  /* May be NULL. scores' contract on a block of the K-tiled layout (f16,
   * bf16; kt, toff, nt): a key's sum in any fixed order that depends on R
   * and D alone (not on the key's lane, toff or n: the same bits for any
   * page size and thread count). */
  void (*scores_kt)(const attn_decode_block *b, const float *q, int64_t R, float *s);
  /* May be NULL. A bf16 cache through a bf16 dot product (VDPBF16PS; the
   * call's bf16_f32 0). scores_kt_bf16: scores_kt's contract on a K-tiled
   * block with the query rows in bf16, qb[r * ldq + d] (ldq even, >= D;
   * qb[r * ldq + D] = 0 for odd D), read in pairs of depths: each product
   * exact, the sums in f32 in a fixed order of R and D. pv_bf16:
   * pv's contract with each weight p[r * NB + j] (j < n; those at j >= n
   * not read) rounded to bf16 (to nearest even) before its product, the
   * products exact, the sums in f32 in a fixed order. Both flush subnormal
   * inputs and sums to zero (the instruction's rule). */
  void (*scores_kt_bf16)(const attn_decode_block *b, const uint16_t *qb, int64_t ldq, int64_t R,
                         float *s);
  void (*pv_bf16)(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
                  float *acc);
  /* May be NULL (then attn_decode_quantize_q8, the same bits). scores_i8's
   * query rows from f32 ones: attn_decode_quantize_q8's contract. */
  int (*quantize_q8)(const float *x, int64_t rows, int64_t D, float sc, int8_t *y, int64_t ldy,
                     float *scale, float *sum);
} attn_decode_ops;

/* scores_i8's query rows: for r < rows, with a_e = |x[r D + e] sc| (a
 * product rounded to f32) and amax their max, y[r ldy + e] = (x sc) (127 /
 * amax) rounded to the nearest integer (ties to even) and clamped to
 * [-127, 127] (0 where amax is 0; each product and the quotient rounded to
 * f32), y zero from D to ldy, scale[r] = amax / 127, sum[r] = the sum of
 * the row's y (exact). Returns 0; 1 if some a_e is not finite (NaN, inf, or
 * a product that overflows), with rows before it written. The portable
 * loop (decode.c); the levels' quantize_q8 give its bits. */
int attn_decode_quantize_q8(const float *x, int64_t rows, int64_t D, float sc, int8_t *y,
                            int64_t ldy, float *scale, float *sum);

/* Which rows the x86 micro-kernels prefetch. Otherwise: scores the next
 * block's K rows, P·V its V rows, a block ahead. For f32 (1 here): scores
 * this block's V rows, P·V the next block's K rows, half a block ahead each:
 * a 32-key block of f32 rows at D 128 is 16 KiB of K and 16 of V, and with
 * the next block's K arriving while this block's V waits for P·V the L1D
 * (48 KiB on Zen 5) held 48 KiB of them; now 32. (f16 and bf16 ran slower
 * that way: docs/DECODE.md.) The AVX-512 level's; the avx2 level prefetches
 * the next block's K in scores and its V in P·V, each in address order
 * (decode_avx2.c's pf_spread: a Zen 3's 32 KiB L1D). */
#define ATTN_DECODE_KV_SWAP(dt) ((dt) == ATTN_F32)

/* the smallest nonzero row weight pv_i8 takes (255 / w stays finite, with room) */
#define ATTN_DECODE_I8PV_MIN_W 1e-30f

enum { ATTN_DECODE_I8DOT_MAX_D = 256 }; /* the sums stay exact in f32 (< 2^24) */

/* Loops over the rows, keys and columns of a tile are unrolled in full, so
 * that their accumulators live in registers (GCC leaves these loops rolled
 * at -O2, the accumulators then on the stack). Not under clang, which
 * unrolls them itself, and whose sanitizer builds (make fuzz) take minutes
 * on the pragma-unrolled bodies. */
#define DECODE_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define DECODE_UNROLL(n)
#else
#define DECODE_UNROLL(n) DECODE_PRAGMA(GCC unroll n)
#endif

#endif
