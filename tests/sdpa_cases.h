/* The shape suite of the low-precision flash tests (test_sdpa_bf16.c,
 * test_sdpa_i8.c; the random shapes also test_sdpa_f16.c): each function
 * runs its cases, one config and seed at a time, through the test's
 * run(c, seed) (every path against math); and their fully masked rows. */
#ifndef ATTN_TEST_SDPA_CASES_H
#define ATTN_TEST_SDPA_CASES_H

#include "sdpa_problem.h"

typedef void (*sdpa_case_fn)(const sdpa_cfg *c, unsigned seed);

/* D from 1 to 256 with Dv != D and Dv = D (seeds 100+, 200+) */
static inline void sdpa_cases_head_dims(sdpa_case_fn run) {
  static const int dims[] = {1, 2, 7, 32, 40, 64, 80, 128, 129, 256};
  for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    sdpa_cfg c = sdpa_plain(37, 70, dims[i]);
    c.Dv = dims[(i + 3) % 10];
    run(&c, 100 + i);
    c.Dv = dims[i];
    run(&c, 200 + i);
  }
}

/* Lq, Lk around the tile sizes, D 64 and 128 (seeds 300+, 400+) */
static inline void sdpa_cases_lengths_and_tails(sdpa_case_fn run) {
  static const int L[][2] = {{1, 1},    {1, 65},   {5, 3},    {64, 64},  {16, 16},
                             {65, 129}, {130, 63}, {97, 200}, {200, 97}, {17, 300}};
  for (unsigned i = 0; i < sizeof L / sizeof L[0]; i++) {
    sdpa_cfg c = sdpa_plain(L[i][0], L[i][1], 64);
    run(&c, 300 + i);
    c.D = c.Dv = 128;
    run(&c, 400 + i);
  }
}

/* causal and windows on square and both oblong shapes, and a decoder's
 * queries after a cache (q_offset) (seeds 500+) */
static inline void sdpa_cases_causal_windows_offset(sdpa_case_fn run) {
  static const int W[][3] = {{1, -1, -1}, {0, 5, -1},  {0, 20, 0},
                             {0, -1, 3},  {1, 70, -1}, {0, 0, 0}};
  static const int L[][2] = {{150, 150}, {100, 190}, {190, 100}};
  for (unsigned w = 0; w < sizeof W / sizeof W[0]; w++)
    for (unsigned i = 0; i < 3; i++) {
      sdpa_cfg c = sdpa_plain(L[i][0], L[i][1], 64);
      c.causal = W[w][0];
      c.wl = W[w][1];
      c.wr = W[w][2];
      run(&c, 500 + w * 3 + i);
    }
  sdpa_cfg c = sdpa_plain(40, 150, 64);
  c.causal = 1;
  c.q_offset = 110;
  run(&c, 520);
}

/* key lengths, bool and additive masks, GQA (seeds 600+) */
static inline void sdpa_cases_masks_key_lens_gqa(sdpa_case_fn run) {
  sdpa_cfg c = sdpa_plain(70, 90, 64);
  c.B = 3;
  c.Hq = 4;
  c.Hkv = 2;
  c.key_lens = 1;
  run(&c, 600);
  c.bool_mask = 1;
  run(&c, 601);
  c.add_mask = 1;
  c.causal = 1;
  run(&c, 602);
  c.Hkv = 1;
  c.Dv = 48;
  c.key_lens = 0;
  run(&c, 603);
  sdpa_cfg g = sdpa_plain(33, 129, 128); /* 8 query heads on 2 K/V heads */
  g.Hq = 8;
  g.Hkv = 2;
  g.Dv = 64;
  run(&g, 604);
}

/* strided layouts, causal, GQA: the config of sdpa_cases_strided_scale */
static inline sdpa_cfg sdpa_strided_cfg(void) {
  sdpa_cfg c = sdpa_plain(50, 77, 40);
  c.B = 2;
  c.Hq = 4;
  c.Hkv = 2;
  c.strided = 1;
  c.causal = 1;
  return c;
}

/* strided layouts, then with a scale and large logits (seeds 700, 701) */
static inline void sdpa_cases_strided_scale(sdpa_case_fn run) {
  sdpa_cfg c = sdpa_strided_cfg();
  run(&c, 700);
  c.scale = 0.37f;
  c.qmul = 8.0f; /* logits ~ +-40: exercises the lazy max (TAU) */
  run(&c, 701);
}

/* n random shapes with random options, drawn from s (seeds seed0 + t) */
static inline void sdpa_cases_random(sdpa_case_fn run, unsigned s, int n, unsigned seed0) {
  for (int t = 0; t < n; t++) {
    s = s * 1103515245u + 12345u;
    sdpa_cfg c =
        sdpa_plain(1 + (int)((s >> 8) % 150), 1 + (int)((s >> 16) % 150), 1 + (int)((s >> 4) % 96));
    c.Dv = 1 + (int)((s >> 12) % 96);
    c.B = 1 + (int)((s >> 20) % 2);
    c.Hkv = 1 + (int)((s >> 22) % 2);
    c.Hq = c.Hkv * (1 + (int)((s >> 24) % 3));
    c.causal = (s >> 26) & 1;
    c.key_lens = (s >> 27) & 1;
    c.bool_mask = ((s >> 28) & 3) == 0;
    c.add_mask = ((s >> 29) & 3) == 1;
    c.strided = (s >> 30) & 1;
    if (((s >> 3) & 3) == 0) c.wl = (int)((s >> 5) % 40);
    run(&c, seed0 + t);
  }
}

/* Fully masked rows: 2 batches, 2 heads, Lq 40, Lk 50, D = Dv 64, causal,
 * batch 0 with key length 0; the test hides every key of batch 1's row 3
 * too (sdpa_hide_row(p, 1, 3)). */
static inline sdpa_cfg sdpa_masked_rows_cfg(void) {
  sdpa_cfg c = sdpa_plain(40, 50, 64);
  c.B = 2;
  c.key_lens = 1;
  c.causal = 1;
  return c;
}

/* Their forward: out 0 and lse -inf in those rows (out of no elements),
 * never NaN. */
static inline void sdpa_check_masked_rows(const float *o, const float *l, int64_t no) {
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 40; i++) {
      CHECK(l[h * 40 + i] == -INFINITY); /* batch 0 */
      for (int e = 0; e < 64; e++)
        CHECK(o[(h * 40 + i) * 64 + e] == 0.0f);
    }
  CHECK(l[2 * 40 + 3] == -INFINITY && o[(2 * 40 + 3) * 64] == 0.0f);
  CHECK(!sdpa_any_nan(o, no));
}

#endif
