/* The softcap's tanh (kernels/sdpa/softcap_tanh.h: a rational y P(u) / Q(u),
 * clamped) against tanh in double on a dense grid: the portable form, and
 * every level's row op (attn_row_ops.softcap, cap tanh(x / cap)) at two caps.
 *
 * Bound: 6.5 ulp of the result for tanh itself (the fit is 2.4e-8 relative;
 * the rest is the f32 evaluation), 7 ulp for cap tanh(x / cap) (the
 * rounding of x / cap and of the product by cap on top). Exact: tanh y = y
 * for tiny y, +-1 (+-cap) at and past 9.1 (inf and 1e30 included), -inf
 * kept by the row op, NaN stays NaN, |result| <= 1 (cap) everywhere. */
#include <float.h>

#include "harness.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/softcap_tanh.h"

/* |got - want| in units of the f32 spacing at want (want != 0) */
static double ulps(float got, double want) {
  const float w = (float)fabs(want);
  const double step = (double)(nextafterf(w, INFINITY) - w);
  return fabs((double)got - want) / step;
}

/* y on [0, 12] every 2^-13 (98,305 points), 1e-30..1 and 10..1e38 geometric */
static int grid(int i, float *y) {
  if (i < 98305) return *y = (float)i / 8192.0f, 1;
  i -= 98305;
  if (i < 3000) return *y = powf(10.0f, -30.0f + 30.0f * (float)i / 3000.0f), 1;
  i -= 3000;
  if (i < 3000) return *y = powf(10.0f, 1.0f + 37.0f * (float)i / 3000.0f), 1;
  return 0;
}

static void test_portable_dense(void) {
  double worst = 0;
  float y;
  for (int i = 0; grid(i, &y); i++)
    for (int sgn = -1; sgn <= 1; sgn += 2) {
      const float x = (float)sgn * y, t = attn_softcap_tanh(x);
      const double want = tanh((double)x);
      CHECK(fabsf(t) <= 1.0f);
      if (x != 0.0f) worst = fmax(worst, ulps(t, want));
    }
  printf("# portable: worst %.2f ulp\n", worst);
  CHECK(worst <= 6.5);
  CHECK(attn_softcap_tanh(1e-30f) == 1e-30f && attn_softcap_tanh(-1e-30f) == -1e-30f);
  CHECK(attn_softcap_tanh(0.0f) == 0.0f && signbit(attn_softcap_tanh(-0.0f)));
  CHECK(attn_softcap_tanh(9.1f) == 1.0f && attn_softcap_tanh(-9.1f) == -1.0f);
  CHECK(attn_softcap_tanh(1e30f) == 1.0f && attn_softcap_tanh(-FLT_MAX) == -1.0f);
  CHECK(attn_softcap_tanh(INFINITY) == 1.0f && attn_softcap_tanh(-INFINITY) == -1.0f);
  CHECK(isnan(attn_softcap_tanh(NAN)));
}

static void test_levels_dense(void) {
  enum { N = 4096 };
  static float x[N], y[N], g[N];
  const float caps[2] = {1.0f, 50.0f};
  int rows = 0;
  for (int i = 0; i < ATTN_ISA_COUNT; i++) {
    const attn_kern *k = attn_kern_at((attn_isa)i);
    const attn_score_vec_fn vf =
        k ? attn_stage_vec(attn_stage_unit_named("softcap"), (attn_isa)i) : NULL;
    if (!vf) continue;
    rows++;
    for (int c = 0; c < 2; c++) {
      const float cap = caps[c];
      double worst = 0;
      float v;
      int done = 0, at = 0;
      while (!done) { /* the grid in chunks of N, both signs */
        int n = 0;
        for (; n < N; n += 2, at++) {
          if (!grid(at, &v)) {
            done = 1;
            break;
          }
          x[n] = cap * v, x[n + 1] = -cap * v;
        }
        memcpy(y, x, sizeof(float) * (size_t)n);
        vf(cap, y, g, n);
        for (int e = 0; e < n; e++) {
          if (!isfinite(x[e])) continue; /* cap v overflowed: the exact cases below */
          const double want = (double)cap * tanh((double)x[e] / cap);
          CHECK(fabsf(y[e]) <= cap);
          if (x[e] != 0.0f) worst = fmax(worst, ulps(y[e], want));
        }
      }
      printf("# level %s, cap %g: worst %.2f ulp\n", attn_isa_name((attn_isa)i), (double)cap,
             worst);
      CHECK(worst <= 7.0);
      float s[6] = {-INFINITY, INFINITY, NAN, 1e30f, -1e30f, 9.1f * cap};
      vf(cap, s, g, 6);
      CHECK(s[0] == -INFINITY && g[0] == 0.0f && s[1] == cap && isnan(s[2]) && s[3] == cap);
      CHECK(s[4] == -cap && s[5] == cap);
    }
    if (h_case_failed) printf("  ^ level %s\n", attn_isa_name((attn_isa)i));
  }
  if (attn_isa_active() != ATTN_ISA_GENERIC) CHECK(rows > 0);
}

int main(void) {
  RUN(test_portable_dense);
  RUN(test_levels_dense);
  HARNESS_END();
}
