/* Embedding lookup and its backward.
 * ids [n] in [0, vocab), table and dtable [vocab, dim], y and dy [n, dim].
 * The backward accumulates into dtable with each table row owned by one
 * thread (threads split the vocabulary), and every row sums its dy rows in
 * id order, so repeated ids give the same bits for any thread count. */
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn/kernels.h"

#define PAR_MIN_ELEMS 32768

static attn_status check_args(const char *op, const int32_t *ids, int64_t n, int64_t vocab,
                              int64_t dim) {
  if (n < 0 || vocab < 0 || dim < 0)
    return attn_set_error(ATTN_EINVAL, "%s: negative size n=%lld vocab=%lld dim=%lld", op,
                          (long long)n, (long long)vocab, (long long)dim);
  if (n > 0 && !ids) return attn_set_error(ATTN_EINVAL, "%s: ids is NULL", op);
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      return attn_set_error(ATTN_EINVAL, "%s: ids[%lld] = %d is outside [0, %lld)", op,
                            (long long)i, (int)ids[i], (long long)vocab);
  return ATTN_OK;
}

attn_status attn_embedding_f32(const int32_t *ids, int64_t n, const float *table, int64_t vocab,
                               int64_t dim, float *y) {
  attn_status st = check_args("embedding", ids, n, vocab, dim);
  if (st != ATTN_OK) return st;
  if (n == 0 || dim == 0) return ATTN_OK;
  if (!table || !y) return attn_set_error(ATTN_EINVAL, "embedding: table or y is NULL");
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n * dim >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++)
    memcpy(y + i * dim, table + (int64_t)ids[i] * dim, (size_t)dim * sizeof(float));
  return ATTN_OK;
}

attn_status attn_embedding_backward_f32(const int32_t *ids, int64_t n, const float *dy,
                                        int64_t vocab, int64_t dim, float *dtable) {
  attn_status st = check_args("embedding_backward", ids, n, vocab, dim);
  if (st != ATTN_OK) return st;
  if (n == 0 || dim == 0) return ATTN_OK;
  if (!dy || !dtable)
    return attn_set_error(ATTN_EINVAL, "embedding_backward: dy or dtable is NULL");
  int nt = n * dim >= PAR_MIN_ELEMS ? attn_get_num_threads() : 1;
  if (nt > vocab) nt = (int)vocab;
  /* Thread t owns table rows [vocab*t/nt, vocab*(t+1)/nt) and scans every id
   * in order: no row is written by two threads, and each row's sum order is
   * the id order whatever nt is. */
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
#ifdef _OPENMP
    int t = omp_get_thread_num(), nth = omp_get_num_threads();
#else
    int t = 0, nth = 1;
#endif
    int64_t lo = vocab * t / nth, hi = vocab * (t + 1) / nth;
    for (int64_t i = 0; i < n; i++) {
      int64_t v = ids[i];
      if (v < lo || v >= hi) continue;
      float *dst = dtable + v * dim;
      const float *src = dy + i * dim;
#pragma omp simd
      for (int64_t j = 0; j < dim; j++) dst[j] += src[j];
    }
  }
  return ATTN_OK;
}
