/* AMX tiles: the process-wide permission to use XTILEDATA (Linux asks
 * programs to request it with arch_prctl(ARCH_REQ_XCOMP_PERM, 18) before the
 * first tile instruction, or they get SIGILL), requested once, thread-safe,
 * and the tile configuration every AMX micro-kernel uses. The request is
 * cpu.c's, attn_amx_ready() dispatch.c's (it asks the kernel table), the
 * tile configuration amx.c's. */
#ifndef ATTN_AMX_H
#define ATTN_AMX_H

/* 1 when the CPU has AMX tiles (the active level's table has AMX kernels) and the kernel granted
 * the permission; the request is made on the first call only. */
int attn_amx_ready(void);

/* Tests: replace the permission request (a function returning 0 when granted)
 * and forget the cached answer; NULL restores the real request. */
void attn_amx_set_request_hook(int (*request)(void));

/* Per thread: load the configuration (tiles 0..7 all 16 rows x 64 bytes) /
 * release the tiles. Only after attn_amx_ready() returned 1. */
void attn_amx_config_tiles(void);
void attn_amx_release_tiles(void);

#endif
