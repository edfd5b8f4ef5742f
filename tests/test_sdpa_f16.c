/* fp16 flash attention (attn/sdpa_f16.h), portable and SIMD paths.
 *
 * q, k, v are drawn in f32, rounded to fp16, and the f32 copies replaced by
 * the fp16 values, so every reference sees the same numbers:
 *   - the f32 flash backend with the same tile kernels (generic for the
 *     portable path, AVX-512 for SIMD) on those f32 values: the fp16 path is
 *     that loop after a conversion, so out, lse, dq, dk, dv must be equal bit
 *     for bit (tolerance 0; NaN/inf in the same places);
 *   - the f32 math path: the f32 flash tolerances of tests/test_flash.c,
 *     |out, lse - math| <= 1e-5 + 1e-4 |math|, gradients 2e-5 + 2e-4 |math|.
 * Plus: 1 vs 2 threads bit-identical, fully masked rows, empty shapes, NaN
 * and inf inputs, bad arguments. */
#include <stdint.h>

#include "attn/sdpa_f16.h"
#include "harness.h"
#include "kernels/kern.h"
#include "kernels/flash/sdpa_flash.h"
#include "sdpa_cases.h"
#include "sdpa_problem.h"

/* A problem with q, k, v rounded to fp16 (tests/sdpa_problem.h); with key
 * lengths and B > 2, batch 1 keeps its seeded length (the shared rule would
 * give it Lk - 1). */
static void make_problem(const sdpa_cfg *c, unsigned seed, sdpa_problem *p) {
  sdpa_make_problem(c, seed, p);
  if (c->key_lens && c->B > 2) p->kl[1] = sdpa_seeded_key_len(seed, 1, c->Lk);
  sdpa_problem_to_f16(p);
}

static int have_simd(void) { return attn_sdpa_f16_path_available(ATTN_LOWP_SIMD); }

/* The f32 tile kernels path runs on. */
static const attn_flash_ops *ops_of(attn_lowp_path path) {
  return path == ATTN_LOWP_SIMD ? attn_kern_get()->flash : attn_flash_ops_generic();
}

/* The fp16 path against the f32 flash (bit for bit) and math (tolerance). */
static void compare_case(attn_lowp_path path, const sdpa_cfg *c, unsigned seed) {
  sdpa_problem p;
  make_problem(c, seed, &p);
  const attn_flash_ops *ops = ops_of(path);
  float *o[3], *l[3]; /* fp16, f32 flash, math */
  for (int i = 0; i < 3; i++)
    o[i] = sdpa_zeros(p.no), l[i] = sdpa_zeros(p.nl);
  int before = h_case_failed;
  h_case_failed = 0;
  CHECK_OK(attn_sdpa_forward_f16_path(path, &p.d, p.qh, p.kh, p.vh, o[0], l[0]));
  CHECK_OK(attn_sdpa_forward_flash_ops(ops, &p.d, p.q, p.k, p.v, o[1], l[1]));
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o[2], l[2], NULL));
  CHECK_CLOSE("out vs f32 flash", o[0], o[1], p.no, 0, 0);
  CHECK_CLOSE("lse vs f32 flash", l[0], l[1], p.nl, 0, 0);
  CHECK_CLOSE("out vs math", o[0], o[2], p.no, 1e-5, 1e-4);
  CHECK_CLOSE("lse vs math", l[0], l[2], p.nl, 1e-5, 1e-4);
  float *g[3][3];
  const int64_t n[3] = {p.nq, p.nk, p.nv};
  for (int i = 0; i < 3; i++)
    for (int t = 0; t < 3; t++)
      g[i][t] = sdpa_zeros(n[t]);
  /* every backward from the math forward's out and lse */
  CHECK_OK(attn_sdpa_backward_f16_path(path, &p.d, p.qh, p.kh, p.vh, o[2], l[2], p.dout, g[0][0],
                                       g[0][1], g[0][2]));
  CHECK_OK(attn_sdpa_backward_flash_ops(ops, &p.d, p.q, p.k, p.v, o[2], l[2], p.dout, g[1][0],
                                        g[1][1], g[1][2]));
  CHECK_OK(
      attn_sdpa_backward_math(&p.d, p.q, p.k, p.v, o[2], l[2], p.dout, g[2][0], g[2][1], g[2][2]));
  static const char *name[3] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; t++) {
    CHECK_CLOSE(name[t], g[0][t], g[1][t], n[t], 0, 0);
    CHECK_CLOSE(name[t], g[0][t], g[2][t], n[t], 2e-5, 2e-4);
  }
  if (h_case_failed) sdpa_print_case(path == ATTN_LOWP_SIMD ? "simd" : "portable", c, seed);
  h_case_failed |= before;
  for (int i = 0; i < 3; i++) {
    free(o[i]), free(l[i]);
    for (int t = 0; t < 3; t++)
      free(g[i][t]);
  }
  sdpa_free_problem(&p);
}

static void for_each_path(const sdpa_cfg *c, unsigned seed) {
  if (!h_sample()) return; /* ATTN_TEST_SAMPLE (tests/harness.h) */
  compare_case(ATTN_LOWP_PORTABLE, c, seed);
  if (have_simd()) compare_case(ATTN_LOWP_SIMD, c, seed);
}

static void test_head_dims_and_lengths(void) {
  static const int dims[] = {1, 7, 32, 64, 80, 129, 256};
  for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    sdpa_cfg c = sdpa_plain(37, 70, dims[i]);
    c.Dv = dims[(i + 3) % 7];
    for_each_path(&c, 100 + i);
  }
  static const int L[][2] = {{1, 1}, {1, 65}, {5, 3}, {64, 64}, {65, 129}, {150, 63}, {200, 300}};
  for (unsigned i = 0; i < sizeof L / sizeof L[0]; i++) {
    sdpa_cfg c = sdpa_plain(L[i][0], L[i][1], 64);
    for_each_path(&c, 200 + i);
  }
}

static void test_causal_windows_offset(void) {
  static const int W[][3] = {{1, -1, -1}, {0, 5, -1}, {0, 20, 0}, {1, 70, -1}, {0, 0, 0}};
  for (unsigned w = 0; w < sizeof W / sizeof W[0]; w++) {
    sdpa_cfg c = sdpa_plain(w & 1 ? 100 : 190, w & 1 ? 190 : 100, 64);
    c.causal = W[w][0], c.wl = W[w][1], c.wr = W[w][2];
    for_each_path(&c, 300 + w);
  }
  sdpa_cfg c = sdpa_plain(40, 150, 64); /* decoder: new queries after a cache */
  c.causal = 1;
  c.q_offset = 110;
  for_each_path(&c, 320);
}

static void test_masks_key_lens_gqa_strided(void) {
  sdpa_cfg c = sdpa_plain(70, 90, 48);
  c.B = 3, c.Hq = 4, c.Hkv = 2;
  c.key_lens = 1;
  c.bool_mask = 1;
  for_each_path(&c, 400);
  c.add_mask = 1;
  c.causal = 1;
  c.Hkv = 1;
  c.Dv = 72;
  c.scale = 0.37f;
  for_each_path(&c, 401);
  sdpa_cfg s = sdpa_plain(50, 160, 40); /* strided q/k/v/out, 4 query heads on 2 K/V heads */
  s.B = 2, s.Hq = 4, s.Hkv = 2;
  s.strided = 1;
  s.Dv = 24;
  for_each_path(&s, 402);
  s.causal = 1;
  for_each_path(&s, 403);
}

static void test_random_shapes(void) { sdpa_cases_random(for_each_path, 777, 16, 500); }

/* Rows with no allowed key: out 0, lse -inf, zero dq; batch 0 has no keys. */
static void test_fully_masked_rows(void) {
  sdpa_cfg c = sdpa_plain(40, 50, 64);
  c.B = 2;
  c.key_lens = 1;
  sdpa_problem p;
  make_problem(&c, 600, &p);
  float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl),
        *g[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
  for (int64_t i = 0; i < p.no; i++)
    o[i] = NAN;
  CHECK_OK(attn_sdpa_forward_f16(&p.d, p.qh, p.kh, p.vh, o, l));
  for (int e = 0; e < 2 * 40; e++)
    CHECK(l[e] == -INFINITY);
  for (int e = 0; e < 2 * 40 * 64; e++)
    CHECK(o[e] == 0.0f);
  CHECK(isfinite(l[2 * 40]));
  CHECK_OK(attn_sdpa_backward_f16(&p.d, p.qh, p.kh, p.vh, o, l, p.dout, g[0], g[1], g[2]));
  for (int e = 0; e < 2 * 40 * 64; e++) /* batch 0 */
    CHECK(g[0][e] == 0.0f);
  for (int e = 0; e < 2 * 50 * 64; e++)
    CHECK(g[1][e] == 0.0f && g[2][e] == 0.0f);
  free(o), free(l), free(g[0]), free(g[1]), free(g[2]);
  sdpa_free_problem(&p);
  /* no keys at all; no queries at all */
  c = sdpa_plain(5, 0, 64);
  make_problem(&c, 601, &p);
  float o2[2 * 5 * 64], l2[10], dq[2 * 5 * 64];
  for (int i = 0; i < 2 * 5 * 64; i++)
    o2[i] = dq[i] = NAN;
  CHECK_OK(attn_sdpa_forward_f16(&p.d, p.qh, NULL, NULL, o2, l2));
  CHECK(o2[0] == 0.0f && o2[2 * 5 * 64 - 1] == 0.0f && l2[9] == -INFINITY);
  CHECK_OK(attn_sdpa_backward_f16(&p.d, p.qh, NULL, NULL, o2, l2, o2, dq, NULL, NULL));
  CHECK(dq[0] == 0.0f && dq[2 * 5 * 64 - 1] == 0.0f);
  sdpa_free_problem(&p);
  c = sdpa_plain(0, 7, 64);
  make_problem(&c, 602, &p);
  CHECK_OK(attn_sdpa_forward_f16(&p.d, NULL, p.kh, p.vh, NULL, NULL));
  sdpa_free_problem(&p);
}

/* NaN and inf in the inputs: where the f32 flash has them (same values). */
static void test_nan_inf(void) {
  sdpa_cfg c = sdpa_plain(30, 80, 32);
  for (int pth = 0; pth < 2; pth++) {
    attn_lowp_path path = pth ? ATTN_LOWP_SIMD : ATTN_LOWP_PORTABLE;
    if (pth && !have_simd()) continue;
    sdpa_problem p;
    make_problem(&c, 700, &p);
    p.qh[5 * 32 + 3] = 0x7e00;  /* NaN in query 5 of head 0 */
    p.kh[70 * 32 + 1] = 0x7c00; /* +inf in key 70 of head 0 */
    p.vh[80 * 32 + 9] = 0xfc00; /* -inf in value 9 of key 0, head 1 */
    p.q[5 * 32 + 3] = NAN;
    p.k[70 * 32 + 1] = INFINITY;
    p.v[80 * 32 + 9] = -INFINITY;
    float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
          *l1 = sdpa_zeros(p.nl);
    CHECK_OK(attn_sdpa_forward_f16_path(path, &p.d, p.qh, p.kh, p.vh, o0, l0));
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_of(path), &p.d, p.q, p.k, p.v, o1, l1));
    CHECK_CLOSE("out", o0, o1, p.no, 0, 0);
    CHECK_CLOSE("lse", l0, l1, p.nl, 0, 0);
    /* head 1 (-inf in v column 9 only): lse finite and as math, out[:, 9] = -inf.
     * Head 0: NaN exactly where math has it (attn/sdpa.h): the NaN query's
     * row, and the rows whose logit at key 70 is +inf (inf - inf), out and
     * lse NaN; the rows where it is -inf (q[1] < 0) ignore the key. */
    float *om = sdpa_zeros(p.no), *lm = sdpa_zeros(p.nl);
    CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, om, lm, NULL));
    CHECK_CLOSE("lse head 1", l0 + 30, lm + 30, 30, 1e-5, 1e-4);
    for (int i = 30; i < 60; i++)
      CHECK(o0[i * 32 + 9] == -INFINITY && om[i * 32 + 9] == -INFINITY);
    CHECK_CLOSE("lse head 0", l0, lm, 30, 1e-5, 1e-4);
    CHECK_CLOSE("out head 0", o0, om, 30 * 32, 1e-5, 1e-4);
    int n_inf = 0, n_ok = 0;
    for (int i = 0; i < 30; i++)
      if (i != 5 && isnan(l0[i]) == (p.q[i * 32 + 1] > 0))
        *(p.q[i * 32 + 1] > 0 ? &n_inf : &n_ok) += 1;
    CHECK(isnan(l0[5]) && isnan(o0[5 * 32]) && n_inf > 0 && n_ok > 0 && n_inf + n_ok == 29);
    free(om), free(lm);
    float *g[2][3];
    const int64_t n[3] = {p.nq, p.nk, p.nv};
    for (int i = 0; i < 2; i++)
      for (int t = 0; t < 3; t++)
        g[i][t] = sdpa_zeros(n[t]);
    CHECK_OK(attn_sdpa_backward_f16_path(path, &p.d, p.qh, p.kh, p.vh, o1, l1, p.dout, g[0][0],
                                         g[0][1], g[0][2]));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops_of(path), &p.d, p.q, p.k, p.v, o1, l1, p.dout,
                                          g[1][0], g[1][1], g[1][2]));
    for (int t = 0; t < 3; t++)
      CHECK_CLOSE("grad", g[0][t], g[1][t], n[t], 0, 0);
    int dq5 = 1; /* the NaN row's gradient is NaN, not 0 */
    for (int e = 0; e < 32; e++)
      dq5 &= isnan(g[0][0][5 * 32 + e]);
    CHECK(dq5);
    for (int i = 0; i < 2; i++)
      for (int t = 0; t < 3; t++)
        free(g[i][t]);
    free(o0), free(o1), free(l0), free(l1);
    sdpa_free_problem(&p);
  }
}

/* Same results for 1 and 2 threads, bit for bit; AUTO is the SIMD path where
 * the CPU has it, else the portable one. */
static void test_threads_and_auto(void) {
  sdpa_cfg c = sdpa_plain(300, 333, 64);
  c.B = 2, c.Hq = 4, c.Hkv = 2;
  c.causal = 1;
  c.key_lens = 1;
  int saved = attn_get_num_threads();
  sdpa_problem p;
  make_problem(&c, 800, &p);
  float *o[3], *l[3], *g[3][3];
  const int64_t n[3] = {p.nq, p.nk, p.nv};
  for (int t = 0; t < 3; t++) { /* 1 thread, 2 threads, 1 thread on the explicit path */
    attn_set_num_threads(t == 1 ? 2 : 1);
    attn_lowp_path path = t < 2         ? ATTN_LOWP_AUTO
                          : have_simd() ? ATTN_LOWP_SIMD
                                        : ATTN_LOWP_PORTABLE;
    o[t] = sdpa_zeros(p.no), l[t] = sdpa_zeros(p.nl);
    CHECK_OK(attn_sdpa_forward_f16_path(path, &p.d, p.qh, p.kh, p.vh, o[t], l[t]));
    for (int e = 0; e < 3; e++)
      g[t][e] = sdpa_zeros(n[e]);
    CHECK_OK(attn_sdpa_backward_f16_path(path, &p.d, p.qh, p.kh, p.vh, o[0], l[0], p.dout, g[t][0],
                                         g[t][1], g[t][2]));
  }
  for (int t = 1; t < 3; t++) {
    CHECK(!memcmp(o[0], o[t], p.no * sizeof(float)));
    CHECK(!memcmp(l[0], l[t], p.nl * sizeof(float)));
    for (int e = 0; e < 3; e++)
      CHECK(!memcmp(g[0][e], g[t][e], n[e] * sizeof(float)));
  }
  for (int t = 0; t < 3; t++) {
    free(o[t]), free(l[t]);
    for (int e = 0; e < 3; e++)
      free(g[t][e]);
  }
  sdpa_free_problem(&p);
  attn_set_num_threads(saved);
}

static void test_errors(void) {
  sdpa_cfg c = sdpa_plain(8, 8, 64);
  sdpa_problem p;
  make_problem(&c, 900, &p);
  float o[2 * 8 * 64], l[16], g[3][2 * 8 * 64];
  const attn_sdpa_desc *d = &p.d;
  const uint16_t *q = p.qh, *k = p.kh, *v = p.vh;
  CHECK_ERR(attn_sdpa_forward_f16(d, q, k, v, NULL, l), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_f16(d, q, k, v, o, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_f16(d, NULL, k, v, o, l), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_f16_path(ATTN_LOWP_AMX, d, q, k, v, o, l), ATTN_EUNSUPPORTED);
  CHECK_ERR(attn_sdpa_forward_f16_path((attn_lowp_path)42, d, q, k, v, o, l), ATTN_EUNSUPPORTED);
  CHECK(!attn_sdpa_f16_path_available(ATTN_LOWP_AMX));
  CHECK(attn_sdpa_f16_path_available(ATTN_LOWP_PORTABLE));
  if (!have_simd())
    CHECK_ERR(attn_sdpa_forward_f16_path(ATTN_LOWP_SIMD, d, q, k, v, o, l), ATTN_EUNSUPPORTED);
  CHECK_ERR(attn_sdpa_backward_f16(d, q, k, v, o, l, NULL, g[0], g[1], g[2]), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_backward_f16(d, q, k, v, o, l, o, g[0], NULL, g[2]), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_backward_f16(d, q, k, v, NULL, l, o, g[0], g[1], g[2]), ATTN_EINVAL);
  attn_sdpa_desc e = p.d;
  float slopes[2] = {0.5f, 0.25f};
  e.alibi_slopes = slopes;
  CHECK_ERR(attn_sdpa_forward_f16(&e, q, k, v, o, l), ATTN_EUNSUPPORTED);
  CHECK_ERR(attn_sdpa_backward_f16(&e, q, k, v, o, l, o, g[0], g[1], g[2]), ATTN_EUNSUPPORTED);
  e = p.d;
  e.Hkv = 3; /* 2 % 3 */
  CHECK_ERR(attn_sdpa_forward_f16(&e, q, k, v, o, l), ATTN_EINVAL);
  e = p.d;
  e.window_left = -2;
  CHECK_ERR(attn_sdpa_backward_f16(&e, q, k, v, o, l, o, g[0], g[1], g[2]), ATTN_EINVAL);
  sdpa_free_problem(&p);
}

int main(void) {
  printf("# fp16 flash: simd path %s\n",
         have_simd() ? "available" : "not available (portable only)");
  /* one thread for the shape sweeps (many small calls); test_threads_and_auto runs 1 and 2 */
  attn_set_num_threads(1);
  RUN(test_head_dims_and_lengths);
  RUN(test_causal_windows_offset);
  RUN(test_masks_key_lens_gqa_strided);
  RUN(test_random_shapes);
  RUN(test_fully_masked_rows);
  RUN(test_nan_inf);
  RUN(test_threads_and_auto);
  RUN(test_errors);
  HARNESS_END();
}
