/* Internal to the bf16 flash SDPA (sdpa_flash_bf16.c forward,
 * sdpa_flash_bf16_backward.c backward; the int8 flash, sdpa_flash_i8.c,
 * runs the same forward steps on its own scores): the tile loops run on a
 * small table of tile kernels, AMX + AVX-512 (sdpa_flash_bf16_amx.c),
 * AVX512_BF16 (sdpa_flash_bf16_avx512.c), AVX2 on widened bf16 (the int8
 * flash's, sdpa_flash_bf16_avx2.c) or portable C
 * (sdpa_flash_bf16_generic.c), which read the same packed layouts.
 *
 * Why these loops are not the f32 ones (sdpa_flash.c) with a bf16 operand
 * hook, as fp16 and bf16 on a level without a bf16 dot product are: the
 * arithmetic differs. The dot products take bf16 pairs (VDPBF16PS, AMX
 * TDPBF16PS / TDPBSSD) from packed VNNI tiles, p is rounded to bf16 before
 * p·v, the running max moves only past a threshold (ATTN_BF16_TAU), and the
 * tiles are transposed so that a query's statistics are one vector lane.
 * What is not arithmetic is shared with the f32 loops: the key ranges
 * (attn_sdpa_key_range), the item's key blocks, the backward's query rows,
 * the element masks and a row's end (flash_loop.h), the score-modifier
 * stage (sdpa_stage.h) and the user modifiers (sdpa_usermod.h).
 *
 * Orientation: scores are computed transposed, sᵀ [keys, queries] = K·Qᵀ, so
 * one query is one lane of a 16-float vector and the softmax statistics
 * (m, l, alpha, lse, D_i) of 16 queries are one vector each (no horizontal
 * reductions). Every tile is 16 rows x 64 bytes (the AMX configuration of
 * kernels/arch/amx/amx.h); operands are zero-padded to whole tiles.
 *
 * Layouts (bf16 = uint16_t; a "B tile" is the VNNI layout TDPBF16PS reads:
 * 16 rows of depth pairs x 16 columns x 2):
 *   K rows    [keys][Dp] row-major (Dp = 32 * dc): A tiles of 16 keys x 32 depth
 *   Qp        per 16 queries [dc][16 depth pairs][16 queries][2]: dc B tiles
 *   vT block  [dvt * 16][64 keys] (Vᵀ of a 64-key block): A tiles, stride 128 B
 *   p         [2][16 key pairs][16 queries][2]: the two B tiles of a block
 *   st        [64 keys][16 queries] f32 (4 C tiles)
 *   oT        [dvt * 16][16 queries] f32 (dvt C tiles)
 */
#ifndef ATTN_SDPA_FLASH_BF16_H
#define ATTN_SDPA_FLASH_BF16_H

#include <stdint.h>

#include "attn/lowp.h"
#include "attn/sdpa_bf16.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/sdpa/sdpa_internal.h"

enum {
  ATTN_BF16_BC = 64, /* keys per block */
  ATTN_BF16_QT = 16, /* queries per group (one tile's columns) */
  ATTN_BF16_DMAX = 256,
  ATTN_BF16_AUTO_F32_LK = 128 /* AUTO's f32 route up to this many keys (attn_sdpa_bf16_route_for) */
};

/* The running max m of a query moves up only when a block's max exceeds it
 * by more than this (natural-log units): p = e^(t - m) <= e^8 ~ 3e3, far
 * inside f32 and bf16 range, and the output is rescaled (alpha != 1) only a
 * few times per row instead of at most key blocks. */
#define ATTN_BF16_TAU 8.0f
/* p below e^-64 of the row's reference max is 0 (as ATTN_FLASH_PMIN_LOG). */
#define ATTN_BF16_PMIN_LOG (-64.0f)

typedef struct {
  const char *name;
  void (*begin)(void); /* per thread, before the first tile op (AMX config) */
  void (*end)(void);
  /* st [64][16] = K rows (64 rows ldk elements apart, dc chunks of 32) · Qpᵀ;
   * depth pairs np..16 dc-1 are zero in both (a kernel may skip them) */
  void (*scores)(const uint16_t *k, int64_t ldk, int dc, int np, const uint16_t *qp, float *st);
  /* Online softmax over one key block, per query lane q < 16: logits
   * t[j] = scale * st[j][q] where lo[q] <= j < hi[q] (lo NULL: all 64), -inf
   * elsewhere; mb = max_j t; m moves to mb if mb > m + TAU; alpha = e^(m_old
   * - m_new) (1 if unchanged); p = e^(t - m) (0 below PMIN_LOG or at -inf)
   * rounded to bf16 into p (B tiles), l = alpha * l + sum of the f32 p (two
   * partial sums, even and odd j, added at the end). Returns 1 if some
   * alpha != 1. */
  int (*softmax)(const float *st, float scale, const int *lo, const int *hi, float *m, float *l,
                 float *alpha, uint16_t *p);
  /* oT [dvt*16][16] = (alpha ? alpha * oT : oT) + vT block · p */
  void (*accum)(float *ot, int dvt, const float *alpha, const uint16_t *vt, const uint16_t *p);
  /* Backward tile, per query lane q < 16 and key row j < 64: logits t as in
   * softmax; p = e^(t - lse[q]) (0 below PMIN_LOG, outside [lo, hi), or
   * where lse = -inf); ds = p * (dpt[j][q] - di[q]) * dscale. Writes pᵀ and
   * dsᵀ rounded to bf16 as rows of A tiles (pt[j * ldt + q], dst[j * ldt +
   * q]) and ds as the two B tiles of the block (dsv, the layout of p). */
  void (*probs_grad)(const float *st, const float *dpt, float scale, const int *lo, const int *hi,
                     const float *lse, const float *di, float dscale, uint16_t *pt, uint16_t *dst,
                     int64_t ldt, uint16_t *dsv);
  /* acc [4][ntc][16x16] f32 += A · B over nqc chunks of 32 queries: A tile
   * (kt, qc) at a + kt*16*lda + qc*32 (rows lda apart: 16 keys x 32 queries),
   * B tile (qc, ct) at b + (qc*ntc + ct)*512 (16 query pairs x 16 columns). */
  void (*accum_t)(float *acc, int ntc, const uint16_t *a, int64_t lda, const uint16_t *b, int nqc);
} attn_flash_bf16_ops;

const attn_flash_bf16_ops *attn_flash_bf16_ops_generic(void);
/* NULL where the build has no x86 code; needs AVX512_BF16 (dispatch.c). */
const attn_flash_bf16_ops *attn_flash_bf16_ops_avx512(void);
/* The AVX512_BF16 softmax and probs_grad tiles (sdpa_flash_bf16_avx512.c),
 * shared by the AVX512_BF16 and the AMX sets. */
int attn_flash_bf16_softmax_avx512(const float *st, float scale, const int *lo, const int *hi,
                                   float *m, float *l, float *alpha, uint16_t *p);
void attn_flash_bf16_probs_grad_avx512(const float *st, const float *dpt, float scale,
                                       const int *lo, const int *hi, const float *lse,
                                       const float *di, float dscale, uint16_t *pt, uint16_t *dst,
                                       int64_t ldt, uint16_t *dsv);
/* AVX2 + FMA on bf16 widened to f32 (sdpa_flash_bf16_avx2.c); NULL where the
 * build has no x86 code. The avx2 level's lowp.flash_bf16_simd. */
const attn_flash_bf16_ops *attn_flash_bf16_ops_avx2(void);
/* NULL where the build has no AMX code; usable only when
 * attn_flash_bf16_amx_usable() says so. */
const attn_flash_bf16_ops *attn_flash_bf16_ops_amx(void);
/* The CPU has AVX-512 (F, BW, BF16) and AMX-BF16 and the tile permission is granted. */
int attn_flash_bf16_amx_usable(void);

/* ---- packing (sdpa_flash_bf16.c; shared by forward and backward) -------- */
/* qp (one group of 16 queries) from n <= 16 rows of x (rows ldx apart, D
 * columns): dc B tiles, zero past n and D. */
void attn_bf16_pack_qp(const uint16_t *x, int64_t ldx, int n, int64_t D, int dc, uint16_t *qp);
/* y [64][ldy] = nk rows of x (rows ldx apart, n columns), zero past nk and n. */
void attn_bf16_pack_rows(const uint16_t *x, int64_t ldx, int nk, int64_t n, uint16_t *y,
                         int64_t ldy);
/* vt [nt][64] = transpose of nk rows of x (rows ldx apart, n <= nt columns), zero-padded. */
void attn_bf16_pack_t(const uint16_t *x, int64_t ldx, int nk, int64_t n, int64_t nt, uint16_t *vt);
/* B tiles along rows: y [ntc][16 row pairs][16 columns][2] from n <= 32 rows
 * of x (rows ldx apart, ncol columns), zero past n and ncol. */
void attn_bf16_pack_pairs(const uint16_t *x, int64_t ldx, int n, int64_t ncol, int ntc,
                          uint16_t *y);

/* ---- shared by forward and backward (sdpa_flash_bf16.c) ----------------- */
/* What a path runs: the bf16 tile loops on tiles, or (f32 set) the f32 flash
 * loops with those tile kernels on q, k, v widened to f32 (attn_flash_in,
 * attn_flash_in_of's bf16 row). */
typedef struct {
  const attn_flash_bf16_ops *tiles;
  const attn_flash_ops *f32;
} attn_bf16_route;
attn_status attn_sdpa_bf16_route_of(attn_lowp_path path, attn_bf16_route *r);
/* The route of path for the call d: route_of, except that AUTO on the
 * AVX512_BF16 tiles takes the f32 route when d has at most
 * ATTN_BF16_AUTO_F32_LK keys. The tile loops pad keys to blocks of 64 and
 * queries to tiles of 16 and pack every operand per call; on short
 * sequences that costs more than the bf16 products save (Zen 5, 1 thread,
 * bf16 tiles against the f32 flash: Lq = Lk = 128, D 32 / 64: forward
 * 1.04-1.12x, backward 0.88x; 12-96 keys: backward 0.25-0.63x; 256 keys:
 * forward 1.4-1.9x, backward 0.97-1.02x; docs/MIXED_PRECISION.md). AMX is
 * not measured here and keeps its tiles. */
attn_status attn_sdpa_bf16_route_for(const attn_sdpa_desc *d, attn_lowp_path path,
                                     attn_bf16_route *r);
/* The limits of the transposed loops (bf16 and int8; who names the kernel
 * in the message): attn_sdpa_validate (fills rs; q, k, v are read for their
 * NULL-ness only), no dropout, no position variants nor block layout, head
 * dims up to ATTN_BF16_DMAX. Error set on failure. */
attn_status attn_bf16_check_limits(const attn_sdpa_desc *d, const char *who, const void *q,
                                   const void *k, const void *v, attn_sdpa_resolved *rs);
/* Checks the descriptor (attn_bf16_check_limits) and picks the route of
 * path; error set on failure. */
attn_status attn_sdpa_bf16_check(const attn_sdpa_desc *d, const uint16_t *q, const uint16_t *k,
                                 const uint16_t *v, attn_sdpa_resolved *rs, attn_bf16_route *route,
                                 attn_lowp_path path);
/* 64-byte aligned, or NULL with the error set. */
void *attn_bf16_alloc(int64_t bytes, const char *what);
/* Column range lo[r] <= j < hi[r] (block-relative) of the 16 query lanes
 * i0 + r against keys j0..j0+nk-1 (causal, window, key_lens); lanes r >= R
 * get none. Returns 0 when no lane may see any key of the block. */
int attn_bf16_tile_bounds(const attn_sdpa_desc *d, int64_t b, int64_t i0, int R, int64_t j0, int nk,
                          int *lo, int *hi);
/* The tile steps of a forward work item (rows i0..i0+nq-1 of batch b): key
 * block kb against query group g (16 rows), key blocks in order and groups
 * in order within each, only those where some lane may see some key; the
 * lanes' column ranges [lo, hi) (full: every lane sees all 64 keys). */
typedef struct {
  int64_t kb;
  int g, full;
  int lo[ATTN_BF16_QT], hi[ATTN_BF16_QT];
} attn_bf16_step;
typedef struct {
  const attn_sdpa_desc *d;
  int64_t b, i0;
  int nq, ng;
  int64_t kb, kb1; /* next key block, end */
  int g;           /* next group in kb */
  int all;         /* every row of the item may see every key */
} attn_bf16_step_iter;
void attn_bf16_steps_begin(attn_bf16_step_iter *it, const attn_sdpa_desc *d, int64_t b, int64_t i0,
                           int nq);
/* The next step into *s; 0 at the end. */
int attn_bf16_next_step(attn_bf16_step_iter *it, attn_bf16_step *s);
/* The transposed logits of a tile, query lane r < R (query i0 + r) against
 * key row j (key j0 + j, j < nk): st [64][16] (raw scores) := scale st in
 * the lanes' ranges [lo[r], hi[r]) (-inf elsewhere; skipped when full and
 * scale is 1), then the score-modifier stage's tile units (staged), the
 * user mods (sdpa_usermod.h: shift NULL or the rows' shifts, raw NULL or
 * [64][16] the scores before them) and the element masks: the f32 loops'
 * attn_flash_tile_logits in the transposed orientation. */
void attn_bf16_tile_logits(const attn_sdpa_desc *d, int staged, int64_t b, int64_t h, int64_t i0,
                           int R, int64_t j0, int nk, const int *lo, const int *hi, int full,
                           float scale, float *st, const float *shift, float *raw);
/* The scores stage of the forward tile loop (bf16: K·Qᵀ in f32; int8: the
 * exact int32 scores, dequantized): issue(ctx, s, buf) starts the scores of
 * step s into buffer buf (0 or 1, the step's parity); logits(ctx, s, buf)
 * returns its transposed logits st [64][16] when the step's softmax is due
 * (before the scale; writable). */
typedef struct {
  void (*issue)(const void *ctx, const attn_bf16_step *s, int buf);
  float *(*logits)(const void *ctx, const attn_bf16_step *s, int buf);
  const void *ctx;
  /* the item's rows' shift (the true scaled score = logit + shift[r]: int8
   * keeps scale q·mean(k) out), NULL = 0; seen by user score_mods only */
  const float *shift;
} attn_bf16_scores_stage;
/* A forward work item, rows i0..i0+nq-1 of (b, h) (the bf16 and the int8
 * flash). Its tile steps, three in flight, one step apart: the scores of
 * step s+1 and the p·v of step s-1 are issued to the tile unit before the
 * softmax of step s (attn_bf16_tile_logits where the call has masks, mods
 * or stage units) runs on the vector units, so the two overlap; p and
 * alpha are double-buffered by step parity. vt: the (b, kv head)'s vT
 * blocks [nkb][dvt * 16][64]. Workspace: oT [ng][dvt * 256], m, l
 * [ng * 16] (ng groups of 16 rows) f32, p [2][64 * 16] bf16. Then the
 * rows' ends (attn_flash_row_store): out (rows ldo apart, Dv columns) = oT
 * / l and lse = m + log l (m + sc->shift[r] where shift is not NULL), the
 * stage's row units joining the denominator; a row with no allowed key
 * gets out 0 and lse -inf (or the row units'); l NaN (a NaN logit) gives
 * NaN out and lse. */
void attn_bf16_item_forward(const attn_flash_bf16_ops *ops, const attn_sdpa_desc *d, int64_t b,
                            int64_t h, int64_t i0, int nq, float scale,
                            const attn_bf16_scores_stage *sc, const uint16_t *vt, int64_t dvt,
                            float *ot, float *m, float *l, uint16_t *p, float *out, int64_t ldo,
                            float *lse);

#endif
