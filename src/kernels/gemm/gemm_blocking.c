/* Cache blocking of the packed f32 GEMM fitted to the CPU it runs on: the
 * width of the b~ block (nc) that stays in the L2 (attn_cpu_cache_bytes(2)).
 * Blocking sizes other than kc do not change any result (kc alone sets the
 * order of the k sums, and it never depends on the cache). */
#include "kernels/gemm/gemm_internal.h"

int64_t attn_gemm_nc_fit(int64_t nc, int64_t nr, int64_t kc, int64_t l2) {
  if (l2 <= 0 || kc <= 0 || nr <= 0) return nc;
  int64_t fit = l2 / 4 * 3 / (kc * (int64_t)sizeof(float)) / nr * nr;
  return fit < nr ? nr : fit < nc ? fit : nc;
}
