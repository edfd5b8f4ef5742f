/* AMX tile configuration, per thread (the permission to use the tiles is
 * asked by cpu.c, attn_amx_ready() in dispatch.c). */
#include "kernels/arch/amx/amx.h"

#include <stdint.h>

#if defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>

/* LDTILECFG memory format (palette 1). */
typedef struct {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

/* A constant in memory: GCC 12's _tile_loadconfig declares an 8-byte memory
 * operand, so a config built on the stack just before it can lose its stores. */
static const tile_config config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

__attribute__((target("amx-tile"))) void attn_amx_config_tiles(void) {
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void attn_amx_release_tiles(void) { _tile_release(); }
#else
void attn_amx_config_tiles(void) {}
void attn_amx_release_tiles(void) {}
#endif
