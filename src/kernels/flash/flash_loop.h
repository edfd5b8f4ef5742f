/* What every flash tile loop shares, whatever its element type and tile
 * orientation: the f32 loops (sdpa_flash.c, sdpa_flash_backward.c; fp16 and
 * bf16 without a bf16 dot product run them through attn_flash_in's operand
 * hook), whose score tiles are s[r][j] (a query per row), and the bf16 /
 * int8 loops (sdpa_flash_bf16.c, sdpa_flash_bf16_backward.c,
 * sdpa_flash_i8.c), whose tiles are transposed, sᵀ[j][r] (a query per
 * vector lane). The masking rule itself is attn_sdpa_key_range and the
 * element masks attn_sdpa_elem_masks (sdpa_internal.h), the score
 * modifiers the stage's (sdpa_stage.h); these are the loop-side pieces
 * around them, written once. Inline: each loop
 * compiles them with its own constant strides, as if written in place. */
#ifndef ATTN_FLASH_LOOP_H
#define ATTN_FLASH_LOOP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/sdpa/sdpa_internal.h"
#include "kernels/sdpa/sdpa_stage.h"

/* The key blocks of bc keys that query rows i0 .. i0+nq-1 of batch b may
 * see: [kb0, kb1) (empty when no row sees a key); lo1 and hi0 are the last
 * row's interval start and the first row's end, so every row of the item
 * sees keys [lo1, hi0) (the intervals' ends never decrease along the rows). */
typedef struct {
  int64_t kb0, kb1, lo1, hi0;
} attn_flash_span;
static inline void attn_flash_item_span(const attn_sdpa_desc *d, int64_t b, int64_t i0, int64_t nq,
                                        int64_t bc, attn_flash_span *s) {
  int64_t lo0, hi0, lo1, hi1;
  attn_sdpa_key_range(d, b, i0, &lo0, &hi0);
  attn_sdpa_key_range(d, b, i0 + nq - 1, &lo1, &hi1);
  s->kb0 = lo0 / bc;
  s->kb1 = hi1 > lo0 ? (hi1 + bc - 1) / bc : s->kb0;
  s->lo1 = lo1;
  s->hi0 = hi0;
}

/* The first row i in [0, Lq) of batch b whose key interval ends past key j
 * (want_hi: hi(i) > j) or starts at or after it (lo(i) >= j), Lq if none (a
 * binary search: the ends never decrease with i). The backward loops' query
 * rows of a key block [j0, j1): [first_row(j0, 1), first_row(j1, 0)). */
static inline int64_t attn_flash_first_row(const attn_sdpa_desc *d, int64_t b, int64_t j,
                                           int want_hi) {
  int64_t a = 0, z = d->Lq;
  while (a < z) {
    int64_t mid = a + (z - a) / 2, lo, hi;
    attn_sdpa_key_range(d, b, mid, &lo, &hi);
    if (want_hi ? hi > j : lo >= j)
      z = mid;
    else
      a = mid + 1;
  }
  return a;
}

/* dq of a backward call with no keys (every row fully masked): 0, rows
 * with the resolved q strides rs. */
static inline void attn_flash_dq_zero(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs,
                                      float *dq) {
  for (int64_t bh = 0; bh < d->B * d->Hq; bh++)
    for (int64_t i = 0; i < d->Lq; i++)
      memset(dq + (bh / d->Hq) * rs->q[0] + (bh % d->Hq) * rs->q[1] + i * rs->q[2], 0,
             (size_t)d->D * sizeof(float));
}

/* A forward row's end: from its running max m and sum l (l = 0: no allowed
 * key) and the row units' logit x (attn_stage_head.row_logit), out [Dv] :=
 * o / l (o's columns oc apart: 1 in the f32 loops, 16 in the transposed
 * ones) and *lse, or out 0 and the row units' lse (attn_stage_row_finish;
 * l NaN, a NaN logit: out and lse NaN). */
static inline void attn_flash_row_store(float x, float m, float l, const float *o, int64_t oc,
                                        int64_t Dv, float *out, float *lse) {
  float inv;
  if (attn_stage_row_finish(x, m, l, &inv, lse)) {
    for (int64_t c = 0; c < Dv; c++)
      out[c] = o[c * oc] * inv;
  } else {
    memset(out, 0, (size_t)Dv * sizeof(float));
  }
}

#endif
