/* AMX permission (once per process, thread-safe) and tile configuration. */
#include "kernels/arch/amx/amx.h"
#include "kernels/kern.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "attn/kernels.h"

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#include <immintrin.h>

enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

/* 0 when the kernel grants XTILEDATA (and confirms it in the permitted set). */
static int request_linux(void) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return -1;
  unsigned long bits = 0;
  if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bits) != 0) return -1;
  return (bits >> XFEATURE_XTILEDATA) & 1 ? 0 : -1;
}

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
static int request_linux(void) { return -1; }
void attn_amx_config_tiles(void) {}
void attn_amx_release_tiles(void) {}
#endif

/* The CPU has AMX tiles at the active level (the table has AMX kernels). */
static int amx_tiles_present(void) {
  const attn_lowp_ops *l = &attn_kern_get()->lowp;
  return l->bf16_amx || l->i8_amx;
}

static pthread_mutex_t amx_lock = PTHREAD_MUTEX_INITIALIZER;
static int amx_state;                  /* 0 unknown, 1 granted, -1 refused */
static int (*amx_request)(void) = request_linux;

int attn_amx_ready(void) {
  if (!amx_tiles_present()) return 0;
  pthread_mutex_lock(&amx_lock);
  if (amx_state == 0) amx_state = amx_request() == 0 ? 1 : -1;
  int ok = amx_state == 1;
  pthread_mutex_unlock(&amx_lock);
  return ok;
}

void attn_amx_set_request_hook(int (*request)(void)) {
  pthread_mutex_lock(&amx_lock);
  amx_request = request ? request : request_linux;
  amx_state = 0;
  pthread_mutex_unlock(&amx_lock);
}
