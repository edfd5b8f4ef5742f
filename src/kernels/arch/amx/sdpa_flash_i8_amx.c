/* AMX-INT8 scores of the int8 flash attention: sᵀ [64 keys, 16 queries] in
 * four accumulator tiles (0..3), per 64 depth steps one Q tile (4, the VNNI
 * layout) and four K tiles (5, 6 alternating): 4 TDPBSSD (s8 x s8 -> s32,
 * exact) per chunk. The caller has configured the tiles (the bf16 flash's
 * begin, kernels/arch/amx/amx.h). */
#include "kernels/flash/sdpa_flash_i8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AMX_I8_TARGET __attribute__((target("amx-tile,amx-int8")))

/* GCC's tile store asm has no memory operand: later reads of st stay after
 * it (as in sdpa_flash_bf16_amx.c). */
#define MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

AMX_I8_TARGET static void scores_amx(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                     int32_t *st) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int c = 0; c < dc; c++) {
    const int8_t *kc = k + 64 * c;
    _tile_loadd(4, qp + 1024 * c, 64);
    _tile_loadd(5, kc, ldk);
    _tile_loadd(6, kc + 16 * ldk, ldk);
    _tile_dpbssd(0, 5, 4);
    _tile_loadd(5, kc + 32 * ldk, ldk);
    _tile_dpbssd(1, 6, 4);
    _tile_loadd(6, kc + 48 * ldk, ldk);
    _tile_dpbssd(2, 5, 4);
    _tile_dpbssd(3, 6, 4);
  }
  _tile_stored(0, st, 64);
  _tile_stored(1, st + 256, 64);
  _tile_stored(2, st + 512, 64);
  _tile_stored(3, st + 768, 64);
  MEMORY_BARRIER();
}

attn_i8_scores_fn attn_flash_i8_scores_amx(void) { return scores_amx; }
#else
attn_i8_scores_fn attn_flash_i8_scores_amx(void) { return 0; }
#endif
