/* AMX bf16 micro-kernel: a 32x32 f32 block of C in four accumulator tiles
 * (0..3, 16x16 each); per 32 depth steps two A tiles (4, 5: 16 rows x 32
 * bf16) and two B tiles (6, 7: 16 depth pairs x 16 columns x 2, the VNNI
 * layout) feed four TDPBF16PS. Packed layouts (gemm_lowp_internal.h): a~ in
 * rows of 32 depth steps (g = 32), b~ in depth pairs (g = 2) of 32 columns,
 * so a B tile row is 64 bytes at a stride of 128. Tiles are configured per
 * thread by begin() (kernels/arch/amx/amx.h). */
#include "kernels/arch/amx/amx.h"
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AMX_BF16_TARGET __attribute__((target("amx-tile,amx-bf16")))

/* tile[32, 32] = a~[kcp/32][32][32] · b~[kcp/2][32][2] */
AMX_BF16_TARGET static void ukr_amx_bf16_32x32(int64_t kcp, const void *av, const void *bv,
                                               void *tv) {
  const uint16_t *a = av, *b = bv;
  float *t = tv;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t p = 0; p < kcp; p += 32) {
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 16 * 32, 64);
    _tile_loadd(6, b, 128);
    _tile_loadd(7, b + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    a += 32 * 32;
    b += 16 * 64;
  }
  _tile_stored(0, t, 128);
  _tile_stored(1, t + 16, 128);
  _tile_stored(2, t + 16 * 32, 128);
  _tile_stored(3, t + 16 * 32 + 16, 128);
}

static const attn_lowp_kernel kernel = {
    .name = "amx_bf16 32x32", .path = "amx",
    .mr = 32, .nr = 32, .ga = 32, .gb = 2, .kgroup = 32,
    /* a~ 2 MB (L3), a micro-panel 64 KB (L2); b~ 1 MB (L2); kc 1024 halves
     * the passes of the f32 epilogue over C against kc 512 */
    .mc = 32 * 32, .kc = 1024, .nc = 512,
    .pa = LOWP_BF16, .pb = LOWP_BF16, .int_acc = 0,
    .ukr = ukr_amx_bf16_32x32,
    .begin = attn_amx_config_tiles,
    .end = attn_amx_release_tiles,
};

const attn_lowp_kernel *attn_lowp_kernel_bf16_amx(void) { return &kernel; }
#else
const attn_lowp_kernel *attn_lowp_kernel_bf16_amx(void) { return NULL; }
#endif
