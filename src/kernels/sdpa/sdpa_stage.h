/* The score-modifier stage: the one place every SDPA loop (the math rows,
 * the f32 flash forward and backward, the bf16 and int8 flash loops, the
 * probabilities) hands its scores to, instead of knowing the modifiers by
 * name. A modifier that changes a score element by element, or the end of
 * a row, is one unit (attn_score_unit below) in its own file
 * (mod_<name>.c), named in its row of the modifier table (sdpa_modifiers.c);
 * the loops call only the attn_stage_* functions here.
 *
 * The order of one score, as every loop runs it:
 *   t = scale q·k (-inf where a mask removes the key; attn_sdpa_key_range and
 *       the element masks);
 *   t := unit(t) for each tile unit in table order (attn_stage_tile);
 *   the additive mask and the position terms (ALiBi, T5, Shaw:
 *       sdpa_positions.c, sdpa_flash_positions.c) are added;
 *   softmax, whose denominator a row unit may join (attn_stage_row_finish);
 *   the backward multiplies d t by each tile unit's derivative
 *       (attn_stage_grad_tile) and lets units with parameters add their
 *       gradients outside the tiles (attn_stage_backward).
 * Fused SIMD tiles (attn_flash_ops.tile_forward_mod) run the tile units of
 * attn_flash_mod (attn_stage_fuse, attn_stage_head_init) in registers, to the bit as the steps.
 *
 * Adding a modifier: its descriptor field (attn/sdpa.h), a mod_<name>.c
 * defining an attn_score_unit, its row of the modifier table
 * (sdpa_modifiers.c: which kernels run it, and the unit), tests. */
#ifndef ATTN_SDPA_STAGE_H
#define ATTN_SDPA_STAGE_H

#include <math.h>
#include <stdint.h>

#include "attn/decode.h"
#include "attn/kernels.h"
#include "kernels/sdpa/sdpa_internal.h"

struct attn_flash_mod;

/* A unit's vector form of its tile op on one row: s [n] := op(s) with
 * parameter `param`, g (NULL or [n]) := the derivative. One per ISA level
 * that has it (NULL: the level below's, down to the unit's portable tile). */
typedef void (*attn_score_vec_fn)(float param, float *s, float *g, int64_t n);

/* A unit is named in its modifier's row of sdpa_modifiers.c's table, whose
 * `present` says whether a descriptor sets it. */
typedef struct attn_score_unit {
  const char *name;
  /* the descriptor's fields of the unit beyond what the modifier table
   * checks (values, combinations); NULL: nothing more */
  attn_status (*validate)(const attn_sdpa_desc *d);
  /* ---- an element-wise unit on the scaled logits (NULL: none) ----
   * s [R, n] (rows lds apart) := the unit of s, -inf kept (a masked key);
   * g (NULL or [R, n], rows ldg apart) := d unit / d s: the portable loop.
   * Where the active level has a vector form (vec below, attn_stage_vec),
   * the stage runs that instead, row by row, with param(d, h). */
  void (*tile)(const attn_sdpa_desc *d, int64_t h, int R, int n, float *s, int64_t lds, float *g,
               int64_t ldg);
  /* the vector form's parameter for head h (a unit with vec entries) */
  float (*param)(const attn_sdpa_desc *d, int64_t h);
  /* the math path's reference of tile, in double precision, on n logits */
  void (*row_exact)(const attn_sdpa_desc *d, int64_t h, float *s, int64_t n, float *g);
  /* the fields of the fused tiles' attn_flash_mod for head h */
  void (*fuse)(const attn_sdpa_desc *d, int64_t h, struct attn_flash_mod *mod);
  /* 1: tile(t + c) = tile(t) + c for a constant c (a loop may shift its
   * logits, as the int8 flash centres q); 0: the unit needs the true ones */
  int shift_invariant;
  attn_score_vec_fn vec[ATTN_ISA_COUNT];
  /* ---- a row unit: a logit with no value joining each row's softmax
   * denominator (NULL: none), -inf for none */
  float (*row_logit)(const attn_sdpa_desc *d, int64_t h);
  /* ---- the gradients of the unit's own parameters, from out, dout and the
   * saved lse, outside the tiles (NULL: none) */
  void (*backward)(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, const float *out,
                   const float *lse, const float *dout);
} attn_score_unit;

int attn_stage_unit_count(void);
const attn_score_unit *attn_stage_unit_at(int i);
const attn_score_unit *attn_stage_unit_named(const char *name); /* NULL: none */
/* unit u's vector op at level isa, or the level below's; NULL: portable */
attn_score_vec_fn attn_stage_vec(const attn_score_unit *u, attn_isa isa);

/* A decode call's score modifiers (attn/decode.h) as an SDPA descriptor's
 * fields, sizes and all, Lk 0: the decode loop (decode.c) validates and runs
 * them through this stage, as the SDPA loops do. */
void attn_stage_decode_mods(const attn_decode_desc *dd, attn_sdpa_desc *sd);

/* Every present unit's validate (called by attn_sdpa_validate). */
attn_status attn_stage_validate(const attn_sdpa_desc *d);

/* A present unit with a tile op? (the loops skip the stage otherwise) */
int attn_stage_has_tile(const attn_sdpa_desc *d);
/* Every present tile unit has a fused form (attn_flash_mod; 1 without any)? */
int attn_stage_fusable(const attn_sdpa_desc *d);
/* Every present tile unit shift invariant (1 without any)? */
int attn_stage_shift_invariant(const attn_sdpa_desc *d);

/* s [R, n] := the tile units of d in order (the active level's vector ops);
 * g (NULL or [R, n]) := the product of their derivatives (1 without any). */
void attn_stage_tile(const attn_sdpa_desc *d, int64_t h, int R, int n, float *s, int64_t lds,
                     float *g, int64_t ldg);
/* The math path's reference: s [n] in double precision per unit; g as above. */
void attn_stage_row_exact(const attn_sdpa_desc *d, int64_t h, float *s, int64_t n, float *g);
/* ds [R, n] *= g (the derivative attn_stage_tile saved). */
void attn_stage_grad_tile(int64_t R, int64_t n, float *ds, int64_t lds, const float *g,
                          int64_t ldg);
/* The fused tiles' attn_flash_mod fields of the tile units (the caller has
 * zeroed mod). */
void attn_stage_fuse(const attn_sdpa_desc *d, int64_t h, struct attn_flash_mod *mod);

/* What the stage does for head h of a call, looked up once per work item
 * (one call where a loop would ask attn_stage_has_tile, _fusable,
 * _row_logit and _fuse in turn). */
typedef struct {
  int tile;        /* a tile unit is present (attn_stage_has_tile) */
  int fusable;     /* attn_stage_fusable */
  float row_logit; /* attn_stage_row_logit (-inf: none) */
} attn_stage_head;
/* fills *st; with mod (not NULL), attn_stage_fuse's fields too */
void attn_stage_head_init(const attn_sdpa_desc *d, int64_t h, attn_stage_head *st,
                          struct attn_flash_mod *mod);

/* The row units' logit of head h joining every denominator (-inf: none). */
float attn_stage_row_logit(const attn_sdpa_desc *d, int64_t h);

/* A flash row's end: from its running max m and sum l (l = 0: no allowed
 * key) and x, the row units' logit (attn_stage_row_logit, once per head),
 * *inv := the factor for its accumulated output and *lse := its
 * log-sum-exp, x joining the denominator. Returns 0 when the output row is
 * exactly 0 (no allowed key). NaN in l (or x) gives NaN. */
static inline int attn_stage_row_finish(float x, float m, float l, float *inv, float *lse) {
  if (x == -INFINITY) {
    if (l == 0.0f) {
      *lse = -INFINITY;
      return 0;
    }
    *inv = 1.0f / l;
    *lse = m + logf(l);
    return 1;
  }
  if (l == 0.0f) {
    *lse = x;
    return 0;
  }
  const float m2 = x > m ? x : m; /* a NaN x does not win, but poisons l2 */
  const float a = expf(m - m2), l2 = l * a + expf(x - m2);
  *inv = a / l2;
  *lse = m2 + logf(l2);
  return 1;
}

/* Every present unit's parameter gradients (after the tiles). out/dout use
 * the resolved out strides; lse is [B, Hq, Lq]. */
void attn_stage_backward(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, const float *out,
                         const float *lse, const float *dout);

#endif
