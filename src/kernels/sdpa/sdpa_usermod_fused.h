/* User score modifiers (score_mod, score_mod_row) inside the fused whole
 * tiles of the f32 flash forward (attn_flash_ops.tile_forward_mod with
 * attn_flash_mod.user): the row groups' logits go through
 * attn_usermod_tile between q·kᵀ and the softmax, as in the steps (the same
 * bits), without leaving the fused kernel. */
#ifndef ATTN_SDPA_USERMOD_FUSED_H
#define ATTN_SDPA_USERMOD_FUSED_H

#include "kernels/flash/flash_tiles.h"
#include "kernels/sdpa/sdpa_internal.h"

/* Sets mod->user (and its fields for (b, h)) where the fused tiles can run
 * d's mods: ops has tile_forward_mod, a score_mod or score_mod_row and no
 * mask_mod, and no fused unit of the score-modifier stage nor ALiBi in mod (their order against the
 * callback is the steps'). Returns 1 if set, else 0 (mod->user NULL). */
int attn_usermod_fuse(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t b, int64_t h,
                      attn_flash_mod *mod);

#endif
