/* Dropout with the Philox counter RNG (rng.c): element i is kept iff
 * attn_rng_uniform(seed, offset + i) >= p; kept values are scaled by 1/(1-p).
 * Each element's draw depends only on (seed, offset + i), so the mask is the
 * same for any thread count, and consecutive calls with offset advanced by n
 * draw fresh numbers. On AVX-512 CPUs the forward draws 16 at a time
 * (dropout_avx512.c, bit-identical); chunks are split over threads. */
#include <math.h>
#include <stddef.h>

#include "attn/kernels.h"
#include "kernels/elementwise_internal.h"

#define PAR_MIN_ELEMS 16384
#define CHUNK 4096 /* values per call of the vector path */

static attn_status check_p(const char *op, float p) {
  if (!(p >= 0.0f && p < 1.0f))
    return attn_set_error(ATTN_EINVAL, "%s: p must be in [0, 1), got %g", op, (double)p);
  return ATTN_OK;
}

void attn_dropout_f32_generic(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                              float scale, uint64_t seed, uint64_t offset) {
  for (int64_t i = 0; i < n; i++) {
    int keep = attn_rng_uniform(seed, offset + (uint64_t)i) >= p;
    y[i] = keep ? x[i] * scale : 0.0f;
    if (mask) mask[i] = (uint8_t)keep;
  }
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
