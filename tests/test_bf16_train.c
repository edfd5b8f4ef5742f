/* bf16 mixed-precision training paths of the nn layer (src/nn/ffn_bf16.c,
 * mha_bf16.c, dense_bf16.c): activations kept in bf16, fused epilogues
 * (bias, ReLU, ReLU-backward mask, bf16 output, bias-gradient sums).
 *   - the FFN path against the same maths assembled from the public bf16
 *     Linear (attn_dense_*_ctx) and ReLU kernels: the same rounded operands,
 *     so within f32 summation order (1e-5 of each tensor's max);
 *   - the MHA path (one q/k/v GEMM) against the per-projection path, which
 *     runs when key and value are passed explicitly, both with the f32 math
 *     SDPA: same tolerance; with bf16 flash attention (auto backend) against
 *     the f32 flash one: 2e-2 of each tensor's max (bf16 P and dS);
 *   - a ReLU encoder layer in bf16 (bf16 flash attention) against f32,
 *     normwise: out and dsrc 2.5e-2, parameter gradients 6e-2 (measured:
 *     out <= 1.4e-3, dsrc <= 1.5e-2, gradients <= 4.4e-2; the ReLU units
 *     whose pre-activation changes sign under bf16 rounding switch on or
 *     off, so linear1's and the next LayerNorm's gradients are the worst:
 *     3.5e-2 already with f32 attention and the per-Linear bf16 path);
 *   - the same bits for 1, 2 and 3 threads. */
#include "harness.h"

/* max |got - want| / max |want| */
static double rel_max(const float *got, const float *want, int64_t n) {
  double e = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    e = d > e ? d : e;
    m = fabs(want[i]) > m ? fabs(want[i]) : m;
  }
  return m > 0 ? e / m : e;
}

/* ||got - want|| / ||want|| */
static double rel_norm(const float *got, const float *want, int64_t n) {
  double e = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = (double)got[i] - want[i];
    e += d * d;
    m += (double)want[i] * want[i];
  }
  return m > 0 ? sqrt(e / m) : sqrt(e);
}

static attn_nn_ctx bf16_ctx(void) {
  attn_nn_ctx ctx = {0};
  ctx.backend = ATTN_BACKEND_AUTO;
  ctx.training = 1;
  ctx.precision = ATTN_PREC_BF16;
  return ctx;
}

static void test_ffn_bf16_matches_dense_path(void) {
  enum { R = 70, E = 40, F = 72 };
  attn_params p;
  attn_params_init(&p);
  attn_ffn m;
  CHECK_OK(attn_ffn_declare(&m, &p, "ff.", "linear1", "linear2", E, F, ATTN_ACT_RELU, 0.0f));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_ffn_init(&m, &p, ATTN_INIT_TORCH, 5));
  static float x[R * E], dy[R * E], y[R * E], dx[R * E], yr[R * E], dxr[R * E];
  static float h[R * F], a[R * F], da[R * F], dh[R * F];
  fill_uniform(x, R * E, 1, -1, 1);
  fill_uniform(dy, R * E, 2, -1, 1);
  attn_nn_ctx ctx = bf16_ctx();
  attn_ffn_saved s = {0};
  attn_params_zero_grad(&p);
  memset(dx, 0, sizeof dx);
  CHECK_OK(attn_ffn_forward(&m, &p, &ctx, &s, x, y, R));
  CHECK(s.ah != NULL && s.h == NULL);  // the bf16 path ran
  CHECK_OK(attn_ffn_backward(&m, &p, &ctx, &s, x, dy, dx));
  float *g = malloc(sizeof(float) * (size_t)p.numel);
  memcpy(g, p.grad, sizeof(float) * (size_t)p.numel);
  attn_ffn_saved_free(&s);
  // the reference: the generic bf16 Linears and the f32 ReLU kernels
  attn_params_zero_grad(&p);
  memset(dxr, 0, sizeof dxr);
  memset(da, 0, sizeof da);
  CHECK_OK(attn_linear_forward_ctx(&m.l1, &p, &ctx, x, h, R));
  CHECK_OK(attn_relu_f32(h, a, R * F));
  CHECK_OK(attn_linear_forward_ctx(&m.l2, &p, &ctx, a, yr, R));
  CHECK_OK(attn_linear_backward_ctx(&m.l2, &p, &ctx, a, dy, da, R));
  CHECK_OK(attn_relu_backward_f32(h, da, dh, R * F));
  CHECK_OK(attn_linear_backward_ctx(&m.l1, &p, &ctx, x, dh, dxr, R));
  double ey = rel_max(y, yr, R * E), ex = rel_max(dx, dxr, R * E), eg = 0;
  for (int v = 0; v < p.count; v++) {
    double e = rel_max(g + p.views[v].offset, p.grad + p.views[v].offset, p.views[v].numel);
    if (e > 1e-5) printf("  %s: %.3g\n", p.views[v].name, e);
    eg = e > eg ? e : eg;
  }
  printf("  y %.2e dx %.2e grads %.2e\n", ey, ex, eg);
  CHECK(ey <= 1e-5 && ex <= 1e-5 && eg <= 1e-5);
  free(g);
  attn_params_free(&p);
}

static void mha_case(attn_backend backend, double tol) {
  enum { B = 3, L = 23, E = 48, H = 4 };
  attn_params p;
  attn_params_init(&p);
  attn_mha m;
  attn_mha_config c = {0};
  c.embed_dim = E;
  c.num_heads = H;
  c.bias = 1;
  CHECK_OK(attn_mha_declare(&m, &p, "attn.", &c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_mha_init(&m, &p, ATTN_INIT_TORCH, 3));
  // non-zero biases, so their gradients and the bias epilogue are tested
  for (int v = 0; v < p.count; v++)
    if (strstr(p.views[v].name, "bias"))
      fill_uniform(p.data + p.views[v].offset, (long)p.views[v].numel, 40 + v, -0.5f, 0.5f);
  static float x[B * L * E], dout[B * L * E], out[2][B * L * E], dx[2][B * L * E];
  static float dk[B * L * E], dv[B * L * E];
  fill_uniform(x, B * L * E, 4, -1, 1);
  fill_uniform(dout, B * L * E, 5, -1, 1);
  attn_nn_ctx ctx = bf16_ctx();
  ctx.backend = backend;
  float *g[2];
  for (int k = 0; k < 2; k++) {  // k = 0: self-attention (one GEMM); 1: q, k, v given
    attn_mha_saved s = {0};
    attn_params_zero_grad(&p);
    memset(dx[k], 0, sizeof dx[k]);
    memset(dk, 0, sizeof dk);
    memset(dv, 0, sizeof dv);
    CHECK_OK(attn_mha_forward(&m, &p, &ctx, &s, x, k ? x : NULL, k ? x : NULL, B, L, L, NULL,
                              out[k], NULL, 0));
    CHECK((s.xh != NULL) == (k == 0));
    CHECK((s.qkvh != NULL) == (k == 0 && backend != ATTN_BACKEND_MATH));  // bf16 flash
    CHECK_OK(attn_mha_backward(&m, &p, &ctx, &s, x, k ? x : NULL, k ? x : NULL, dout, dx[k],
                               k ? dk : NULL, k ? dv : NULL));
    if (k)
      for (int i = 0; i < B * L * E; i++) dx[k][i] += dk[i] + dv[i];
    g[k] = malloc(sizeof(float) * (size_t)p.numel);
    memcpy(g[k], p.grad, sizeof(float) * (size_t)p.numel);
    attn_mha_saved_free(&s);
  }
  double eo = rel_max(out[0], out[1], B * L * E), ex = rel_max(dx[0], dx[1], B * L * E), eg = 0;
  for (int v = 0; v < p.count; v++) {
    double e = rel_max(g[0] + p.views[v].offset, g[1] + p.views[v].offset, p.views[v].numel);
    if (e > tol) printf("  %s: %.3g\n", p.views[v].name, e);
    eg = e > eg ? e : eg;
  }
  printf("  %s: out %.2e dx %.2e grads %.2e\n", attn_backend_name(backend), eo, ex, eg);
  CHECK(eo <= tol && ex <= tol && eg <= tol);
  if (backend != ATTN_BACKEND_MATH) CHECK(eo > 0);  // bf16 attention ran
  free(g[0]);
  free(g[1]);
  attn_params_free(&p);
}

static void test_mha_bf16_matches_projection_path(void) { mha_case(ATTN_BACKEND_MATH, 1e-5); }
static void test_mha_bf16_flash_vs_f32_flash(void) { mha_case(ATTN_BACKEND_AUTO, 2e-2); }

typedef struct {
  attn_params p;
  attn_encoder_layer m;
} enc;

static void enc_make(enc *e, int norm_first) {
  enum { E = 64, H = 4, FF = 160 };
  attn_layer_config c = {E, H, FF, 0.0f, ATTN_ACT_RELU, 1e-5f, norm_first, 1};
  attn_params_init(&e->p);
  CHECK_OK(attn_encoder_declare(&e->m, &e->p, "enc.", &c));
  CHECK_OK(attn_params_alloc(&e->p));
  CHECK_OK(attn_encoder_init(&e->m, &e->p, ATTN_INIT_TORCH, 21));
}

/* out, dsrc [B*L*E] and the gradients (malloc'ed, returned) of one step */
static float *enc_step(enc *e, attn_precision prec, const float *src, const float *dout,
                       int64_t B, int64_t L, float *out, float *dsrc) {
  attn_nn_ctx ctx = bf16_ctx();
  ctx.precision = prec;
  attn_encoder_saved s = {0};
  attn_params_zero_grad(&e->p);
  memset(dsrc, 0, sizeof(float) * (size_t)(B * L * e->m.c.d_model));
  CHECK_OK(attn_encoder_forward(&e->m, &e->p, &ctx, &s, src, B, L, NULL, out));
  CHECK_OK(attn_encoder_backward(&e->m, &e->p, &ctx, &s, src, dout, dsrc));
  attn_encoder_saved_free(&s);
  float *g = malloc(sizeof(float) * (size_t)e->p.numel);
  memcpy(g, e->p.grad, sizeof(float) * (size_t)e->p.numel);
  return g;
}

static void test_encoder_relu_bf16_vs_f32(void) {
  enum { B = 4, L = 37, E = 64 };
  static float src[B * L * E], dout[B * L * E], out[2][B * L * E], dsrc[2][B * L * E];
  fill_uniform(src, B * L * E, 7, -1, 1);
  fill_uniform(dout, B * L * E, 8, -1, 1);
  for (int nf = 0; nf < 2; nf++) {
    enc e;
    enc_make(&e, nf);
    float *g32 = enc_step(&e, ATTN_PREC_F32, src, dout, B, L, out[0], dsrc[0]);
    float *g16 = enc_step(&e, ATTN_PREC_BF16, src, dout, B, L, out[1], dsrc[1]);
    double eo = rel_norm(out[1], out[0], B * L * E), ed = rel_norm(dsrc[1], dsrc[0], B * L * E);
    double eg = 0;
    for (int v = 0; v < e.p.count; v++) {
      int64_t off = e.p.views[v].offset;
      double x = rel_norm(g16 + off, g32 + off, e.p.views[v].numel);
      if (x > 6e-2) printf("  %s: %.3g\n", e.p.views[v].name, x);
      eg = x > eg ? x : eg;
    }
    printf("  norm_first %d: out %.2e dsrc %.2e grads %.2e (normwise)\n", nf, eo, ed, eg);
    CHECK(eo < 2.5e-2 && ed < 2.5e-2 && eg < 6e-2);
    CHECK(eo > 0);  // it did run in bf16
    free(g32);
    free(g16);
    attn_params_free(&e.p);
  }
}

static void test_bf16_same_bits_any_thread_count(void) {
  enum { B = 3, L = 64, E = 64 };
  static float src[B * L * E], dout[B * L * E], out[3][B * L * E], dsrc[3][B * L * E];
  fill_uniform(src, B * L * E, 17, -1, 1);
  fill_uniform(dout, B * L * E, 18, -1, 1);
  int saved = attn_get_num_threads();
  enc e;
  enc_make(&e, 0);
  float *g[3];
  for (int t = 0; t < 3; t++) {
    attn_set_num_threads(t + 1);
    g[t] = enc_step(&e, ATTN_PREC_BF16, src, dout, B, L, out[t], dsrc[t]);
  }
  attn_set_num_threads(saved);
  for (int t = 1; t < 3; t++) {
    CHECK(!memcmp(out[t], out[0], sizeof out[0]));
    CHECK(!memcmp(dsrc[t], dsrc[0], sizeof dsrc[0]));
    CHECK(!memcmp(g[t], g[0], sizeof(float) * (size_t)e.p.numel));
  }
  for (int t = 0; t < 3; t++) free(g[t]);
  attn_params_free(&e.p);
}

int main(void) {
  RUN(test_ffn_bf16_matches_dense_path);
  RUN(test_mha_bf16_matches_projection_path);
  RUN(test_mha_bf16_flash_vs_f32_flash);
  RUN(test_encoder_relu_bf16_vs_f32);
  RUN(test_bf16_same_bits_any_thread_count);
  HARNESS_END();
}
