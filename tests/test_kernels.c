/* The non-GEMM f32 kernels: golden files from torch (tools/golden_kernels.py,
 * float64 references stored as F32), plain double references computed here,
 * the Philox RNG (dropout: test_dropout.c), thread-count determinism and
 * argument validation.
 *
 * Tolerances (|got - want| <= atol + rtol * |want|), f32 against a float64
 * reference rounded to f32:
 *   softmax          atol 1e-6, rtol 1e-5 (logits up to ~40*randn)
 *   log-softmax      atol 1e-5, rtol 1e-5 (absolute: y - lse with |x| ~ 100)
 *   layer_norm       atol 1e-5, rtol 1e-5 (y, dx; dweight/dbias sum rows: 1e-5 + 1e-5 rel)
 *   relu             exact
 *   gelu             atol 1e-6, rtol 1e-6 (erff is ~1 ulp)
 *   embedding        exact forward, atol 1e-6 backward (repeated ids summed in f32)
 *   cross_entropy    loss rtol 1e-5, dlogits atol 1e-7 + rtol 1e-5 */
#include <stdint.h>

#include "harness.h"
#include "kernels/rows/elementwise_internal.h"
#include "kernels/rows/rng_internal.h"

#define GOLDEN "tests/golden/kernels.safetensors"

static attn_st *golden;
static double worst_softmax, worst_log_softmax, worst_ln, worst_gelu, worst_emb, worst_ce;

static double dmax(double a, double b) { return a > b ? a : b; }

/* f32 tensor "<prefix><name>" from the golden file; NULL (and a failed check) if absent */
static const float *gf(const char *prefix, const char *name, int64_t *numel) {
  char key[160];
  snprintf(key, sizeof key, "%s%s", prefix, name);
  const attn_tensor *t = golden ? attn_st_get(golden, key) : NULL;
  if (!t || t->dtype != ATTN_F32) {
    printf("  golden tensor %s missing or not F32\n", key);
    h_case_failed = 1;
    return NULL;
  }
  if (numel) *numel = attn_tensor_numel(t);
  return (const float *)t->data;
}

static const int32_t *gi(const char *prefix, const char *name, int64_t *numel) {
  char key[160];
  snprintf(key, sizeof key, "%s%s", prefix, name);
  const attn_tensor *t = golden ? attn_st_get(golden, key) : NULL;
  if (!t || t->dtype != ATTN_I32) {
    printf("  golden tensor %s missing or not I32\n", key);
    h_case_failed = 1;
    return NULL;
  }
  if (numel) *numel = attn_tensor_numel(t);
  return (const int32_t *)t->data;
}

static int64_t last_dim(const char *prefix, const char *name) {
  char key[160];
  snprintf(key, sizeof key, "%s%s", prefix, name);
  const attn_tensor *t = golden ? attn_st_get(golden, key) : NULL;
  return t && t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
}

static float *falloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* ---- golden: torch ----------------------------------------------------------- */

static void test_golden_file_loads(void) {
  CHECK_OK(attn_st_load(GOLDEN, &golden));
  CHECK(golden != NULL && attn_st_count(golden) > 100);
}

static const char *const softmax_cases[] = {"r3n1", "r3n17", "r2n1000", "big"};

static void test_golden_softmax(void) {
  for (size_t c = 0; c < sizeof softmax_cases / sizeof *softmax_cases; c++) {
    char p[64];
    snprintf(p, sizeof p, "softmax.%s.", softmax_cases[c]);
    int64_t numel;
    const float *x = gf(p, "x", &numel), *y = gf(p, "y", NULL), *dy = gf(p, "dy", NULL),
                *dx = gf(p, "dx", NULL);
    if (!x || !y || !dy || !dx) return;
    int64_t n = last_dim(p, "x"), rows = numel / n;
    float *got = falloc(numel), *gdx = falloc(numel);
    CHECK_OK(attn_softmax_f32(x, got, rows, n));
    worst_softmax = dmax(worst_softmax, CHECK_CLOSE(p, got, y, numel, 1e-6, 1e-5));
    CHECK_OK(attn_softmax_backward_f32(got, dy, gdx, rows, n));
    worst_softmax = dmax(worst_softmax, CHECK_CLOSE(p, gdx, dx, numel, 1e-6, 1e-5));
    free(got);
    free(gdx);
  }
}

static void test_golden_log_softmax(void) {
  for (size_t c = 0; c < sizeof softmax_cases / sizeof *softmax_cases; c++) {
    char p[64];
    snprintf(p, sizeof p, "log_softmax.%s.", softmax_cases[c]);
    int64_t numel;
    const float *x = gf(p, "x", &numel), *y = gf(p, "y", NULL), *dy = gf(p, "dy", NULL),
                *dx = gf(p, "dx", NULL);
    if (!x || !y || !dy || !dx) return;
    int64_t n = last_dim(p, "x"), rows = numel / n;
    float *got = falloc(numel), *gdx = falloc(numel);
    CHECK_OK(attn_log_softmax_f32(x, got, rows, n));
    worst_log_softmax = dmax(worst_log_softmax, CHECK_CLOSE(p, got, y, numel, 1e-5, 1e-5));
    CHECK_OK(attn_log_softmax_backward_f32(got, dy, gdx, rows, n));
    worst_log_softmax = dmax(worst_log_softmax, CHECK_CLOSE(p, gdx, dx, numel, 1e-6, 1e-5));
    free(got);
    free(gdx);
  }
}

static void test_golden_layer_norm(void) {
  const char *cases[] = {"r3n1", "r3n17", "r4n1000", "r5n17_noaffine", "offset"};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char p[64];
    snprintf(p, sizeof p, "layer_norm.%s.", cases[c]);
    int affine = strstr(cases[c], "noaffine") == NULL;
    int64_t numel;
    const float *x = gf(p, "x", &numel), *y = gf(p, "y", NULL), *dy = gf(p, "dy", NULL),
                *dx = gf(p, "dx", NULL), *mean = gf(p, "mean", NULL),
                *rstd = gf(p, "rstd", NULL), *eps = gf(p, "eps", NULL);
    const float *w = affine ? gf(p, "weight", NULL) : NULL;
    const float *b = affine ? gf(p, "bias", NULL) : NULL;
    const float *dw = affine ? gf(p, "dweight", NULL) : NULL;
    const float *db = affine ? gf(p, "dbias", NULL) : NULL;
    if (!x || !y || !dy || !dx || !mean || !rstd || !eps || (affine && (!w || !b || !dw || !db)))
      return;
    int64_t n = last_dim(p, "x"), rows = numel / n;
    float *gy = falloc(numel), *gdx = falloc(numel), *gm = falloc(rows), *gr = falloc(rows);
    float *gdw = falloc(n), *gdb = falloc(n);
    CHECK_OK(attn_layernorm_f32(x, w, b, gy, gm, gr, rows, n, eps[0]));
    worst_ln = dmax(worst_ln, CHECK_CLOSE(p, gy, y, numel, 1e-5, 1e-5));
    CHECK_CLOSE("mean", gm, mean, rows, 1e-5, 1e-5);
    CHECK_CLOSE("rstd", gr, rstd, rows, 1e-5, 1e-5);
    CHECK_OK(attn_layernorm_backward_f32(x, w, gm, gr, dy, gdx, affine ? gdw : NULL,
                                         affine ? gdb : NULL, rows, n));
    worst_ln = dmax(worst_ln, CHECK_CLOSE(p, gdx, dx, numel, 1e-5, 1e-5));
    if (affine) {
      worst_ln = dmax(worst_ln, CHECK_CLOSE("dweight", gdw, dw, n, 1e-5, 1e-5));
      worst_ln = dmax(worst_ln, CHECK_CLOSE("dbias", gdb, db, n, 1e-5, 1e-5));
      /* dweight/dbias accumulate: a second backward doubles them */
      CHECK_OK(attn_layernorm_backward_f32(x, w, gm, gr, dy, gdx, gdw, gdb, rows, n));
      for (int64_t j = 0; j < n; j++) gdb[j] *= 0.5f;
      CHECK_CLOSE("dbias accumulated", gdb, db, n, 1e-5, 1e-5);
    }
    free(gy);
    free(gdx);
    free(gm);
    free(gr);
    free(gdw);
    free(gdb);
  }
}

static void test_golden_relu_gelu(void) {
  int64_t n, ng;
  const char *p = "relu.n1000.";
  const float *x = gf(p, "x", &n), *y = gf(p, "y", NULL), *dy = gf(p, "dy", NULL),
              *dx = gf(p, "dx", NULL);
  const char *q = "gelu.n1000.";
  const float *xg = gf(q, "x", &ng), *yg = gf(q, "y", NULL), *dyg = gf(q, "dy", NULL),
              *dxg = gf(q, "dx", NULL);
  if (!x || !y || !dy || !dx || !xg || !yg || !dyg || !dxg) return;
  float *a = falloc(ng), *b = falloc(ng);
  CHECK_OK(attn_relu_f32(x, a, n));
  CHECK_CLOSE("relu", a, y, n, 0, 0);
  CHECK_OK(attn_relu_backward_f32(x, dy, b, n));
  CHECK_CLOSE("relu dx", b, dx, n, 0, 0);
  CHECK_OK(attn_gelu_f32(xg, a, ng));
  worst_gelu = dmax(worst_gelu, CHECK_CLOSE("gelu", a, yg, ng, 1e-6, 1e-6));
  CHECK_OK(attn_gelu_backward_f32(xg, dyg, b, ng));
  worst_gelu = dmax(worst_gelu, CHECK_CLOSE("gelu dx", b, dxg, ng, 1e-6, 1e-6));
  free(a);
  free(b);
}

static void test_golden_embedding(void) {
  const char *p = "embedding.rep.";
  int64_t tn, n;
  const float *table = gf(p, "table", &tn), *y = gf(p, "y", NULL), *dy = gf(p, "dy", NULL),
              *dt = gf(p, "dtable", NULL);
  const int32_t *ids = gi(p, "ids", &n);
  if (!table || !y || !dy || !dt || !ids) return;
  int64_t dim = last_dim(p, "table"), vocab = tn / dim;
  float *gy = falloc(n * dim), *gdt = falloc(tn);
  CHECK_OK(attn_embedding_f32(ids, n, table, vocab, dim, gy));
  CHECK_CLOSE("embedding", gy, y, n * dim, 0, 0);
  CHECK_OK(attn_embedding_backward_f32(ids, n, dy, vocab, dim, gdt));
  worst_emb = CHECK_CLOSE("embedding dtable", gdt, dt, tn, 1e-6, 1e-6);
  free(gy);
  free(gdt);
}

static void test_golden_cross_entropy(void) {
  const char *cases[] = {"plain", "ignore_smooth", "ignore2_smooth", "large", "c1"};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char p[64];
    snprintf(p, sizeof p, "cross_entropy.%s.", cases[c]);
    int64_t numel, rows;
    const float *x = gf(p, "logits", &numel), *loss = gf(p, "loss", NULL),
                *dl = gf(p, "dlogits", NULL), *ls = gf(p, "label_smoothing", NULL);
    const int32_t *t = gi(p, "targets", &rows), *ign = gi(p, "ignore_index", NULL);
    if (!x || !loss || !dl || !ls || !t || !ign) return;
    int64_t C = numel / rows;
    float got = NAN, *gd = falloc(numel);
    CHECK_OK(attn_cross_entropy_f32(x, t, rows, C, ign[0], ls[0], &got, gd));
    worst_ce = dmax(worst_ce, CHECK_CLOSE(p, &got, loss, 1, 0, 1e-5));
    worst_ce = dmax(worst_ce, CHECK_CLOSE("dlogits", gd, dl, numel, 1e-7, 1e-5));
    /* loss only / grad only give the same numbers */
    float got2 = NAN;
    CHECK_OK(attn_cross_entropy_f32(x, t, rows, C, ign[0], ls[0], &got2, NULL));
    CHECK(got2 == got);
    free(gd);
  }
}

/* ---- plain double references ---------------------------------------------- */

static void test_softmax_masked_rows_give_zeros(void) {
  /* row 0 all -inf; row 1 partly -inf; row 2 huge logits */
  float x[3 * 4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 1.0f, -INFINITY, 2.0f,
                    -INFINITY, 1e30f, -1e30f, 1e30f, 0.0f};
  float y[12], dx[12], ly[12], ldx[12], dy[12];
  fill_uniform(dy, 12, 3, -1, 1);
  CHECK_OK(attn_softmax_f32(x, y, 3, 4));
  for (int j = 0; j < 4; j++) CHECK(y[j] == 0.0f);
  double e = exp(-1.0);
  float want1[4] = {(float)(e / (1 + e)), 0, (float)(1 / (1 + e)), 0};
  CHECK_CLOSE("partly masked", y + 4, want1, 4, 1e-7, 1e-6);
  float want2[4] = {0.5f, 0, 0.5f, 0};
  CHECK_CLOSE("huge", y + 8, want2, 4, 0, 0);
  CHECK_OK(attn_softmax_backward_f32(y, dy, dx, 3, 4));
  for (int j = 0; j < 12; j++) CHECK(isfinite(dx[j]));
  for (int j = 0; j < 4; j++) CHECK(dx[j] == 0.0f);
  CHECK_OK(attn_log_softmax_f32(x, ly, 3, 4));
  for (int j = 0; j < 4; j++) CHECK(ly[j] == -INFINITY);
  CHECK_OK(attn_log_softmax_backward_f32(ly, dy, ldx, 3, 4));
  for (int j = 0; j < 12; j++) CHECK(isfinite(ldx[j]));
  for (int j = 0; j < 4; j++) CHECK(ldx[j] == 0.0f);
  /* in place */
  float z[12];
  memcpy(z, x, sizeof z);
  CHECK_OK(attn_softmax_f32(z, z, 3, 4));
  CHECK(memcmp(z, y, sizeof z) == 0);
}

static void test_softmax_matches_double_reference(void) {
  enum { R = 5, N = 333 };
  float *x = falloc(R * N), *y = falloc(R * N), *want = falloc(R * N);
  fill_uniform(x, R * N, 7, -30, 30);
  CHECK_OK(attn_softmax_f32(x, y, R, N));
  for (int r = 0; r < R; r++) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < N; j++) m = fmax(m, x[r * N + j]);
    for (int j = 0; j < N; j++) s += exp((double)x[r * N + j] - m);
    for (int j = 0; j < N; j++) want[r * N + j] = (float)(exp((double)x[r * N + j] - m) / s);
  }
  CHECK_CLOSE("softmax vs double", y, want, R * N, 1e-6, 1e-5);
  free(x);
  free(y);
  free(want);
}

static void test_layernorm_matches_double_reference(void) {
  enum { R = 4, N = 257 };
  float *x = falloc(R * N), *y = falloc(R * N), *want = falloc(R * N), w[N], b[N], mean[R],
        rstd[R];
  fill_uniform(x, R * N, 11, 999, 1001); /* large offset: two-pass variance matters */
  fill_uniform(w, N, 12, 0.5f, 1.5f);
  fill_uniform(b, N, 13, -1, 1);
  CHECK_OK(attn_layernorm_f32(x, w, b, y, mean, rstd, R, N, 1e-5f));
  for (int r = 0; r < R; r++) {
    double m = 0, v = 0;
    for (int j = 0; j < N; j++) m += x[r * N + j];
    m /= N;
    for (int j = 0; j < N; j++) v += (x[r * N + j] - m) * (x[r * N + j] - m);
    v /= N;
    double rs = 1 / sqrt(v + 1e-5);
    for (int j = 0; j < N; j++) want[r * N + j] = (float)((x[r * N + j] - m) * rs * w[j] + b[j]);
  }
  /* the mean of inputs near 1000 is rounded to f32 (half an ulp: 3e-5), which
   * shifts y by up to 3e-5 * rstd (~1.7) */
  CHECK_CLOSE("layernorm vs double", y, want, R * N, 1e-4, 1e-4);
  free(x);
  free(y);
  free(want);
}

static void test_gelu_matches_double_erf(void) {
  enum { N = 4001 };
  float *x = falloc(N), *y = falloc(N), *dx = falloc(N), *one = falloc(N), *wy = falloc(N),
        *wd = falloc(N);
  for (int i = 0; i < N; i++) {
    x[i] = -10.0f + 20.0f * (float)i / (N - 1);
    one[i] = 1.0f;
    double v = x[i];
    wy[i] = (float)(0.5 * v * (1 + erf(v / sqrt(2.0))));
    wd[i] = (float)(0.5 * (1 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2 * M_PI));
  }
  CHECK_OK(attn_gelu_f32(x, y, N));
  CHECK_CLOSE("gelu vs erf", y, wy, N, 1e-6, 1e-6);
  CHECK_OK(attn_gelu_backward_f32(x, one, dx, N));
  CHECK_CLOSE("gelu' vs erf", dx, wd, N, 1e-6, 1e-6);
  /* in place */
  CHECK_OK(attn_gelu_f32(x, x, N));
  CHECK(memcmp(x, y, N * sizeof(float)) == 0);
  free(x);
  free(y);
  free(dx);
  free(one);
  free(wy);
  free(wd);
}

static void test_cross_entropy_all_ignored_gives_zero(void) {
  float x[6] = {1, 2, 3, 4, 5, 6}, d[6], loss = NAN;
  int32_t t[2] = {-100, -100};
  fill_uniform(d, 6, 1, 1, 2);
  CHECK_OK(attn_cross_entropy_f32(x, t, 2, 3, -100, 0.1f, &loss, d));
  CHECK(loss == 0.0f);
  for (int i = 0; i < 6; i++) CHECK(d[i] == 0.0f);
  /* rows = 0 as well */
  loss = NAN;
  CHECK_OK(attn_cross_entropy_f32(NULL, NULL, 0, 3, -100, 0.0f, &loss, NULL));
  CHECK(loss == 0.0f);
}

static void test_cross_entropy_matches_double_reference(void) {
  enum { R = 6, C = 9 };
  float x[R * C], d[R * C], wd[R * C], loss;
  int32_t t[R] = {0, 8, -1, 4, 4, 2};
  fill_uniform(x, R * C, 21, -50, 50);
  const double eps = 0.2;
  double total = 0;
  int valid = 0;
  for (int r = 0; r < R; r++) valid += t[r] != -1;
  for (int r = 0; r < R; r++) {
    const float *xr = x + r * C;
    double m = -INFINITY, s = 0, sx = 0;
    for (int c = 0; c < C; c++) m = fmax(m, xr[c]), sx += xr[c];
    for (int c = 0; c < C; c++) s += exp(xr[c] - m);
    double lse = m + log(s);
    for (int c = 0; c < C; c++) wd[r * C + c] = 0;
    if (t[r] == -1) continue;
    total += (1 - eps) * (lse - xr[t[r]]) + eps / C * (C * lse - sx);
    for (int c = 0; c < C; c++)
      wd[r * C + c] = (float)((exp(xr[c] - lse) - eps / C - (1 - eps) * (c == t[r])) / valid);
  }
  float want = (float)(total / valid);
  CHECK_OK(attn_cross_entropy_f32(x, t, R, C, -1, (float)eps, &loss, d));
  CHECK_CLOSE("ce loss", &loss, &want, 1, 0, 1e-5);
  CHECK_CLOSE("ce dlogits", d, wd, R * C, 1e-7, 1e-5);
}

static void test_embedding_backward_accumulates(void) {
  enum { V = 5, D = 3, N = 4 };
  int32_t ids[N] = {1, 4, 1, 1};
  float dy[N * D], dt[V * D], want[V * D];
  fill_uniform(dy, N * D, 5, -1, 1);
  for (int i = 0; i < V * D; i++) dt[i] = want[i] = (float)i;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < D; j++) want[ids[i] * D + j] += dy[i * D + j];
  CHECK_OK(attn_embedding_backward_f32(ids, N, dy, V, D, dt));
  CHECK_CLOSE("accumulated", dt, want, V * D, 0, 0);
}

/* GELU against double erfc, relative even where gelu is tiny (x << 0):
 * rtol 2e-6 for |x| <= 3; beyond, rounding -x/sqrt 2 to f32 (6e-8 relative)
 * moves erfc by x^2 times that, so 1.5e-5 up to |x| = 12. The derivative also
 * gets atol 1e-7 (it crosses zero at x = -0.75). */
static void check_gelu(const char *what, const float *x, const float *got, const float *want,
                       int n, double atol) {
  int lo = 0, hi = n; /* [lo, hi): |x| <= 3 (x is sorted) */
  while (lo < n && x[lo] < -3.0f) lo++;
  while (hi > lo && x[hi - 1] > 3.0f) hi--;
  CHECK_CLOSE(what, got + lo, want + lo, hi - lo, atol, 2e-6);
  CHECK_CLOSE(what, got, want, n, atol, 1.5e-5);
}

/* Both GELU paths (portable and, on AVX-512 CPUs, the vector one) against
 * double erfc, for every length 0..40 (vector tails) and a sweep of x. */
static void test_gelu_paths_match_double_erf(void) {
  enum { N = 2000 };
  float *x = falloc(N), *dy = falloc(N), *y = falloc(N), *dx = falloc(N), *wy = falloc(N),
        *wd = falloc(N);
  for (int i = 0; i < N; i++) {
    x[i] = -12.0f + 24.0f * (float)i / (N - 1);
    dy[i] = 1.0f - 2.0f * (float)(i % 3);
    double v = x[i], cdf = 0.5 * erfc(-v / sqrt(2.0));
    wy[i] = (float)(v * cdf);
    wd[i] = (float)(dy[i] * (cdf + v * exp(-0.5 * v * v) / sqrt(2 * M_PI)));
  }
  attn_gelu_f32_generic(x, y, N);
  check_gelu("gelu generic", x, y, wy, N, 1e-30);
  attn_gelu_backward_f32_generic(x, dy, dx, N);
  check_gelu("gelu' generic", x, dx, wd, N, 1e-7);
  const attn_row_ops *L = &attn_kern_get()->row; /* the active level's (tests/run.sh) */
  if (L->gelu == attn_gelu_f32_generic) {
    printf("  (level %s runs the portable GELU)\n", attn_isa_name(attn_isa_active()));
  } else {
    for (int n = 0; n <= 40; n++) {
      memset(y, 0xff, 41 * sizeof(float)); /* NaN canary past the end */
      L->gelu(x + 900, y, n);
      CHECK_CLOSE("gelu level tail", y, wy + 900, n, 1e-30, 2e-6);
      CHECK(isnan(y[n]));
    }
    L->gelu(x, y, N);
    check_gelu("gelu level", x, y, wy, N, 1e-30);
    L->gelu_backward(x, dy, dx, N);
    check_gelu("gelu' level", x, dx, wd, N, 1e-7);
  }
  free(x);
  free(dy);
  free(y);
  free(dx);
  free(wy);
  free(wd);
}

/* exp(x - m) and its sum, both paths, every length 0..40 and -inf entries */
static void test_exp_sub_sum_paths(void) {
  enum { N = 40 };
  float x[N], y[N + 1], want[N];
  fill_uniform(x, N, 9, -20, 3);
  x[3] = x[17] = -INFINITY;
  const attn_row_ops *L = &attn_kern_get()->row;
  int avx = L->exp_sub_sum != attn_exp_sub_sum_f32_generic;
  for (int n = 0; n <= N; n++) {
    double ws = 0;
    /* x - m rounds in f32 in both paths; the reference takes that rounding */
    for (int j = 0; j < n; j++) ws += want[j] = (float)exp((double)(x[j] - 2.5f));
    float s;
    y[n] = 7.0f; /* canary */
    s = attn_exp_sub_sum_f32_generic(x, y, n, 2.5f);
    CHECK_CLOSE("exp generic", y, want, n, 0, 4e-7);
    CHECK(fabs(s - ws) <= 1e-6 * ws + 1e-30);
    CHECK(y[n] == 7.0f);
    if (avx) {
      s = L->exp_sub_sum(x, y, n, 2.5f);
      CHECK_CLOSE("exp level", y, want, n, 0, 4e-7);
      CHECK(fabs(s - ws) <= 1e-6 * ws + 1e-30);
      CHECK(y[n] == 7.0f);
      s = L->exp_sub_sum(x, NULL, n, 2.5f); /* sum only */
      CHECK(fabs(s - ws) <= 1e-6 * ws + 1e-30);
    }
  }
}

/* ---- RNG ---------------------------------------------------------- */

static void test_philox_known_answers(void) {
  /* Random123's kat_vectors for philox4x32_10 */
  uint32_t o[4];
  const uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
  attn_philox4x32_10(c0, k0, o);
  CHECK(o[0] == 0x6627e8d5u && o[1] == 0xe169c58du && o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u);
  const uint32_t c1[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                 k1[2] = {0xffffffffu, 0xffffffffu};
  attn_philox4x32_10(c1, k1, o);
  CHECK(o[0] == 0x408f276du && o[1] == 0x41c83b0eu && o[2] == 0xa20bc7c6u && o[3] == 0x6d5451fdu);
  const uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                 k2[2] = {0xa4093822u, 0x299f31d0u};
  attn_philox4x32_10(c2, k2, o);
  CHECK(o[0] == 0xd16cfe09u && o[1] == 0x94fdccebu && o[2] == 0x5001e420u && o[3] == 0x24126ea1u);
  /* uniform(seed=0, i=0) = top 24 bits of word 0 */
  CHECK(attn_rng_uniform(0, 0) == (float)(0x6627e8d5u >> 8) / 16777216.0f);
}

static void test_rng_uniform_and_normal_statistics(void) {
  enum { N = 100000 };
  double s = 0, s2 = 0, n1 = 0, n2 = 0;
  float lo = 1, hi = 0;
  for (int i = 0; i < N; i++) {
    float u = attn_rng_uniform(42, (uint64_t)i);
    s += u;
    s2 += (double)u * u;
    lo = fminf(lo, u);
    hi = fmaxf(hi, u);
    double z = attn_rng_normal(42, (uint64_t)i);
    CHECK(isfinite(z));
    n1 += z;
    n2 += z * z;
  }
  CHECK(lo >= 0.0f && hi < 1.0f);
  /* mean 1/2 (sd of the mean 0.29/sqrt(N) = 9e-4), var 1/12 */
  CHECK(fabs(s / N - 0.5) < 5e-3);
  CHECK(fabs(s2 / N - s / N * (s / N) - 1.0 / 12) < 3e-3);
  CHECK(fabs(n1 / N) < 0.02);           /* sd of the mean 3e-3 */
  CHECK(fabs(n2 / N - 1.0) < 0.03);     /* sd of the var ~4.5e-3 */
  CHECK(attn_rng_uniform(1, 5) != attn_rng_uniform(2, 5)); /* the seed matters */
}

/* ---- determinism over thread counts --------------------------------------------- */

/* 1, 2 and 3 threads (3 does not divide the row blocks evenly) give the same
 * bits; sizes are above every kernel's parallel threshold. */
static void test_results_do_not_depend_on_thread_count(void) {
  enum { R = 300, N = 257, V = 50, K = 3, NOUT = 9 };
  float *x = falloc(R * N), *dy = falloc(R * N), w[N], b[N];
  float *out[K][NOUT];
  int32_t ids[R], t[R];
  fill_uniform(x, R * N, 1, -3, 3);
  fill_uniform(dy, R * N, 2, -1, 1);
  fill_uniform(w, N, 3, 0, 2);
  fill_uniform(b, N, 4, -1, 1);
  for (int i = 0; i < R; i++) ids[i] = (i * 7) % V, t[i] = (i * 13) % N;
  t[5] = -100;
  int saved = attn_get_num_threads();
  for (int k = 0; k < K; k++) {
    attn_set_num_threads(k + 1);
    for (int j = 0; j < NOUT; j++) out[k][j] = falloc(R * N + 2);
    float mean[R], rstd[R];
    CHECK_OK(attn_softmax_f32(x, out[k][0], R, N));
    CHECK_OK(attn_layernorm_f32(x, w, b, out[k][1], mean, rstd, R, N, 1e-5f));
    /* dx in out[2], dweight and dbias in out[3] */
    CHECK_OK(attn_layernorm_backward_f32(x, w, mean, rstd, dy, out[k][2], out[k][3],
                                         out[k][3] + N, R, N));
    CHECK_OK(attn_embedding_backward_f32(ids, R, dy, V, N, out[k][4]));
    CHECK_OK(attn_cross_entropy_f32(x, t, R, N, -100, 0.1f, out[k][5] + R * N, out[k][5]));
    CHECK_OK(attn_gelu_f32(x, out[k][6], R * N));
    CHECK_OK(attn_gelu_backward_f32(x, dy, out[k][7], R * N));
    CHECK_OK(attn_log_softmax_f32(x, out[k][8], R, N));
  }
  attn_set_num_threads(saved);
  for (int j = 0; j < NOUT; j++) {
    for (int k = 1; k < K; k++) {
      CHECK(memcmp(out[0][j], out[k][j], (R * N + 2) * sizeof(float)) == 0);
      free(out[k][j]);
    }
    free(out[0][j]);
  }
  free(x);
  free(dy);
}

/* ---- argument validation ---------------------------------------------------- */

/* Under AddressSanitizer a failed huge allocation returns NULL, as malloc
 * does, instead of stopping the program (the out-of-memory cases below). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* LayerNorm backward sizes too large for its dweight/dbias partial sums: a
 * refusal that says what could not be allocated (it said "N partial sums"),
 * with no overflow computing the size (rows*n and blocks*2*n). */
static void test_layernorm_backward_too_large_says_what(void) {
  float x[8] = {0}, y[8], m[2] = {0}, r[2] = {1, 1}, dw[8], db[8];
  CHECK_ERR(attn_layernorm_backward_f32(x, NULL, m, r, x, y, dw, db, INT64_MAX / 4, 2),
            ATTN_ENOMEM);
  CHECK(strstr(attn_last_error(), "out of memory") != NULL);
  CHECK(strstr(attn_last_error(), "dweight/dbias") != NULL);
  CHECK_ERR(attn_layernorm_backward_f32(x, NULL, m, r, x, y, dw, db, INT64_MAX / 2, 4),
            ATTN_EINVAL); /* rows * n itself does not fit */
  CHECK(strstr(attn_last_error(), "too large") != NULL);
}

static void test_bad_arguments_are_rejected(void) {
  float x[8] = {0}, y[8], m[2], r[2];
  uint8_t mask[8];
  int32_t ids[2] = {0, 5}, t[2] = {0, 3};
  CHECK_ERR(attn_softmax_f32(x, y, -1, 4), ATTN_EINVAL);
  CHECK_ERR(attn_softmax_f32(NULL, y, 2, 4), ATTN_EINVAL);
  CHECK_ERR(attn_softmax_backward_f32(x, NULL, y, 2, 4), ATTN_EINVAL);
  CHECK_ERR(attn_log_softmax_f32(x, y, 2, -4), ATTN_EINVAL);
  CHECK_OK(attn_softmax_f32(NULL, NULL, 0, 4)); /* nothing to do */
  CHECK_ERR(attn_layernorm_f32(x, NULL, NULL, y, m, r, 2, -4, 1e-5f), ATTN_EINVAL);
  CHECK_ERR(attn_layernorm_f32(NULL, NULL, NULL, y, m, r, 2, 4, 1e-5f), ATTN_EINVAL);
  CHECK_ERR(attn_layernorm_f32(x, NULL, NULL, y, m, r, 2, 4, -1.0f), ATTN_EINVAL);
  CHECK_ERR(attn_layernorm_backward_f32(x, NULL, NULL, r, x, y, NULL, NULL, 2, 4), ATTN_EINVAL);
  CHECK_ERR(attn_relu_f32(x, y, -1), ATTN_EINVAL);
  CHECK_ERR(attn_gelu_backward_f32(x, NULL, y, 8), ATTN_EINVAL);
  CHECK_ERR(attn_dropout_f32(x, y, mask, 8, 1.0f, 1, 0), ATTN_EINVAL);
  CHECK_ERR(attn_dropout_f32(x, y, mask, 8, -0.1f, 1, 0), ATTN_EINVAL);
  CHECK_ERR(attn_dropout_f32(x, y, mask, 8, NAN, 1, 0), ATTN_EINVAL);
  CHECK_ERR(attn_dropout_backward_f32(x, NULL, y, 8, 0.5f), ATTN_EINVAL);
  CHECK_ERR(attn_embedding_f32(ids, 2, x, 4, 2, y), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "ids[1]") != NULL);
  ids[1] = -1;
  CHECK_ERR(attn_embedding_backward_f32(ids, 2, x, 4, 2, y), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "ids[1]") != NULL);
  CHECK_ERR(attn_embedding_f32(ids, 2, x, -4, 2, y), ATTN_EINVAL);
  CHECK_ERR(attn_cross_entropy_f32(x, t, 2, 3, -100, 0.0f, y, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "targets[1]") != NULL);
  t[1] = 1;
  CHECK_ERR(attn_cross_entropy_f32(x, t, 2, 3, -100, 1.0f, y, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_cross_entropy_f32(x, t, -2, 3, -100, 0.0f, y, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_cross_entropy_f32(NULL, t, 2, 3, -100, 0.0f, y, NULL), ATTN_EINVAL);
}

int main(void) {
  RUN(test_golden_file_loads);
  RUN(test_golden_softmax);
  RUN(test_golden_log_softmax);
  RUN(test_golden_layer_norm);
  RUN(test_golden_relu_gelu);
  RUN(test_golden_embedding);
  RUN(test_golden_cross_entropy);
  RUN(test_softmax_masked_rows_give_zeros);
  RUN(test_softmax_matches_double_reference);
  RUN(test_layernorm_matches_double_reference);
  RUN(test_gelu_matches_double_erf);
  RUN(test_gelu_paths_match_double_erf);
  RUN(test_exp_sub_sum_paths);
  RUN(test_cross_entropy_all_ignored_gives_zero);
  RUN(test_cross_entropy_matches_double_reference);
  RUN(test_embedding_backward_accumulates);
  RUN(test_philox_known_answers);
  RUN(test_rng_uniform_and_normal_statistics);
  RUN(test_results_do_not_depend_on_thread_count);
  RUN(test_bad_arguments_are_rejected);
  RUN(test_layernorm_backward_too_large_says_what);
  printf("# golden max abs err: softmax %.3g, log_softmax %.3g, layer_norm %.3g, gelu %.3g, "
         "embedding %.3g, cross_entropy %.3g\n",
         worst_softmax, worst_log_softmax, worst_ln, worst_gelu, worst_emb, worst_ce);
  attn_st_free(golden);
  HARNESS_END();
}
