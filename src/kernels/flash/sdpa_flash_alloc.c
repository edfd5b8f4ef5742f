/* The flash loops' per-thread workspace (sdpa_flash.h), apart from the
 * loops so that the pieces they call (sdpa_flash_layout.c,
 * sdpa_flash_positions.c) do not call back into them. */
#include <stdint.h>
#include <stdlib.h>

#include "attn/status.h"
#include "kernels/flash/sdpa_flash.h"

float *attn_flash_alloc(int64_t per_thread, int threads, const char *what) {
  size_t n;
  int64_t per = (per_thread + 15) & ~(int64_t)15; /* keep each thread's block 64-byte aligned */
  if (per_thread < 0 || __builtin_mul_overflow((size_t)per, (size_t)threads, &n) ||
      __builtin_mul_overflow(n, sizeof(float), &n)) {
    attn_set_error(ATTN_ENOMEM, "sdpa flash: %s workspace too large", what);
    return NULL;
  }
  void *p = NULL;
  if (posix_memalign(&p, 64, n ? n : 64) != 0) {
    attn_set_error(ATTN_ENOMEM, "sdpa flash: cannot allocate %zu bytes of %s workspace", n, what);
    return NULL;
  }
  return p;
}
