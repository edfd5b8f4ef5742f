/* Internal: dropout's random stream and the loop every level's dropout
 * kernel runs (dropout_stream.c).
 *
 * The stream (attn_dropout_uniform, attn/kernels.h): element e under seed
 * takes word (e & 3) of Philox-4x32-10 with counter (c low, c high,
 * ATTN_DROPOUT_TAG, 0), c = e >> 2, and key (seed low, seed high); its
 * uniform is the word's top 24 bits times 2^-24, and the element is kept iff
 * uniform >= p. One Philox block serves four elements (attn_rng_uniform uses
 * one block per value), and the third counter word keeps the stream apart
 * from attn_rng_uniform's under the same seed. Each element's value depends
 * only on (seed, e): any split over calls, threads or levels draws the same.
 *
 * A level supplies two steps (dropout_stream.c, dropout_avx2.c, which the AVX-512
 * level runs too, row_ops_neon.c): fill writes the words of ATTN_DROPOUT_FILL
 * consecutive counters in stream order, apply drops n elements with one
 * word each; attn_dropout_run cuts [offset, offset + n) into blocks of at
 * most ATTN_DROPOUT_BLOCK elements and calls them. */
#ifndef ATTN_DROPOUT_STREAM_H
#define ATTN_DROPOUT_STREAM_H

#include <stdint.h>

#define ATTN_DROPOUT_TAG 0x706f7264u /* "drop" */

enum {
  ATTN_DROPOUT_FILL = 16,   /* counters per fill call (64 words) */
  ATTN_DROPOUT_BLOCK = 256, /* elements per block: 64 counters when e is a multiple of 4 */
};

/* words[4j + w] = word w of the block of counter c0 + j, j < ATTN_DROPOUT_FILL */
typedef void (*attn_dropout_fill_fn)(uint64_t seed, uint64_t c0, uint32_t *words);
/* y[i] = w[i] >> 8 times 2^-24 >= p ? x[i] * scale : 0, mask[i] = kept (mask
 * may be NULL), i < n; x == y allowed */
typedef void (*attn_dropout_apply_fn)(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                                      float scale, const uint32_t *w);

void attn_dropout_run(attn_dropout_fill_fn fill, attn_dropout_apply_fn apply, const float *x,
                      float *y, uint8_t *mask, int64_t n, float p, float scale, uint64_t seed,
                      uint64_t offset);

/* the portable steps (dropout_stream.c), also the reference the tests compare with */
void attn_dropout_fill_generic(uint64_t seed, uint64_t c0, uint32_t *words);
void attn_dropout_apply_generic(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                                float scale, const uint32_t *w);

#endif
