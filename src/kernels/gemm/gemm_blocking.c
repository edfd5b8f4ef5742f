/* Cache blocking of the packed f32 GEMM fitted to the CPU it runs on: the
 * L2 size, and the width of the b~ block (nc) that stays in it. Blocking
 * sizes other than kc do not change any result (kc alone sets the order of
 * the k sums, and it never depends on the cache). */
#include <pthread.h>
#include <unistd.h>

#include "kernels/gemm/gemm_internal.h"

static int64_t l2_bytes;
static pthread_once_t l2_once = PTHREAD_ONCE_INIT;

static void l2_detect(void) {
#ifdef _SC_LEVEL2_CACHE_SIZE
  long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
  l2_bytes = v > 0 ? (int64_t)v : 0;
#endif
}

int64_t attn_cpu_l2_bytes(void) {
  pthread_once(&l2_once, l2_detect);
  return l2_bytes;
}

int64_t attn_gemm_nc_fit(int64_t nc, int64_t nr, int64_t kc, int64_t l2) {
  if (l2 <= 0 || kc <= 0 || nr <= 0) return nc;
  int64_t fit = l2 / 4 * 3 / (kc * (int64_t)sizeof(float)) / nr * nr;
  return fit < nr ? nr : fit < nc ? fit : nc;
}
