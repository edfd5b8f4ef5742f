/* User modifiers (attn/sdpa_mods.h) inside the SDPA backends: the per-tile
 * operations that the math rows (sdpa_math.c) and the flash tile loops
 * (sdpa_flash.c, sdpa_flash_backward.c; fp16 through the same loops) call
 * at their hook points. Everything here is a no-op / "nothing to do" when
 * d->mods is NULL. Tiles: rows i0..i0+R-1 (query rows of the call, as the
 * callbacks' q_idx), keys j0..j0+nk-1, row stride lds. */
#ifndef ATTN_SDPA_USERMOD_H
#define ATTN_SDPA_USERMOD_H

#include <stdint.h>

#include "attn/sdpa_mods.h"
#include "kernels/sdpa/sdpa_internal.h"
#include "kernels/sdpa/sdpa_usermod_row.h"

/* The descriptor's mods (from attn_sdpa_validate): block mask shape and
 * sizes, score_mod_param_grad needs score_mod, score_mod (or score_mod_row,
 * with only its own derivatives) not with shaw_k. */
attn_status attn_usermod_validate(const attn_sdpa_desc *d);
/* The backward's extra rule: score_mod needs score_mod_grad (score_mod_row
 * score_mod_row_grad). */
attn_status attn_usermod_check_backward(const attn_sdpa_desc *d, const char *who);
/* ATTN_EUNSUPPORTED "<who>: user modifiers ..." where mods are set (the
 * kernels that do not take them). */
attn_status attn_usermod_refuse(const attn_sdpa_desc *d, const char *who);

/* What a tile needs: 0 = every pair excluded by the block mask (skip the
 * tile), 1 = nothing (no mods, or a block mask FULL over the tile and no
 * score_mod), 2 = attn_usermod_tile on its logits. */
int attn_usermod_tile_state(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                            int64_t j0, int64_t nk);
/* Logits s (scale * q·k where allowed, -inf elsewhere): -inf where mask_mod
 * (or the block mask) excludes, score_mod applied to the others; -inf stays.
 * raw (NULL, or row stride ldr): the scores before, for the backward. */
void attn_usermod_tile(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                       int64_t j0, int64_t nk, float *s, int64_t lds, float *raw, int64_t ldr);
/* The same on a transposed tile st[c * ldst + r] (the bf16 and int8 loops),
 * whose scores are the true ones less shift[r] (shift NULL: none; int8 keeps
 * scale q·mean(k) out of its scores); raw (NULL or at st's offsets): the true
 * scores before the mods. */
void attn_usermod_tile_t(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                         int64_t j0, int64_t nk, float *st, int64_t ldst, const float *shift,
                         float *raw);
/* The bf16 backward's chain, before its probs_grad (which rounds ds to bf16):
 * on the transposed final logits st and dpᵀ, with p = e^(st - lse[r]) and
 * g = p (dp - di[r]): score_mod_param_grad(raw, g) where g != 0, and dp :=
 * (dp - di[r]) score_mod_grad(raw) + di[r], so that p (dp - di) is the
 * gradient w.r.t. the score. */
void attn_usermod_dp_t(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                       int64_t j0, int64_t nk, const float *raw, const float *st, int64_t ldst,
                       float *dpt, const float *lse, const float *di);
/* Does the backward chain through score_mod (score_mod or score_mod_row set)? */
static inline int attn_usermod_has_grad(const attn_sdpa_desc *d) {
  return attn_usermod_any_score(d->mods);
}
/* Must the backward call score_mod_param_grad for each (b, h) from one
 * work item? */
static inline int attn_usermod_serial(const attn_sdpa_desc *d) {
  return d->mods && (d->mods->score_mod_param_grad || d->mods->score_mod_row_param_grad);
}
/* ds [R, nk] (gradient w.r.t. the logits, unscaled) := ds * score_mod_grad(raw)
 * where ds != 0, after score_mod_param_grad(raw, ds) there; in row-major order. */
void attn_usermod_tile_grad(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                            int64_t j0, int64_t nk, const float *raw, int64_t ldr, float *ds,
                            int64_t ldds);

#endif
