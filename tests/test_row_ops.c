/* The row and elementwise kernels of every ISA level this machine and build
 * have (attn_kern_at(level)->row: own entries and those taken from the
 * level below) against the portable set (the generic level's) and against
 * double-precision formulas, whatever ATTN_CPU says; every case runs once
 * per level (its count is cases x levels).
 *
 * Lengths 0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 1023 (vector
 * tails of 4, 8 and 16 lanes); inputs end at an unreadable page (a read past
 * the end crashes) and outputs are followed by canaries (a write past the end
 * fails). Special values: NaN, +-inf, +-0, denormals, rounding ties.
 *
 * Bit-identical to generic (kern.h): dropout (y and mask), Adam (p, m, v),
 * minmax (lo, hi, bad; lo / hi only for rows without NaN), quantize,
 * dequant, bf16 <-> f32, f32 -> bf16 -> f32 and f16 <-> f32; a NaN input
 * only has to give a NaN where a float comes out of arithmetic (Adam,
 * dropout) or from f16 (payloads may differ), but its exact bf16 bits.
 * Tolerances otherwise:
 *   vexp                 <= 3 ulp of expf (normal results), denormal results
 *                        within 2 steps, -inf -> 0, x > 88.8 -> inf, NaN -> NaN
 *   exp_sub_sum          y as vexp; sum within 1e-6 relative of generic's,
 *                        the same bits with y NULL, y = x or y elsewhere
 *   gelu, gelu_backward  vs double erfc: rtol 2e-6 for |x| <= 3, 1.5e-5 up
 *                        to |x| = 12 (tests/test_kernels.c), atol 1e-7 for
 *                        the derivative (it crosses 0)
 *   layernorm_row        y within 1e-6 (|x_j| rstd |w_j| + |b_j| + 1) of the
 *                        double formula (the f32 mean carries |x| eps of
 *                        error into x - mean); mean within 1e-6 max|x|, rstd
 *                        within 1e-6 relative
 *   layernorm_backward   within 1e-6 rstd (|g_j| + mean|g| + |xhat_j|
 *                        mean|g xhat|) of the double formula */
#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "kernels/kern.h"

static const int LENS[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 1023};
#define NLENS ((int)(sizeof LENS / sizeof LENS[0]))
#define CANARY 16 /* output elements checked past n */

static const attn_row_ops *G; /* the portable set */
static const char *level;     /* the level being compared (in messages) */
static int nfail;             /* messages printed in this case */

/* One failure message per case and level, at most 8 per case. */
static void fail(const char *fmt, ...) {
  h_case_failed = 1;
  if (nfail++ >= 8) return;
  va_list ap;
  va_start(ap, fmt);
  printf("  [%s] ", level);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

/* ---- memory: inputs end at an unreadable page, outputs carry canaries ---- */
typedef struct {
  void *base;
  size_t len;
} mapping;
static mapping maps[4096];
static int nmaps;

/* a copy of src[bytes] whose last byte is followed by a PROT_NONE page */
static void *guarded(const void *src, size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + pg - 1) / pg * pg + pg;
  char *b = mmap(NULL, body + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED || nmaps == 4096) abort();
  mprotect(b + body, pg, PROT_NONE);
  maps[nmaps++] = (mapping){b, body + pg};
  char *p = b + body - bytes;
  if (bytes) memcpy(p, src, bytes);
  return p;
}
static void unmap_all(void) {
  while (nmaps)
    munmap(maps[nmaps - 1].base, maps[nmaps - 1].len), nmaps--;
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* the same bits, or both NaN */
static int same(float a, float b) { return f2u(a) == f2u(b) || (isnan(a) && isnan(b)); }

static void fill_canary(void *p, size_t bytes) { memset(p, 0xA5, bytes); }
static int canary_ok(const void *p, size_t bytes) {
  const unsigned char *c = p;
  for (size_t i = 0; i < bytes; i++)
    if (c[i] != 0xA5) return 0;
  return 1;
}

/* deterministic bits */
static uint32_t rng_state = 12345u;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

/* x[n] uniform in [lo, hi) with specials sprinkled in (every 11th value) */
static const float SPECIAL[] = {0.0f,     -0.0f, 1e-40f, -1e-40f, 1.4e-45f, FLT_MIN,
                                -FLT_MIN, 1.0f,  -1.0f,  0.5f,    -2.5f,    3.5f};
static void fill_mixed(float *x, int n, unsigned seed, float lo, float hi) {
  fill_uniform(x, n, seed, lo, hi);
  for (int i = 5; i < n; i += 11)
    x[i] = SPECIAL[(i / 11) % (int)(sizeof SPECIAL / 4)];
}

static int32_t ordered(float x) { /* float bits on a line ordered like the values */
  int32_t i;
  memcpy(&i, &x, 4);
  return i < 0 ? INT32_MIN - i : i;
}

/* y vs expf(x): 3 ulp (normal), 2 denormal steps, exact 0 / inf / NaN */
static int exp_ok(float x, float y) {
  float want = expf(x);
  if (isnan(x)) return isnan(y);
  if (isinf(want)) return isinf(y) && y > 0;
  if (want >= FLT_MIN) {
    int64_t u = (int64_t)ordered(y) - ordered(want);
    return u >= -3 && u <= 3;
  }
  return y >= 0.0f && fabsf(y - want) <= 2.9e-45f;
}

/* ---- the levels ---------------------------------------------------------- */
static void print_levels(void) {
  printf("# levels compared with generic:");
  for (int i = 0; i < ATTN_ISA_COUNT; i++) {
    const attn_kern *k = attn_kern_at((attn_isa)i);
    if (!k) continue;
    const attn_row_ops *r = &k->row;
    /* entries that are the portable function itself (nothing to compare) */
    int portable = (r->vexp == G->vexp) + (r->exp_sub_sum == G->exp_sub_sum) +
                   (r->gelu == G->gelu) + (r->gelu_backward == G->gelu_backward) +
                   (r->dropout == G->dropout) + (r->adam == G->adam) +
                   (r->layernorm_row == G->layernorm_row) +
                   (r->layernorm_backward_row == G->layernorm_backward_row) +
                   (r->minmax_row == G->minmax_row) + (r->quantize_row_u8 == G->quantize_row_u8) +
                   (r->dequant_row == G->dequant_row) + (r->f16_to_f32 == G->f16_to_f32) +
                   (r->f32_to_f16 == G->f32_to_f16) + (r->f32_to_bf16 == G->f32_to_bf16) +
                   (r->bf16_to_f32 == G->bf16_to_f32) + (r->f32_round_bf16 == G->f32_round_bf16) +
                   (r->sdpa_dropout == G->sdpa_dropout) + (r->gemv_nt == G->gemv_nt);
    /* the function pointers of attn_row_ops (after its name); gemv_nt is tested against the
     * reference GEMM in test_gemm */
    enum { ENTRIES = 18 };
    _Static_assert(sizeof(attn_row_ops) == sizeof(const char *) + ENTRIES * sizeof(void (*)(void)),
                   "a new attn_row_ops entry: count it here");
    printf(" %s (%d of %d entries vector)", attn_isa_name((attn_isa)i), ENTRIES - portable, ENTRIES);
  }
  printf("\n");
}

/* the level under test (main runs every case once per level) */
static const attn_row_ops *cur;
#define FOR_LEVELS(L) for (const attn_row_ops *L = cur; L && (nfail = 0, 1); L = NULL)

/* ---- exp ------------------------------------------------------------------ */
static void test_vexp(void) {
  enum { N = 1023 };
  float x[N];
  fill_mixed(x, N, 1, -110.0f, 95.0f);
  const float sp[] = {NAN,    -NAN,    INFINITY, -INFINITY, 88.7f, 88.8f, 88.73f,
                      -87.4f, -103.9f, -104.5f,  0.0f,      -0.0f, 1e-40f};
  for (int i = 0; i < (int)(sizeof sp / 4); i++)
    x[3 + 7 * i] = sp[i];
  FOR_LEVELS(L) {
    for (int c = 0; c < NLENS; c++) {
      int n = LENS[c];
      const float *xs = guarded(x + N - n, n * sizeof(float)); /* the last n: specials in tails */
      float y[N + CANARY];
      fill_canary(y, sizeof y);
      L->vexp(xs, y, n);
      for (int i = 0; i < n; i++)
        if (!exp_ok(xs[i], y[i]))
          fail("vexp n=%d: exp(%.9g) = %.9g, expf %.9g", n, xs[i], y[i], expf(xs[i]));
      if (!canary_ok(y + n, CANARY * sizeof(float))) fail("vexp n=%d wrote past the end", n);
      float z[N];
      memcpy(z, xs, n * sizeof(float));
      L->vexp(z, z, n); /* in place */
      for (int i = 0; i < n; i++)
        if (!same(z[i], y[i])) fail("vexp in place n=%d [%d]: %.9g vs %.9g", n, i, z[i], y[i]);
    }
    unmap_all();
  }
}

static void test_exp_sub_sum(void) {
  enum { N = 1023 };
  float x[N];
  fill_mixed(x, N, 2, -30.0f, 4.0f);
  for (int i = 1; i < N; i += 13)
    x[i] = -INFINITY; /* masked scores */
  const float ms[] = {4.0f, 0.0f, -3.0f};
  FOR_LEVELS(L) {
    for (int mi = 0; mi < 3; mi++)
      for (int c = 0; c < NLENS; c++) {
        int n = LENS[c];
        float m = ms[mi];
        const float *xs = guarded(x + N - n, n * sizeof(float));
        float y[N + CANARY], yg[N], z[N];
        fill_canary(y, sizeof y);
        float s = L->exp_sub_sum(xs, y, n, m), sg = G->exp_sub_sum(xs, yg, n, m);
        for (int i = 0; i < n; i++)
          if (!exp_ok(xs[i] - m, y[i])) fail("exp_sub_sum n=%d m=%g [%d]: %.9g", n, m, i, y[i]);
        if (!canary_ok(y + n, CANARY * sizeof(float)))
          fail("exp_sub_sum n=%d wrote past the end", n);
        if (!(fabsf(s - sg) <= 1e-6f * sg))
          fail("exp_sub_sum n=%d m=%g: sum %.9g, generic %.9g", n, m, s, sg);
        /* deterministic: the same sum without y and in place */
        float s0 = L->exp_sub_sum(xs, NULL, n, m);
        memcpy(z, xs, n * sizeof(float));
        float s1 = L->exp_sub_sum(z, z, n, m);
        if (f2u(s0) != f2u(s) || f2u(s1) != f2u(s))
          fail("exp_sub_sum n=%d: sums %.9g %.9g %.9g", n, s, s0, s1);
        for (int i = 0; i < n; i++)
          if (!same(z[i], y[i])) fail("exp_sub_sum in place n=%d [%d]", n, i);
      }
    unmap_all();
  }
}

/* ---- GELU ------------------------------------------------------------------ */
static void gelu_check(const char *what, int n, const float *x, const float *got,
                       const double *want, double atol) {
  for (int i = 0; i < n; i++) {
    double rtol = fabsf(x[i]) <= 3.0f ? 2e-6 : 1.5e-5;
    if (!(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i])))
      fail("%s n=%d: x=%.9g got %.9g want %.9g", what, n, x[i], got[i], want[i]);
  }
}

static void test_gelu(void) {
  enum { N = 1023 };
  float x[N], dy[N];
  double wy[N], wd[N];
  for (int i = 0; i < N; i++) {
    x[i] = -12.0f + 24.0f * (float)((i * 389) % N) / (N - 1); /* the sweep, shuffled */
    dy[i] = 1.0f - 0.75f * (float)(i % 3);
  }
  x[N - 1] = 0.0f, x[N - 2] = -0.0f, x[N - 4] = 1e-40f, x[N - 6] = -1e-40f;
  for (int i = 0; i < N; i++) {
    double v = x[i], cdf = 0.5 * erfc(-v / sqrt(2.0));
    wy[i] = v * cdf;
    wd[i] = dy[i] * (cdf + v * exp(-0.5 * v * v) / sqrt(2 * M_PI));
  }
  FOR_LEVELS(L) {
    for (int c = 0; c < NLENS; c++) {
      int n = LENS[c], o = N - n;
      const float *xs = guarded(x + o, n * sizeof(float)), *ds = guarded(dy + o, n * sizeof(float));
      float y[N + CANARY], d[N + CANARY];
      fill_canary(y, sizeof y);
      fill_canary(d, sizeof d);
      L->gelu(xs, y, n);
      L->gelu_backward(xs, ds, d, n);
      gelu_check("gelu", n, xs, y, wy + o, 1e-30);
      gelu_check("gelu'", n, xs, d, wd + o, 1e-7);
      if (!canary_ok(y + n, CANARY * 4) || !canary_ok(d + n, CANARY * 4))
        fail("gelu n=%d wrote past the end", n);
    }
    /* NaN and inf as the portable formula gives them (0.5 -inf erfc(inf) is NaN) */
    float s[] = {NAN, INFINITY, -INFINITY, 0.0f}, one[] = {1, 1, 1, 1}, a[4], b[4], ga[4], gb[4];
    L->gelu(s, a, 4);
    G->gelu(s, ga, 4);
    L->gelu_backward(s, one, b, 4);
    G->gelu_backward(s, one, gb, 4);
    for (int i = 0; i < 4; i++)
      if (!same(a[i], ga[i]) || isnan(b[i]) != isnan(gb[i]) || (!isnan(b[i]) && b[i] != gb[i]))
        fail("gelu(%g) = %g, %g'; generic %g, %g", s[i], a[i], b[i], ga[i], gb[i]);
    unmap_all();
  }
}

/* ---- dropout ------------------------------------------------------------- */
static void test_dropout(void) {
  enum { N = 1023 };
  float x[N];
  fill_mixed(x, N, 3, -2.0f, 2.0f);
  x[N - 1] = NAN, x[N - 2] = INFINITY, x[N - 3] = -INFINITY, x[N - 4] = -0.0f;
  const uint64_t seeds[] = {0, 42, 0x123456789abcdef0ull};
  const uint64_t offs[] = {0, 7, 0xfffffffbull, 0x1fffffffcull, 0xfffffffffffffffcull};
  const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
  FOR_LEVELS(L) {
    for (int c = 0; c < NLENS; c++) {
      int n = LENS[c];
      const float *xs = guarded(x + N - n, n * sizeof(float));
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 5; b++)
          for (int pi = 0; pi < 4; pi++) {
            float p = ps[pi], sc = 1.0f / (1.0f - p);
            float y[N + CANARY], yg[N];
            uint8_t m[N + CANARY], mg[N];
            fill_canary(y, sizeof y);
            fill_canary(m, sizeof m);
            L->dropout(xs, y, m, n, p, sc, seeds[a], offs[b]);
            G->dropout(xs, yg, mg, n, p, sc, seeds[a], offs[b]);
            for (int i = 0; i < n; i++)
              if (!same(y[i], yg[i]) || m[i] != mg[i])
                fail("dropout n=%d seed %llu offset %llu p %g [%d]: %g/%d vs %g/%d", n,
                     (unsigned long long)seeds[a], (unsigned long long)offs[b], p, i, y[i], m[i],
                     yg[i], mg[i]);
            if (!canary_ok(y + n, CANARY * 4) || !canary_ok(m + n, CANARY))
              fail("dropout n=%d wrote past the end", n);
            fill_canary(y, sizeof y);
            L->dropout(xs, y, NULL, n, p, sc, seeds[a], offs[b]);
            for (int i = 0; i < n; i++)
              if (!same(y[i], yg[i])) fail("dropout (no mask) n=%d [%d]", n, i);
            if (!canary_ok(y + n, CANARY * 4)) fail("dropout n=%d wrote past the end", n);
          }
    }
    unmap_all();
  }
}

/* ---- Adam ------------------------------------------------------------------ */
static void test_adam(void) {
  enum { N = 1023 };
  float p0[N], g0[N], m0[N], v0[N];
  fill_mixed(p0, N, 4, -1.0f, 1.0f);
  fill_mixed(g0, N, 5, -0.1f, 0.1f);
  fill_uniform(m0, N, 6, -0.01f, 0.01f);
  fill_uniform(v0, N, 7, 0.0f, 1e-4f);
  g0[N - 1] = NAN, g0[N - 2] = INFINITY, g0[N - 5] = 1e30f, v0[N - 3] = 0.0f, g0[N - 3] = 0.0f;
  attn_adam_scalars ks[4];
  for (int t = 0; t < 4; t++) {
    attn_adam_scalars k = {.adamw = t & 1,
                           .wd = t >= 2 ? 0.01f : 0.0f,
                           .decay_mul = t >= 2 ? 1.0f - 1e-3f * 0.01f : 1.0f,
                           .beta1 = 0.9f,
                           .one_minus_beta1 = 1.0f - 0.9f,
                           .beta2 = 0.999f,
                           .one_minus_beta2 = 1.0f - 0.999f,
                           .neg_step_size = -1e-3f / (1.0f - 0.9f * 0.9f),
                           .bc2_sqrt = sqrtf(1.0f - 0.999f * 0.999f),
                           .eps = t == 3 ? 0.0f : 1e-8f};
    ks[t] = k;
  }
  FOR_LEVELS(L) {
    for (int t = 0; t < 4; t++)
      for (int c = 0; c < NLENS; c++) {
        int n = LENS[c], o = N - n;
        const float *gs = guarded(g0 + o, n * sizeof(float));
        float p[N + CANARY], m[N + CANARY], v[N + CANARY], pg[N], mg[N], vg[N];
        fill_canary(p, sizeof p), fill_canary(m, sizeof m), fill_canary(v, sizeof v);
        memcpy(p, p0 + o, n * 4), memcpy(m, m0 + o, n * 4), memcpy(v, v0 + o, n * 4);
        memcpy(pg, p0 + o, n * 4), memcpy(mg, m0 + o, n * 4), memcpy(vg, v0 + o, n * 4);
        for (int step = 0; step < 3; step++) { /* carry m and v over steps */
          L->adam(&ks[t], p, gs, m, v, n);
          G->adam(&ks[t], pg, gs, mg, vg, n);
        }
        for (int i = 0; i < n; i++)
          if (!same(p[i], pg[i]) || !same(m[i], mg[i]) || !same(v[i], vg[i]))
            fail("adam case %d n=%d [%d]: p %.9g/%.9g m %.9g/%.9g v %.9g/%.9g", t, n, i, p[i],
                 pg[i], m[i], mg[i], v[i], vg[i]);
        if (!canary_ok(p + n, CANARY * 4) || !canary_ok(m + n, CANARY * 4) ||
            !canary_ok(v + n, CANARY * 4))
          fail("adam n=%d wrote past the end", n);
      }
    unmap_all();
  }
}

/* ---- LayerNorm rows ---------------------------------------------------------- */
static void test_layernorm_row(void) {
  enum { N = 1023 };
  float x[2][N], w[N], b[N];
  fill_mixed(x[0], N, 8, -2.0f, 3.0f);
  fill_uniform(x[1], N, 9, 999.0f, 1001.0f); /* large common offset */
  fill_uniform(w, N, 10, 0.5f, 1.5f);
  fill_uniform(b, N, 11, -0.5f, 0.5f);
  const float eps = 1e-5f;
  FOR_LEVELS(L) {
    for (int r = 0; r < 3; r++)
      for (int wb = 0; wb < 4; wb++)
        for (int c = 0; c < NLENS; c++) {
          int n = LENS[c], o = N - n;
          float cst[N];
          for (int i = 0; i < n; i++)
            cst[i] = 0.25f; /* zero variance */
          const float *xs = guarded(r < 2 ? x[r] + o : cst, n * 4);
          const float *ws = wb & 1 ? guarded(w + o, n * 4) : NULL;
          const float *bs = wb & 2 ? guarded(b + o, n * 4) : NULL;
          float y[N + CANARY], mean = -1, rstd = -1;
          fill_canary(y, sizeof y);
          L->layernorm_row(xs, ws, bs, y, eps, n, &mean, &rstd);
          if (!canary_ok(y + n, CANARY * 4)) fail("layernorm n=%d wrote past the end", n);
          double s = 0, ss = 0, xmax = 0;
          for (int i = 0; i < n; i++)
            s += xs[i], xmax = fmax(xmax, fabs(xs[i]));
          double md = n ? s / n : 0;
          for (int i = 0; i < n; i++)
            ss += (xs[i] - md) * (xs[i] - md);
          double rd = 1.0 / sqrt((n ? ss / n : 0) + eps);
          if (!(fabs(mean - md) <= 1e-6 * xmax) || !(fabs(rstd - rd) <= 1e-6 * rd))
            fail("layernorm n=%d: mean %.9g rstd %.9g, want %.9g %.9g", n, mean, rstd, md, rd);
          for (int i = 0; i < n; i++) {
            double wi = ws ? ws[i] : 1, bi = bs ? bs[i] : 0;
            double want = (xs[i] - md) * rd * wi + bi;
            double tol = 1e-6 * (fabs(xs[i]) * rd * fabs(wi) + fabs(bi) + 1);
            if (!(fabs(y[i] - want) <= tol))
              fail("layernorm row %d wb %d n=%d [%d]: %.9g want %.9g", r, wb, n, i, y[i], want);
          }
        }
    unmap_all();
  }
}

static void test_layernorm_backward_row(void) {
  enum { N = 1023 };
  float x[N], w[N], dy[N];
  fill_mixed(x, N, 12, -2.0f, 3.0f);
  fill_uniform(w, N, 13, 0.5f, 1.5f);
  fill_mixed(dy, N, 14, -1.0f, 1.0f);
  FOR_LEVELS(L) {
    for (int wi = 0; wi < 2; wi++)
      for (int c = 0; c < NLENS; c++) {
        int n = LENS[c], o = N - n;
        const float *xs = guarded(x + o, n * 4), *ds = guarded(dy + o, n * 4);
        const float *ws = wi ? guarded(w + o, n * 4) : NULL;
        float mean = 0.4f, rstd = 0.7f, dx[N + CANARY];
        fill_canary(dx, sizeof dx);
        L->layernorm_backward_row(xs, ws, mean, rstd, ds, dx, n);
        if (!canary_ok(dx + n, CANARY * 4)) fail("layernorm backward n=%d wrote past the end", n);
        double sg = 0, sgx = 0, ag = 0, agx = 0;
        for (int i = 0; i < n; i++) {
          double g = (double)ds[i] * (ws ? ws[i] : 1), xh = ((double)xs[i] - mean) * rstd;
          sg += g, sgx += g * xh, ag += fabs(g), agx += fabs(g * xh);
        }
        double a = sg / n, cc = sgx / n;
        for (int i = 0; i < n; i++) {
          double g = (double)ds[i] * (ws ? ws[i] : 1), xh = ((double)xs[i] - mean) * rstd;
          double want = rstd * (g - a - xh * cc);
          double tol = 1e-6 * rstd * (fabs(g) + ag / n + fabs(xh) * agx / n);
          if (!(fabs(dx[i] - want) <= tol))
            fail("layernorm backward w %d n=%d [%d]: %.9g want %.9g", wi, n, i, dx[i], want);
        }
      }
    unmap_all();
  }
}

/* ---- quantization rows ------------------------------------------------------ */
static void test_minmax(void) {
  enum { N = 1023 };
  float x[N];
  fill_mixed(x, N, 15, -3.0f, 2.0f);
  FOR_LEVELS(L) {
    for (int c = 0; c < NLENS; c++)
      for (int kind = 0; kind < 6; kind++) {
        int n = LENS[c], o = N - n;
        float t[N];
        memcpy(t, x + o, n * 4);
        /* the extremes in the last (tail) lane, only zeros of both signs,
         * only positive, +-inf, a NaN first / last */
        if (kind == 0 && n) t[n - 1] = -7.0f, t[0] = 6.0f;
        if (kind == 1)
          for (int i = 0; i < n; i++)
            t[i] = i & 1 ? -0.0f : 0.0f;
        if (kind == 2)
          for (int i = 0; i < n; i++)
            t[i] = fabsf(t[i]) + 1e-3f;
        if (kind == 3 && n) t[n / 2] = -INFINITY, t[n - 1] = INFINITY;
        if (kind == 4 && n) t[0] = NAN;
        if (kind == 5 && n) t[n - 1] = -NAN;
        const float *xs = guarded(t, n * 4);
        float lo, hi, lg, hg;
        int bad, bg;
        L->minmax_row(xs, n, &lo, &hi, &bad);
        G->minmax_row(xs, n, &lg, &hg, &bg);
        if (bad != bg || (!bg && (f2u(lo) != f2u(lg) || f2u(hi) != f2u(hg))))
          fail("minmax kind %d n=%d: %g %g %d, generic %g %g %d", kind, n, lo, hi, bad, lg, hg, bg);
      }
    unmap_all();
  }
}

static void test_quantize(void) {
  enum { N = 1023 };
  float x[N];
  fill_mixed(x, N, 16, -70.0f, 70.0f);
  /* ties of x / 0.5 (k + 0.5 with k even and odd) and the clamp ends */
  for (int i = 0; i < N; i += 7)
    x[i] = 0.25f * (float)(2 * (i % 41) - 41);
  const float sp[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 127.25f, 127.75f, -64.25f};
  for (int i = 0; i < 8; i++)
    x[N - 1 - 3 * i] = sp[i];
  const float ss[] = {0.5f, 0.3f, 1e-3f};
  const int32_t zs[] = {0, 37, 128, 255};
  FOR_LEVELS(L) {
    for (int si = 0; si < 3; si++)
      for (int zi = 0; zi < 4; zi++)
        for (int c = 0; c < NLENS; c++) {
          int n = LENS[c];
          const float *xs = guarded(x + N - n, n * 4);
          uint8_t q[N + CANARY], qg[N];
          fill_canary(q, sizeof q);
          L->quantize_row_u8(xs, n, ss[si], zs[zi], q);
          G->quantize_row_u8(xs, n, ss[si], zs[zi], qg);
          for (int i = 0; i < n; i++)
            if (q[i] != qg[i])
              fail("quantize s %g z %d n=%d: x %.9g -> %d, generic %d", ss[si], zs[zi], n, xs[i],
                   q[i], qg[i]);
          if (!canary_ok(q + n, CANARY)) fail("quantize n=%d wrote past the end", n);
        }
    unmap_all();
  }
}

static void test_dequant(void) {
  enum { N = 1023 };
  int32_t acc[N], cs[N];
  float sw[N], b[N];
  for (int i = 0; i < N; i++) {
    acc[i] = (int32_t)rnd();
    cs[i] = (int32_t)(rnd() % 200001) - 100000;
  }
  acc[N - 1] = INT32_MIN, acc[N - 2] = INT32_MAX, cs[N - 1] = INT32_MAX;
  fill_uniform(sw, N, 17, 1e-4f, 1e-2f);
  fill_uniform(b, N, 18, -1.0f, 1.0f);
  const float sxs[] = {0.02f, 1.0f};
  const int32_t zxs[] = {0, 128, -77};
  FOR_LEVELS(L) {
    for (int si = 0; si < 2; si++)
      for (int zi = 0; zi < 3; zi++)
        for (int hb = 0; hb < 2; hb++)
          for (int c = 0; c < NLENS; c++) {
            int n = LENS[c], o = N - n;
            const int32_t *as = guarded(acc + o, n * 4), *css = guarded(cs + o, n * 4);
            const float *sws = guarded(sw + o, n * 4), *bs = hb ? guarded(b + o, n * 4) : NULL;
            float y[N + CANARY], yg[N];
            fill_canary(y, sizeof y);
            L->dequant_row(as, n, sxs[si], zxs[zi], sws, css, bs, y);
            G->dequant_row(as, n, sxs[si], zxs[zi], sws, css, bs, yg);
            for (int i = 0; i < n; i++)
              if (f2u(y[i]) != f2u(yg[i]))
                fail("dequant n=%d [%d]: %.9g vs %.9g", n, i, y[i], yg[i]);
            if (!canary_ok(y + n, CANARY * 4)) fail("dequant n=%d wrote past the end", n);
          }
    unmap_all();
  }
}

/* ---- conversions ------------------------------------------------------------ */
enum { NC = 1 << 16 };
static float cx[NC];    /* f32 inputs of the conversions to 16 bits */
static uint16_t hx[NC]; /* every 16-bit pattern */

static void conversion_inputs(void) {
  for (int i = 0; i < NC; i++) {
    hx[i] = (uint16_t)i;
    uint32_t u = rnd();
    switch (i % 8) {
    case 0: u = (u & 0xffff0000u) | 0x8000u; break;               /* bf16 tie */
    case 1: u = (u & 0x8fffe000u) | 0x1000u | 0x38000000u; break; /* f16 tie, normal range */
    case 2: u = (u & 0x807fe000u) | 0x1000u | (u & 0x1000000u ? 0x33000000u : 0x34000000u); break;
    case 3: u = (u & 0x80000000u) | (0x33000000u + (u & 0x1ffffffu)); break; /* f16 subnormals */
    case 4: u = (u & 0x80000000u) | (0x477fe000u + (u & 0x3fffu)); break;    /* near 65504..65520 */
    default: break;                                                          /* any bits */
    }
    cx[i] = u2f(u);
  }
  const float sp[] = {NAN,      -NAN,          INFINITY,       -INFINITY,     0.0f,
                      -0.0f,    1e-40f,        -1e-45f,        FLT_MIN,       FLT_MAX,
                      -FLT_MAX, 65504.0f,      65519.99f,      65520.0f,      5.96e-8f,
                      2.98e-8f, 2.9802322e-8f, 6.1035156e-05f, 6.1035153e-05f};
  for (int i = 0; i < (int)(sizeof sp / 4); i++)
    cx[NC - 1 - 2 * i] = sp[i];
  cx[NC - 40] = u2f(0x7f800001u); /* signalling NaNs */
  cx[NC - 42] = u2f(0xff80ffffu);
  cx[NC - 44] = u2f(0x7fff8000u); /* a NaN whose rounding would carry */
}

static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

/* run the conversion of the level on the last n inputs of each kind; the
 * largest run is every input */
static void test_conversions(void) {
  conversion_inputs();
  static int lens[NLENS + 1];
  memcpy(lens, LENS, sizeof LENS);
  lens[NLENS] = NC;
  FOR_LEVELS(L) {
    for (int c = 0; c <= NLENS; c++) {
      int n = lens[c], o = NC - n;
      const float *xs = guarded(cx + o, n * 4);
      const uint16_t *hs = guarded(hx + o, n * 2);
      static uint16_t h[NC + CANARY], hg[NC];
      static float f[NC + CANARY], fg[NC];
      /* f32 -> f16: exact, a NaN gives a NaN */
      fill_canary(h, sizeof h);
      L->f32_to_f16(xs, h, n);
      G->f32_to_f16(xs, hg, n);
      for (int i = 0; i < n; i++)
        if (isnan(xs[i]) ? !f16_is_nan(h[i]) : h[i] != hg[i])
          fail("f32_to_f16 n=%d: %a (0x%08x) -> 0x%04x, generic 0x%04x", n, xs[i], f2u(xs[i]), h[i],
               hg[i]);
      if (!canary_ok(h + n, CANARY * 2)) fail("f32_to_f16 n=%d wrote past the end", n);
      /* f16 -> f32 */
      fill_canary(f, sizeof f);
      L->f16_to_f32(hs, f, n);
      G->f16_to_f32(hs, fg, n);
      for (int i = 0; i < n; i++)
        if (f16_is_nan(hs[i]) ? !isnan(f[i]) : f2u(f[i]) != f2u(fg[i]))
          fail("f16_to_f32 n=%d: 0x%04x -> 0x%08x, generic 0x%08x", n, hs[i], f2u(f[i]),
               f2u(fg[i]));
      if (!canary_ok(f + n, CANARY * 4)) fail("f16_to_f32 n=%d wrote past the end", n);
      /* f32 -> bf16: exact, NaN included */
      fill_canary(h, sizeof h);
      L->f32_to_bf16(xs, h, n);
      G->f32_to_bf16(xs, hg, n);
      for (int i = 0; i < n; i++)
        if (h[i] != hg[i])
          fail("f32_to_bf16 n=%d: 0x%08x -> 0x%04x, generic 0x%04x", n, f2u(xs[i]), h[i], hg[i]);
      if (!canary_ok(h + n, CANARY * 2)) fail("f32_to_bf16 n=%d wrote past the end", n);
      /* bf16 -> f32 */
      fill_canary(f, sizeof f);
      L->bf16_to_f32(hs, f, n);
      G->bf16_to_f32(hs, fg, n);
      for (int i = 0; i < n; i++)
        if (f2u(f[i]) != f2u(fg[i])) fail("bf16_to_f32 n=%d: 0x%04x", n, hs[i]);
      if (!canary_ok(f + n, CANARY * 4)) fail("bf16_to_f32 n=%d wrote past the end", n);
      /* f32 -> bf16 -> f32 */
      fill_canary(f, sizeof f);
      L->f32_round_bf16(xs, f, n);
      G->f32_round_bf16(xs, fg, n);
      for (int i = 0; i < n; i++)
        if (f2u(f[i]) != f2u(fg[i]))
          fail("f32_round_bf16 n=%d: 0x%08x -> 0x%08x, generic 0x%08x", n, f2u(xs[i]), f2u(f[i]),
               f2u(fg[i]));
      if (!canary_ok(f + n, CANARY * 4)) fail("f32_round_bf16 n=%d wrote past the end", n);
    }
    unmap_all();
  }
}

int main(void) {
  G = &attn_kern_at(ATTN_ISA_GENERIC)->row;
  print_levels();
  for (int i = 0; i < ATTN_ISA_COUNT; i++) {
    const attn_kern *k = attn_kern_at((attn_isa)i);
    if (!k) continue;
    cur = &k->row;
    level = attn_isa_name((attn_isa)i);
    printf("# level %s\n", level);
    RUN(test_vexp);
    RUN(test_exp_sub_sum);
    RUN(test_gelu);
    RUN(test_dropout);
    RUN(test_adam);
    RUN(test_layernorm_row);
    RUN(test_layernorm_backward_row);
    RUN(test_minmax);
    RUN(test_quantize);
    RUN(test_dequant);
    RUN(test_conversions);
  }
  HARNESS_END();
}
