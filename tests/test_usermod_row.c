/* The row variants of the user score modifier (attn/sdpa_mods.h "Row
 * variants": score_mod_row, score_mod_row_grad, score_mod_row_param_grad),
 * forward and backward, on math, both flash kernel sets of this level, fp16,
 * bf16 (every path) and int8 (forward).
 *
 * Built-ins written as row callbacks must give the built-in's numbers:
 * ALiBi (with causal and q_offset), softcap (the loop of tanhf, and the
 * bench's vectorised rational tanh of `attn bench sdpa --mod softcap-row`),
 * causal, sliding windows and document masking written as -inf from the row
 * callback, and ALiBi after a causal mask_mod with its block mask.
 * Tolerance as tests/test_usermod.c (1e-5 + 1e-4 |want| forward, twice that
 * for the gradients); the bench's fast tanh (error 3.5e-7 on tanh, scaled by
 * the cap) within 10 times that. ALiBi slope gradients from
 * score_mod_row_param_grad against the per-pair score_mod_param_grad's (the
 * same g summed in another order: 1e-5 relative to the largest). bf16 and
 * int8 (transposed tiles, int8's shifted scores) against the same backend
 * with the per-pair callbacks: 1e-6 + 1e-5 |want|. Plus: the callbacks never
 * see an infinite score (placeholders), NaN from a row callback follows the
 * NaN contract, thread count does not change a bit, bad descriptors are
 * refused. */
#include <stdatomic.h>
#include <stdint.h>

#include "apps/tools/bench_sdpa_mods.h"
#include "attn/sdpa_bf16.h"
#include "attn/sdpa_i8.h"
#include "usermod_callbacks.h"
#include "usermod_run.h"

/* ---- the row callbacks (user data: mctx of usermod_callbacks.h) -------- */
static void seen(mctx *c, const float *s, int64_t n) {
  long bad = 0;
  for (int64_t k = 0; k < n; k++)
    bad += isinf(s[k]) != 0;
  atomic_fetch_add(&c->inf_seen, bad);
  long m = atomic_load(&c->max_n);
  while (n > m && !atomic_compare_exchange_weak(&c->max_n, &m, (long)n)) {
  }
}

static void alibi_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0, void *u) {
  (void)b;
  mctx *c = u;
  seen(c, s, n);
  for (int64_t k = 0; k < n; k++)
    s[k] = s[k] + (-c->slopes[h] * dist(c, q, kv0 + k)); /* the built-in's rounding */
}

static void one_row(const float *s, float *g, int64_t n, int64_t b, int64_t h, int64_t q,
                    int64_t kv0, void *u) {
  (void)g, (void)b, (void)h, (void)q, (void)kv0;
  seen(u, s, n);
}

static void alibi_row_param(const float *s, const float *g, int64_t n, int64_t b, int64_t h,
                            int64_t q, int64_t kv0, void *u) {
  mctx *c = u;
  seen(c, s, n);
  float acc = 0;
  for (int64_t k = 0; k < n; k++)
    acc += g[k] * -dist(c, q, kv0 + k);
  c->slope_grad[b * c->H + h] += acc;
}

static void softcap_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0,
                        void *u) {
  seen(u, s, n);
  for (int64_t k = 0; k < n; k++)
    s[k] = softcap_score(s[k], b, h, q, kv0 + k, u);
}

static void softcap_row_grad(const float *s, float *g, int64_t n, int64_t b, int64_t h, int64_t q,
                             int64_t kv0, void *u) {
  seen(u, s, n);
  for (int64_t k = 0; k < n; k++)
    g[k] *= softcap_grad(s[k], b, h, q, kv0 + k, u);
}

/* masks as -inf from the row callback: causal / window (q_offset), documents */
static void window_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0,
                       void *u) {
  (void)b, (void)h;
  mctx *c = u;
  seen(c, s, n);
  const int64_t p = q + c->q_offset;
  for (int64_t k = 0; k < n; k++) {
    const int64_t kv = kv0 + k;
    if ((c->wl >= 0 && kv < p - c->wl) || (c->wr >= 0 && kv > p + c->wr)) s[k] = -INFINITY;
  }
}

static void doc_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0, void *u) {
  (void)h;
  mctx *c = u;
  seen(c, s, n);
  for (int64_t k = 0; k < n; k++)
    if (c->doc[b * 1000 + q] != c->doc[b * 1000 + kv0 + k]) s[k] = -INFINITY;
}

static void nan_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0, void *u) {
  const mctx *c = u;
  if (b == c->nan_b && h == c->nan_h && q == c->nan_q && kv0 <= c->nan_kv && c->nan_kv < kv0 + n)
    s[c->nan_kv - kv0] = NAN;
}

/* ---- the built-ins as row callbacks ------------------------------------ */
static void test_alibi_row(void) {
  for (int t = 0; t < 2; t++) {
    sdpa_problem p;
    make(&p, 110, 140, t, t ? 30 : 0, 300 + t);
    float slopes[4];
    CHECK_OK(attn_alibi_slopes(4, slopes));
    mctx u = {.q_offset = p.d.q_offset, .slopes = slopes, .H = 4};
    attn_sdpa_mods mods = {.score_mod_row = alibi_row, .score_mod_row_grad = one_row, .user = &u};
    attn_sdpa_desc builtin = p.d;
    builtin.alibi_slopes = slopes;
    against_builtin("alibi score_mod_row", &p, &builtin, &mods, 0, 0);
    CHECK(atomic_load(&u.inf_seen) == 0); /* causal keys came as placeholders */
    CHECK(atomic_load(&u.max_n) <= 140);
    sdpa_free_problem(&p);
  }
}

/* after a causal mask_mod (with its block mask): the row callback runs on
 * what mask_mod left */
static void test_alibi_row_after_mask_mod(void) {
  sdpa_problem p;
  make(&p, 150, 150, 0, 0, 310);
  float slopes[4];
  CHECK_OK(attn_alibi_slopes(4, slopes));
  mctx u = {.slopes = slopes, .H = 4};
  attn_sdpa_mods mods = {.score_mod_row = alibi_row,
                         .score_mod_row_grad = one_row,
                         .mask_mod = causal_mask,
                         .user = &u};
  attn_sdpa_desc builtin = p.d;
  builtin.alibi_slopes = slopes, builtin.causal = 1;
  against_builtin("causal mask_mod + alibi score_mod_row", &p, &builtin, &mods, 0, 0);
  against_builtin("causal mask_mod + alibi score_mod_row, block mask 64x64", &p, &builtin, &mods,
                  64, 64);
  CHECK(atomic_load(&u.inf_seen) == 0);
  sdpa_free_problem(&p);
}

static void test_softcap_row(void) {
  for (int t = 0; t < 2; t++) {
    sdpa_cfg c = shape(70, t ? 70 : 90);
    c.causal = t;
    c.qmul = 4.0f; /* logits up to ~ +-10: the cap matters */
    sdpa_problem p;
    sdpa_make_problem(&c, 500 + t, &p);
    mctx u = {.cap = t ? 2.0f : 5.0f};
    attn_sdpa_mods mods = {.score_mod_row = softcap_row,
                           .score_mod_row_grad = softcap_row_grad,
                           .user = &u};
    attn_sdpa_desc builtin = p.d;
    builtin.softcap = u.cap;
    against_builtin("softcap score_mod_row", &p, &builtin, &mods, 0, 0);
    CHECK(atomic_load(&u.inf_seen) == 0);
    sdpa_free_problem(&p);
  }
}

/* the bench's softcap-row: its rational tanh, vectorised */
static void test_bench_softcap_row(void) {
  sdpa_cfg c = shape(100, 130);
  c.causal = 1, c.qmul = 4.0f;
  sdpa_problem p;
  sdpa_make_problem(&c, 520, &p);
  attn_sdpa_desc d = p.d, builtin;
  d.softcap = 3.0f;
  attn_bench_mod bm;
  CHECK(attn_bench_mod_setup(BENCH_MOD_SOFTCAP_ROW, &d, &builtin, &bm) == 0);
  CHECK(d.softcap == 0.0f && d.mods && d.mods->score_mod_row && builtin.softcap == 3.0f);
  for (int be = MATH; be < n_ops; be++) {
    results a, b;
    run(be, &d, &p, &a);
    run(be, &builtin, &p, &b);
    same("bench softcap-row", be, &p, &a, &b, 10);
    release(&a), release(&b);
  }
  attn_bench_mod_free(&bm);
  /* the tanh itself: against tanh, NaN passes, +-inf give +-1 */
  float x[300], t[300];
  for (int i = 0; i < 300; i++)
    x[i] = (float)(i - 150) / 12.0f;
  x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 1e30f;
  attn_bench_tanh_row(x, t, 300);
  CHECK(isnan(t[0]) && t[1] == 1.0f && t[2] == -1.0f && t[3] == 1.0f);
  double worst = 0;
  for (int i = 4; i < 300; i++)
    worst = fmax(worst, fabs((double)t[i] - tanh((double)x[i])));
  CHECK(worst <= 3.5e-7);
  sdpa_free_problem(&p);
}

/* masks as -inf from the row callback: causal and windows (with q_offset) */
static void test_window_row(void) {
  static const int w[3][2] = {{-1, 0}, {20, -1}, {30, 7}};
  for (int t = 0; t < 3; t++) {
    sdpa_problem p;
    make(&p, 130, 170, 0, t == 2 ? 40 : 0, 200 + t);
    mctx u = {.q_offset = p.d.q_offset, .wl = w[t][0], .wr = w[t][1]};
    attn_sdpa_mods mods = {.score_mod_row = window_row, .score_mod_row_grad = one_row, .user = &u};
    attn_sdpa_desc builtin = p.d;
    if (t == 0) builtin.causal = 1;
    else builtin.window_left = w[t][0], builtin.window_right = w[t][1];
    against_builtin(t ? "window score_mod_row" : "causal score_mod_row", &p, &builtin, &mods, 0,
                    0);
    sdpa_free_problem(&p);
  }
}

/* packed documents: -inf across documents against the same bool mask, with
 * causal built in */
static void test_document_row(void) {
  sdpa_problem p;
  make(&p, 160, 160, 1, 0, 400);
  int32_t doc[2000];
  attn_sdpa_desc builtin = p.d;
  uint8_t *bm = usermod_documents(doc, &builtin);
  mctx u = {.doc = doc};
  attn_sdpa_mods mods = {.score_mod_row = doc_row, .score_mod_row_grad = one_row, .user = &u};
  against_builtin("document score_mod_row", &p, &builtin, &mods, 0, 0);
  CHECK(atomic_load(&u.inf_seen) == 0);
  free(bm);
  sdpa_free_problem(&p);
}

/* ---- parameter gradients, threads, NaN ---------------------------------- */
/* ALiBi slopes: score_mod_row_param_grad's partials against the per-pair
 * score_mod_param_grad's, on every backend, causal (rows with placeholders) */
static void test_alibi_row_slope_gradient(void) {
  sdpa_problem p;
  make(&p, 60, 70, 1, 10, 600);
  float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f}, got[8], want[8];
  mctx u = {.q_offset = 10, .slopes = slopes, .H = 4};
  attn_sdpa_mods row = {.score_mod_row = alibi_row,
                        .score_mod_row_grad = one_row,
                        .score_mod_row_param_grad = alibi_row_param,
                        .user = &u};
  attn_sdpa_mods pair = {.score_mod = alibi_score,
                         .score_mod_grad = one_grad,
                         .score_mod_param_grad = alibi_param_grad,
                         .user = &u};
  for (int be = MATH; be < n_ops; be++) {
    attn_sdpa_desc d = p.d;
    results a, b;
    memset(want, 0, sizeof want), memset(got, 0, sizeof got);
    u.slope_grad = want, d.mods = &pair;
    run(be, &d, &p, &b);
    u.slope_grad = got, d.mods = &row;
    run(be, &d, &p, &a);
    same("alibi score_mod_row vs score_mod", be, &p, &a, &b, 1);
    float big = 0;
    for (int i = 0; i < 8; i++)
      big = fmaxf(big, fabsf(want[i]));
    CHECK(big > 0);
    for (int i = 0; i < 8; i++)
      if (!(fabsf(got[i] - want[i]) <= 1e-5f * big)) {
        printf("  slope partial %d: %s gives %.7g, per pair %.7g\n", i, be_name(be),
               (double)got[i], (double)want[i]);
        h_case_failed = 1;
      }
    release(&a), release(&b);
  }
  CHECK(atomic_load(&u.inf_seen) == 0);
  sdpa_free_problem(&p);
}

/* 1 and 2 threads: the same bits, the parameter gradient partials included */
static void test_row_threads_bit_identical(void) {
  sdpa_problem p;
  make(&p, 150, 200, 1, 0, 700);
  float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
  mctx u = {.slopes = slopes, .H = 4};
  attn_sdpa_mods mods = {.score_mod_row = alibi_row,
                         .score_mod_row_grad = one_row,
                         .score_mod_row_param_grad = alibi_row_param,
                         .user = &u};
  attn_sdpa_desc d = p.d;
  d.mods = &mods;
  usermod_threads_identical(&p, &d, &u.slope_grad);
  sdpa_free_problem(&p);
}

/* NaN written by the row callback at one pair: that row's out, lse, dq NaN,
 * the other rows finite, no crash */
static void test_row_nan_contract(void) {
  mctx u = {.nan_b = 1, .nan_h = 2, .nan_q = 3, .nan_kv = 5};
  attn_sdpa_mods mods = {.score_mod_row = nan_row, .score_mod_row_grad = one_row, .user = &u};
  usermod_nan_contract(&mods);
}

/* ---- the other dtypes: row callbacks against the per-pair ones --------- */
static const attn_lowp_path LOWP[] = {ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX,
                                      ATTN_LOWP_F32};

static void close5(const char *what, const results *a, const results *b, const int64_t n[5],
                   int k) {
  static const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
  int before = h_case_failed;
  h_case_failed = 0;
  for (int i = 0; i < k; i++)
    CHECK_CLOSE(names[i], a->x[i], b->x[i], n[i], 1e-6, 1e-5);
  if (h_case_failed) printf("  ^ %s\n", what);
  h_case_failed |= before;
}

/* bf16 (transposed tiles; forward and backward, the slope gradient too),
 * fp16 and int8 (shifted scores; forward): causal + ALiBi and softcap */
static void test_lowp_row(void) {
  sdpa_cfg c = shape(100, 140);
  c.qmul = 2.0f, c.koff = 1.5f, c.causal = 1;
  sdpa_problem p;
  sdpa_make_problem(&c, 1200, &p);
  sdpa_problem_to_bf16(&p);
  float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f}, pg[2][8];
  mctx u = {.slopes = slopes, .H = 4, .cap = 3.0f};
  attn_sdpa_mods rows[2] = {{.score_mod_row = alibi_row,
                             .score_mod_row_grad = one_row,
                             .score_mod_row_param_grad = alibi_row_param,
                             .user = &u},
                            {.score_mod_row = softcap_row,
                             .score_mod_row_grad = softcap_row_grad,
                             .user = &u}};
  attn_sdpa_mods pairs[2] = {{.score_mod = alibi_score,
                              .score_mod_grad = one_grad,
                              .score_mod_param_grad = alibi_param_grad,
                              .user = &u},
                             {.score_mod = softcap_score,
                              .score_mod_grad = softcap_grad,
                              .user = &u}};
  const int64_t n[5] = {p.no, p.nl, p.nq, p.nk, p.nv};
  for (int t = 0; t < 2; t++)
    for (unsigned pa = 0; pa < sizeof LOWP / sizeof LOWP[0]; pa++) {
      results r[2];
      for (int v = 0; v < 2; v++) { /* v 0: per pair, 1: per row */
        attn_sdpa_desc d = p.d;
        d.mods = v ? &rows[t] : &pairs[t];
        memset(pg[v], 0, sizeof pg[v]);
        u.slope_grad = pg[v];
        for (int i = 0; i < 5; i++)
          r[v].x[i] = sdpa_zeros(n[i]);
        if (attn_sdpa_bf16_path_available(LOWP[pa])) {
          CHECK_OK(attn_sdpa_forward_bf16_path(LOWP[pa], &d, p.qh, p.kh, p.vh, r[v].x[0], r[v].x[1]));
          CHECK_OK(attn_sdpa_backward_bf16_path(LOWP[pa], &d, p.qh, p.kh, p.vh, r[v].x[0],
                                                r[v].x[1], p.dout, r[v].x[2], r[v].x[3], r[v].x[4]));
        }
      }
      close5(t ? "bf16 softcap row" : "bf16 alibi row", &r[1], &r[0], n, 5);
      for (int i = 0; i < 8; i++)
        CHECK(fabsf(pg[1][i] - pg[0][i]) <= 1e-5f * (fabsf(pg[0][i]) + 1.0f));
      for (int v = 0; v < 2; v++) { /* int8 forward */
        attn_sdpa_desc d = p.d;
        d.mods = v ? &rows[t] : &pairs[t];
        if (attn_sdpa_i8_path_available(LOWP[pa]))
          CHECK_OK(attn_sdpa_forward_i8_path(LOWP[pa], &d, p.q, p.k, p.v, r[v].x[0], r[v].x[1]));
      }
      close5(t ? "int8 softcap row" : "int8 alibi row", &r[1], &r[0], n, 2);
      release(&r[0]), release(&r[1]);
    }
  free(p.qh), free(p.kh), free(p.vh); /* the bf16 copies, for fp16 ones */
  sdpa_problem_to_f16(&p);
  results a, b;
  attn_sdpa_desc d = p.d;
  u.slope_grad = pg[0];
  d.mods = &rows[1];
  run(F16, &d, &p, &a);
  d.mods = &pairs[1];
  run(F16, &d, &p, &b);
  close5("fp16 softcap row", &a, &b, n, 5);
  release(&a), release(&b);
  CHECK(atomic_load(&u.inf_seen) == 0);
  sdpa_free_problem(&p);
}

/* bad descriptors: clear errors, nothing run */
static void test_row_bad_input(void) {
  sdpa_problem p;
  make(&p, 20, 30, 0, 0, 1100);
  float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl), *g[3];
  g[0] = sdpa_zeros(p.nq), g[1] = sdpa_zeros(p.nk), g[2] = sdpa_zeros(p.nv);
  mctx u = {.cap = 5};
  attn_sdpa_desc d = p.d;
  attn_sdpa_mods both = {.score_mod = softcap_score,
                         .score_mod_grad = softcap_grad,
                         .score_mod_row = softcap_row,
                         .score_mod_row_grad = softcap_row_grad,
                         .user = &u};
  d.mods = &both; /* per pair and per row at once */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "score_mod_row") != NULL);
  attn_sdpa_mods lone = {.score_mod_row_grad = softcap_row_grad, .user = &u};
  d.mods = &lone; /* a row derivative without score_mod_row */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, NULL), ATTN_EINVAL);
  attn_sdpa_mods mixed = {.score_mod_row = softcap_row,
                          .score_mod_grad = softcap_grad,
                          .user = &u};
  d.mods = &mixed; /* score_mod_row with the per-pair derivative */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL), ATTN_EINVAL);
  attn_sdpa_mods fwd = {.score_mod_row = softcap_row, .user = &u};
  d.mods = &fwd; /* no derivative: the forward runs, the backward refuses */
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_AUTO, p.q, p.k, p.v, o, l, NULL));
  for (int be = 0; be < 3; be++)
    CHECK_ERR(
        attn_sdpa_backward_f32(&d, (attn_backend)be, p.q, p.k, p.v, o, l, p.dout, g[0], g[1], g[2]),
        ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "score_mod_row_grad") != NULL);
  float shaw[3 * 24] = {0};
  d.shaw_k = shaw, d.shaw_max = 2; /* with Shaw keys */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, NULL),
            ATTN_EUNSUPPORTED);
  free(o), free(l), free(g[0]), free(g[1]), free(g[2]);
  sdpa_free_problem(&p);
}

int main(void) {
  attn_set_num_threads(1); /* see test_row_threads_bit_identical */
  n_ops = flash_ops_portable_and_level(ops_list);
  RUN(test_alibi_row);
  RUN(test_alibi_row_after_mask_mod);
  RUN(test_softcap_row);
  RUN(test_bench_softcap_row);
  RUN(test_window_row);
  RUN(test_document_row);
  RUN(test_alibi_row_slope_gradient);
  RUN(test_row_threads_bit_identical);
  RUN(test_row_nan_contract);
  RUN(test_lowp_row);
  RUN(test_row_bad_input);
  HARNESS_END();
}
