/* The arm64 NEON row kernels (row_ops_neon.c) against the portable ones
 * (attn_row_ops_generic): every entry the NEON table fills, on awkward
 * lengths (0, 1, 3, 5, 7, ..., 1023), NaN / inf / -0 / ties, with a canary
 * past the end; bit-identity where kern.h's contract says so (dropout, Adam,
 * min/max, int8 rows, f16 / bf16 conversions), otherwise the contract's
 * tolerance (exp: 3 ulp of expf; LayerNorm: the summation order). On other
 * machines the build has no NEON table and the program reports a skip. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "kernels/elementwise_internal.h"

static const int64_t LENS[] = {0,  1,  2,  3,  4,  5,  7,   8,   9,   11,  15,  16,   17,
                                31, 32, 33, 63, 64, 65, 127, 255, 257, 511, 1000, 1023};
enum { NL = sizeof LENS / sizeof LENS[0], NMAX = 1024 + 8 };

static const attn_row_ops *G, *N;

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static int32_t ordered(float x) { /* float bits on a line ordered like the values */
  int32_t i;
  memcpy(&i, &x, 4);
  return i < 0 ? INT32_MIN - i : i;
}
static uint32_t rnd32(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s ^ (*s >> 15);
}
static const float CANARY = 12345.678f;

/* n values: uniform in [lo, hi) with a NaN, inf, -inf, -0 sprinkled in when
 * `specials` (at positions that move with n) */
static void fill(float *x, int64_t n, unsigned seed, float lo, float hi, int specials) {
  fill_uniform(x, n, seed, lo, hi);
  if (!specials || n < 8) return;
  x[n / 3] = NAN;
  x[n / 2] = INFINITY;
  x[n - 1] = -INFINITY;
  x[n / 5] = -0.0f;
}

#define NEED(entry)                                                                    \
  do {                                                                                 \
    if (!N) {                                                                          \
      SKIP("no NEON row kernels in this build");                                       \
      return;                                                                          \
    }                                                                                  \
    if (!N->entry) {                                                                   \
      SKIP("the NEON table leaves " #entry " to the portable code");                   \
      return;                                                                          \
    }                                                                                  \
  } while (0)

static int ulp_ok(float got, float want, int max_ulp) {
  if (isnan(want)) return isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  int64_t d = (int64_t)ordered(got) - (int64_t)ordered(want);
  return d >= -max_ulp && d <= max_ulp;
}

static void test_vexp(void) {
  NEED(vexp);
  static float x[NMAX], y[NMAX];
  int worst = 0;
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    fill(x, n, 1 + (unsigned)l, -110.0f, 95.0f, 1);
    y[n] = CANARY;
    N->vexp(x, y, n);
    CHECK(y[n] == CANARY);
    for (int64_t i = 0; i < n; i++) {
      float w = expf(x[i]);
      if (!ulp_ok(y[i], w, 3)) {
        if (!worst) printf("  vexp(%.9g) = %.9g, expf %.9g (n %lld)\n", (double)x[i],
                           (double)y[i], (double)w, (long long)n);
        worst = 1;
      }
    }
  }
  CHECK(!worst);
  /* the contract's special values, in place */
  float s[9] = {-INFINITY, INFINITY, NAN, 88.8f, 89.0f, -200.0f, 0.0f, -0.0f, 1.0f};
  N->vexp(s, s, 9);
  CHECK(s[0] == 0.0f && s[1] == INFINITY && isnan(s[2]) && s[3] == INFINITY &&
        s[4] == INFINITY && s[5] == 0.0f && s[6] == 1.0f && s[7] == 1.0f);
  CHECK(ulp_ok(s[8], expf(1.0f), 3));
}

static void test_exp_sub_sum(void) {
  NEED(exp_sub_sum);
  static float x[NMAX], y[NMAX], y2[NMAX], yg[NMAX];
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    fill(x, n, 7 + (unsigned)l, -30.0f, 2.0f, 0);
    if (n >= 6) x[n / 2] = -INFINITY, x[1] = -100.0f; /* masked key; a denormal exp */
    float m = 1.5f;
    y[n] = CANARY;
    float s = N->exp_sub_sum(x, y, n, m);
    float sg = G->exp_sub_sum(x, yg, n, m);
    CHECK(y[n] == CANARY);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
      if (!ulp_ok(y[i], expf(x[i] - m), 3)) bad = 1;
    CHECK(!bad);
    CHECK(fabsf(s - sg) <= 1e-6f * fabsf(sg) + 1e-30f);
    /* sum only (y NULL), in place, and a second call: the same sum, bit for bit */
    CHECK(bits(N->exp_sub_sum(x, NULL, n, m)) == bits(s));
    memcpy(y2, x, (size_t)n * sizeof(float));
    CHECK(bits(N->exp_sub_sum(y2, y2, n, m)) == bits(s));
    CHECK(!memcmp(y2, y, (size_t)n * sizeof(float)));
  }
  /* a NaN input gives a NaN sum, as expf does; an all-masked row sums to 0 */
  float z[5] = {0.0f, NAN, 0.0f, 0.0f, 0.0f};
  CHECK(isnan(N->exp_sub_sum(z, NULL, 5, 0.0f)));
  float mk[7] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  CHECK(N->exp_sub_sum(mk, NULL, 7, 0.0f) == 0.0f);
}

static void test_dropout_bit_identical(void) {
  NEED(dropout);
  static float x[NMAX], y0[NMAX], y1[NMAX];
  static uint8_t m0[NMAX], m1[NMAX];
  const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
  const uint64_t seeds[] = {0, 42, 0x123456789abcdefull};
  const uint64_t offs[] = {0, 3, 0xfffffffdull, 0x1fffffffcull + 1}; /* low word wraps */
  int bad = 0;
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    fill(x, n, 3 + (unsigned)l, -2.0f, 2.0f, 1);
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 3; b++) {
        int c = (l + a + b) % 4;
        float p = ps[a], scale = 1.0f / (1.0f - p);
        memset(m0, 7, sizeof m0), memset(m1, 7, sizeof m1);
        y1[n] = CANARY;
        G->dropout(x, y0, m0, n, p, scale, seeds[b], offs[c]);
        N->dropout(x, y1, m1, n, p, scale, seeds[b], offs[c]);
        bad |= memcmp(y0, y1, (size_t)n * sizeof(float)) != 0 || memcmp(m0, m1, (size_t)n + 1);
        bad |= y1[n] != CANARY;
        N->dropout(x, y1, NULL, n, p, scale, seeds[b], offs[c]); /* no mask */
        bad |= memcmp(y0, y1, (size_t)n * sizeof(float)) != 0;
        if (bad) {
          printf("  n %lld p %g seed %llx offset %llx\n", (long long)n, (double)p,
                 (unsigned long long)seeds[b], (unsigned long long)offs[c]);
          CHECK(!bad);
          return;
        }
      }
  }
}

static void test_adam_bit_identical(void) {
  NEED(adam);
  static float p0[NMAX], g[NMAX], m0[NMAX], v0[NMAX], p1[NMAX], m1[NMAX], v1[NMAX];
  for (int mode = 0; mode < 3; mode++) {
    attn_adam_scalars k = {0};
    float lr = 1e-3f, wd = mode == 0 ? 0.0f : 0.01f;
    k.adamw = mode == 2;
    k.wd = mode == 2 ? 0.0f : wd;
    k.decay_mul = mode == 2 ? 1.0f - lr * wd : 1.0f;
    k.beta1 = 0.9f, k.one_minus_beta1 = 1.0f - 0.9f;
    k.beta2 = 0.999f, k.one_minus_beta2 = 1.0f - 0.999f;
    k.neg_step_size = -lr / (1.0f - 0.9f * 0.9f * 0.9f);
    k.bc2_sqrt = sqrtf(1.0f - 0.999f * 0.999f * 0.999f);
    k.eps = 1e-8f;
    for (int l = 0; l < NL; l++) {
      int64_t n = LENS[l];
      fill(p0, n, 11 + (unsigned)l, -1.0f, 1.0f, 0);
      fill(g, n, 12 + (unsigned)l, -1e-2f, 1e-2f, l % 3 == 0); /* NaN / inf gradients too */
      fill(m0, n, 13 + (unsigned)l, -1e-3f, 1e-3f, 0);
      fill(v0, n, 14 + (unsigned)l, 0.0f, 1e-5f, 0);
      if (n > 4) g[2] = 1e-30f, v0[3] = 0.0f, g[3] = 0.0f; /* denormal g^2, zero denominators */
      memcpy(p1, p0, sizeof p0), memcpy(m1, m0, sizeof m0), memcpy(v1, v0, sizeof v0);
      p1[n] = m1[n] = v1[n] = CANARY;
      for (int step = 0; step < 3; step++) {
        G->adam(&k, p0, g, m0, v0, n);
        N->adam(&k, p1, g, m1, v1, n);
      }
      int same = !memcmp(p0, p1, (size_t)n * 4) && !memcmp(m0, m1, (size_t)n * 4) &&
                 !memcmp(v0, v1, (size_t)n * 4);
      if (!same) printf("  mode %d n %lld: not the portable bits\n", mode, (long long)n);
      CHECK(same);
      CHECK(p1[n] == CANARY && m1[n] == CANARY && v1[n] == CANARY);
    }
  }
}

static void test_layernorm_row(void) {
  NEED(layernorm_row);
  static float x[NMAX], w[NMAX], b[NMAX], y0[NMAX], y1[NMAX];
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    fill(x, n, 21 + (unsigned)l, -3.0f, 3.0f, 0);
    if (l % 2) /* a large common offset: the double accumulators matter */
      for (int64_t j = 0; j < n; j++) x[j] += 1000.0f;
    fill(w, n, 22 + (unsigned)l, 0.5f, 1.5f, 0);
    fill(b, n, 23 + (unsigned)l, -0.5f, 0.5f, 0);
    for (int v = 0; v < 4; v++) {
      const float *wv = v & 1 ? w : NULL, *bv = v & 2 ? b : NULL;
      float mg, rg, mn, rn;
      y1[n] = CANARY;
      G->layernorm_row(x, wv, bv, y0, 1e-5f, n, &mg, &rg);
      N->layernorm_row(x, wv, bv, y1, 1e-5f, n, &mn, &rn);
      CHECK(y1[n] == CANARY);
      CHECK(fabsf(mn - mg) <= 1e-7f * fabsf(mg) + 1e-7f);
      CHECK(fabsf(rn - rg) <= 1e-6f * fabsf(rg));
      CHECK_CLOSE("layernorm y", y1, y0, n, 1e-4, 1e-5);
      if (n == 0) CHECK(mn == 0.0f && rn == 1.0f / sqrtf(1e-5f));
      /* the same statistics give the portable expression's bits */
      if (mn == mg && rn == rg) CHECK(!memcmp(y0, y1, (size_t)n * sizeof(float)));
    }
  }
  /* a NaN or inf in the row: NaN statistics and output, as the portable code */
  fill(x, 37, 5, -1, 1, 0);
  x[20] = NAN;
  float m, r;
  N->layernorm_row(x, NULL, NULL, y1, 1e-5f, 37, &m, &r);
  CHECK(isnan(m) && isnan(y1[0]));
}

static void test_layernorm_backward_row(void) {
  NEED(layernorm_backward_row);
  static float x[NMAX], w[NMAX], dy[NMAX], d0[NMAX], d1[NMAX];
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    if (n == 0) continue; /* mean(g) of an empty row: never called */
    fill(x, n, 31 + (unsigned)l, -2.0f, 2.0f, 0);
    fill(w, n, 32 + (unsigned)l, 0.5f, 1.5f, 0);
    fill(dy, n, 33 + (unsigned)l, -1.0f, 1.0f, 0);
    float mean, rstd;
    G->layernorm_row(x, NULL, NULL, d0, 1e-5f, n, &mean, &rstd);
    for (int v = 0; v < 2; v++) {
      const float *wv = v ? w : NULL;
      d1[n] = CANARY;
      G->layernorm_backward_row(x, wv, mean, rstd, dy, d0, n);
      N->layernorm_backward_row(x, wv, mean, rstd, dy, d1, n);
      CHECK(d1[n] == CANARY);
      /* f32 sums of n terms in another order: the error scales with n and rstd */
      CHECK_CLOSE("layernorm dx", d1, d0, n, 2e-6 * rstd * (1 + sqrt((double)n)), 1e-5);
    }
  }
}

static void test_minmax_bit_identical(void) {
  NEED(minmax_row);
  static float x[NMAX];
  int bad = 0;
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    for (int c = 0; c < 6; c++) {
      float lo = -3, hi = 2;
      if (c == 1) lo = 0.5f, hi = 4; /* all positive: lo stays 0 */
      if (c == 2) lo = -4, hi = -0.5f; /* all negative: hi stays 0 */
      fill(x, n, 41 + (unsigned)(l * 6 + c), lo, hi, c == 3);
      if (c == 4) /* only zeros of both signs: +0, +0 */
        for (int64_t j = 0; j < n; j++) x[j] = j % 2 ? -0.0f : 0.0f;
      if (c == 5 && n > 0) x[n - 1] = NAN; /* a NaN in the tail lanes */
      float a0, b0, a1, b1;
      int n0 = -1, n1 = -1;
      G->minmax_row(x, n, &a0, &b0, &n0);
      N->minmax_row(x, n, &a1, &b1, &n1);
      if (bits(a0) != bits(a1) || bits(b0) != bits(b1) || n0 != n1) {
        if (!bad)
          printf("  n %lld case %d: (%g, %g, %d), portable (%g, %g, %d)\n", (long long)n, c,
                 (double)a1, (double)b1, n1, (double)a0, (double)b0, n0);
        bad = 1;
      }
    }
  }
  CHECK(!bad);
}

static void test_quantize_row_u8_bit_identical(void) {
  NEED(quantize_row_u8);
  static float x[NMAX];
  static uint8_t q0[NMAX], q1[NMAX];
  const float scales[] = {0.01f, 0.5f, 1.0f, 3.0f};
  const int32_t zs[] = {0, 128, 255, 17};
  int bad = 0;
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    for (int c = 0; c < 4; c++) {
      float s = scales[c];
      fill(x, n, 51 + (unsigned)(l * 4 + c), -300.0f * s, 300.0f * s, 1);
      for (int64_t j = 0; j < n; j += 3) x[j] = ((float)(j % 41) - 20.0f + 0.5f) * s; /* ties */
      if (n > 6) x[5] = 1e30f, x[6] = -1e30f;
      q1[n] = 0xA5;
      G->quantize_row_u8(x, n, s, zs[c], q0);
      N->quantize_row_u8(x, n, s, zs[c], q1);
      bad |= memcmp(q0, q1, (size_t)n) != 0 || q1[n] != 0xA5;
    }
  }
  CHECK(!bad);
}

static void test_dequant_row_bit_identical(void) {
  NEED(dequant_row);
  static int32_t acc[NMAX], cs[NMAX];
  static float sw[NMAX], b[NMAX], y0[NMAX], y1[NMAX];
  uint32_t r = 99;
  int bad = 0;
  for (int l = 0; l < NL; l++) {
    int64_t n = LENS[l];
    for (int64_t j = 0; j < n; j++) {
      acc[j] = (int32_t)rnd32(&r);
      cs[j] = (int32_t)(rnd32(&r) % 200001) - 100000;
    }
    if (n > 2) acc[0] = INT32_MAX, acc[1] = INT32_MIN, cs[1] = 100000; /* wrapping */
    fill(sw, n, 61 + (unsigned)l, 1e-4f, 1e-2f, 0);
    fill(b, n, 62 + (unsigned)l, -1.0f, 1.0f, 0);
    for (int v = 0; v < 2; v++) {
      const float *bv = v ? b : NULL;
      int32_t zx = v ? 131 : -7;
      y1[n] = CANARY;
      G->dequant_row(acc, n, 0.0123f, zx, sw, cs, bv, y0);
      N->dequant_row(acc, n, 0.0123f, zx, sw, cs, bv, y1);
      bad |= memcmp(y0, y1, (size_t)n * sizeof(float)) != 0 || y1[n] != CANARY;
    }
  }
  CHECK(!bad);
}

/* f16 -> f32 and bf16 -> f32 of every 16-bit pattern; f32 -> f16 / bf16 and
 * the bf16 rounding of random bit patterns (NaNs, denormals, infinities
 * included) and of the f16 boundaries, in runs of every length */
static void test_conversions_bit_identical(void) {
  if (!N) {
    SKIP("no NEON row kernels in this build");
    return;
  }
  static uint16_t h[65536 + 8], h0[NMAX], h1[NMAX];
  static float f0[65536 + 8], f1[65536 + 8], x[NMAX];
  for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  int bad = 0;
  if (N->f16_to_f32) {
    f1[65536] = CANARY;
    G->f16_to_f32(h, f0, 65536);
    N->f16_to_f32(h, f1, 65536);
    bad |= memcmp(f0, f1, 65536 * sizeof(float)) != 0 || f1[65536] != CANARY;
    for (int l = 0; l < NL; l++) { /* every length, from an odd start */
      N->f16_to_f32(h + 31744 + l, f1, LENS[l]);
      bad |= memcmp(f0 + 31744 + l, f1, (size_t)LENS[l] * sizeof(float)) != 0;
    }
    if (bad) printf("  f16_to_f32 differs\n");
  }
  if (N->bf16_to_f32) {
    G->bf16_to_f32(h, f0, 65536);
    N->bf16_to_f32(h, f1, 65536);
    int b2 = memcmp(f0, f1, 65536 * sizeof(float)) != 0;
    for (int l = 0; l < NL; l++) {
      N->bf16_to_f32(h + 7 + l, f1, LENS[l]);
      b2 |= memcmp(f0 + 7 + l, f1, (size_t)LENS[l] * sizeof(float)) != 0;
    }
    if (b2) printf("  bf16_to_f32 differs\n");
    bad |= b2;
  }
  static const float edges[] = {65504.0f, 65519.996f, 65520.0f, 65536.0f, 6.1035156e-05f,
                                6.1035152e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
                                8.940697e-08f, 1.0009766f, 1.0004883f, 1.0014648f, 3.3895314e38f,
                                3.4028235e38f, 1e-45f, 0.0f, -0.0f, INFINITY, -INFINITY};
  const int ne = sizeof edges / sizeof edges[0];
  uint32_t r = 7;
  for (int round = 0; round < 40; round++)
    for (int l = 0; l < NL; l++) {
      int64_t n = LENS[l];
      for (int64_t j = 0; j < n; j++) {
        uint32_t u = rnd32(&r);
        if (j % 4 == 1) /* f16's range: exponents 100..145 */
          u = (u & 0x807fffffu) | ((100u + u % 46u) << 23);
        x[j] = from_bits(u);
      }
      for (int e = 0; e < ne && e < n; e++) x[(e * 7 + round) % n] = round % 2 ? -edges[e] : edges[e];
      if (n > 3) x[n - 1] = from_bits(0x7f800001u), x[n - 2] = from_bits(0xffc00123u); /* NaNs */
      if (N->f32_to_f16) {
        h1[n] = 0xA5A5;
        G->f32_to_f16(x, h0, n);
        N->f32_to_f16(x, h1, n);
        if (memcmp(h0, h1, (size_t)n * 2) || h1[n] != 0xA5A5) {
          for (int64_t j = 0; j < n; j++)
            if (h0[j] != h1[j] && !bad)
              printf("  f32_to_f16(%08x) = %04x, portable %04x\n", (unsigned)bits(x[j]),
                     (unsigned)h1[j], (unsigned)h0[j]), bad = 1;
          bad = 1;
        }
      }
      if (N->f32_to_bf16) {
        h1[n] = 0xA5A5;
        G->f32_to_bf16(x, h0, n);
        N->f32_to_bf16(x, h1, n);
        bad |= memcmp(h0, h1, (size_t)n * 2) != 0 || h1[n] != 0xA5A5;
      }
      if (N->f32_round_bf16) {
        f1[n] = CANARY;
        G->f32_round_bf16(x, f0, n);
        N->f32_round_bf16(x, f1, n);
        bad |= memcmp(f0, f1, (size_t)n * sizeof(float)) != 0 || f1[n] != CANARY;
      }
    }
  CHECK(!bad);
}

/* dispatch: the neon level is available on arm64 and uses this table */
static void test_dispatch_has_neon(void) {
  if (!N) {
    SKIP("no NEON row kernels in this build");
    return;
  }
  CHECK(attn_isa_available(ATTN_ISA_NEON));
  const attn_kern *k = attn_kern_at(ATTN_ISA_NEON);
  CHECK(k && k->row.dropout == N->dropout && k->row.adam == N->adam);
  CHECK(k && k->row.gelu == G->gelu); /* NULL entries: the portable ones */
}

static void test_no_neon_here(void) {
  CHECK(!attn_isa_available(ATTN_ISA_NEON));
  SKIP("not an arm64 build: no NEON row kernels to test");
}

int main(void) {
  G = attn_row_ops_generic();
  N = attn_row_ops_neon();
  if (!N) {
    RUN(test_no_neon_here);
    HARNESS_END();
  }
  RUN(test_vexp);
  RUN(test_exp_sub_sum);
  RUN(test_dropout_bit_identical);
  RUN(test_adam_bit_identical);
  RUN(test_layernorm_row);
  RUN(test_layernorm_backward_row);
  RUN(test_minmax_bit_identical);
  RUN(test_quantize_row_u8_bit_identical);
  RUN(test_dequant_row_bit_identical);
  RUN(test_conversions_bit_identical);
  RUN(test_dispatch_has_neon);
  HARNESS_END();
}
