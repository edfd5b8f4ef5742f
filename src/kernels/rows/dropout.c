/* Dropout on dropout's own Philox stream (dropout_stream.h): element i is
 * kept iff attn_dropout_uniform(seed, offset + i) >= p; kept values are
 * scaled by 1/(1-p). Each element's draw depends only on (seed, offset + i),
 * so the mask is the same for any thread count and any split into calls,
 * and consecutive calls with offset advanced by n draw fresh numbers. Every
 * level runs attn_dropout_run (dropout_stream.c) with its own fill and apply
 * steps (dropout_stream.c, dropout_avx2.c, also at the AVX-512 level,
 * row_ops_neon.c; bit-identical); chunks are split over threads. */
#include <math.h>
#include <stddef.h>

#include "attn/kernels.h"
#include "kernels/rows/dropout_stream.h"
#include "kernels/rows/elementwise_internal.h"
#include "kernels/rows/rng_internal.h"
#include "kernels/util.h"

#define PAR_MIN_ELEMS 16384
#define CHUNK 4096 /* values per call of the level's kernel */

static attn_status check_p(const char *op, float p) {
  if (!(p >= 0.0f && p < 1.0f))
    return attn_set_error(ATTN_EINVAL, "%s: p must be in [0, 1), got %g", op, (double)p);
  return ATTN_OK;
}

attn_status attn_dropout_f32(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                             uint64_t seed, uint64_t offset) {
  if (n < 0) return attn_set_error(ATTN_EINVAL, "dropout: negative size n=%lld", (long long)n);
  attn_status st = check_p("dropout", p);
  if (st != ATTN_OK) return st;
  if (n > 0 && (!x || !y)) return attn_set_error(ATTN_EINVAL, "dropout: x or y is NULL");
  float scale = 1.0f / (1.0f - p);
  void (*drop)(const float *, float *, uint8_t *, int64_t, float, float, uint64_t, uint64_t) =
      attn_kern_get()->row.dropout;
  int64_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
    uint8_t *m = mask ? mask + i0 : NULL;
    drop(x + i0, y + i0, m, len, p, scale, seed, offset + (uint64_t)i0);
  }
  return ATTN_OK;
}

attn_status attn_dropout_backward_f32(const float *dy, const uint8_t *mask, float *dx, int64_t n,
                                      float p) {
  if (n < 0)
    return attn_set_error(ATTN_EINVAL, "dropout_backward: negative size n=%lld", (long long)n);
  attn_status st = check_p("dropout_backward", p);
  if (st != ATTN_OK) return st;
  if (n > 0 && (!dy || !mask || !dx))
    return attn_set_error(ATTN_EINVAL, "dropout_backward: NULL %s",
                          !dy ? "dy" : !mask ? "mask" : "dx");
  float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd num_threads(attn_get_num_threads()) if (n >= PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    float g = dy[i] * scale; /* loaded unconditionally: a select, not a branch */
    dx[i] = mask[i] != 0 ? g : 0.0f;
  }
  return ATTN_OK;
}
