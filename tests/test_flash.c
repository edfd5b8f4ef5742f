/* Flash SDPA backend: vectorised exp against expf, the tile kernels of the
 * active ISA level (ATTN_CPU; tests/run.sh runs this program on every level
 * the machine has) vs portable, and the fused forward/backward against the math reference on
 * many random shapes, masks and layouts, for both kernel sets.
 *
 * Tolerance vs math: |flash - math| <= 1e-5 + 1e-4 |math| for out and lse
 * (the two differ only in f32 summation order and exp rounding); gradients
 * get 2e-5 + 2e-4 |math| (one more product in their chain). */
#include <stdint.h>

#include "harness.h"
#include "kernels/kern.h"
#include "kernels/flash/sdpa_flash.h"
#include "sdpa_golden.h"
#include "sdpa_nan_cases.h"
#include "sdpa_problem.h"

/* The active level's tile kernels, NULL at the generic level. */
static const attn_flash_ops *simd_ops(void) {
  const attn_flash_ops *a = attn_kern_get()->flash;
  return a != attn_flash_ops_generic() ? a : NULL;
}
static int have_simd(void) { return simd_ops() != NULL; }

/* ---- vectorised exp ------------------------------------------------------ */
static int32_t ordered(float x) { /* float bits on a line ordered like the values */
  int32_t i;
  memcpy(&i, &x, 4);
  return i < 0 ? INT32_MIN - i : i;
}

static void check_vexp(void (*f)(const float *, float *, int64_t)) {
  enum { N = 400001 };
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++)
    x[i] = -110.0f + 200.0f * (float)i / (N - 1); /* [-110, 90] */
  x[1] = -INFINITY;
  x[2] = INFINITY;
  x[3] = 0.0f;
  x[4] = -0.0f;
  x[5] = 1e-30f;
  x[6] = 88.7f;
  x[7] = -87.4f; /* result just below FLT_MIN (denormal) */
  x[8] = -103.9f;
  f(x, y, N);
  int64_t worst = 0;
  int bad = -1;
  for (int i = 0; i < N; i++) {
    float want = expf(x[i]);
    if (want >= 1.1754944e-38f && isfinite(want)) { /* normal result: a few ulp */
      int64_t u = (int64_t)ordered(y[i]) - ordered(want);
      if (u < 0) u = -u;
      if (u > worst) worst = u;
      if (u > 3 && bad < 0) bad = i;
    } else if (isinf(want)) {
      if (!(isinf(y[i]) && y[i] > 0) && bad < 0) bad = i;
    } else if (fabsf(y[i] - want) > 2.9e-45f && bad < 0) { /* denormal: within 2 steps */
      bad = i;
    }
  }
  if (bad >= 0) printf("  vexp(%.9g) = %.9g, expf %.9g\n", x[bad], y[bad], expf(x[bad]));
  CHECK(bad < 0);
  CHECK(worst <= 3);
  CHECK(y[1] == 0.0f && y[3] == 1.0f && y[4] == 1.0f && isinf(y[2]));
  float nanin = NAN, nanout = 0;
  f(&nanin, &nanout, 1);
  CHECK(isnan(nanout));
  /* short and odd lengths (masked tail) leave the rest untouched */
  float a[19], b[19];
  for (int i = 0; i < 19; i++)
    a[i] = (float)i - 9.0f, b[i] = -1.0f;
  f(a, b, 17);
  for (int i = 0; i < 17; i++)
    CHECK(fabsf(b[i] - expf(a[i])) <= 3e-7f * expf(a[i]));
  CHECK(b[17] == -1.0f && b[18] == -1.0f);
  free(x);
  free(y);
}

static void test_vexp_generic_matches_expf(void) {
  check_vexp(attn_kern_at(ATTN_ISA_GENERIC)->row.vexp);
}
static void test_vexp_level_within_3_ulp(void) { check_vexp(attn_kern_get()->row.vexp); }

/* ---- tile kernels: the active level vs portable ---------------------------------- */
static void test_tile_gemm_level_matches_generic(void) {
  if (!have_simd()) {
    SKIP("level %s has no tile kernels of its own", attn_isa_name(attn_isa_active()));
    return;
  }
  const attn_flash_ops *g = attn_flash_ops_generic(), *a = simd_ops();
  float A[6 * 80], Bm[80 * 70], C0[6 * 70], C1[6 * 70], cs[6] = {0.5f, 1, 2, -1, 0, 3};
  fill_uniform(A, 6 * 80, 1, -1, 1);
  fill_uniform(Bm, 80 * 70, 2, -1, 1);
  for (int R = 1; R <= 6; R++)
    for (int n = 1; n <= 64; n += (n < 20 ? 1 : 7))
      for (int mode = 0; mode < 4; mode++) {
        int64_t K = mode == 3 ? 0 : 37 + mode, ars = mode == 1 ? 1 : 80, acs = mode == 1 ? 6 : 1;
        int acc = mode >= 2;
        fill_uniform(C0, 6 * 70, 3, -1, 1);
        memcpy(C1, C0, sizeof C0);
        g->gemm(R, n, K, A, ars, acs, Bm, 70, C0, 70, mode == 2 ? cs : NULL, acc);
        a->gemm(R, n, K, A, ars, acs, Bm, 70, C1, 70, mode == 2 ? cs : NULL, acc);
        CHECK_CLOSE("gemm", C1, C0, 6 * 70, 1e-5, 1e-5); /* also: nothing outside [R, n] */
      }
}

/* kᵀ packing: the level's pack_t writes what the portable one does, the
 * columns up to n rounded to 8 (zeros past n), and leaves the rest alone */
static void test_pack_t_level_matches_generic(void) {
  if (!have_simd()) {
    SKIP("level %s has no tile kernels of its own", attn_isa_name(attn_isa_active()));
    return;
  }
  const attn_flash_ops *g = attn_flash_ops_generic(), *a = simd_ops();
  enum { LDX = 75, DMAX = 72 };
  float *x = malloc(ATTN_FLASH_BC * LDX * sizeof(float));
  float *k0 = malloc(DMAX * ATTN_FLASH_BC * sizeof(float));
  float *k1 = malloc(DMAX * ATTN_FLASH_BC * sizeof(float));
  fill_uniform(x, ATTN_FLASH_BC * LDX, 5, -1, 1);
  const int64_t Ds[] = {1, 7, 8, 9, 32, 64, 72};
  for (int di = 0; di < 7; di++)
    for (int64_t n = 1; n <= ATTN_FLASH_BC; n++) {
      const int64_t D = Ds[di], pad = (n + 7) & ~7;
      for (int64_t e = 0; e < DMAX * ATTN_FLASH_BC; e++) k0[e] = k1[e] = -7.0f; /* unwritten */
      g->pack_t(n, D, x, LDX, k0);
      a->pack_t(n, D, x, LDX, k1);
      int bad = 0;
      for (int64_t dd = 0; dd < D; dd++)
        for (int64_t j = 0; j < ATTN_FLASH_BC; j++) {
          const float want = j < n ? x[j * LDX + dd] : j < pad ? 0.0f : -7.0f;
          bad += k0[dd * ATTN_FLASH_BC + j] != want || k1[dd * ATTN_FLASH_BC + j] != want;
        }
      for (int64_t e = D * ATTN_FLASH_BC; e < DMAX * ATTN_FLASH_BC; e++) bad += k1[e] != -7.0f;
      if (bad) printf("  pack_t n=%lld D=%lld: %d wrong\n", (long long)n, (long long)D, bad);
      CHECK(bad == 0);
    }
  free(x);
  free(k0);
  free(k1);
}

static void test_tile_softmax_level_matches_generic(void) {
  if (!have_simd()) {
    SKIP("level %s has no tile kernels of its own", attn_isa_name(attn_isa_active()));
    return;
  }
  const attn_flash_ops *g = attn_flash_ops_generic(), *a = simd_ops();
  float s0[6 * 64], s1[6 * 64], m0[6], m1[6], l0[6], l1[6], al0[6], al1[6];
  int lo[6] = {0, 3, 0, 10, 64, 0}, hi[6] = {64, 40, 1, 11, 64, 63};
  for (int step = 0; step < 3; step++) {
    fill_uniform(s0, 6 * 64, 10 + step, -30, 30);
    memcpy(s1, s0, sizeof s0);
    if (step == 0)
      for (int r = 0; r < 6; r++)
        m0[r] = m1[r] = -INFINITY, l0[r] = l1[r] = 0;
    float t0[6 * 64], t1[6 * 64];
    memcpy(t0, s0, sizeof s0);
    memcpy(t1, s0, sizeof s0);
    g->logits(6, t0, 0.7f, lo, hi);
    a->logits(6, t1, 0.7f, lo, hi);
    CHECK_CLOSE("logits", t1, t0, 6 * 64, 0, 0);
    g->softmax_update(6, s0, 0.7f, lo, hi, m0, l0, al0);
    a->softmax_update(6, s1, 0.7f, lo, hi, m1, l1, al1);
    CHECK_CLOSE("p", s1, s0, 6 * 64, 1e-7, 3e-7);
    CHECK_CLOSE("m", m1, m0, 6, 0, 0);
    CHECK_CLOSE("l", l1, l0, 6, 1e-6, 1e-6);
    CHECK_CLOSE("alpha", al1, al0, 6, 1e-7, 3e-7);
  }
  CHECK(m0[4] == -INFINITY && l0[4] == 0 && al0[4] == 1.0f); /* row with no key */
}

/* The whole-tile forward kernel (G row groups at once) against the same
 * kernel set's steps per group (gemm, softmax_update, gemm: bit for bit) and
 * the portable steps (rounding), over three key blocks so that the running
 * max moves (alpha < 1). */
static void tile_steps(const attn_flash_ops *o, int G, int64_t D, int64_t Dv, const float *q,
                       int64_t ldq, const float *kt, const float *v, int64_t ldv, float scale,
                       float *s, float *out, int64_t ldo, float *m, float *l) {
  int lo[6] = {0, 0, 0, 0, 0, 0}, hi[6] = {64, 64, 64, 64, 64, 64};
  float alpha[6];
  for (int g = 0; g < G; g++) {
    o->gemm(6, 64, D, q + g * 6 * ldq, ldq, 1, kt, 64, s, 64, NULL, 0);
    o->softmax_update(6, s, scale, lo, hi, m + 6 * g, l + 6 * g, alpha);
    for (int64_t c0 = 0; c0 < Dv; c0 += 64)
      o->gemm(6, (int)(Dv - c0 < 64 ? Dv - c0 : 64), 64, s, 64, 1, v + c0, ldv,
              out + g * 6 * ldo + c0, ldo, alpha, 1);
  }
}

static void test_tile_forward_matches_steps(void) {
  CHECK(attn_flash_ops_generic()->tile_forward == NULL);
  if (!have_simd()) {
    SKIP("level %s has no tile kernels of its own", attn_isa_name(attn_isa_active()));
    return;
  }
  const attn_flash_ops *g = attn_flash_ops_generic(), *a = simd_ops();
  if (!a->tile_forward) return; /* the level runs the steps */
  const int64_t dims[][2] = {{64, 64}, {40, 80}, {128, 128}, {16, 24}, {1, 1}, {64, 64}};
  for (int t = 0; t < 6; t++) {
    int G = t == 5 ? 1 : 1 + t % 3, n = 6 * G;
    int64_t D = dims[t][0], Dv = dims[t][1], ldq = D + 3, ldv = Dv + 5, ldo = Dv + 2;
    float *q = malloc(n * ldq * sizeof(float)), *kt = malloc(3 * D * 64 * sizeof(float));
    float *v = malloc(3 * 64 * ldv * sizeof(float)), *o[3], *m[3], *l[3], s[3][2 * 6 * 64];
    fill_uniform(q, n * ldq, 20 + t, -2, 2);
    fill_uniform(kt, 3 * D * 64, 30 + t, -2, 2);
    fill_uniform(v, 3 * 64 * ldv, 40 + t, -1, 1);
    for (int64_t i = 2 * D * 64; i < 3 * D * 64; i++)
      kt[i] *= 3; /* the third block has the larger logits */
    for (int x = 0; x < 3; x++) {
      o[x] = calloc(n * ldo, sizeof(float));
      m[x] = malloc(n * sizeof(float));
      l[x] = malloc(n * sizeof(float));
      for (int r = 0; r < n; r++)
        m[x][r] = -INFINITY, l[x][r] = 0;
    }
    float scale = 1.0f / sqrtf((float)D), m1[18];
    const float *plast = s[0] + ((G - 1) & 1) * 6 * 64; /* p of the last group */
    for (int kb = 0; kb < 3; kb++) {
      if (kb == 2) memcpy(m1, m[0], n * sizeof(float));
      const float *ktb = kt + kb * D * 64, *vb = v + kb * 64 * ldv;
      int nx = kb < 2 && t < 5; /* the next block: only a hint, blocks 1 and 2 are there */
      a->tile_forward(G, D, Dv, q, ldq, ktb, vb, ldv, scale, s[0], o[0], ldo, m[0], l[0],
                      nx ? ktb + D * 64 : NULL, nx ? vb + 64 * ldv : NULL, ldv);
      tile_steps(a, G, D, Dv, q, ldq, ktb, vb, ldv, scale, s[1], o[1], ldo, m[1], l[1]);
      tile_steps(g, G, D, Dv, q, ldq, ktb, vb, ldv, scale, s[2], o[2], ldo, m[2], l[2]);
      CHECK_CLOSE("p same kernels", plast, s[1], 6 * 64, 0, 0);
      CHECK_CLOSE("o same kernels", o[0], o[1], n * ldo, 0, 0);
      CHECK_CLOSE("m same kernels", m[0], m[1], n, 0, 0);
      CHECK_CLOSE("l same kernels", l[0], l[1], n, 0, 0);
      CHECK_CLOSE("p portable", plast, s[2], 6 * 64, 1e-6, 1e-5);
      CHECK_CLOSE("o portable", o[0], o[2], n * ldo, 1e-5, 1e-5);
      CHECK_CLOSE("m portable", m[0], m[2], n, 1e-6, 1e-6);
      CHECK_CLOSE("l portable", l[0], l[2], n, 1e-5, 1e-5);
    }
    int moved = 0; /* the last block raised the max of some row (alpha < 1) */
    for (int r = 0; r < n; r++)
      moved |= m[0][r] > m1[r];
    CHECK(moved);
    if (h_case_failed) printf("  ^ G=%d D=%lld Dv=%lld\n", G, (long long)D, (long long)Dv);
    free(q), free(kt), free(v);
    for (int x = 0; x < 3; x++)
      free(o[x]), free(m[x]), free(l[x]);
  }
}

/* ---- fused forward/backward vs math ------------------------------------- */

/* Runs flash (ops) and math on one problem and compares everything. */
static void compare_case(const attn_flash_ops *ops, const sdpa_cfg *c, unsigned seed,
                         int backward) {
  sdpa_problem p;
  sdpa_make_problem(c, seed, &p);
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_flash_ops(ops, &p.d, p.q, p.k, p.v, o1, l1));
  double atol = 1e-5, rtol = 1e-4;
  if (c->qmul > 4) atol = rtol = 1e-3; /* logits ~30x: rounding of q·k is ~30x larger */
  int before = h_case_failed;
  h_case_failed = 0;
  CHECK_CLOSE("out", o1, o0, p.no, atol, rtol);
  CHECK_CLOSE("lse", l1, l0, p.nl, atol, rtol);
  CHECK(!sdpa_any_nan(o1, p.no));
  if (backward) {
    float *g0[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
    float *g1[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
    CHECK_OK(attn_sdpa_backward_math(&p.d, p.q, p.k, p.v, o0, l0, p.dout, g0[0], g0[1], g0[2]));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops, &p.d, p.q, p.k, p.v, o0, l0, p.dout, g1[0], g1[1],
                                          g1[2]));
    double ga = 2 * atol, gr = 2 * rtol;
    if (c->qmul > 4) ga = 1e-2, gr = 1e-2; /* dk sums q (30x) times ds */
    CHECK_CLOSE("dq", g1[0], g0[0], p.nq, ga, gr);
    CHECK_CLOSE("dk", g1[1], g0[1], p.nk, ga, gr);
    CHECK_CLOSE("dv", g1[2], g0[2], p.nv, ga, gr);
    for (int i = 0; i < 3; i++)
      free(g0[i]), free(g1[i]);
  }
  if (h_case_failed) sdpa_print_case(ops->name, c, seed);
  h_case_failed |= before;
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

static const attn_flash_ops *ops_list[2];
static int n_ops;

static void for_each_ops(const sdpa_cfg *c, unsigned seed, int backward) {
  if (!h_sample()) return; /* ATTN_TEST_SAMPLE (tests/harness.h) */
  for (int i = 0; i < n_ops; i++)
    compare_case(ops_list[i], c, seed, backward);
}

static void test_head_dims(void) {
  static const int dims[] = {1, 7, 32, 40, 64, 80, 128, 129, 256};
  for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    sdpa_cfg c = sdpa_plain(37, 70, dims[i]);
    c.Dv = dims[(i + 3) % 9] == 256 ? dims[i] : dims[(i + 3) % 9]; /* Dv != D mostly */
    for_each_ops(&c, 100 + i, 1);
  }
}

static void test_lengths_and_tails(void) {
  static const int L[][2] = {{1, 1},    {1, 65},   {5, 3},    {64, 64},
                             {65, 129}, {130, 63}, {97, 200}, {200, 97}};
  for (unsigned i = 0; i < sizeof L / sizeof L[0]; i++) {
    sdpa_cfg c = sdpa_plain(L[i][0], L[i][1], 32);
    for_each_ops(&c, 200 + i, 1);
  }
}

static void test_causal_and_windows(void) {
  static const int W[][3] = {{1, -1, -1}, {0, 5, -1}, {0, 20, 0}, {0, -1, 3},
                             {1, 70, -1}, {0, 0, 0},  {1, 0, -1}, {0, 130, 70}};
  static const int L[][2] = {{150, 150}, {100, 190}, {190, 100}};
  for (unsigned i = 0; i < sizeof W / sizeof W[0]; i++)
    for (unsigned j = 0; j < 3; j++) {
      sdpa_cfg c = sdpa_plain(L[j][0], L[j][1], 24);
      c.causal = W[i][0];
      c.wl = W[i][1];
      c.wr = W[i][2];
      for_each_ops(&c, 300 + i * 3 + j, 1);
    }
}

static void test_masks_key_lens_gqa(void) {
  for (int m = 0; m < 8; m++) {
    sdpa_cfg c = sdpa_plain(70 + m, 90 + 3 * m, 16 + 8 * m);
    c.B = 3;
    c.Hq = 4;
    c.Hkv = m % 2 ? 1 : 2;
    c.key_lens = m & 1;
    c.bool_mask = (m >> 1) & 1;
    c.add_mask = (m >> 2) & 1;
    c.causal = m == 5;
    c.scale = m == 6 ? 0.3f : 0.0f;
    for_each_ops(&c, 400 + m, 1);
  }
}

static void test_strided_layouts(void) {
  sdpa_cfg c = sdpa_plain(67, 131, 40);
  c.B = 2;
  c.Hq = 6;
  c.Hkv = 3;
  c.Dv = 24;
  c.strided = 1;
  c.causal = 1;
  for_each_ops(&c, 500, 1);
  c.causal = 0;
  c.key_lens = 1;
  c.add_mask = 1;
  for_each_ops(&c, 501, 1);
}

static void test_random_shapes(void) {
  unsigned s = 12345;
  for (int t = 0; t < 24; t++) {
    s = s * 1103515245u + 12345u;
    sdpa_cfg c = sdpa_plain(1 + (s >> 4) % 140, 1 + (s >> 12) % 170, 1 + (s >> 20) % 100);
    c.Dv = 1 + (s >> 8) % 90;
    c.Hkv = 1 + t % 2;
    c.Hq = c.Hkv * (1 + (t / 2) % 3);
    c.B = 1 + t % 3;
    c.causal = (s >> 27) & 1;
    c.wl = (s >> 28) & 1 ? (int)((s >> 5) % 50) : -1;
    c.wr = (s >> 29) & 1 ? (int)((s >> 9) % 50) : -1;
    c.key_lens = (s >> 30) & 1;
    c.bool_mask = t % 5 == 0;
    c.add_mask = t % 7 == 0;
    c.strided = t % 4 == 0;
    for_each_ops(&c, 600 + t, 1);
  }
}

/* v at any alignment gives the same bits (blocks of an unaligned v are
 * copied to aligned rows for the whole-tile kernel, or read in place where
 * an item has a single row group). */
static void test_v_alignment(void) {
  static const int shapes[][3] = {{130, 200, 64}, {70, 130, 40}, {10, 150, 64}}; /* Lq, Lk, Dv */
  for (int t = 0; t < 3; t++) {
    int Lq = shapes[t][0], Lk = shapes[t][1], D = 64, Dv = shapes[t][2], H = 2;
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d, 1, H, H, Lq, Lk, D, Dv);
    int64_t nq = (int64_t)H * Lq * D, nk = (int64_t)H * Lk * D, nv = (int64_t)H * Lk * Dv;
    float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float));
    float *vbuf = aligned_alloc(64, (size_t)((nv + 16) * 4 + 63) / 64 * 64);
    float *v0 = malloc(nv * sizeof(float)), *om = sdpa_zeros(H * Lq * Dv), *lm = sdpa_zeros(H * Lq);
    fill_uniform(q, nq, 60 + t, -1, 1);
    fill_uniform(k, nk, 70 + t, -1, 1);
    fill_uniform(v0, nv, 80 + t, -1, 1);
    CHECK_OK(attn_sdpa_forward_math(&d, q, k, v0, om, lm, NULL));
    for (int o = 0; o < n_ops; o++) {
      float *ref = NULL;
      for (int off = 0; off < 3; off++) {
        float *v = vbuf + (off == 2 ? 4 : off); /* 64-byte aligned, 4 and 16 bytes off */
        memcpy(v, v0, nv * sizeof(float));
        float *out = sdpa_zeros(H * Lq * Dv), *lse = sdpa_zeros(H * Lq);
        CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[o], &d, q, k, v, out, lse));
        CHECK_CLOSE("out", out, om, H * Lq * Dv, 1e-5, 1e-4);
        CHECK_CLOSE("lse", lse, lm, H * Lq, 1e-5, 1e-4);
        if (ref) CHECK_CLOSE("out same bits", out, ref, H * Lq * Dv, 0, 0);
        if (ref) free(out);
        else ref = out;
        free(lse);
      }
      free(ref);
    }
    if (h_case_failed) printf("  ^ Lq=%d Lk=%d Dv=%d\n", Lq, Lk, Dv);
    free(q), free(k), free(vbuf), free(v0), free(om), free(lm);
  }
}

static void test_large_logits(void) {
  sdpa_cfg c = sdpa_plain(90, 100, 64);
  c.qmul = 30.0f; /* logits up to ~ +-100 */
  c.causal = 1;
  for_each_ops(&c, 700, 1);
  /* one key dominates by e^1000: out is exactly its v row, lse finite */
  for (int i = 0; i < n_ops; i++) {
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d, 1, 1, 1, 3, 130, 4, 4);
    float q[12] = {0}, k[520] = {0}, v[520], out[12], lse[3];
    fill_uniform(v, 520, 7, -1, 1);
    for (int r = 0; r < 3; r++)
      q[r * 4] = 1000.0f;
    k[100 * 4] = 2.0f; /* logit 1000 for key 100, 0 elsewhere */
    k[5 * 4] = 1.0f;   /* 500 */
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[i], &d, q, k, v, out, lse));
    for (int r = 0; r < 3; r++) {
      CHECK_CLOSE("dominant out", out + r * 4, v + 400, 4, 0, 0);
      CHECK(fabsf(lse[r] - 1000.0f) < 1e-3f);
    }
  }
}

static void test_fully_masked_rows_are_zero(void) {
  for (int i = 0; i < n_ops; i++) {
    sdpa_cfg c = sdpa_plain(20, 70, 8);
    c.B = 2;
    c.key_lens = 1; /* batch 0: key_lens 0 */
    c.wl = 2;
    c.wr = -1;
    c.causal = 0;
    sdpa_problem p;
    sdpa_make_problem(&c, 800, &p);
    p.d.window_right = 0;
    p.kl[1] = 10; /* batch 1: rows >= 12 see no key (window [i-2, i] past key_lens) */
    float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl),
          *g[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[i], &p.d, p.q, p.k, p.v, o, l));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops_list[i], &p.d, p.q, p.k, p.v, o, l, p.dout, g[0],
                                          g[1], g[2]));
    for (int r = 0; r < 20; r++) {
      CHECK(isinf(l[r]) && l[r] < 0); /* batch 0 */
      int dead = r >= 12;
      CHECK((isinf(l[2 * 20 + r]) && l[2 * 20 + r] < 0) == dead);
    }
    int nan = 0, nonzero = 0;
    for (int64_t e = 0; e < p.no; e++)
      nan |= isnan(o[e]);
    for (int t = 0; t < 3; t++) {
      int64_t n = t == 0 ? p.nq : t == 1 ? p.nk : p.nv;
      for (int64_t e = 0; e < n; e++)
        nan |= isnan(g[t][e]);
    }
    for (int64_t e = 0; e < 2 * 20 * 8; e++)
      nonzero |= o[e] != 0 || g[0][e] != 0; /* batch 0 */
    for (int64_t e = 0; e < 2 * 70 * 8; e++)
      nonzero |= g[1][e] != 0 || g[2][e] != 0;
    CHECK(!nan);
    CHECK(!nonzero);
    free(o), free(l);
    for (int t = 0; t < 3; t++)
      free(g[t]);
    sdpa_free_problem(&p);
  }
}

/* Lk = 0: every row sees no key (checked directly: the math path is not
 * asked about empty key sets here). */
/* NaN and +inf in a tile: a NaN logit inside [lo, hi) gives p = NaN and
 * l = NaN (the row's out turns NaN, as in math); one outside is ignored; a
 * row with nothing allowed stays m = -inf, l = 0, p = 0 whatever its data;
 * +inf gives inf - inf = NaN. The backward tile with lse = NaN: p = ds =
 * NaN at the allowed keys only. Both kernel sets. */
static void test_tile_nan_logits(void) {
  for (int o = 0; o < n_ops; o++) {
    const attn_flash_ops *ops = ops_list[o];
    float s[6 * 64], m[6], l[6], al[6];
    int lo[6] = {0, 0, 0, 5, 0, 0}, hi[6] = {64, 40, 0, 30, 64, 64};
    fill_uniform(s, 6 * 64, 77, -3, 3);
    s[0 * 64 + 5] = NAN;      /* row 0: allowed NaN */
    s[1 * 64 + 50] = NAN;     /* row 1: NaN past hi: ignored */
    s[2 * 64 + 7] = NAN;      /* row 2: nothing allowed */
    s[3 * 64 + 7] = INFINITY; /* row 3: +inf logit */
    s[4 * 64 + 63] = NAN;     /* row 4: NaN in the last lane */
    for (int r = 0; r < 6; r++)
      m[r] = -INFINITY, l[r] = 0;
    ops->softmax_update(6, s, 0.5f, lo, hi, m, l, al);
    CHECK(isnan(l[0]) && isnan(s[5]) && isfinite(m[0]));
    CHECK(isfinite(l[1]) && l[1] > 0 && s[64 + 50] == 0.0f);
    CHECK(m[2] == -INFINITY && l[2] == 0 && s[2 * 64 + 7] == 0.0f && al[2] == 1.0f);
    CHECK(isnan(l[3]) && m[3] == INFINITY);
    CHECK(isnan(l[4]) && isfinite(l[5]) && l[5] > 0);
    /* a second block: l stays NaN while the max moves */
    fill_uniform(s, 6 * 64, 78, 5, 9);
    ops->softmax_update(6, s, 0.5f, lo, hi, m, l, al);
    CHECK(isnan(l[0]) && isnan(l[4]) && isfinite(l[1]) && l[2] == 0);
    /* backward tile */
    float dp[6 * 64], pp[6 * 64], ds[6 * 64], lse[6] = {NAN, 1.0f, -INFINITY, NAN, 2.0f, 0.5f};
    float di[6] = {0.1f, NAN, 0.0f, 0.2f, 0.3f, 0.4f};
    fill_uniform(s, 6 * 64, 79, -3, 3);
    fill_uniform(dp, 6 * 64, 80, -1, 1);
    ops->probs_grad(6, s, 0.5f, lo, hi, dp, lse, di, 0.25f, pp, ds, 64);
    int ok = 1;
    for (int r = 0; r < 6; r++)
      for (int j = 0; j < 64; j++) {
        int in = j >= lo[r] && j < hi[r];
        float pv = pp[r * 64 + j], dv = ds[r * 64 + j];
        if (r == 0 || r == 3) ok &= in ? isnan(pv) && isnan(dv) : pv == 0 && dv == 0;
        if (r == 1) ok &= in ? pv > 0 && isnan(dv) : pv == 0 && dv == 0; /* D_i NaN */
        if (r == 2) ok &= pv == 0 && dv == 0;
        if (r >= 4) ok &= isfinite(pv) && isfinite(dv) && (in || (pv == 0 && dv == 0));
      }
    CHECK(ok);
  }
}

/* ---- NaN / inf in the data (tests/sdpa_nan_cases.h) ---------------------- */
static void nan_case(const attn_flash_ops *ops, int kind, int causal) {
  sdpa_problem p;
  sdpa_nan_problem(kind, causal, 1200 + kind, NULL, &p);
  const int X = SDPA_NAN_X, L = SDPA_NAN_L;
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_flash_ops(ops, &p.d, p.q, p.k, p.v, o1, l1));
  int before = h_case_failed;
  h_case_failed = 0;
  sdpa_nan_check_forward(kind, &p, o1, o0, l1, l0, 1e-5, 1e-4, 1e-5, 1e-4);
  /* backward, each from its own forward */
  float *g0[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
  float *g1[3] = {sdpa_zeros(p.nq), sdpa_zeros(p.nk), sdpa_zeros(p.nv)};
  CHECK_OK(attn_sdpa_backward_math(&p.d, p.q, p.k, p.v, o0, l0, p.dout, g0[0], g0[1], g0[2]));
  CHECK_OK(attn_sdpa_backward_flash_ops(ops, &p.d, p.q, p.k, p.v, o1, l1, p.dout, g1[0], g1[1],
                                        g1[2]));
  const char *gn[3] = {"dq", "dk", "dv"};
  const int64_t gsz[3] = {p.nq, p.nk, p.nv};
  for (int t = 0; t < 3; t++)
    close_where_math_defined(gn[t], g1[t], g0[t], gsz[t], 2e-5, 2e-4);
  sdpa_nan_check_backward(kind, causal, g1);
  if (kind == 4) {
    /* batch 1: dk, dv finite and as math; dq may get 0·NaN from the masked
     * keys' k in a shared tile (math: in every row), so only where math is
     * defined (above) */
    CHECK_CLOSE("dk b1", g1[1] + 2 * L * X, g0[1] + 2 * L * X, 2 * L * X, 2e-5, 2e-4);
    CHECK_CLOSE("dv b1", g1[2] + 2 * L * X, g0[2] + 2 * L * X, 2 * L * X, 2e-5, 2e-4);
    CHECK(!nan_rows(g1[1] + 2 * L * X, X, 0, 2 * L - 1, 1));
  }
  if (h_case_failed) printf("  ^ %s kind %d causal %d\n", ops->name, kind, causal);
  h_case_failed |= before;
  for (int t = 0; t < 3; t++)
    free(g0[t]), free(g1[t]);
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

static void test_nan_in_q_propagates(void) {
  for (int i = 0; i < n_ops; i++)
    for (int causal = 0; causal < 2; causal++) /* 0: the whole-tile kernel's path */
      nan_case(ops_list[i], 0, causal);
}

static void test_nan_and_inf_in_k_propagate(void) {
  for (int i = 0; i < n_ops; i++) {
    nan_case(ops_list[i], 1, 1);
    nan_case(ops_list[i], 2, 1);
    nan_case(ops_list[i], 5, 1);
  }
}

static void test_nan_in_v_reaches_rows_that_attend(void) {
  for (int i = 0; i < n_ops; i++)
    nan_case(ops_list[i], 3, 1);
}

static void test_nan_at_masked_keys_is_ignored(void) {
  for (int i = 0; i < n_ops; i++)
    nan_case(ops_list[i], 4, 1);
}

static void test_no_keys(void) {
  for (int i = 0; i < n_ops; i++) {
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d, 1, 2, 1, 7, 0, 5, 3);
    float q[70], o[42], l[14], dq[70], dout[42];
    fill_uniform(q, 70, 3, -1, 1);
    fill_uniform(dout, 42, 4, -1, 1);
    fill_uniform(o, 42, 5, -1, 1);
    fill_uniform(dq, 70, 6, -1, 1);
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[i], &d, q, NULL, NULL, o, l));
    CHECK_OK(
        attn_sdpa_backward_flash_ops(ops_list[i], &d, q, NULL, NULL, o, l, dout, dq, NULL, NULL));
    int ok = 1;
    for (int e = 0; e < 42; e++)
      ok &= o[e] == 0.0f;
    for (int e = 0; e < 14; e++)
      ok &= isinf(l[e]) && l[e] < 0;
    for (int e = 0; e < 70; e++)
      ok &= dq[e] == 0.0f;
    CHECK(ok);
  }
}

/* 1 and 2 threads give the same bits (forward and backward). The other
 * tests run on one thread (no idle OpenMP workers spinning between calls);
 * this one ties the 2-thread results to them. */
static void threads_case(const attn_flash_ops *ops, const sdpa_cfg *c, unsigned seed) {
  sdpa_problem p;
  sdpa_make_problem(c, seed, &p);
  float *o[2], *l[2], *g[2][3];
  for (int t = 0; t < 2; t++) {
    attn_set_num_threads(t + 1);
    o[t] = sdpa_zeros(p.no), l[t] = sdpa_zeros(p.nl);
    for (int e = 0; e < 3; e++)
      g[t][e] = sdpa_zeros(e == 0 ? p.nq : e == 1 ? p.nk : p.nv);
    CHECK_OK(attn_sdpa_forward_flash_ops(ops, &p.d, p.q, p.k, p.v, o[t], l[t]));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops, &p.d, p.q, p.k, p.v, o[t], l[t], p.dout, g[t][0],
                                          g[t][1], g[t][2]));
  }
  attn_set_num_threads(1);
  CHECK(!memcmp(o[0], o[1], p.no * sizeof(float)));
  CHECK(!memcmp(l[0], l[1], p.nl * sizeof(float)));
  CHECK(!memcmp(g[0][0], g[1][0], p.nq * sizeof(float)));
  CHECK(!memcmp(g[0][1], g[1][1], p.nk * sizeof(float)));
  CHECK(!memcmp(g[0][2], g[1][2], p.nv * sizeof(float)));
  for (int t = 0; t < 2; t++) {
    free(o[t]), free(l[t]);
    for (int e = 0; e < 3; e++)
      free(g[t][e]);
  }
  sdpa_free_problem(&p);
}

static void test_threads_bit_identical(void) {
  for (int i = 0; i < n_ops; i++) {
    sdpa_cfg c = sdpa_plain(150, 170, 48);
    c.Hq = 2; /* one (b, kv head) item: backward splits the keys into chunks */
    c.Hkv = 1;
    c.causal = 1;
    c.add_mask = 1;
    threads_case(ops_list[i], &c, 900);
    sdpa_cfg e = sdpa_plain(100, 140, 40); /* many items, strided, key_lens, window */
    e.B = 2;
    e.Hq = 4;
    e.Hkv = 2;
    e.Dv = 24;
    e.strided = 1;
    e.key_lens = 1;
    e.wl = 30;
    e.wr = 10;
    threads_case(ops_list[i], &e, 901);
  }
}

/* ---- PyTorch golden files (tools/golden_sdpa.py) through both kernel sets */
static void golden_flash(const attn_flash_ops *ops, const char *name, double tol) {
  char path[256];
  snprintf(path, sizeof path, "tests/golden/sdpa_%s.safetensors", name);
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(path, &st));
  if (!st) return;
  const attn_tensor *q = attn_st_get(st, "q"), *k = attn_st_get(st, "k"), *v = attn_st_get(st, "v");
  const attn_tensor *want[5] = {attn_st_get(st, "out"), attn_st_get(st, "lse"),
                                attn_st_get(st, "dq"), attn_st_get(st, "dk"),
                                attn_st_get(st, "dv")};
  const attn_tensor *dout = attn_st_get(st, "dout");
  int ok = q && k && v && dout && q->ndim == 4 && k->ndim == 4 && v->ndim == 4;
  for (int i = 0; i < 5; i++)
    ok = ok && want[i] && want[i]->dtype == ATTN_F32;
  CHECK(ok);
  if (!ok) {
    attn_st_free(st);
    return;
  }
  attn_sdpa_desc d;
  golden_sdpa_desc(st, &d);
  float *got[5];
  for (int i = 0; i < 5; i++)
    got[i] = sdpa_zeros(attn_tensor_numel(want[i]));
  CHECK_OK(attn_sdpa_forward_flash_ops(ops, &d, q->data, k->data, v->data, got[0], got[1]));
  CHECK_OK(attn_sdpa_backward_flash_ops(ops, &d, q->data, k->data, v->data, got[0], got[1],
                                        dout->data, got[2], got[3], got[4]));
  static const char *what[5] = {"out", "lse", "dq", "dk", "dv"};
  int before = h_case_failed;
  h_case_failed = 0;
  for (int i = 0; i < 5; i++)
    CHECK_CLOSE(what[i], got[i], want[i]->data, attn_tensor_numel(want[i]), tol, 10 * tol);
  if (h_case_failed) printf("  ^ golden %s, %s kernels\n", name, ops->name);
  h_case_failed |= before;
  for (int i = 0; i < 5; i++)
    free(got[i]);
  attn_st_free(st);
}

static void test_golden_files(void) {
  static const char *cases[] = {"plain",    "causal",       "causal_lq_gt_lk", "window",
                                "key_lens", "bool_mask_2d", "add_mask",        "gqa",
                                "dv_ne_d",  "masked_batch", "combined"};
  for (int i = 0; i < n_ops; i++) {
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++)
      golden_flash(ops_list[i], cases[c], 1e-5);
    golden_flash(ops_list[i], "large_logits", 1e-4); /* lse ~ 100: f32 rounding of the logits */
  }
}

static void test_public_api_flash_backend(void) {
  sdpa_cfg c = sdpa_plain(33, 45, 16);
  sdpa_problem p;
  sdpa_make_problem(&c, 950, &p);
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o1, l1, NULL));
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_CLOSE("out", o1, o0, p.no, 1e-5, 1e-4);
  CHECK_ERR(attn_sdpa_forward_flash(&p.d, p.q, p.k, p.v, NULL, l1), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_backward_flash(&p.d, p.q, p.k, p.v, o1, l1, NULL, o0, o0, o0), ATTN_EINVAL);
  p.d.Hkv = 3; /* Hq = 2 is not a multiple */
  CHECK_ERR(attn_sdpa_forward_flash(&p.d, p.q, p.k, p.v, o1, l1), ATTN_EINVAL);
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

int main(void) {
  attn_set_num_threads(1); /* see test_threads_bit_identical */
  ops_list[n_ops++] = attn_flash_ops_generic();
  if (have_simd()) ops_list[n_ops++] = simd_ops();
  printf("# level %s; kernel sets: %s%s%s\n", attn_isa_name(attn_isa_active()), ops_list[0]->name,
         n_ops > 1 ? ", " : "", n_ops > 1 ? ops_list[1]->name : "");
  RUN(test_vexp_generic_matches_expf);
  RUN(test_vexp_level_within_3_ulp);
  RUN(test_tile_gemm_level_matches_generic);
  RUN(test_tile_softmax_level_matches_generic);
  RUN(test_pack_t_level_matches_generic);
  RUN(test_tile_forward_matches_steps);
  RUN(test_tile_nan_logits);
  RUN(test_head_dims);
  RUN(test_lengths_and_tails);
  RUN(test_causal_and_windows);
  RUN(test_masks_key_lens_gqa);
  RUN(test_strided_layouts);
  RUN(test_random_shapes);
  RUN(test_v_alignment);
  RUN(test_large_logits);
  RUN(test_fully_masked_rows_are_zero);
  RUN(test_nan_in_q_propagates);
  RUN(test_nan_and_inf_in_k_propagate);
  RUN(test_nan_in_v_reaches_rows_that_attend);
  RUN(test_nan_at_masked_keys_is_ignored);
  RUN(test_no_keys);
  RUN(test_golden_files);
  RUN(test_threads_bit_identical);
  RUN(test_public_api_flash_backend);
  HARNESS_END();
}
