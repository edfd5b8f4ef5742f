/* Position schemes and the block-sparse layout of an SDPA descriptor, per
 * (query row i, key j): the formulas every backend applies inside its tiles
 * (nothing of size Lq x Lk is ever stored). See include/attn/sdpa.h for the
 * fields and docs/VARIANTS.md for the conventions.
 *
 * A tiled (flash) kernel uses the tile operations at the end of this file
 * (docs/VARIANTS.md, "Fusing into the flash kernel"); the math path runs the
 * same operations on one row at a time.
 * p_i = i + d->q_offset. */
#ifndef ATTN_SDPA_POSITIONS_H
#define ATTN_SDPA_POSITIONS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/checked.h"
#include "kernels/sdpa/sdpa_internal.h"

/* HF T5 _relative_position_bucket(rel, bidirectional, num_buckets,
 * max_distance), rel = key position - query position. The log branch is
 * evaluated in float32 in torch's order, so bucket edges agree exactly. */
static inline int64_t attn_pos_t5_bucket(int64_t rel, int bidirectional, int64_t num_buckets,
                                         int64_t max_distance) {
  int64_t bucket = 0, nb = num_buckets;
  if (bidirectional) {
    nb /= 2;
    if (rel > 0) bucket += nb;
    rel = rel < 0 ? -rel : rel;
  } else {
    rel = rel < 0 ? -rel : 0;
  }
  const int64_t max_exact = nb / 2;
  if (rel < max_exact) return bucket + rel;
  float x = (float)rel / (float)max_exact;
  x = logf(x);
  x = x / (float)log((double)max_distance / (double)max_exact);
  x = x * (float)(nb - max_exact);
  if (!(x < (float)nb)) return bucket + nb - 1; /* clamped (and no overflowing cast) */
  int64_t large = max_exact + (int64_t)x;       /* .to(long) truncates */
  if (large > nb - 1) large = nb - 1;
  return bucket + large;
}

/* ALiBi + T5 bias for query head h, query position pi, key j (0 if none). */
static inline float attn_pos_bias(const attn_sdpa_desc *d, int64_t h, int64_t pi, int64_t j) {
  float b = 0.0f;
  if (d->alibi_slopes) {
    int64_t dist = pi > j ? pi - j : j - pi;
    b -= d->alibi_slopes[h] * (float)dist;
  }
  if (d->rel_bias)
    b += d->rel_bias[h * d->rel_buckets + attn_pos_t5_bucket(j - pi, d->rel_bidirectional,
                                                             d->rel_buckets, d->rel_max_distance)];
  return b;
}

static inline int64_t attn_pos_abs(int64_t x) { return x < 0 ? -x : x; }

/* Gradients by relative distance wanted (T5 table, learnable ALiBi slopes)? */
static inline int attn_pos_wants_rel_grad(const attn_sdpa_desc *d) {
  return (d->rel_bias && d->rel_bias_grad) || (d->alibi_slopes && d->alibi_slopes_grad);
}

/* The ALiBi slopes' gradient of a call that computes nothing: zeros. */
static inline void attn_pos_alibi_grad_zero(const attn_sdpa_desc *d) {
  if (d->alibi_slopes && d->alibi_slopes_grad)
    memset(d->alibi_slopes_grad, 0,
           (size_t)(d->alibi_slopes_bstride ? d->B * d->Hq : d->Hq) * sizeof(float));
}

/* -sum of ds [R, nk] (rows i0.., keys j0..) times |p_i - j|: this tile's
 * part of d slope (ALiBi's logit term is -slope |p_i - j|). */
static inline double attn_pos_alibi_grad(const attn_sdpa_desc *d, int64_t i0, int64_t R, int64_t j0,
                                         int64_t nk, const float *ds, int64_t ld) {
  double g = 0.0;
  for (int64_t r = 0; r < R; r++) {
    const int64_t pi = i0 + r + d->q_offset;
    for (int64_t c = 0; c < nk; c++)
      if (ds[r * ld + c] != 0.0f) g -= (double)ds[r * ld + c] * (double)attn_pos_abs(pi - j0 - c);
  }
  return g;
}

/* Shaw table row for query position pi, key j: clip(pi - j) + M - 1. */
static inline int64_t attn_pos_shaw_row(const attn_sdpa_desc *d, int64_t pi, int64_t j) {
  const int64_t m = d->shaw_max - 1;
  int64_t r = pi - j;
  if (r > m) r = m;
  if (r < -m) r = -m;
  return r + m;
}

/* Rows of the Shaw tables (2M-1), 0 when Shaw is off. */
static inline int64_t attn_pos_shaw_rows(const attn_sdpa_desc *d) {
  return d->shaw_k || d->shaw_v ? 2 * d->shaw_max - 1 : 0;
}

/* Row stride of the block layout, in blocks. */
static inline int64_t attn_pos_block_cols(const attn_sdpa_desc *d) {
  return d->block_cols > 0 ? d->block_cols : attn_ceil_div(d->Lk, d->block_size);
}

/* Block-sparse layout: may query position pi see key j? */
static inline int attn_pos_block_allows(const attn_sdpa_desc *d, int64_t pi, int64_t j) {
  if (!d->block_mask) return 1;
  return d->block_mask[(pi / d->block_size) * attn_pos_block_cols(d) + j / d->block_size] != 0;
}

/* Does no (pi, j) of the tile pi0..pi1 x j0..j1 (inclusive) fall in an allowed
 * block? (A flash kernel skips such tiles entirely.) */
static inline int attn_pos_block_tile_empty(const attn_sdpa_desc *d, int64_t pi0, int64_t pi1,
                                            int64_t j0, int64_t j1) {
  if (!d->block_mask) return 0;
  const int64_t bs = d->block_size, nkb = attn_pos_block_cols(d);
  for (int64_t a = pi0 / bs; a <= pi1 / bs; a++)
    for (int64_t c = j0 / bs; c <= j1 / bs; c++)
      if (d->block_mask[a * nkb + c]) return 0;
  return 1;
}

/* ---- tile operations (the math path runs them on [1, Lk] rows; a flash
 * kernel on its [R, BC] tiles). Rows i0..i0+R-1 (positions + q_offset), keys
 * j0..j0+nk-1, row stride ld. -------------------------------------------- */

/* Logits t (scale*q·k plus masks; -inf where not allowed) += ALiBi + T5 +
 * Shaw (qr: NULL or [R, 2M-1] rows of scale * q_i·shaw_kᵀ, stride ldqr);
 * -inf where the block layout disallows. -inf entries stay -inf. */
static inline void attn_pos_tile_logits(const attn_sdpa_desc *d, int64_t h, int64_t i0, int64_t R,
                                        int64_t j0, int64_t nk, float *t, int64_t ld,
                                        const float *qr, int64_t ldqr) {
  for (int64_t r = 0; r < R; r++) {
    const int64_t pi = i0 + r + d->q_offset;
    float *tr = t + r * ld;
    const float *qrr = qr ? qr + r * ldqr : NULL;
    for (int64_t c = 0; c < nk; c++) {
      const int64_t j = j0 + c;
      if (tr[c] == -INFINITY) continue;
      if (!attn_pos_block_allows(d, pi, j)) {
        tr[c] = -INFINITY;
        continue;
      }
      float x = tr[c] + attn_pos_bias(d, h, pi, j);
      if (qrr) x += qrr[attn_pos_shaw_row(d, pi, j)];
      tr[c] = x;
    }
  }
}

/* xr [R, 2M-1] (stride ldr) += x [R, nk] summed by Shaw row (p -> pr for the
 * values, ds -> dqr for the keys' backward). */
static inline void attn_pos_shaw_scatter(const attn_sdpa_desc *d, int64_t i0, int64_t R, int64_t j0,
                                         int64_t nk, const float *x, int64_t ld, float *xr,
                                         int64_t ldr) {
  for (int64_t r = 0; r < R; r++) {
    const int64_t pi = i0 + r + d->q_offset;
    for (int64_t c = 0; c < nk; c++)
      xr[r * ldr + attn_pos_shaw_row(d, pi, j0 + c)] += x[r * ld + c];
  }
}

/* x [R, nk] += xr [R, 2M-1] gathered by Shaw row (dp += dout·shaw_vᵀ). */
static inline void attn_pos_shaw_gather(const attn_sdpa_desc *d, int64_t i0, int64_t R, int64_t j0,
                                        int64_t nk, const float *xr, int64_t ldr, float *x,
                                        int64_t ld) {
  for (int64_t r = 0; r < R; r++) {
    const int64_t pi = i0 + r + d->q_offset;
    for (int64_t c = 0; c < nk; c++)
      x[r * ld + c] += xr[r * ldr + attn_pos_shaw_row(d, pi, j0 + c)];
  }
}

/* g [rel_buckets] (head h's row of the T5 table gradient) += ds [R, nk]. */
static inline void attn_pos_t5_grad(const attn_sdpa_desc *d, int64_t i0, int64_t R, int64_t j0,
                                    int64_t nk, const float *ds, int64_t ld, float *g) {
  for (int64_t r = 0; r < R; r++) {
    const int64_t pi = i0 + r + d->q_offset;
    for (int64_t c = 0; c < nk; c++)
      if (ds[r * ld + c] != 0.0f)
        g[attn_pos_t5_bucket(j0 + c - pi, d->rel_bidirectional, d->rel_buckets,
                             d->rel_max_distance)] += ds[r * ld + c];
  }
}

#endif
