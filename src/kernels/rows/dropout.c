/* Dropout on dropout's own Philox stream (dropout_stream.h): element i is
 * kept iff attn_dropout_uniform(seed, offset + i) >= p; kept values are
 * scaled by 1/(1-p). Each element's draw depends only on (seed, offset + i),
 * so the mask is the same for any thread count and any split into calls,
 * and consecutive calls with offset advanced by n draw fresh numbers. Every
 * level runs attn_dropout_run with its own fill and apply steps
 * (dropout_avx2.c, also at the AVX-512 level, row_ops_neon.c;
 * bit-identical); chunks are split over threads. */
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

void attn_dropout_run(attn_dropout_fill_fn fill, attn_dropout_apply_fn apply, const float *x,
                      float *y, uint8_t *mask, int64_t n, float p, float scale, uint64_t seed,
                      uint64_t offset) {
  uint32_t words[ATTN_DROPOUT_BLOCK] __attribute__((aligned(64)));
  for (int64_t i = 0; i < n;) {
    /* elements e .. e + len - 1 use words s .. s + len - 1 of the counters
     * from e >> 2 on; a block ends where e wraps to 0 (counter 0 again) */
    uint64_t e = offset + (uint64_t)i, to_wrap = (uint64_t)0 - e;
    int64_t s = (int64_t)(e & 3), len = attn_min64(n - i, ATTN_DROPOUT_BLOCK - s);
    if (e != 0 && to_wrap < (uint64_t)len) len = (int64_t)to_wrap;
    for (int64_t j = 0; 4 * j < s + len; j += ATTN_DROPOUT_FILL)
      fill(seed, (e >> 2) + (uint64_t)j, words + 4 * j);
    apply(x + i, y + i, mask ? mask + i : NULL, len, p, scale, words + s);
    i += len;
  }
}

/* the four words of dropout's block for counter c */
static void dropout_block(uint64_t seed, uint64_t c, uint32_t out[4]) {
  const uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), ATTN_DROPOUT_TAG, 0};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  attn_philox4x32_10(ctr, key, out);
}

void attn_dropout_fill_generic(uint64_t seed, uint64_t c0, uint32_t *words) {
  for (int j = 0; j < ATTN_DROPOUT_FILL; j++)
    dropout_block(seed, c0 + (uint64_t)j, words + 4 * j);
}

float attn_dropout_uniform(uint64_t seed, uint64_t e) {
  uint32_t r[4];
  dropout_block(seed, e >> 2, r);
  return (float)(r[e & 3] >> 8) * 0x1p-24f;
}

void attn_dropout_apply_generic(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                                float scale, const uint32_t *w) {
  for (int64_t i = 0; i < n; i++) {
    int keep = (float)(w[i] >> 8) * 0x1p-24f >= p; /* top 24 bits: exact in f32 */
    y[i] = keep ? x[i] * scale : 0.0f;
    if (mask) mask[i] = (uint8_t)keep;
  }
}

void attn_dropout_f32_generic(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                              float scale, uint64_t seed, uint64_t offset) {
  attn_dropout_run(attn_dropout_fill_generic, attn_dropout_apply_generic, x, y, mask, n, p, scale,
                   seed, offset);
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
