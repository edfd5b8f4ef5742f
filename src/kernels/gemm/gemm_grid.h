/* The thread grid shared by the packed GEMM drivers (f32 in gemm.c, bf16 /
 * fp16 / int8 in gemm_lowp.c): C is cut into tm x tn chunks on micro-tile
 * edges, one per thread, so every element is computed by one thread in the
 * same k order whatever the thread count. */
#ifndef ATTN_GEMM_GRID_H
#define ATTN_GEMM_GRID_H

#include <stdint.h>

/* mp, np: micro-tiles along M and N; mr, nr, mc: the kernel's register
 * block and row cache block. Chooses tm x tn = nt minimising the largest
 * chunk's multiply-adds plus its packing (a thread packs its rows of A once
 * and its columns of B once per block of mc rows; a packed element costs
 * ~16 multiply-adds). tm = tn = 1 when no split fits. */
void attn_gemm_grid_choose(int64_t mp, int64_t np, int64_t K, int64_t mr, int64_t nr, int64_t mc,
                           int nt, int *tm, int *tn);
/* The number of threads for an M x N x K product (at most nt, at most one per
 * work_per_thread multiply-adds) and its grid (*tm x *tn = the result). */
int attn_gemm_grid_plan(int64_t M, int64_t N, int64_t K, int64_t mp, int64_t np, int64_t mr,
                        int64_t nr, int64_t mc, int nt, double work_per_thread, int *tm, int *tn);
/* Rows [m0, m1) and columns [n0, n1) of chunk t of the tm x tn grid. */
void attn_gemm_grid_chunk(int64_t M, int64_t N, int64_t mp, int64_t np, int tm, int tn,
                          int64_t mr, int64_t nr, int t, int64_t *m0, int64_t *m1, int64_t *n0,
                          int64_t *n1);

#endif
