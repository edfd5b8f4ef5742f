/* The row variants of the user score modifier (attn/sdpa_mods.h, "Row
 * variants") at the hook points of sdpa_usermod.c: one call of the user's
 * row callback per run of at most ATTN_USERMOD_RUN keys of one query row,
 * with the excluded keys (-inf) passed as 0 and kept excluded, and the
 * gradients that are 0 kept 0. */
#ifndef ATTN_SDPA_USERMOD_ROW_H
#define ATTN_SDPA_USERMOD_ROW_H

#include <stdint.h>

#include "attn/sdpa_mods.h"

enum { ATTN_USERMOD_RUN = 256 };

/* Is a score modifier set (per pair or per row)? */
static inline int attn_usermod_any_score(const attn_sdpa_mods *m) {
  return m && (m->score_mod || m->score_mod_row);
}

/* Row i of (b, h), keys j0 .. j0+n-1: the scores at x[c * cs] (the callback
 * sees x + sh where shift is set; written back less sh) through
 * score_mod_row; -inf stays -inf. raw (NULL, or at x's offsets): the scores
 * passed to the callback (0 where excluded). */
void attn_usermod_row_scores(const attn_sdpa_mods *m, int64_t b, int64_t h, int64_t i, int64_t j0,
                             int64_t n, float *x, int64_t cs, int shift, float sh, float *raw);
/* g [n] (gradient w.r.t. the modified scores of row i) := g * derivative at
 * raw [n], after score_mod_row_param_grad(raw, g); zeros stay 0. */
void attn_usermod_row_grad(const attn_sdpa_mods *m, int64_t b, int64_t h, int64_t i, int64_t j0,
                           int64_t n, const float *raw, float *g);
/* attn_usermod_dp_t's work for score_mod_row (see sdpa_usermod.h) */
void attn_usermod_row_dp_t(const attn_sdpa_mods *m, int64_t b, int64_t h, int64_t i0, int64_t R,
                           int64_t j0, int64_t nk, const float *raw, const float *st,
                           int64_t ldst, float *dpt, const float *lse, const float *di);

#endif
