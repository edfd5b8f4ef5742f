/* The fused tiles' hook for user score modifiers (sdpa_usermod_fused.h). */
#include <stddef.h>

#include "kernels/sdpa/sdpa_usermod_fused.h"
#include "kernels/sdpa/sdpa_usermod.h"

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR };

/* rows r0 .. r0 + MR - 1 of the call, every key of the block allowed */
static void user_tile(const attn_flash_mod *mod, int r0, float *s) {
  attn_usermod_tile(mod->udesc, mod->ub, mod->uh, mod->ui0 + r0, MR, mod->uj0, BC, s, BC, NULL, 0);
}

int attn_usermod_fuse(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t b, int64_t h,
                      attn_flash_mod *mod) {
  const attn_sdpa_mods *m = d->mods;
  mod->user = NULL;
  if (!ops->tile_forward_mod || !m || m->mask_mod || !attn_usermod_any_score(m) ||
      mod->cap != 0.0f || mod->alibi)
    return 0;
  mod->user = user_tile;
  mod->udesc = d, mod->ub = b, mod->uh = h;
  return 1;
}
