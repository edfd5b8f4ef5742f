/* LayerNorm over the last dim, f32, forward and backward.
 * x, y, dy, dx [rows, n]; weight, bias, dweight, dbias [n]; mean, rstd [rows].
 * Two-pass mean and biased variance (as torch), summed in double. Rows are
 * split over threads for y and dx; dweight/dbias are summed over fixed blocks
 * of rows, then over the blocks in order, so every result is the same for any
 * thread count. */
#include <math.h>
#include <stdlib.h>

#include "attn/kernels.h"
#include "core/checked.h"
#include "kernels/rows/elementwise_internal.h"

#define PAR_MIN_ELEMS 32768
#define ROW_BLOCK 32 /* rows per partial sum of dweight/dbias */
#define COL_BLOCK 64 /* columns of the final dweight/dbias sum one thread owns */

static attn_status check_sizes(const char *op, int64_t rows, int64_t n) {
  if (rows < 0 || n < 0)
    return attn_set_error(ATTN_EINVAL, "%s: negative size rows=%lld n=%lld", op,
                          (long long)rows, (long long)n);
  return ATTN_OK;
}

attn_status attn_layernorm_f32(const float *x, const float *weight, const float *bias, float *y,
                               float *mean, float *rstd, int64_t rows, int64_t n, float eps) {
  attn_status st = check_sizes("layernorm", rows, n);
  if (st != ATTN_OK) return st;
  if (!(eps >= 0.0f) || isinf(eps))
    return attn_set_error(ATTN_EINVAL, "layernorm: eps must be finite and >= 0, got %g",
                          (double)eps);
  if (rows == 0) return ATTN_OK;
  if (n > 0 && (!x || !y)) return attn_set_error(ATTN_EINVAL, "layernorm: x or y is NULL");
  const attn_row_ops *ro = &attn_kern_get()->row;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (rows * n >= PAR_MIN_ELEMS && rows > 1)
  for (int64_t r = 0; r < rows; r++) {
    float m, rs;
    ro->layernorm_row(x + r * n, weight, bias, y + r * n, eps, n, &m, &rs);
    if (mean) mean[r] = m;
    if (rstd) rstd[r] = rs;
  }
  return ATTN_OK;
}

attn_status attn_layernorm_backward_f32(const float *x, const float *weight, const float *mean,
                                        const float *rstd, const float *dy, float *dx,
                                        float *dweight, float *dbias, int64_t rows, int64_t n) {
  attn_status st = check_sizes("layernorm_backward", rows, n);
  if (st != ATTN_OK) return st;
  if (rows == 0 || n == 0) return ATTN_OK;
  if (!x || !mean || !rstd || !dy || !dx)
    return attn_set_error(ATTN_EINVAL, "layernorm_backward: NULL %s",
                          !x ? "x" : !mean ? "mean" : !rstd ? "rstd" : !dy ? "dy" : "dx");
  int64_t elems, nparts;
  if (attn_ck_mul(rows, n, &elems))
    return attn_set_error(ATTN_EINVAL, "layernorm_backward: rows=%lld x n=%lld is too large",
                          (long long)rows, (long long)n);
  int par = elems >= PAR_MIN_ELEMS;
  /* dweight/dbias: each block of ROW_BLOCK rows sums its rows (in order) into
   * its own partial [2, n] while the rows are in cache; the partials are then
   * added in block order. Blocks are fixed, so the sums are the same for any
   * thread count. */
  int64_t nrb = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
  float *part = NULL;
  if (dweight || dbias) {
    size_t bytes = 0;
    if (attn_ck_mul(nrb, n, &nparts) || attn_ck_mul(nparts, 2, &nparts) || attn_ck_bytes(nparts, sizeof(float), &bytes) ||
        !(part = calloc((size_t)nparts, sizeof(float))))
      return attn_set_error(ATTN_ENOMEM,
                            "layernorm_backward: out of memory for the dweight/dbias partial sums "
                            "(%lld row blocks x 2 x %lld floats%s)",
                            (long long)nrb, (long long)n, bytes ? "" : ", too large to allocate");
  }
  const attn_row_ops *ro = &attn_kern_get()->row;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (par && nrb > 1)
  for (int64_t rb = 0; rb < nrb; rb++) {
    float *pw = part ? part + rb * 2 * n : NULL, *pb = pw ? pw + n : NULL;
    int64_t r1 = (rb + 1) * ROW_BLOCK < rows ? (rb + 1) * ROW_BLOCK : rows;
    for (int64_t r = rb * ROW_BLOCK; r < r1; r++) {
      const float *xr = x + r * n, *dyr = dy + r * n;
      float m = mean[r], rs = rstd[r];
      ro->layernorm_backward_row(xr, weight, m, rs, dyr, dx + r * n, n);
      if (!pw) continue;
#pragma omp simd
      for (int64_t j = 0; j < n; j++) {
        pw[j] += dyr[j] * (xr[j] - m) * rs;
        pb[j] += dyr[j];
      }
    }
  }
  if (!part) return ATTN_OK;
  int64_t ncb = (n + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (par && ncb > 1)
  for (int64_t cb = 0; cb < ncb; cb++) {
    int64_t j0 = cb * COL_BLOCK, nj = n - j0 < COL_BLOCK ? n - j0 : COL_BLOCK;
    float gw[COL_BLOCK] = {0}, gb[COL_BLOCK] = {0};
    for (int64_t rb = 0; rb < nrb; rb++) {
      const float *pw = part + rb * 2 * n + j0, *pb = pw + n;
#pragma omp simd
      for (int64_t j = 0; j < nj; j++) {
        gw[j] += pw[j];
        gb[j] += pb[j];
      }
    }
    for (int64_t j = 0; j < nj; j++) {
      if (dweight) dweight[j0 + j] += gw[j];
      if (dbias) dbias[j0 + j] += gb[j];
    }
  }
  free(part);
  return ATTN_OK;
}
