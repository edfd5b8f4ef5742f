/* Internal to the flash SDPA backend: the tile loop (sdpa_flash.c forward,
 * sdpa_flash_backward.c backward) runs on a small table of tile kernels, so a
 * different micro-kernel set (one per ISA level: portable, AVX2, AVX-512,
 * NEON; kern.h) drops in without touching the loops. Tests use the *_ops entry points to run one
 * kernel set explicitly.
 *
 * Tiles: keys in blocks of ATTN_FLASH_BC (64) columns; queries in row groups
 * of at most ATTN_FLASH_MR (6) rows. A score tile s [R, BC] has row stride
 * ATTN_FLASH_BC; columns past the block's key count are masked (-inf / 0). */
#ifndef ATTN_SDPA_FLASH_H
#define ATTN_SDPA_FLASH_H

#include <stdint.h>

#include "kernels/sdpa_internal.h"

/* ATTN_FLASH_QW: row stride of a tile's Shaw band [MR, QW] (>= BC + MR - 1). */
enum { ATTN_FLASH_BC = 64, ATTN_FLASH_MR = 6, ATTN_FLASH_NC = 64, ATTN_FLASH_QW = 80 };

/* p = e^x with x below this is taken as 0. e^-64 ~ 1.6e-28 of the row's
 * largest p: far below f32 resolution even summed over 2^40 keys, and it
 * keeps p, the products p·v and ds = p (dp - D_i) clear of denormals (each
 * costs a microcode assist in the GEMMs: ALiBi's far keys made the backward
 * ~1.5x slower). */
#define ATTN_FLASH_PMIN_LOG (-64.0f)

typedef struct {
  const char *name;
  /* c [R, n] (row stride ldc) = A·B (acc = 0) or cs[r] * c + A·B (acc = 1;
   * cs NULL means 1), summing k = 0..K-1 in order, where A(r, k) =
   * a[r*ars + k*acs] and row k of B is b + k*ldb (n contiguous floats).
   * 1 <= R <= ATTN_FLASH_MR, 1 <= n <= ATTN_FLASH_NC, K >= 0. */
  void (*gemm)(int R, int n, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b,
               int64_t ldb, float *c, int64_t ldc, const float *cs, int acc);
  /* s [R, BC]: s := scale * s where lo[r] <= j < hi[r], -inf elsewhere. */
  void (*logits)(int R, float *s, float scale, const int *lo, const int *hi);
  /* Online softmax over one key block: s [R, BC] raw scores; the logits are
   * t = scale * s where lo[r] <= j < hi[r], -inf elsewhere (as logits()), and
   * s := p = e^(t - m_new) (0 where t = -inf or t - m_new < ATTN_FLASH_PMIN_LOG); per row m (running max) and l
   * (running sum) are updated and alpha = e^(m_old - m_new) is the factor for
   * the output so far (1 while the row has seen no allowed key). NaN: the max
   * skips a NaN t, but its p is NaN, so l (and the row's output) turn NaN and
   * stay so; an +inf t gives m = +inf and p = NaN (inf - inf), as math. */
  void (*softmax_update)(int R, float *s, float scale, const int *lo, const int *hi, float *m,
                         float *l, float *alpha);
  /* Backward tile: s [R, BC] raw scores (logits t as in softmax_update),
   * dp [R, BC] = dout·vᵀ; writes p = e^(t - lse[r]) (0 below ATTN_FLASH_PMIN_LOG) and
   * ds = p * (dp - di[r]) * dscale into p, ds [R, BC] (rows ldp apart), ds = 0
   * where p = 0 (as math, even for a NaN dp or di); rows with lse = -inf give
   * 0, rows with lse NaN give p = ds = NaN where allowed and t > -inf. */
  void (*probs_grad)(int R, const float *s, float scale, const int *lo, const int *hi,
                     const float *dp, const float *lse, const float *di, float dscale, float *p,
                     float *ds, int64_t ldp);
  /* kt [D, BC] = transpose of x [n, D] (rows ldx apart), zero columns n..BC-1. */
  void (*pack_t)(int64_t n, int64_t D, const float *x, int64_t ldx, float *kt);
  /* s[r*lds + c] += b[r*brs + c*bcs] for r < R, c < n <= BC, bcs -1, 0 or 1
   * (position terms: a bias table slice, a constant, a reversed band); with
   * skip, entries at -inf stay -inf. Strides may be negative. */
  void (*add_rows)(int R, int n, float *s, int64_t lds, const float *b, int64_t brs, int bcs,
                   int skip);
  /* x[0] + ... + x[n-1], 0 <= n <= BC (any fixed order). */
  float (*sum)(int n, const float *x);
  /* Optional (NULL: the loop runs the steps above): G whole forward tiles
   * (row groups of MR rows, rows 0 .. G MR - 1) against one block of BC
   * keys, every key allowed for every row, no masks. The same numbers, bit
   * for bit, as per group gemm (s = q·kt, K = D) + softmax_update (lo 0, hi
   * BC) + gemm (o = alpha o + s·v, Dv in NC-column slices). q [G MR, D] rows
   * ldq apart, kt [D, BC], v [BC, Dv] rows ldv apart, o [G MR, Dv] rows ldo
   * apart, m, l [G MR]; s [2, MR, BC] scratch. ktn [D, BC] and vn [BC, Dv]
   * (rows ldvn apart): the next key block, only fetched towards the caches
   * along the way, never read as data (NULL: none). */
  void (*tile_forward)(int G, int64_t D, int64_t Dv, const float *q, int64_t ldq, const float *kt,
                       const float *v, int64_t ldv, float scale, float *s, float *o, int64_t ldo,
                       float *m, float *l, const float *ktn, const float *vn, int64_t ldvn);
} attn_flash_ops;

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

/* ---- shared by forward and backward (sdpa_flash.c) ---------------------- */
/* Keys j with lo <= j < hi may be allowed for query i (causal, window,
 * key_lens); lo >= hi: none. Both are non-decreasing in i. */
void attn_flash_key_range(const attn_sdpa_desc *d, int64_t b, int64_t i, int64_t *lo, int64_t *hi);
/* Block-relative column bounds for rows i0..i0+R-1 against keys j0..j0+nk-1.
 * Returns 0 when no row may attend to any key of the block (skip the tile). */
int attn_flash_tile_bounds(const attn_sdpa_desc *d, int64_t b, int64_t i0, int R, int64_t j0,
                           int nk, int *lo, int *hi);
/* Bool and additive masks on a logits tile s [R, BC] (entries already -inf
 * stay so): rows i0.., keys j0..j0+nk-1 of (b, h). */
void attn_flash_elem_masks(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int R,
                           int64_t j0, int nk, float *s);
/* Threads for a call of `macs` multiply-adds in `items` work items: the
 * configured count, fewer for small calls (results never depend on it). */
int attn_flash_threads(double macs, int64_t items);
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

#endif
