/* GEMM: validation, path choice, and the BLIS-style packed driver shared by
 * the AVX-512 and portable micro-kernels.
 *
 * C is cut into a grid of one chunk per thread (chunk edges on micro-tile
 * boundaries). Within its chunk a thread loops
 *   ic over rows by mc      (packed a~ [mc, kc], L3; A is packed once)
 *   pc over K by kc         (same kc blocks whatever the thread count)
 *   jc over columns by nc   (packed b~ [kc, nc] stays in this core's L2)
 *   ir by mr, jr by nr      (micro-kernel; a~ micro-panel stays in L1)
 * Every element of C is computed by one thread, summing the same k blocks in
 * the same order, so results do not depend on the number of threads. */
#include <stdlib.h>

#include "kernels/gemm/gemm_grid.h"
#include "kernels/gemm/gemm_internal.h"
#include "kernels/kern.h"
#include "kernels/util.h"

#ifdef _OPENMP
#include <omp.h>
#endif


typedef struct {
  const attn_gemm_kernel_f32 *kr;
  int transa, transb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  const float *A, *B;
  float *C;
  int64_t kc;         /* depth of one k block (balanced: K split evenly) */
  int64_t mc, nc;     /* packing block sizes actually used */
  int tm, tn;         /* thread grid: tm row chunks x tn column chunks */
  int64_t mp, np;     /* micro-panels along M and N */
} gemm_plan;

enum { TILE_MAX = 1024 }; /* mr * nr of any kernel */

/* c (row stride ldc) = alpha * the micro-panel of A at row ic + ir, depth
 * pc (packed in ap, or in place when direct) · bp + beta * c */
static void ukr_call(const gemm_plan *g, int direct, const float *ap, int64_t ic, int64_t ir,
                     int64_t pc, int64_t kc, const float *bp, float *c, int64_t ldc, float alpha,
                     float beta) {
  if (direct)
    g->kr->ukr_rows(kc, g->A + (ic + ir) * g->lda + pc, g->lda, bp, c, ldc, alpha, beta);
  else
    g->kr->ukr(kc, ap, bp, c, ldc, alpha, beta);
}

/* Rows [m0, m1) x columns [n0, n1) of C, with a~ / b~ buffers of this thread.
 * a~ (g->mc rows, up to a few MB, L3) is packed once per k block; b~ (kc x
 * nc, sized for L2) is repacked for each block of rows. With a ukr_rows and
 * op(A) = A, the micro-kernel reads A's full micro-panels in place and only
 * the last, partial one is packed (no transposing copy of A; the same sums). */
static void gemm_chunk(const gemm_plan *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       float *abuf, float *bbuf) {
  const attn_gemm_kernel_f32 *kr = g->kr;
  /* In place unless the rows are a multiple of 4 KiB apart with more of
   * them than an L1 set has ways (8 at least): A's mr rows would then all
   * fall in one set and evict each other (avx512's 14 rows, lda 1024 or
   * 2048: 4 % slower than packing them, measured) */
  const int mr = kr->mr, nr = kr->nr;
  const int in_place =
      kr->ukr_rows && !g->transa && (mr <= 8 || (g->lda * (int64_t)sizeof(float)) % 4096 != 0);
  float tile[TILE_MAX] __attribute__((aligned(64)));
  for (int64_t ic = m0; ic < m1; ic += g->mc) {
    int64_t mc = attn_min64(g->mc, m1 - ic), full = in_place ? mc / mr * mr : 0;
    for (int64_t pc = 0; pc < g->K; pc += g->kc) {
      int64_t kc = attn_min64(g->kc, g->K - pc);
      float beta = pc == 0 ? g->beta : 1.0f; /* later k blocks accumulate */
      if (full < mc)
        kr->pack_a(g->transa, g->A, g->lda, ic + full, mc - full, pc, kc, mr, abuf + full * kc);
      for (int64_t jc = n0; jc < n1; jc += g->nc) {
        int64_t nc = attn_min64(g->nc, n1 - jc);
        kr->pack_b(g->transb, g->B, g->ldb, pc, kc, jc, nc, nr, bbuf);
        for (int64_t ir = 0; ir < mc; ir += mr) {
          const float *ap = abuf + ir * kc;
          int64_t rows = attn_min64(mr, mc - ir);
          const int direct = ir < full;
          for (int64_t jr = 0; jr < nc; jr += nr) {
            const float *bp = bbuf + jr * kc;
            int64_t cols = attn_min64(nr, nc - jr);
            float *c = g->C + (ic + ir) * g->ldc + jc + jr;
            if (rows == mr && cols == nr) {
              ukr_call(g, direct, ap, ic, ir, pc, kc, bp, c, g->ldc, g->alpha, beta);
              continue;
            }
            /* edge tile: full tile into tile[], then the valid part */
            ukr_call(g, direct, ap, ic, ir, pc, kc, bp, tile, nr, 1.0f, 0.0f);
            for (int64_t r = 0; r < rows; r++) {
              float *cr = c + r * g->ldc;
              const float *tr = tile + r * nr;
              if (beta == 0.0f)
                for (int64_t j = 0; j < cols; j++) cr[j] = g->alpha * tr[j];
              else
                for (int64_t j = 0; j < cols; j++) cr[j] = g->alpha * tr[j] + beta * cr[j];
            }
          }
        }
      }
    }
  }
}

static void chunk_range(const gemm_plan *g, int t, int64_t *m0, int64_t *m1, int64_t *n0,
                        int64_t *n1) {
  attn_gemm_grid_chunk(g->M, g->N, g->mp, g->np, g->tm, g->tn, g->kr->mr, g->kr->nr, t, m0, m1,
                       n0, n1);
}

static attn_status gemm_packed(const attn_gemm_kernel_f32 *kr, int transa, int transb,
                               int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                               int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc) {
  gemm_plan g = {kr, transa, transb, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C,
                 0, 0, 0, 1, 1, attn_ceil_div(M, kr->mr), attn_ceil_div(N, kr->nr)};
  g.kc = attn_ceil_div(K, attn_ceil_div(K, kr->kc));
  /* Threads: at most one per 2^20 multiply-adds (~8 us of work, well above
   * the cost of waking a thread), and a grid that fits. */
  int nt = attn_gemm_grid_plan(M, N, K, g.mp, g.np, kr->mr, kr->nr, kr->mc,
                               attn_get_num_threads(), 1048576.0, &g.tm, &g.tn);
  /* Buffers sized for the largest chunk, one pair per thread, 64-aligned. */
  int64_t rows = attn_ceil_div(g.mp, g.tm) * kr->mr, cols = attn_ceil_div(g.np, g.tn) * kr->nr;
  g.mc = attn_ceil_div(attn_ceil_div(rows, attn_ceil_div(rows, kr->mc)), kr->mr) * kr->mr; /* balanced */
  g.nc = attn_min64(attn_gemm_nc_fit(kr->nc, kr->nr, g.kc, attn_cpu_cache_bytes(2)), cols);
  int64_t asize = (g.mc * g.kc + 15) / 16 * 16, bsize = (g.kc * g.nc + 15) / 16 * 16;
  size_t per_thread = sizeof(float) * (size_t)(asize + bsize);
  float *buf = aligned_alloc(64, per_thread * (size_t)nt);
  if (!buf)
    return attn_set_error(ATTN_ENOMEM, "gemm: cannot allocate %zu bytes of packing buffers",
                          per_thread * (size_t)nt);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
  {
    int t = 0, T = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    T = omp_get_num_threads();
#endif
    float *abuf = buf + (size_t)t * (size_t)(asize + bsize), *bbuf = abuf + asize;
    /* fewer threads than planned (nested region): each takes several chunks */
    for (int c = t; c < nt; c += T) {
      int64_t m0, m1, n0, n1;
      chunk_range(&g, c, &m0, &m1, &n0, &n1);
      if (m0 < m1 && n0 < n1) gemm_chunk(&g, m0, m1, n0, n1, abuf, bbuf);
    }
  }
  free(buf);
  return ATTN_OK;
}

/* One row times Bᵀ (a decode step's Linear, M = 1): the level's vector form of
 * the small path's loop, the same bits; the outputs split over the threads
 * in runs of 64 from 2^18 multiply-adds on (a language model's output
 * layer: ~50 us of work, against the few us of waking a thread), each
 * output computed as alone, so any thread count gives the same bits. */
static void gemv_rows(int64_t inca, int64_t N, int64_t K, float alpha, const float *A,
                      const float *B, int64_t ldb, float beta, float *C) {
  const attn_row_ops *ro = &attn_kern_get()->row;
  const double work = (double)N * (double)K;
  int nt = work >= 262144.0 ? attn_get_num_threads() : 1;
  if ((double)nt > work / 131072.0) nt = (int)(work / 131072.0);
  if (nt > N / 64) nt = (int)(N / 64);
  if (nt <= 1) {
    ro->gemv_nt(N, K, alpha, A, inca, B, ldb, beta, C);
    return;
  }
  const int64_t runs = attn_ceil_div(N, 64);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
  for (int t = 0; t < nt; t++) {
    const int64_t j0 = runs * t / nt * 64, j1 = attn_min64(runs * (t + 1) / nt * 64, N);
    if (j0 < j1) ro->gemv_nt(j1 - j0, K, alpha, A, inca, B + j0 * ldb, ldb, beta, C + j0);
  }
}

/* 1 if a [rows, width] matrix (rows, width >= 1) with row stride ld spans
 * more elements or bytes than int64 / size_t hold */
static int gemm_extent(int64_t rows, int64_t ld, int64_t width) {
  int64_t e;
  size_t bytes;
  return attn_ck_mul(rows - 1, ld, &e) || attn_ck_add(e, width, &e) ||
         attn_ck_bytes(e, sizeof(float), &bytes);
}

attn_status attn_gemm_f32_path(attn_gemm_path path, int transa, int transb, int64_t M,
                               int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                               const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0)
    return attn_set_error(ATTN_EINVAL, "gemm: negative size M=%lld N=%lld K=%lld",
                          (long long)M, (long long)N, (long long)K);
  if (M == 0 || N == 0) return ATTN_OK;
  if (!C) return attn_set_error(ATTN_EINVAL, "gemm: C is NULL");
  if (K > 0 && !A) return attn_set_error(ATTN_EINVAL, "gemm: A is NULL");
  if (K > 0 && !B) return attn_set_error(ATTN_EINVAL, "gemm: B is NULL");
  /* leading dims: at least the width of a stored row */
  int64_t wa = transa ? M : K, wb = transb ? K : N;
  if (K > 0 && lda < wa)
    return attn_set_error(ATTN_EINVAL, "gemm: lda=%lld < %lld (row width of A%s)",
                          (long long)lda, (long long)wa, transa ? ", stored K x M" : "");
  if (K > 0 && ldb < wb)
    return attn_set_error(ATTN_EINVAL, "gemm: ldb=%lld < %lld (row width of B%s)",
                          (long long)ldb, (long long)wb, transb ? ", stored N x K" : "");
  if (ldc < N)
    return attn_set_error(ATTN_EINVAL, "gemm: ldc=%lld < N=%lld", (long long)ldc, (long long)N);
  /* every offset the loops form, up to each matrix's last element, fits */
  if ((K > 0 && gemm_extent(transa ? K : M, lda, wa)) ||
      (K > 0 && gemm_extent(transb ? N : K, ldb, wb)) || gemm_extent(M, ldc, N))
    return attn_set_error(ATTN_EINVAL,
                          "gemm: sizes M=%lld N=%lld K=%lld with lda=%lld ldb=%lld ldc=%lld are "
                          "too large",
                          (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb,
                          (long long)ldc);
  if (path == ATTN_GEMM_AUTO) {
    double work = (double)M * (double)N * (double)K;
    path = K == 0 || M == 1 || work < ATTN_GEMM_SMALL_WORK ? ATTN_GEMM_SMALL : ATTN_GEMM_PACKED;
  }
  if (path == ATTN_GEMM_SMALL && M == 1 && transb && K > 0) {
    gemv_rows(transa ? lda : 1, N, K, alpha, A, B, ldb, beta, C);
    return ATTN_OK;
  }
  if (path == ATTN_GEMM_SMALL || K == 0) {
    attn_gemm_small_f32(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return ATTN_OK;
  }
  const attn_gemm_kernel_f32 *kr =
      path == ATTN_GEMM_GENERIC ? attn_gemm_kernel_generic_f32() : attn_kern_get()->gemm;
  return gemm_packed(kr, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

attn_status attn_gemm_f32(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc) {
  return attn_gemm_f32_path(ATTN_GEMM_AUTO, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta,
                            C, ldc);
}
