/* Dropout's own Philox stream (dropout_stream.h): the words of a counter,
 * the uniform of an element, the loop every level's dropout kernel runs
 * (attn_dropout_run) and the portable fill and apply steps, with the
 * generic level's kernel made of them. The public entry points are
 * dropout.c's. */
#include <stddef.h>

#include "kernels/rows/dropout_stream.h"
#include "kernels/rows/elementwise_internal.h"
#include "kernels/rows/rng_internal.h"
#include "kernels/util.h"

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
