/* bf16 flash attention (attn/sdpa_bf16.h), every path (portable, simd, amx,
 * f32) this machine has, against
 * the f32 math path run on the same bf16-valued inputs (q, k, v rounded to
 * bf16 first, so only the kernel's own rounding is measured).
 *
 * Tolerances (|v| <= 1, |dout| <= 1):
 *   out: p is rounded to bf16 (relative 2^-9) before P·V while l sums the
 *        f32 p, so |out - ref| <= 2^-9 max|v| ~ 2e-3, plus f32 noise: 2.5e-3.
 *   lse: f32 throughout (exp and summation order only): 2e-5 + 2e-5 |lse|.
 *   grads: dout, P and dS are rounded to bf16 (2^-9 each) as GEMM operands:
 *        2^-7 of each gradient tensor's largest magnitude, + 1e-4.
 * AMX and SIMD against portable: all within the tolerances above of math
 * (they differ in summation order and exp only); the f32 path (f32
 * arithmetic on the bf16 values) well inside them; 1 vs 2 threads:
 * bit-identical. */
#include <stdint.h>

#include "attn/sdpa_bf16.h"
#include "harness.h"
#include "kernels/arch/amx/amx.h"
#include "sdpa_cases.h"
#include "sdpa_nan_cases.h"
#include "sdpa_problem.h"

static int have_amx(void) { return attn_sdpa_bf16_path_available(ATTN_LOWP_AMX); }

/* The paths every case runs (those this machine has are run). */
static const attn_lowp_path PATHS[] = {ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX,
                                       ATTN_LOWP_F32};
enum { NPATHS = sizeof PATHS / sizeof PATHS[0] };
static const char *path_name(attn_lowp_path p) {
  return p == ATTN_LOWP_AMX ? "amx" : p == ATTN_LOWP_SIMD ? "simd" : p == ATTN_LOWP_F32 ? "f32" : "portable";
}

/* A problem with q, k, v and dout rounded to bf16 (tests/sdpa_problem.h). */
static void make_problem(const sdpa_cfg *c, unsigned seed, sdpa_problem *p) {
  sdpa_make_problem(c, seed, p);
  sdpa_problem_to_bf16(p);
}

static int backward_on; /* set once the backward exists for this run */

/* Runs the bf16 path and math on one problem and compares. */
static void compare_case(attn_lowp_path path, const sdpa_cfg *c, unsigned seed, int backward) {
  sdpa_problem p;
  make_problem(c, seed, &p);
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o1, l1));
  int before = h_case_failed;
  h_case_failed = 0;
  CHECK_CLOSE("out", o1, o0, p.no, 2.5e-3, 0);
  CHECK_CLOSE("lse", l1, l0, p.nl, 2e-5, 2e-5);
  CHECK(!sdpa_any_nan(o1, p.no));
  if (backward && backward_on) {
    float *g0[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
    float *g1[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
    int64_t n[3] = {p.nq, p.nk, p.nv};
    static const char *name[3] = {"dq", "dk", "dv"};
    CHECK_OK(attn_sdpa_backward_math(&p.d, p.q, p.k, p.v, o0, l0, p.dout, g0[0], g0[1], g0[2]));
    CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o0, l0, p.dout, g1[0],
                                          g1[1], g1[2]));
    for (int i = 0; i < 3; i++) {
      CHECK_CLOSE(name[i], g1[i], g0[i], n[i], 1e-4 + sdpa_max_abs(g0[i], n[i]) / 128, 0);
      CHECK(!sdpa_any_nan(g1[i], n[i]));
      free(g0[i]), free(g1[i]);
    }
  }
  if (h_case_failed) sdpa_print_case(path_name(path), c, seed);
  h_case_failed |= before;
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

static void for_each_path(const sdpa_cfg *c, unsigned seed, int backward) {
  if (!h_sample()) return; /* ATTN_TEST_SAMPLE (tests/harness.h) */
  for (int i = 0; i < NPATHS; i++)
    if (attn_sdpa_bf16_path_available(PATHS[i])) compare_case(PATHS[i], c, seed, backward);
}

/* the shape suite (tests/sdpa_cases.h), forward and backward */
static void run_case(const sdpa_cfg *c, unsigned seed) { for_each_path(c, seed, 1); }

static void test_head_dims(void) { sdpa_cases_head_dims(run_case); }
static void test_lengths_and_tails(void) { sdpa_cases_lengths_and_tails(run_case); }
static void test_causal_windows_offset(void) { sdpa_cases_causal_windows_offset(run_case); }
static void test_masks_key_lens_gqa(void) { sdpa_cases_masks_key_lens_gqa(run_case); }
static void test_strided_scale_large_logits(void) { sdpa_cases_strided_scale(run_case); }
static void test_random_shapes(void) { sdpa_cases_random(run_case, 12345, 24, 800); }

/* Rows with no allowed key: out 0, lse -inf, zero gradient, never NaN. */
static void test_fully_masked_rows(void) {
  sdpa_cfg c = sdpa_masked_rows_cfg();
  c.wl = 0; /* each row sees its own key only */
  for (int pth = 0; pth < NPATHS; pth++) {
    attn_lowp_path path = PATHS[pth];
    if (!attn_sdpa_bf16_path_available(path)) continue;
    sdpa_problem p;
    make_problem(&c, 900, &p);
    sdpa_hide_row(&p, 1, 3); /* every key of batch 1's row 3 masked by the bool mask too */
    float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl);
    for (int64_t i = 0; i < p.no; i++)
      o[i] = NAN;
    CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o, l));
    sdpa_check_masked_rows(o, l, p.no);
    if (backward_on) {
      float *g[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
      CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o, l, p.dout, g[0], g[1],
                                            g[2]));
      for (int e = 0; e < 2 * 40 * 64; e++)
        CHECK(g[0][e] == 0.0f); /* batch 0 dq */
      for (int e = 0; e < 64; e++)
        CHECK(g[0][(2 * 40 + 3) * 64 + e] == 0.0f);
      CHECK(!sdpa_any_nan(g[0], p.nq) && !sdpa_any_nan(g[1], p.nk) && !sdpa_any_nan(g[2], p.nv));
      free(g[0]), free(g[1]), free(g[2]);
    }
    free(o), free(l);
    sdpa_free_problem(&p);
  }
}

/* ---- NaN / inf in the data (tests/sdpa_nan_cases.h) ---------------------- */
static void nan_case(attn_lowp_path path, int kind, int causal) {
  sdpa_problem p;
  sdpa_nan_problem(kind, causal, 1300 + kind, sdpa_problem_to_bf16, &p);
  const int X = SDPA_NAN_X, L = SDPA_NAN_L;
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o1, l1));
  int before = h_case_failed;
  h_case_failed = 0;
  sdpa_nan_check_forward(kind, &p, o1, o0, l1, l0, 2.5e-3, 0, 2e-5, 2e-5);
  if (backward_on) {
    float *g0[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
    float *g1[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
    CHECK_OK(attn_sdpa_backward_math(&p.d, p.q, p.k, p.v, o0, l0, p.dout, g0[0], g0[1], g0[2]));
    CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o1, l1, p.dout, g1[0],
                                          g1[1], g1[2]));
    const char *gn[3] = {"dq", "dk", "dv"};
    const int64_t gsz[3] = {p.nq, p.nk, p.nv};
    for (int t = 0; t < 3; t++)
      close_where_math_defined(gn[t], g1[t], g0[t], gsz[t],
                               1e-4 + sdpa_max_abs(g0[t], gsz[t]) / 128, 0);
    sdpa_nan_check_backward(kind, causal, g1);
    if (kind == 4) /* batch 1: dk, dv finite */
      CHECK(!sdpa_any_nan(g1[1] + 2 * L * X, 2 * L * X) &&
            !sdpa_any_nan(g1[2] + 2 * L * X, 2 * L * X));
    for (int t = 0; t < 3; t++)
      free(g0[t]), free(g1[t]);
  }
  if (h_case_failed)
    printf("  ^ %s kind %d causal %d\n", path_name(path), kind, causal);
  h_case_failed |= before;
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

static void test_nan_and_inf_propagate(void) {
  for (int pth = 0; pth < NPATHS; pth++) {
    attn_lowp_path path = PATHS[pth];
    if (!attn_sdpa_bf16_path_available(path)) continue;
    nan_case(path, 0, 0);
    nan_case(path, 0, 1);
    for (int kind = 1; kind <= 5; kind++)
      nan_case(path, kind, 1);
  }
}

static void test_no_keys_no_queries(void) {
  sdpa_cfg c = sdpa_plain(5, 0, 64);
  sdpa_problem p;
  make_problem(&c, 950, &p);
  float o[2 * 5 * 64], l[10];
  for (int i = 0; i < 2 * 5 * 64; i++)
    o[i] = NAN;
  CHECK_OK(attn_sdpa_forward_bf16(&p.d, p.qh, NULL, NULL, o, l));
  CHECK(o[0] == 0.0f && o[2 * 5 * 64 - 1] == 0.0f && l[9] == -INFINITY);
  sdpa_free_problem(&p);
  c = sdpa_plain(0, 7, 64);
  make_problem(&c, 951, &p);
  CHECK_OK(attn_sdpa_forward_bf16(&p.d, NULL, p.kh, p.vh, NULL, NULL));
  sdpa_free_problem(&p);
}

/* Same results for 1 and 2 threads, bit for bit, on both paths. */
static void test_threads_bit_identical(void) {
  sdpa_cfg c = sdpa_plain(300, 333, 64);
  c.Hq = 4;
  c.Hkv = 2;
  c.causal = 1;
  c.key_lens = 1;
  c.B = 2;
  int saved = attn_get_num_threads();
  for (int pth = 0; pth < NPATHS; pth++) {
    attn_lowp_path path = PATHS[pth];
    if (!attn_sdpa_bf16_path_available(path)) continue;
    sdpa_problem p;
    make_problem(&c, 990, &p);
    float *o[2], *l[2], *g[2][3];
    for (int t = 0; t < 2; t++) {
      attn_set_num_threads(t + 1);
      o[t] = sdpa_zeros(p.no), l[t] = sdpa_zeros(p.nl);
      CHECK_OK(attn_sdpa_forward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o[t], l[t]));
      g[t][0] = sdpa_zeros(p.nq), g[t][1] = sdpa_zeros(p.nk), g[t][2] = sdpa_zeros(p.nv);
      if (backward_on)
        CHECK_OK(attn_sdpa_backward_bf16_path(path, &p.d, p.qh, p.kh, p.vh, o[0], l[0], p.dout,
                                              g[t][0], g[t][1], g[t][2]));
    }
    CHECK(!memcmp(o[0], o[1], p.no * sizeof(float)));
    CHECK(!memcmp(l[0], l[1], p.nl * sizeof(float)));
    CHECK(!memcmp(g[0][0], g[1][0], p.nq * sizeof(float)));
    CHECK(!memcmp(g[0][1], g[1][1], p.nk * sizeof(float)));
    CHECK(!memcmp(g[0][2], g[1][2], p.nv * sizeof(float)));
    for (int t = 0; t < 2; t++) {
      free(o[t]), free(l[t]);
      for (int i = 0; i < 3; i++)
        free(g[t][i]);
    }
    sdpa_free_problem(&p);
  }
  attn_set_num_threads(saved);
}

static void test_errors(void) {
  sdpa_cfg c = sdpa_plain(8, 8, 64);
  sdpa_problem p;
  make_problem(&c, 1000, &p);
  float o[2 * 8 * 64], l[16];
  CHECK_ERR(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, NULL, l), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, o, NULL), ATTN_EINVAL);
  if (!attn_sdpa_bf16_path_available(ATTN_LOWP_SIMD))
    CHECK_ERR(attn_sdpa_forward_bf16_path(ATTN_LOWP_SIMD, &p.d, p.qh, p.kh, p.vh, o, l),
              ATTN_EUNSUPPORTED);
  CHECK_ERR(attn_sdpa_forward_bf16_path((attn_lowp_path)99, &p.d, p.qh, p.kh, p.vh, o, l),
            ATTN_EUNSUPPORTED);
  if (!have_amx())
    CHECK_ERR(attn_sdpa_forward_bf16_path(ATTN_LOWP_AMX, &p.d, p.qh, p.kh, p.vh, o, l),
              ATTN_EUNSUPPORTED);
  attn_sdpa_desc d = p.d;
  float slopes[2] = {0.5f, 0.25f};
  d.alibi_slopes = slopes;
  CHECK_ERR(attn_sdpa_forward_bf16(&d, p.qh, p.kh, p.vh, o, l), ATTN_EUNSUPPORTED);
  d = p.d;
  d.Hkv = 3; /* 2 % 3 */
  CHECK_ERR(attn_sdpa_forward_bf16(&d, p.qh, p.kh, p.vh, o, l), ATTN_EINVAL);
  sdpa_free_problem(&p);
  sdpa_cfg big = sdpa_plain(4, 4, 257);
  make_problem(&big, 1001, &p);
  float *ob = sdpa_zeros(p.no), lb[8];
  CHECK_ERR(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, ob, lb), ATTN_EUNSUPPORTED);
  free(ob);
  sdpa_free_problem(&p);
}

/* A refused tile permission: the AMX path is unavailable, AUTO runs the
 * next path (simd where the CPU has a bf16 dot product, else f32; bit for
 * bit; 177 keys, past AUTO's f32 route for short sequences), and asking for
 * AMX is an error. */
static int refuse(void) { return -1; }
static void test_amx_refused_falls_back(void) {
  sdpa_cfg c = sdpa_plain(45, 177, 64);
  c.causal = 1;
  sdpa_problem p;
  make_problem(&c, 1100, &p);
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  float *g0 = sdpa_zeros(p.nq), *g1 = sdpa_zeros(p.nq), *k0 = sdpa_zeros(p.nk),
        *k1 = sdpa_zeros(p.nk);
  float *v0 = sdpa_zeros(p.nv), *v1 = sdpa_zeros(p.nv);
  const attn_lowp_path next =
      attn_sdpa_bf16_path_available(ATTN_LOWP_SIMD) && attn_cpu()->bf16_dot_fast ? ATTN_LOWP_SIMD
                                                                                 : ATTN_LOWP_F32;
  CHECK_OK(attn_sdpa_forward_bf16_path(next, &p.d, p.qh, p.kh, p.vh, o0, l0));
  CHECK_OK(attn_sdpa_backward_bf16_path(next, &p.d, p.qh, p.kh, p.vh, o0, l0, p.dout, g0, k0, v0));
  attn_amx_set_request_hook(refuse);
  CHECK(!attn_sdpa_bf16_path_available(ATTN_LOWP_AMX));
  CHECK_ERR(attn_sdpa_forward_bf16_path(ATTN_LOWP_AMX, &p.d, p.qh, p.kh, p.vh, o1, l1),
            ATTN_EUNSUPPORTED);
  CHECK_OK(attn_sdpa_forward_bf16(&p.d, p.qh, p.kh, p.vh, o1, l1));
  CHECK_OK(attn_sdpa_backward_bf16(&p.d, p.qh, p.kh, p.vh, o0, l0, p.dout, g1, k1, v1));
  attn_amx_set_request_hook(NULL);
  CHECK(!memcmp(o0, o1, p.no * sizeof(float)) && !memcmp(l0, l1, p.nl * sizeof(float)));
  CHECK(!memcmp(g0, g1, p.nq * sizeof(float)) && !memcmp(k0, k1, p.nk * sizeof(float)) &&
        !memcmp(v0, v1, p.nv * sizeof(float)));
  free(o0), free(o1), free(l0), free(l1), free(g0), free(g1), free(k0), free(k1), free(v0),
      free(v1);
  sdpa_free_problem(&p);
}

/* AUTO without AMX takes the f32 route up to 128 keys and the SIMD tiles
 * past them, bit for bit, forward and backward (where the CPU has the tiles;
 * else F32 throughout). */
static void auto_matches(int Lq, int Lk, attn_lowp_path want) {
  sdpa_cfg c = sdpa_plain(Lq, Lk, 32);
  c.causal = Lq == Lk;
  sdpa_problem p;
  make_problem(&c, 1200 + (unsigned)Lk, &p);
  float *o[2], *l[2], *g[2][3];
  for (int i = 0; i < 2; i++) {
    o[i] = sdpa_zeros(p.no), l[i] = sdpa_zeros(p.nl);
    g[i][0] = sdpa_zeros(p.nq), g[i][1] = sdpa_zeros(p.nk), g[i][2] = sdpa_zeros(p.nv);
  }
  CHECK_OK(attn_sdpa_forward_bf16_path(want, &p.d, p.qh, p.kh, p.vh, o[0], l[0]));
  CHECK_OK(attn_sdpa_backward_bf16_path(want, &p.d, p.qh, p.kh, p.vh, o[0], l[0], p.dout, g[0][0],
                                        g[0][1], g[0][2]));
  CHECK_OK(attn_sdpa_forward_bf16_path(ATTN_LOWP_AUTO, &p.d, p.qh, p.kh, p.vh, o[1], l[1]));
  CHECK_OK(attn_sdpa_backward_bf16_path(ATTN_LOWP_AUTO, &p.d, p.qh, p.kh, p.vh, o[1], l[1], p.dout,
                                        g[1][0], g[1][1], g[1][2]));
  const int same_f =
      !memcmp(o[0], o[1], p.no * sizeof(float)) && !memcmp(l[0], l[1], p.nl * sizeof(float));
  const int same_b = !memcmp(g[0][0], g[1][0], p.nq * sizeof(float)) &&
                     !memcmp(g[0][1], g[1][1], p.nk * sizeof(float)) &&
                     !memcmp(g[0][2], g[1][2], p.nv * sizeof(float));
  if (!same_f || !same_b)
    printf("  Lq %d Lk %d: AUTO is not path %d (forward same %d, backward same %d)\n", Lq, Lk,
           (int)want, same_f, same_b);
  CHECK(same_f && same_b);
  for (int i = 0; i < 2; i++)
    free(o[i]), free(l[i]), free(g[i][0]), free(g[i][1]), free(g[i][2]);
  sdpa_free_problem(&p);
}

static void test_auto_short_keys_f32(void) {
  attn_amx_set_request_hook(refuse); /* the rule is AUTO's without AMX */
  /* the bf16 tiles only where the CPU's bf16 dot product is fast */
  const attn_lowp_path tiles =
      attn_sdpa_bf16_path_available(ATTN_LOWP_SIMD) && attn_cpu()->bf16_dot_fast ? ATTN_LOWP_SIMD
                                                                                 : ATTN_LOWP_F32;
  auto_matches(12, 12, ATTN_LOWP_F32);
  auto_matches(200, 128, ATTN_LOWP_F32);
  auto_matches(1, 128, ATTN_LOWP_F32);
  auto_matches(20, 129, tiles);
  auto_matches(129, 129, tiles);
  if (tiles == ATTN_LOWP_SIMD) /* the two routes differ: the test can tell them apart */
    CHECK(strstr(attn_sdpa_bf16_path_name(ATTN_LOWP_AUTO), "(f32 up to 128 keys)") != NULL);
  else
    CHECK(!strncmp(attn_sdpa_bf16_path_name(ATTN_LOWP_AUTO), "f32", 3));
  attn_amx_set_request_hook(NULL);
}

int main(void) {
  printf("# bf16 flash paths here:");
  for (int i = 0; i < NPATHS; i++)
    if (attn_sdpa_bf16_path_available(PATHS[i])) printf(" %s", path_name(PATHS[i]));
  printf("\n");
  backward_on = 1;
  /* one thread for the shape sweeps (many small calls: no barrier waits on a
   * busy machine); test_threads_bit_identical runs 1 and 2 */
  attn_set_num_threads(1);
  RUN(test_head_dims);
  RUN(test_lengths_and_tails);
  RUN(test_causal_windows_offset);
  RUN(test_masks_key_lens_gqa);
  RUN(test_strided_scale_large_logits);
  RUN(test_random_shapes);
  RUN(test_fully_masked_rows);
  RUN(test_nan_and_inf_propagate);
  RUN(test_no_keys_no_queries);
  RUN(test_threads_bit_identical);
  RUN(test_errors);
  RUN(test_amx_refused_falls_back);
  RUN(test_auto_short_keys_f32);
  HARNESS_END();
}
