/* Dropout (attn_dropout_f32) on its own Philox stream (dropout_stream.h):
 * the stream's definition, the same bits from every ISA level's kernel for
 * any offset, length and split into calls or threads, in place, the keep
 * rate and scale, independence of neighbouring elements (four share one
 * Philox block), and the backward. Statistical checks are within 5 sigma
 * of fixed seeds (deterministic: they pass or fail the same every run). */
#include <stdint.h>

#include "harness.h"
#include "kernels/rows/dropout_stream.h"
#include "kernels/rows/elementwise_internal.h"
#include "kernels/rows/rng_internal.h"

static float *falloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* x (uniform in [-1, 1)) and two outputs and masks to compare, n each */
typedef struct {
  float *x, *y1, *y2;
  uint8_t *m1, *m2;
} pair_bufs;

static pair_bufs pair_new(int64_t n) {
  pair_bufs b = {falloc(n), falloc(n), falloc(n), malloc((size_t)n), malloc((size_t)n)};
  fill_uniform(b.x, (long)n, 3, -1, 1);
  return b;
}

static void pair_free(pair_bufs *b) {
  free(b->x), free(b->y1), free(b->y2);
  free(b->m1), free(b->m2);
}

/* Element e takes word e & 3 of the block of counter (e >> 2, tag, 0). */
static void test_stream_is_philox_word_e_mod_4(void) {
  const uint64_t seeds[3] = {0, 0x123456789abcdef0ull, ~0ull};
  const uint64_t es[6] = {0, 1, 2, 3, 0x3fffffffdull, ~0ull};
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 6; b++) {
      uint64_t e = es[b], c = e >> 2;
      const uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0x706f7264u, 0};
      const uint32_t key[2] = {(uint32_t)seeds[a], (uint32_t)(seeds[a] >> 32)};
      uint32_t w[4];
      attn_philox4x32_10(ctr, key, w);
      CHECK(attn_dropout_uniform(seeds[a], e) == (float)(w[e & 3] >> 8) * 0x1p-24f);
    }
  /* a stream apart from attn_rng_uniform's under the same seed */
  int same = 0;
  for (uint64_t i = 0; i < 64; i++) same += attn_dropout_uniform(7, i) == attn_rng_uniform(7, i);
  CHECK(same < 4);
}

/* The kernel of every level this machine has gives the portable one's
 * bits: offsets of every residue mod 4, offsets whose counter's low word
 * wraps or whose index wraps past 2^64, lengths around the block size,
 * seeds using both key words, mask NULL, and x == y. */
static void test_levels_agree_bit_for_bit(void) {
  enum { N = 1000 };
  float x[N], y1[N], y2[N];
  uint8_t m1[N], m2[N];
  fill_uniform(x, N, 8, -1, 1);
  const uint64_t seeds[3] = {0, 0x123456789abcdef0ull, ~0ull};
  const uint64_t offsets[7] = {0, 1, 2, 3, 0x3fffffffbull, 0xfffffffffffffff0ull, ~0ull - 6};
  const int64_t lens[8] = {1, 3, 15, 17, 253, 256, 259, N};
  int levels = 0;
  for (int isa = 0; isa < ATTN_ISA_COUNT; isa++) {
    const attn_kern *K = attn_isa_available((attn_isa)isa) ? attn_kern_at((attn_isa)isa) : NULL;
    if (!K) continue;
    const attn_row_ops *L = &K->row;
    levels++;
    int ok = 1;
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 7; b++)
        for (int c = 0; c < 8; c++) {
          memset(m1, 7, N);
          memset(m2, 7, N);
          attn_dropout_f32_generic(x, y1, m1, lens[c], 0.3f, 1.0f / 0.7f, seeds[a], offsets[b]);
          L->dropout(x, y2, m2, lens[c], 0.3f, 1.0f / 0.7f, seeds[a], offsets[b]);
          /* including the untouched bytes past the end */
          if (memcmp(m1, m2, N) || memcmp(y1, y2, (size_t)lens[c] * sizeof(float))) ok = 0;
          for (int64_t i = 0; i < lens[c]; i++)
            if (m1[i] != (attn_dropout_uniform(seeds[a], offsets[b] + (uint64_t)i) >= 0.3f)) ok = 0;
        }
    if (!ok) printf("  level %s differs from the portable dropout\n", attn_isa_name((attn_isa)isa));
    CHECK(ok);
    /* mask may be NULL; in place */
    attn_dropout_f32_generic(x, y1, NULL, N, 0.3f, 1.0f / 0.7f, 5, 3);
    L->dropout(x, y2, NULL, N, 0.3f, 1.0f / 0.7f, 5, 3);
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
    memcpy(y2, x, sizeof x);
    L->dropout(y2, y2, m2, N, 0.3f, 1.0f / 0.7f, 5, 3);
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
  }
  CHECK(levels >= 1);
}

/* Any split of [0, N) into calls at any offsets gives one call's mask. */
static void test_any_split_gives_the_same_mask(void) {
  enum { N = 20000 };
  pair_bufs b = pair_new(N);
  CHECK_OK(attn_dropout_f32(b.x, b.y1, b.m1, N, 0.4f, 99, 12345));
  const int64_t cuts[] = {0, 1, 3, 6, 250, 257, 4097, 4100, 9999, 16385, N};
  for (size_t k = 0; k + 1 < sizeof cuts / sizeof *cuts; k++) {
    int64_t i0 = cuts[k], n = cuts[k + 1] - i0;
    CHECK_OK(attn_dropout_f32(b.x + i0, b.y2 + i0, b.m2 + i0, n, 0.4f, 99, 12345 + (uint64_t)i0));
  }
  CHECK(memcmp(b.m1, b.m2, N) == 0);
  CHECK(memcmp(b.y1, b.y2, N * sizeof(float)) == 0);
  pair_free(&b);
}

static void test_dropout_keep_rate_and_scale(void) {
  enum { N = 100000 };
  float *x = falloc(N), *y = falloc(N);
  uint8_t *mask = malloc(N);
  for (int i = 0; i < N; i++) x[i] = 1.0f + (float)(i % 7);
  const float p = 0.3f;
  CHECK_OK(attn_dropout_f32(x, y, mask, N, p, 1234, 0));
  long kept = 0, kept_word[4] = {0, 0, 0, 0};
  int consistent = 1;
  for (int i = 0; i < N; i++) {
    kept += mask[i];
    kept_word[i & 3] += mask[i];
    float want = mask[i] ? x[i] * (1.0f / (1.0f - p)) : 0.0f;
    if (y[i] != want) consistent = 0;
    if (mask[i] != (attn_dropout_uniform(1234, (uint64_t)i) >= p)) consistent = 0;
  }
  CHECK(consistent);
  /* keep rate 0.7, sd sqrt(0.7*0.3/N) = 1.45e-3: within 5 sigma; each of
   * the four words of a block alone (N/4 values, sd 2.9e-3) too */
  CHECK(fabs((double)kept / N - 0.7) < 5 * 1.45e-3);
  for (int w = 0; w < 4; w++) CHECK(fabs((double)kept_word[w] / (N / 4) - 0.7) < 5 * 2.9e-3);
  /* p = 0 keeps everything unchanged */
  CHECK_OK(attn_dropout_f32(x, y, mask, N, 0.0f, 9, 0));
  CHECK(memcmp(x, y, N * sizeof(float)) == 0);
  free(x);
  free(y);
  free(mask);
}

/* Neighbours (lags 1-3 share a Philox block, 4 and 5 do not) are kept
 * together as often as independent draws: P = 0.25 at p = 1/2, sd
 * sqrt(0.25 * 0.75 / N) = 6.1e-4 for N = 5e5. */
static void test_neighbours_are_independent(void) {
  enum { N = 500000 };
  float *x = falloc(N), *y = falloc(N);
  uint8_t *mask = malloc(N);
  CHECK_OK(attn_dropout_f32(x, y, mask, N, 0.5f, 2024, 77));
  for (int lag = 1; lag <= 5; lag++) {
    long both = 0;
    for (int i = 0; i + lag < N; i++) both += mask[i] & mask[i + lag];
    double f = (double)both / (N - lag);
    if (!(fabs(f - 0.25) < 5 * 6.1e-4)) printf("  lag %d: both kept %.5f\n", lag, f);
    CHECK(fabs(f - 0.25) < 5 * 6.1e-4);
  }
  free(x);
  free(y);
  free(mask);
}

static void test_dropout_same_mask_for_any_thread_count(void) {
  enum { N = 100000 }; /* above the parallel threshold */
  pair_bufs b = pair_new(N);
  int saved = attn_get_num_threads();
  attn_set_num_threads(1);
  CHECK_OK(attn_dropout_f32(b.x, b.y1, b.m1, N, 0.5f, 77, 1000));
  attn_set_num_threads(2);
  CHECK_OK(attn_dropout_f32(b.x, b.y2, b.m2, N, 0.5f, 77, 1000));
  CHECK(memcmp(b.m1, b.m2, N) == 0);
  CHECK(memcmp(b.y1, b.y2, N * sizeof(float)) == 0);
  attn_set_num_threads(3);
  CHECK_OK(attn_dropout_f32(b.x, b.y2, b.m2, N, 0.5f, 77, 1000));
  attn_set_num_threads(saved);
  CHECK(memcmp(b.m1, b.m2, N) == 0);
  /* offset shifts the stream: offset 1000 + i is offset 1501 + (i - 501) */
  CHECK_OK(attn_dropout_f32(b.x + 501, b.y2, b.m2, N - 501, 0.5f, 77, 1501));
  CHECK(memcmp(b.m1 + 501, b.m2, N - 501) == 0);
  /* and another offset or seed gives another mask */
  CHECK_OK(attn_dropout_f32(b.x, b.y2, b.m2, N, 0.5f, 77, 0));
  CHECK(memcmp(b.m1, b.m2, N) != 0);
  CHECK_OK(attn_dropout_f32(b.x, b.y2, b.m2, N, 0.5f, 78, 1000));
  CHECK(memcmp(b.m1, b.m2, N) != 0);
  pair_free(&b);
}

static void test_dropout_backward_uses_mask(void) {
  enum { N = 1000 };
  float x[N], y[N], dy[N], dx[N];
  uint8_t mask[N];
  fill_uniform(x, N, 4, -1, 1);
  fill_uniform(dy, N, 5, -1, 1);
  const float p = 0.25f;
  CHECK_OK(attn_dropout_f32(x, y, mask, N, p, 5, 0));
  CHECK_OK(attn_dropout_backward_f32(dy, mask, dx, N, p));
  int ok = 1, some_dropped = 0;
  for (int i = 0; i < N; i++) {
    float want = mask[i] ? dy[i] * (1.0f / (1.0f - p)) : 0.0f;
    if (dx[i] != want) ok = 0;
    if (!mask[i]) some_dropped = 1;
  }
  CHECK(ok && some_dropped);
}

int main(void) {
  RUN(test_stream_is_philox_word_e_mod_4);
  RUN(test_levels_agree_bit_for_bit);
  RUN(test_any_split_gives_the_same_mask);
  RUN(test_dropout_keep_rate_and_scale);
  RUN(test_neighbours_are_independent);
  RUN(test_dropout_same_mask_for_any_thread_count);
  RUN(test_dropout_backward_uses_mask);
  HARNESS_END();
}
