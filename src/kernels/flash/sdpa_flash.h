/* Internal to the flash SDPA backend: the tile loops (sdpa_flash.c forward,
 * sdpa_flash_backward.c backward), written once, run on a table of tile
 * kernels (flash_tiles.h), one set per ISA level (kern.h), so a new set
 * drops in without touching the loops. Tests use the *_ops entry points to
 * run one kernel set explicitly. */
#ifndef ATTN_SDPA_FLASH_H
#define ATTN_SDPA_FLASH_H

#include <stdint.h>

#include "kernels/flash/flash_tiles.h"
#include "kernels/sdpa/sdpa_internal.h"

/* What the backend uses: the active level's tiles (kern.h, which also has the
 * getters of each level's set). */
const attn_flash_ops *attn_flash_ops_default(void);

attn_status attn_sdpa_forward_flash_ops(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                        const float *q, const float *k, const float *v, float *out,
                                        float *lse);
attn_status attn_sdpa_backward_flash_ops(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                         const float *q, const float *k, const float *v,
                                         const float *out, const float *lse, const float *dout,
                                         float *dq, float *dk, float *dv);

/* The loops' q, k, v: f32 arrays read in place (q16 == NULL), or fp16 ones
 * (attn/sdpa_f16.h; q, k, v NULL) that the loops convert to f32 with cvt, a
 * block at a time, into per-thread buffers: k and v per key block, q per
 * query block. Everything after the conversion is the f32 loop, so the
 * results are those of the f32 flash on the converted values. Position
 * variants and block-sparse layouts need f32 inputs. */
typedef struct {
  const float *q, *k, *v;
  const uint16_t *q16, *k16, *v16;
  void (*cvt)(const uint16_t *x, float *y, int64_t n); /* n values, fp16 -> f32 */
} attn_flash_in;
/* The operand hook of element type dtype (flash_operands.c, one case per
 * type: ATTN_F16, ATTN_BF16): in reads q, k, v through the active level's
 * conversion, or the portable one. Returns 0 for a type the f32 loops do
 * not read through a hook (f32: in->q, k, v in place; int8). */
int attn_flash_in_of(int dtype, int portable, const uint16_t *q, const uint16_t *k,
                     const uint16_t *v, attn_flash_in *in);
attn_status attn_sdpa_forward_flash_in(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                       const attn_flash_in *in, float *out, float *lse);
attn_status attn_sdpa_backward_flash_in(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                        const attn_flash_in *in, const float *out, const float *lse,
                                        const float *dout, float *dq, float *dk, float *dv);
/* n rows of an operand from element off, rows ld apart, cols wide, as f32:
 * the f32 array x in place (x16 NULL; *ldo = ld), or the fp16 rows of x16
 * converted into buf (rows ldb apart, *ldo = ldb). */
const float *attn_flash_in_rows(const float *x, const uint16_t *x16, const attn_flash_in *in,
                                int64_t off, int64_t ld, int64_t n, int64_t cols, float *buf,
                                int64_t ldb, int64_t *ldo);

/* n rows of x (ld apart, cols wide) as a dense block: x itself when ld ==
 * cols, else copied into buf (rows cols apart); *ldo the rows' stride
 * (sdpa_flash_layout.c: why the loops want their reused blocks dense). */
const float *attn_flash_dense_rows(const float *x, int64_t ld, int64_t n, int64_t cols,
                                   float *buf, int64_t *ldo);

/* The backward's q and dout as its items read them: dense [B, Hq, Lq, D] /
 * [B, Hq, Lq, Dv] copies when the rows are strided (f32 q; fp16 q is
 * converted a block at a time anyway), else the caller's; rs and in are the
 * call's with the copies' strides and pointer. init returns 0 (error set)
 * when a copy cannot be allocated; row copies query row t = (b Hq + h) Lq + i
 * (every row before the items run); free releases the copies. */
typedef struct {
  attn_sdpa_resolved rs;
  attn_flash_in in;
  const float *dout;
  float *qd, *dd; /* the copies (NULL: none) */
  const float *q0, *dout0; /* the caller's */
  attn_sdpa_resolved rs0;
} attn_flash_dense_io;
int attn_flash_dense_io_init(attn_flash_dense_io *x, const attn_sdpa_desc *d,
                             const attn_sdpa_resolved *rs, const attn_flash_in *in,
                             const float *dout);
void attn_flash_dense_io_row(const attn_flash_dense_io *x, int64_t t, int64_t b, int64_t h,
                             int64_t i);
void attn_flash_dense_io_free(attn_flash_dense_io *x);

/* ---- shared by forward and backward (sdpa_flash.c) ---------------------- */
/* (The key ranges are attn_sdpa_key_range's; the pieces every loop,
 * f32 or transposed, shares around them are flash_loop.h's.) */
/* Block-relative column bounds for rows i0..i0+R-1 against keys j0..j0+nk-1.
 * Returns 0 when no row may attend to any key of the block (skip the tile). */
int attn_flash_tile_bounds(const attn_sdpa_desc *d, int64_t b, int64_t i0, int R, int64_t j0,
                           int nk, int *lo, int *hi);
/* The score columns a tile's rows can use: the largest hi[r] rounded up to
 * 8 (at most BC). The columns past it are not computed (a short sequence's
 * block is mostly past its last key); every kernel that reads them masks
 * them by lo/hi first (a select, so whatever they hold never reaches p). */
int attn_flash_tile_cols(int R, const int *hi);
/* Per-thread scratch: n floats x threads, 64-byte aligned, or NULL (error set). */
float *attn_flash_alloc(int64_t per_thread, int threads, const char *what);


/* ---- position schemes and block-sparse layout in the tiles
 * (sdpa_flash_positions.c). Rows i0.. are local query rows, pi0 = i0 +
 * q_offset their first position; s tiles have row stride BC. ------------- */
typedef struct {
  const float *bias; /* [Hq, nrel + BC] ALiBi + T5 by x = j - i + Lq - 1 (0-padded), or NULL */
  int64_t nrel;      /* Lq + Lk - 1 */
  const float *skt;  /* shaw_kᵀ [D, nr] or NULL */
  const float *svt;  /* shaw_vᵀ [Dv, nr] or NULL */
  int64_t nr;        /* Shaw table rows 2M-1 (0: no Shaw) */
  /* [B, Hq, Lq, 4] per query row: scale q·shaw_k[0], scale q·shaw_k[2M-2],
   * dout·shaw_v[0], dout·shaw_v[2M-2] (the clipped distances of every tile) */
  float *ends;
  float *own;
} attn_flash_pos;
/* Builds the per-call tables (O((Lq+Lk) Hq + M (D+Dv))); error set on failure. */
attn_status attn_flash_pos_init(const attn_sdpa_desc *d, attn_flash_pos *p);
void attn_flash_pos_free(attn_flash_pos *p);
/* Fills p->ends (dout NULL in the forward) on nt threads; error set on failure. */
attn_status attn_flash_shaw_ends(attn_flash_pos *p, const attn_sdpa_desc *d,
                                 const attn_sdpa_resolved *rs, const float *q, const float *dout,
                                 int nt);
/* Block layout over the tile rows pi0..pi0+R-1 x keys j0..j0+nk-1: 0 = every
 * block off (skip the tile), 1 = all on (or no layout), 2 = some on. */
int attn_flash_block_state(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk);
/* s := -inf on the elements of the tile in blocks that are off. */
void attn_flash_block_mask(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk,
                           float *s);
/* s += ALiBi + T5 bias of head h (entries at -inf stay so). */
void attn_flash_pos_bias(const attn_flash_ops *ops, const attn_flash_pos *p, int64_t h, int64_t Lq,
                         int64_t i0, int R, int64_t j0, int nk, float *s);
/* The fused tiles' modifiers (attn_flash_mod) of head h's items: the
 * ALiBi where ops has tile_forward_mod (the score-modifier stage's fused
 * units are attn_stage_head_init's),
 * there is no T5 table, head h's slope is finite and every distance |p_i - j| of the call (and of
 * the tiles' rel0 + row - column) is an exact float; else mod->alibi = 0 and the steps add the
 * table. rel0 is the caller's, per tile call. */
void attn_flash_mod_init(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                         const attn_flash_pos *p, int64_t h, attn_flash_mod *mod);
/* Shaw table rows of the tile: t0 .. t0 + width - 1 (returns width <= QW). */
int attn_flash_shaw_band(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk,
                         int64_t *t0);
/* xr [R, QW] := mul * a [R, K] (rows lda apart) · bt[:, t0..t0+w) (bt [K, nr]),
 * interior table rows 1..nr-2 only (the ends: p->ends). */
void attn_flash_shaw_rows(const attn_flash_ops *ops, int R, const float *a, int64_t lda, int64_t K,
                          const float *bt, int64_t nr, int64_t t0, int w, float mul, float *xr);
/* s [R, BC] += xr [R, QW] at each (i, j)'s Shaw row - t0, the clipped ones
 * from ends (row r: ends[4r] for row 0, ends[4r+1] for row 2M-2);
 * skip_ninf: -inf stays. */
void attn_flash_shaw_gather(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t pi0, int R,
                            int64_t j0, int nk, int64_t t0, const float *xr, const float *ends,
                            int skip_ninf, float *s);
/* xr [R, QW] := s [R, nk] (rows lds apart) summed by Shaw row - t0. */
void attn_flash_shaw_scatter(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t pi0,
                             int R, int64_t j0, int nk, int64_t t0, int w, const float *s,
                             int64_t lds, float *xr);
/* s [R, nk] (rows lds apart) by Shaw row: ends[2r] += the sum at row 0,
 * ends[2r+1] at row 2M-2, and xr [R, QW] := the interior rows *ta..*ta+wi-1
 * (returns wi, 0 when the tile has none). */
int attn_flash_shaw_split(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t pi0, int R,
                          int64_t j0, int nk, int64_t t0, int w, const float *s, int64_t lds,
                          float *ends, float *xr, int64_t *ta);
/* g [nr, n] rows t0..t0+w-1 += xr [R, QW]ᵀ · rows [R, n] (rows ldrows apart). */
void attn_flash_table_grad(const attn_flash_ops *ops, int R, int w, int64_t t0, const float *xr,
                           const float *rows, int64_t ldrows, int64_t n, float *g);

/* ---- one tile's logits, the same steps in the forward and the backward
 * (sdpa_flash.c) ----------------------------------------------------------
 * A tile: query rows i .. i+R-1 of (b, h) against keys j0 .. j0+nk-1; lo,
 * hi the rows' block-relative key ranges (attn_flash_tile_bounds), blk the
 * block layout's state (attn_flash_block_state), um the user mods'
 * (attn_usermod_tile_state). */
typedef struct {
  int64_t b, h, i, j0;
  int R, nk, blk, um;
  const int *lo, *hi;
} attn_flash_tile;
/* s [R, BC] (raw scores) := the tile's logits, in the order of
 * sdpa_stage.h: scale s in the rows' ranges (-inf elsewhere), the stage's
 * tile units when staged (g: NULL or [R, BC], their derivative), the user
 * mods when t->um is 2 (raw: NULL or [R, BC], the scores before them), the
 * element masks, the block layout when t->blk is 2, ALiBi + T5 and Shaw
 * (qi [R, D] rows ldq apart, the tile's band t0, w; xr [MR, QW] scratch,
 * left holding scale q·shaw_kᵀ on the band). The softmax (scale 1) or the
 * probabilities come after. */
void attn_flash_tile_logits(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                            const attn_sdpa_resolved *rs, const attn_flash_pos *pos,
                            const attn_flash_tile *t, int staged, const float *qi, int64_t ldq,
                            int64_t t0, int w, float *s, float *g, float *raw, float *xr);

#endif
