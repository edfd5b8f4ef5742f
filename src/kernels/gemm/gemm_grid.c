#include "kernels/gemm/gemm_grid.h"
#include "kernels/util.h"


enum { PACK_COST = 16 }; /* ~ vector FMA rate / packing rate */

void attn_gemm_grid_choose(int64_t mp, int64_t np, int64_t K, int64_t mr, int64_t nr, int64_t mc,
                           int nt, int *tm_out, int *tn_out) {
  double best = -1;
  *tm_out = *tn_out = 1;
  for (int tm = 1; tm <= nt; tm++) {
    if (nt % tm) continue;
    int tn = nt / tm;
    if (tm > mp || tn > np) continue;
    double rows = (double)(attn_ceil_div(mp, tm) * mr);
    double cols = (double)(attn_ceil_div(np, tn) * nr), k = (double)K;
    double cost = rows * cols * k + PACK_COST * (rows * k + k * cols * (double)attn_ceil_div((int64_t)rows, mc));
    if (best < 0 || cost < best) {
      best = cost;
      *tm_out = tm;
      *tn_out = tn;
    }
  }
}

int attn_gemm_grid_plan(int64_t M, int64_t N, int64_t K, int64_t mp, int64_t np, int64_t mr,
                        int64_t nr, int64_t mc, int nt, double work_per_thread, int *tm, int *tn) {
  double work = (double)M * (double)N * (double)K;
  if (work / work_per_thread < nt) nt = work < 2 * work_per_thread ? 1 : (int)(work / work_per_thread);
  for (; nt > 1; nt--) {
    attn_gemm_grid_choose(mp, np, K, mr, nr, mc, nt, tm, tn);
    if (*tm * *tn == nt) return nt;
  }
  *tm = *tn = 1;
  return 1;
}

void attn_gemm_grid_chunk(int64_t M, int64_t N, int64_t mp, int64_t np, int tm, int tn,
                          int64_t mr, int64_t nr, int t, int64_t *m0, int64_t *m1, int64_t *n0,
                          int64_t *n1) {
  int ti = t / tn, tj = t % tn;
  *m0 = attn_min64(M, ti * mp / tm * mr);
  *m1 = attn_min64(M, (ti + 1) * mp / tm * mr);
  *n0 = attn_min64(N, tj * np / tn * nr);
  *n1 = attn_min64(N, (tj + 1) * np / tn * nr);
}
