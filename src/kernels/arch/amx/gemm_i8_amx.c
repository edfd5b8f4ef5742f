/* AMX int8 micro-kernel: a 32x32 s32 block of C in four accumulator tiles
 * (0..3); per 64 depth steps two A tiles (4, 5: 16 rows x 64 u8) and two B
 * tiles (6, 7: 16 depth quads x 16 columns x 4 s8, the VNNI layout) feed
 * four TDPBUSD. a~ in rows of 64 depth steps (g = 64); b~ in quads (g = 4)
 * of 32 columns, so a B tile row is 64 bytes at a stride of 128. */
#include "kernels/arch/amx/amx.h"
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AMX_INT8_TARGET __attribute__((target("amx-tile,amx-int8")))

/* tile[32, 32] = a~[kcp/64][32][64] · b~[kcp/4][32][4] */
AMX_INT8_TARGET static void ukr_amx_i8_32x32(int64_t kcp, const void *av, const void *bv,
                                             void *tv) {
  const uint8_t *a = av;
  const int8_t *b = bv;
  int32_t *t = tv;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t p = 0; p < kcp; p += 64) {
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 16 * 64, 64);
    _tile_loadd(6, b, 128);
    _tile_loadd(7, b + 64, 128);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
    a += 32 * 64;
    b += 16 * 128;
  }
  _tile_stored(0, t, 128);
  _tile_stored(1, t + 16, 128);
  _tile_stored(2, t + 16 * 32, 128);
  _tile_stored(3, t + 16 * 32 + 16, 128);
}

static const attn_lowp_kernel kernel = {
    .name = "amx_int8 32x32", .path = "amx",
    .mr = 32, .nr = 32, .ga = 64, .gb = 4, .kgroup = 64,
    /* a~ 1 MB, a micro-panel 32 KB; b~ 1 MB (L2) */
    .mc = 32 * 32, .kc = 1024, .nc = 1024,
    .pa = LOWP_U8, .pb = LOWP_S8, .int_acc = 1,
    .ukr = ukr_amx_i8_32x32,
    .begin = attn_amx_config_tiles,
    .end = attn_amx_release_tiles,
};

const attn_lowp_kernel *attn_lowp_kernel_i8_amx(void) { return &kernel; }
#else
const attn_lowp_kernel *attn_lowp_kernel_i8_amx(void) { return NULL; }
#endif
