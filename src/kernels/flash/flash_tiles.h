/* The flash attention tile-kernel contract: what one ISA level's file
 * (sdpa_flash_generic.c, sdpa_flash_avx2.c, sdpa_flash_avx512.c,
 * sdpa_flash_neon.c) provides to the tile loops (sdpa_flash.c forward,
 * sdpa_flash_backward.c backward) through the kernel table (kern.h).
 *
 * Tiles: keys in blocks of ATTN_FLASH_BC (64) columns; queries in row groups
 * of at most ATTN_FLASH_MR (6) rows. A score tile s [R, BC] has row stride
 * ATTN_FLASH_BC; columns past the block's key count are masked (-inf / 0). */
#ifndef ATTN_FLASH_TILES_H
#define ATTN_FLASH_TILES_H

#include <stdint.h>

/* ATTN_FLASH_QW: row stride of a tile's Shaw band [MR, QW] (>= BC + MR - 1). */
enum { ATTN_FLASH_BC = 64, ATTN_FLASH_MR = 6, ATTN_FLASH_NC = 64, ATTN_FLASH_QW = 80 };

/* The score columns a partial key block computes for keys 0..n-1: n rounded
 * up to 8 (pack_t zero-pads kᵀ that far; attn_flash_tile_cols). */
static inline int64_t attn_flash_cols8(int64_t n) { return (n + 7) & ~(int64_t)7; }

/* p = e^x with x below this is taken as 0. e^-64 ~ 1.6e-28 of the row's
 * largest p: far below f32 resolution even summed over 2^40 keys, and it
 * keeps p, the products p·v and ds = p (dp - D_i) clear of denormals (each
 * costs a microcode assist in the GEMMs: ALiBi's far keys made the backward
 * ~1.5x slower). */
#define ATTN_FLASH_PMIN_LOG (-64.0f)

/* The score-modifier stage's units fused in tile_forward_mod
 * (sdpa_stage.h; the levels' scoremod_<isa>.h run them in registers). Row
 * r of the call (0 .. G MR - 1) against column c of the key block has the
 * logit
 *   t = scale s;  t = cap tanh(t / cap) if cap > 0 (the tanh cap unit);
 *   t = t - slope |rel0 + r - c| if alibi (as t + the ALiBi table's entry
 *   -(slope |p_i - j|): rel0 = p_i - j0 of row 0, |rel0| + G MR + BC <
 *   2^24 so that every distance is an exact float). */
typedef struct attn_flash_mod {
  float cap;        /* 0: off (filled by attn_stage_fuse) */
  int alibi;        /* 0: no ALiBi bias */
  float slope, rel0;
  /* ---- user score modifiers in the fused tiles (sdpa_usermod_fused.c) ----
   * user (NULL: none; set only with cap 0 and alibi 0): called on each row
   * group's logits s [MR, BC] (scale s: every key allowed, already scaled)
   * between q·kᵀ and the softmax, which then takes s as the logits (scale
   * 1, the steps' softmax_update after attn_usermod_tile); r0: the group's
   * first row in the call. The fields after it are the hook's own. */
  void (*user)(const struct attn_flash_mod *mod, int r0, float *s);
  const void *udesc;
  int64_t ub, uh, ui0, uj0; /* batch, head, query row of row 0, first key */
} attn_flash_mod;

/* Which fused units a call carries: the bits a level's tile instances are
 * specialised on (one instance per set; the user hook apart). */
enum { ATTN_FMOD_CAP = 1, ATTN_FMOD_ALIBI = 2 };
static inline int attn_flash_mod_kinds(const attn_flash_mod *mod) {
  return (mod->cap != 0.0f ? ATTN_FMOD_CAP : 0) | (mod->alibi ? ATTN_FMOD_ALIBI : 0);
}

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
  /* kt [D, BC] = transpose of x [n, D] (rows ldx apart), zero columns n up to
   * the next multiple of 8 (the tiles compute no further: attn_flash_tile_cols;
   * the columns past it keep what they held). */
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
  /* ---- the score-modifier stage fused in the tiles ----
   * Optional (NULL: the steps with attn_stage_tile and the ALiBi table):
   * tile_forward with the logits of attn_flash_mod (above) instead of
   * scale s; the same numbers, bit for bit, as logits + attn_stage_tile
   * (the units' vector ops) + the ALiBi table's slice (add_rows) +
   * softmax_update (scale 1) + gemm; with mod->user, the same as logits +
   * attn_usermod_tile + softmax_update (scale 1) + gemm. */
  void (*tile_forward_mod)(const attn_flash_mod *mod, int G, int64_t D, int64_t Dv,
                           const float *q, int64_t ldq, const float *kt, const float *v,
                           int64_t ldv, float scale, float *s, float *o, int64_t ldo, float *m,
                           float *l, const float *ktn, const float *vn, int64_t ldvn);
} attn_flash_ops;

/* The portable pack_t (sdpa_flash_generic.c), and the x86 one (8x8
 * transposes, sdpa_flash_avx2.c) that the avx2 and avx512 sets share: a
 * once-per-key-block copy (O(BC D) against the tiles' O(rows BC D)). */
void attn_flash_pack_t_generic(int64_t n, int64_t D, const float *x, int64_t ldx, float *kt);
void attn_flash_pack_t_avx2(int64_t n, int64_t D, const float *x, int64_t ldx, float *kt);

#endif
