/* Internal to the SDPA backends (math in sdpa_math.c, flash in
 * flash/sdpa_flash*.c, validation in sdpa_check.c, the entry and routing in
 * sdpa_entry.c). Not part of the public API. */
#ifndef ATTN_SDPA_INTERNAL_H
#define ATTN_SDPA_INTERNAL_H

#include <math.h>

#include "attn/sdpa.h"
#include "attn/sdpa_deprecated.h" /* the kernels of 0.1's entry points */

/* Checks sizes, pointers and strides; fills *r with resolved strides
 * (contiguous defaults applied) and the effective scale. Rules: B, Hq, Hkv,
 * D, Dv >= 1; Lq, Lk >= 0 (0 = nothing to attend / nothing to compute);
 * Hq % Hkv == 0; q/k/v NULL only when they hold no elements; window >= -1;
 * a given scale finite; key_lens[b] in [0, Lk]; mask strides >= 0; q/k/v/out
 * strides >= 0, non-overlapping (gradients and outputs are written through
 * them) and with an extent that fits in int64. NaN/inf in the data is not
 * checked: it propagates to the rows it touches (attn/sdpa.h; every backend
 * gives NaN where math does for a NaN logit). out/lse/dq/... pointers are
 * each backend's to check. Variants: |q_offset|, |q_offsets[b]| not huge
 * (>= 0 with a block layout); alibi_slopes_bstride 0 or Hq, alibi_slopes_grad
 * only with alibi_slopes; rel_bias needs
 * rel_buckets >= 2 (>= 4 bidirectional) and rel_max_distance > the exact
 * range; shaw_* need shaw_max >= 1; block_mask needs block_size >= 1. */
typedef struct {
  int64_t q[3], k[3], v[3], o[3]; /* b, h, l element strides */
  float scale;
  int64_t group; /* Hq / Hkv */
} attn_sdpa_resolved;

attn_status attn_sdpa_validate(const attn_sdpa_desc *d, const float *q, const float *k,
                               const float *v, attn_sdpa_resolved *r);
/* q_offset / q_offsets, per-batch slopes (sdpa_batched.c). */
attn_status attn_sdpa_validate_alignment(const attn_sdpa_desc *d);
/* The backward's pointers, for every backend: out, lse, dout and dq are
 * needed when there are queries, dk and dv when there are keys; ATTN_EINVAL
 * "<who>: <name> is NULL" otherwise. */
attn_status attn_sdpa_check_backward_ptrs(const attn_sdpa_desc *d, const char *who, const void *out,
                                          const void *lse, const void *dout, const void *dq,
                                          const void *dk, const void *dv);

/* args.probs_rows of attn_sdpa_forward (sdpa_probs.c) */
attn_status attn_sdpa_probs_rows_f32(const attn_sdpa_desc *d, const float *q, const float *k,
                                     const float *lse, const attn_sdpa_rows *rows, float *probs);
/* The flash backend (sdpa_flash.c). Same contract as the math one. */
attn_status attn_sdpa_forward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                    const float *v, float *out, float *lse);
attn_status attn_sdpa_backward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                     const float *v, const float *out, const float *lse,
                                     const float *dout, float *dq, float *dk, float *dv);

/* ---- the masking rule, shared by every backend ---------------------------
 * Keys j in [lo, hi) may be allowed for query i of batch b by causal (with
 * prefix_lens: j <= p_i or j < prefix_lens[b], still one interval), window
 * and key_lens (at the query's absolute position p_i = i + q_offset); keys
 * outside are never allowed. hi and lo never decrease with i (the flash
 * kernels' tile bounds rely on it). lo >= hi means none. Position schemes and the
 * block-sparse layout: kernels/sdpa/sdpa_positions.h. */
static inline void attn_sdpa_key_range(const attn_sdpa_desc *d, int64_t b, int64_t i, int64_t *lo,
                                       int64_t *hi) {
  int64_t l = 0, h = d->Lk;
  i += d->q_offsets ? d->q_offsets[b] : d->q_offset; /* the query's absolute position */
  if (d->key_lens && d->key_lens[b] < h) h = d->key_lens[b];
  if (d->causal) { /* keys up to the query's position, or the whole prefix (prefix-LM) */
    int64_t c = i + 1;
    if (d->prefix_lens && d->prefix_lens[b] > c) c = d->prefix_lens[b];
    if (c < h) h = c;
  }
  if (d->window_right >= 0 && d->window_right < h - i - 1) h = i + d->window_right + 1;
  if (d->window_left >= 0 && i - d->window_left > l) l = i - d->window_left;
  *lo = l;
  *hi = h;
}

/* Any position scheme or block-sparse layout set? A backend that does not
 * implement them returns ATTN_EUNSUPPORTED (q_offset alone is handled by
 * attn_sdpa_key_range, which every backend uses). */
static inline int attn_sdpa_has_positions(const attn_sdpa_desc *d) {
  return d->alibi_slopes || d->rel_bias || d->shaw_k || d->shaw_v || d->block_mask;
}

/* The bool mask entry for (b, h, i, j): 1 where it allows (or is absent). */
static inline int attn_sdpa_bool_allows(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i,
                                        int64_t j) {
  if (!d->bool_mask) return 1;
  const int64_t *s = d->bool_mask_stride;
  return d->bool_mask[b * s[0] + h * s[1] + i * s[2] + j * s[3]] != 0;
}

/* The additive mask entry for (b, h, i, j), 0 if absent. -inf disallows. */
static inline float attn_sdpa_add_mask_at(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i,
                                          int64_t j) {
  if (!d->add_mask) return 0.0f;
  const int64_t *s = d->add_mask_stride;
  return d->add_mask[b * s[0] + h * s[1] + i * s[2] + j * s[3]];
}

/* The bool and additive masks of (b, h) on a tile of logits, every loop's
 * (the flash tiles of either orientation, the probabilities): query i0 + r
 * against key j0 + j (r < R, j < nk) at s[r * ldr + j * ldc] (the f32 tiles
 * ldr = ATTN_FLASH_BC, ldc = 1; the transposed ones ldr = 1, ldc = 16).
 * Entries already -inf stay so (an additive +inf or NaN does not revive a
 * removed key). Inline: each loop compiles it with its own strides. */
static inline void attn_sdpa_elem_masks(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0,
                                        int R, int64_t j0, int nk, float *s, int64_t ldr,
                                        int64_t ldc) {
  const int64_t *bs = d->bool_mask_stride, *as = d->add_mask_stride;
  for (int r = 0; r < R; r++) {
    float *sr = s + r * ldr;
    int64_t i = i0 + r;
    if (d->bool_mask) {
      const uint8_t *bm = d->bool_mask + b * bs[0] + h * bs[1] + i * bs[2] + j0 * bs[3];
      for (int j = 0; j < nk; j++)
        if (!bm[j * bs[3]]) sr[j * ldc] = -INFINITY;
    }
    if (d->add_mask) {
      const float *am = d->add_mask + b * as[0] + h * as[1] + i * as[2] + j0 * as[3];
      for (int j = 0; j < nk; j++)
        if (sr[j * ldc] != -INFINITY) sr[j * ldc] += am[j * as[3]];
    }
  }
}

/* Is key j allowed for query i of (batch b, query head h)? Everything except
 * an additive -inf (the caller checks the final logit for that). */
static inline int attn_sdpa_key_allowed(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i,
                                        int64_t j) {
  int64_t lo, hi;
  attn_sdpa_key_range(d, b, i, &lo, &hi);
  return j >= lo && j < hi && attn_sdpa_bool_allows(d, b, h, i, j);
}

#endif
