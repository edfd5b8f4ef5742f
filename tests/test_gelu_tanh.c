/* GELU, tanh approximation (kernels/rows/activations.c): the forward against the
 * formula in double, the backward against central finite differences of
 * that formula, and the nn wiring (an FFN declared with ATTN_ACT_GELU_TANH
 * runs it, "gelu_tanh" names it). */
#include "harness.h"

static double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

#define N 2001

static void test_forward_matches_formula(void) {
  static float x[N], y[N], want[N];
  for (int i = 0; i < N; i++) x[i] = -10.0f + 20.0f * (float)i / (N - 1); /* [-10, 10] */
  for (int i = 0; i < N; i++) want[i] = (float)gelu_tanh_ref(x[i]);
  CHECK_OK(attn_gelu_tanh_f32(x, y, N));
  /* f32: a few ulp of the result; absolute 1e-7 covers the tail where y ~ 0 */
  CHECK_CLOSE("gelu_tanh", y, want, N, 1e-7, 4e-7);
  /* not the erf GELU: at x = 1 the two differ by ~1.6e-4 */
  float one = 1.0f, erf_gelu, tanh_gelu;
  CHECK_OK(attn_gelu_f32(&one, &erf_gelu, 1));
  CHECK_OK(attn_gelu_tanh_f32(&one, &tanh_gelu, 1));
  CHECK(fabs(erf_gelu - tanh_gelu) > 1e-4);
  /* in place */
  CHECK_OK(attn_gelu_tanh_f32(x, x, N));
  CHECK_CLOSE("gelu_tanh in place", x, want, N, 1e-7, 4e-7);
}

static void test_backward_matches_finite_differences(void) {
  static float x[N], dy[N], dx[N], want[N];
  for (int i = 0; i < N; i++) x[i] = -8.0f + 16.0f * (float)i / (N - 1);
  fill_uniform(dy, N, 7, -2.0f, 2.0f);
  const double h = 1e-4;
  for (int i = 0; i < N; i++)
    want[i] = (float)(dy[i] * (gelu_tanh_ref(x[i] + h) - gelu_tanh_ref(x[i] - h)) / (2 * h));
  CHECK_OK(attn_gelu_tanh_backward_f32(x, dy, dx, N));
  /* central differences in double: error ~h^2 |f'''| ~ 1e-8; the kernel is f32 */
  CHECK_CLOSE("d gelu_tanh", dx, want, N, 2e-6, 2e-6);
}

static void test_bad_arguments(void) {
  float v = 0;
  CHECK_ERR(attn_gelu_tanh_f32(NULL, &v, 1), ATTN_EINVAL);
  CHECK_ERR(attn_gelu_tanh_backward_f32(&v, &v, &v, -1), ATTN_EINVAL);
  CHECK_OK(attn_gelu_tanh_f32(NULL, NULL, 0));
}

static void test_activation_names(void) {
  attn_activation a = ATTN_ACT_RELU;
  CHECK_OK(attn_activation_from_name("gelu_tanh", &a));
  CHECK(a == ATTN_ACT_GELU_TANH);
  CHECK(!strcmp(attn_activation_name(a), "gelu_tanh"));
  CHECK(!strcmp(attn_activation_name(ATTN_ACT_GELU), "gelu"));
  CHECK(!strcmp(attn_activation_name(ATTN_ACT_RELU), "relu"));
  CHECK_ERR(attn_activation_from_name("mish", &a), ATTN_EINVAL);
}

/* An FFN with ATTN_ACT_GELU_TANH: y = W2 gelu_tanh(W1 x + b1) + b2, forward
 * and the input gradient through it. */
static void test_ffn_runs_gelu_tanh(void) {
  enum { D = 4, F = 6, R = 3 };
  attn_params p;
  attn_params_init(&p);
  attn_ffn m;
  CHECK_OK(attn_ffn_declare(&m, &p, "", "linear1", "linear2", D, F, ATTN_ACT_GELU_TANH, 0.0f));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_ffn_init(&m, &p, ATTN_INIT_TORCH, 3));
  float x[R * D], y[R * D], want[R * D], dy[R * D], dx[R * D] = {0}, h[R * F], a[R * F];
  fill_uniform(x, R * D, 1, -2.0f, 2.0f);
  fill_uniform(dy, R * D, 2, -1.0f, 1.0f);
  const float *W1 = attn_params_data(&p, m.l1.weight), *b1 = attn_params_data(&p, m.l1.bias);
  const float *W2 = attn_params_data(&p, m.l2.weight), *b2 = attn_params_data(&p, m.l2.bias);
  for (int r = 0; r < R; r++) {
    for (int f = 0; f < F; f++) {
      double s = b1[f];
      for (int d = 0; d < D; d++) s += (double)W1[f * D + d] * x[r * D + d];
      h[r * F + f] = (float)s;
      a[r * F + f] = (float)gelu_tanh_ref(s);
    }
    for (int d = 0; d < D; d++) {
      double s = b2[d];
      for (int f = 0; f < F; f++) s += (double)W2[d * F + f] * a[r * F + f];
      want[r * D + d] = (float)s;
    }
  }
  attn_ffn_saved s;
  memset(&s, 0, sizeof s);
  CHECK_OK(attn_ffn_forward(&m, &p, NULL, &s, x, y, R));
  CHECK_CLOSE("ffn gelu_tanh", y, want, R * D, 1e-6, 1e-5);
  CHECK_OK(attn_ffn_backward(&m, &p, NULL, &s, x, dy, dx));
  /* dx = W1^T (gelu_tanh'(h) * (W2^T dy)), with the derivative by differences */
  float dxw[R * D] = {0};
  for (int r = 0; r < R; r++)
    for (int f = 0; f < F; f++) {
      double da = 0;
      for (int d = 0; d < D; d++) da += (double)W2[d * F + f] * dy[r * D + d];
      double hv = h[r * F + f];
      double g = (gelu_tanh_ref(hv + 1e-4) - gelu_tanh_ref(hv - 1e-4)) / 2e-4;
      for (int d = 0; d < D; d++) dxw[r * D + d] += (float)(da * g * W1[f * D + d]);
    }
  CHECK_CLOSE("ffn gelu_tanh dx", dx, dxw, R * D, 1e-5, 1e-4);
  attn_ffn_saved_free(&s);
  attn_params_free(&p);
}

int main(void) {
  RUN(test_forward_matches_formula);
  RUN(test_backward_matches_finite_differences);
  RUN(test_bad_arguments);
  RUN(test_activation_names);
  RUN(test_ffn_runs_gelu_tanh);
  HARNESS_END();
}
