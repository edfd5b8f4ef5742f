/* Mixed precision: the Linear GEMMs in bf16 / fp16 against f32 (per-dtype
 * tolerances below), the f32 path unchanged bit for bit, an encoder layer
 * forward + backward in each precision, and the dynamic loss scaler's rule
 * (GradScaler's sequence of scales for a pattern of overflows). */
#include "attn/amp.h"
#include "harness.h"
#include "kernels/kern.h"

/* Tolerances, relative to Σ_k |a_k||b_k| of each output (the rounding of
 * each input to the dtype: 2^-9 for bf16's 8-bit significand, 2^-12 for
 * fp16's 11 bits, twice for the two inputs, plus f32 accumulation):
 *   bf16: 2^-7,  fp16: 2^-10.
 * Whole encoder layer (outputs and gradients), relative to the largest
 * |value| of each tensor: bf16 1.5e-2, fp16 2e-3. */
#define TOL_BF16 (1.0 / 128)
#define TOL_F16 (1.0 / 1024)

static double tol_of(attn_precision p) { return p == ATTN_PREC_BF16 ? TOL_BF16 : TOL_F16; }

static void test_precision_names(void) {
  attn_precision p;
  CHECK_OK(attn_precision_from_name("bf16", &p));
  CHECK(p == ATTN_PREC_BF16);
  CHECK_OK(attn_precision_from_name("fp16", &p));
  CHECK(p == ATTN_PREC_F16);
  CHECK_OK(attn_precision_from_name("f32", &p));
  CHECK(p == ATTN_PREC_F32);
  CHECK_ERR(attn_precision_from_name("int4", &p), ATTN_EINVAL);
  CHECK(!strcmp(attn_precision_name(ATTN_PREC_F16), "fp16"));
}

/* C = op(A)·op(B) in each precision and transpose against a double loop
 * with the bound above; the products of the exactly rounded inputs agree to
 * f32 accumulation (checked for fp16 by rounding the inputs first). */
static void test_gemm_prec_vs_f32(void) {
  enum { M = 19, N = 37, K = 70 };
  static float A[K * M], B[K * N], C[M * N];
  fill_uniform(A, K * M, 1, -2, 2);
  fill_uniform(B, K * N, 2, -1, 1);
  for (int pi = 1; pi <= 2; pi++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        attn_precision prec = (attn_precision)pi;
        int64_t lda = ta ? M : K, ldb = tb ? K : N;
        for (int i = 0; i < M * N; i++) C[i] = 1.0f;
        CHECK_OK(attn_gemm_prec_f32in(prec, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.5f, C, N));
        int bad = 0;
        for (int i = 0; i < M && !bad; i++)
          for (int j = 0; j < N; j++) {
            double s = 0.5, mag = 0;
            for (int k = 0; k < K; k++) {
              double a = ta ? A[k * M + i] : A[i * K + k], b = tb ? B[j * K + k] : B[k * N + j];
              s += a * b;
              mag += fabs(a * b);
            }
            if (fabs(C[i * N + j] - s) > tol_of(prec) * mag) {
              printf("  prec %d ta %d tb %d C[%d,%d] = %g want %g\n", pi, ta, tb, i, j,
                     (double)C[i * N + j], s);
              bad = 1;
              break;
            }
          }
        CHECK(!bad);
      }
}

/* fp16 operands beyond 65504 become inf: the overflow the loss scaler sees. */
static void test_gemm_f16_overflow(void) {
  float A[2] = {1e5f, 1.0f}, B[2] = {1.0f, 1.0f}, C[1];
  CHECK_OK(attn_gemm_prec_f32in(ATTN_PREC_F16, 0, 0, 1, 1, 2, 1.0f, A, 2, B, 1, 0.0f, C, 1));
  CHECK(isinf(C[0]));
  CHECK_OK(attn_gemm_prec_f32in(ATTN_PREC_BF16, 0, 0, 1, 1, 2, 1.0f, A, 2, B, 1, 0.0f, C, 1));
  CHECK(isfinite(C[0]) && fabs(C[0] - 100001.0) < 1e3);
}

/* The active level's fp16 conversion (the one the fp16 GEMMs use) gives attn_f32_to_f16's bits for every
 * non-NaN value: ties, subnormals, overflow (65520 -> inf), ±0, ±inf;
 * NaN stays NaN. Lengths not a multiple of 16 (masked tail). */
static void test_f16_conversion_paths(void) {
  enum { N = 4099 };
  static float x[N];
  static uint16_t a[N], b[N];
  fill_uniform(x, N, 21, -1, 1);
  for (int i = 0; i < N; i++) x[i] *= powf(2.0f, (float)(i % 60) - 30.0f);  // 2^-30 .. 2^29
  const float special[] = {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, INFINITY,
                           -INFINITY, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f, 1.0f + 1.0f / 2048,
                           1.0f + 3.0f / 2048, NAN};
  int ns = (int)(sizeof special / sizeof *special);
  for (int i = 0; i < ns; i++) x[i * 7] = special[i];
  attn_f32_to_f16_n(x, a, N);
  int bad = 0;
  void (*cvt)(const float *, uint16_t *, int64_t) = attn_kern_get()->row.f32_to_f16;
  if (cvt != attn_f32_to_f16_n) { /* the active level's conversion (tests/run.sh) */
    for (int n = N; n >= N - 17; n -= 3) {
      memset(b, 0xAB, sizeof b);
      cvt(x, b, n);
      for (int i = 0; i < n; i++) {
        int nan_a = (a[i] & 0x7c00) == 0x7c00 && (a[i] & 0x3ff);
        int nan_b = (b[i] & 0x7c00) == 0x7c00 && (b[i] & 0x3ff);
        bad += isnan(x[i]) ? !(nan_a && nan_b) : a[i] != b[i];
      }
      for (int i = n; i < N; i++) bad += b[i] != 0xABAB;  // nothing written past n
    }
  } else {
    printf("  (level %s: portable conversion only)\n", attn_isa_name(attn_isa_active()));
  }
  CHECK(bad == 0);
  CHECK(a[7 * 4] == 0x7c00 && a[7 * 5] == 0xfc00 && a[7 * 2] == 0x7bff && a[7 * 3] == 0x7bff);
}

/* The f32 ctx path is attn_dense_*_f32 bit for bit (also with ctx NULL). */
static void test_f32_path_unchanged(void) {
  enum { R = 33, I = 48, O = 40 };
  static float x[R * I], W[O * I], b[O], dy[R * O];
  static float y1[R * O], y2[R * O], dx1[R * I], dx2[R * I], dw1[O * I], dw2[O * I], db1[O],
      db2[O];
  fill_uniform(x, R * I, 3, -1, 1);
  fill_uniform(W, O * I, 4, -1, 1);
  fill_uniform(b, O, 5, -1, 1);
  fill_uniform(dy, R * O, 6, -1, 1);
  attn_nn_ctx ctx = {0};
  ctx.training = 1;
  CHECK_OK(attn_dense_forward_f32(x, W, b, y1, R, I, O));
  CHECK_OK(attn_dense_forward_ctx(&ctx, x, W, b, y2, R, I, O));
  CHECK(!memcmp(y1, y2, sizeof y1));
  CHECK_OK(attn_dense_forward_ctx(NULL, x, W, b, y2, R, I, O));
  CHECK(!memcmp(y1, y2, sizeof y1));
  memset(dx1, 0, sizeof dx1), memset(dx2, 0, sizeof dx2);
  memset(dw1, 0, sizeof dw1), memset(dw2, 0, sizeof dw2);
  memset(db1, 0, sizeof db1), memset(db2, 0, sizeof db2);
  CHECK_OK(attn_dense_backward_f32(x, W, dy, dx1, dw1, db1, R, I, O));
  CHECK_OK(attn_dense_backward_ctx(&ctx, x, W, dy, dx2, dw2, db2, R, I, O));
  CHECK(!memcmp(dx1, dx2, sizeof dx1) && !memcmp(dw1, dw2, sizeof dw1) &&
        !memcmp(db1, db2, sizeof db1));
}

/* Linear forward and backward in bf16 / fp16 against f32 with the bound
 * (Σ|a||b| per output); gradients accumulate (+=) like the f32 path. */
static void test_linear_lowp_fwd_bwd(void) {
  enum { R = 21, I = 40, O = 24 };
  attn_params p;
  attn_params_init(&p);
  attn_linear l;
  CHECK_OK(attn_linear_declare(&l, &p, "fc.", I, O, 1));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_linear_init(&l, &p, ATTN_INIT_TORCH, 3));
  static float x[R * I], dy[R * O], y[R * O], dx[R * I];
  fill_uniform(x, R * I, 7, -1, 1);
  fill_uniform(dy, R * O, 8, -1, 1);
  const float *W = attn_params_data(&p, l.weight), *b = attn_params_data(&p, l.bias);
  for (int pi = 1; pi <= 2; pi++) {
    attn_nn_ctx ctx = {0};
    ctx.precision = (attn_precision)pi;
    double tol = tol_of(ctx.precision);
    attn_params_zero_grad(&p);
    for (int i = 0; i < R * I; i++) dx[i] = 1.0f;  // accumulates onto 1
    CHECK_OK(attn_linear_forward_ctx(&l, &p, &ctx, x, y, R));
    CHECK_OK(attn_linear_backward_ctx(&l, &p, &ctx, x, dy, dx, R));
    const float *dW = attn_params_grad(&p, l.weight), *db = attn_params_grad(&p, l.bias);
    int bad = 0;
    for (int r = 0; r < R; r++)
      for (int o = 0; o < O; o++) {
        double s = b[o], mag = 0;
        for (int i = 0; i < I; i++) s += (double)x[r * I + i] * W[o * I + i],
                                   mag += fabs((double)x[r * I + i] * W[o * I + i]);
        bad += fabs(y[r * O + o] - s) > tol * mag + 1e-6;
      }
    for (int r = 0; r < R; r++)
      for (int i = 0; i < I; i++) {
        double s = 1.0, mag = 0;
        for (int o = 0; o < O; o++) s += (double)dy[r * O + o] * W[o * I + i],
                                   mag += fabs((double)dy[r * O + o] * W[o * I + i]);
        bad += fabs(dx[r * I + i] - s) > tol * mag + 1e-6;
      }
    for (int o = 0; o < O; o++) {
      double sb = 0;
      for (int i = 0; i < I; i++) {
        double s = 0, mag = 0;
        for (int r = 0; r < R; r++) s += (double)dy[r * O + o] * x[r * I + i],
                                   mag += fabs((double)dy[r * O + o] * x[r * I + i]);
        bad += fabs(dW[o * I + i] - s) > tol * mag + 1e-6;
      }
      for (int r = 0; r < R; r++) sb += dy[r * O + o];
      bad += fabs(db[o] - sb) > 1e-5;  // the bias gradient is an f32 sum
    }
    if (bad) printf("  precision %s: %d values out of tolerance\n", attn_precision_name(pi), bad);
    CHECK(bad == 0);
  }
  attn_params_free(&p);
}

/* max |got - want| / max |want| */
static double rel_err(const float *got, const float *want, int64_t n) {
  double e = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    e = d > e ? d : e;
    m = fabs(want[i]) > m ? fabs(want[i]) : m;
  }
  return m > 0 ? e / m : e;
}

/* A TransformerEncoderLayer (pre- and post-norm) forward + backward in
 * bf16 / fp16 against f32: output, input gradient and every parameter
 * gradient within bf16 1.5e-2, fp16 2e-3 (relative to each tensor's max). */
static void test_encoder_lowp(void) {
  enum { B = 2, L = 9, E = 32, H = 4, FF = 64 };
  for (int nf = 0; nf < 2; nf++) {
    attn_layer_config c = {E, H, FF, 0.0f, ATTN_ACT_GELU, 1e-5f, nf, 1};
    attn_params p;
    attn_params_init(&p);
    attn_encoder_layer m;
    CHECK_OK(attn_encoder_declare(&m, &p, "enc.", &c));
    CHECK_OK(attn_params_alloc(&p));
    CHECK_OK(attn_encoder_init(&m, &p, ATTN_INIT_TORCH, 11));
    static float src[B * L * E], dout[B * L * E], out[3][B * L * E], dsrc[3][B * L * E];
    fill_uniform(src, B * L * E, 9, -1, 1);
    fill_uniform(dout, B * L * E, 10, -1, 1);
    float *grads[3];
    for (int pi = 0; pi < 3; pi++) {
      attn_nn_ctx ctx = {0};
      ctx.backend = ATTN_BACKEND_MATH;
      ctx.training = 1;
      ctx.precision = (attn_precision)pi;
      attn_encoder_saved s = {0};
      attn_params_zero_grad(&p);
      memset(dsrc[pi], 0, sizeof dsrc[pi]);
      CHECK_OK(attn_encoder_forward(&m, &p, &ctx, &s, src, B, L, NULL, out[pi]));
      CHECK_OK(attn_encoder_backward(&m, &p, &ctx, &s, src, dout, dsrc[pi]));
      grads[pi] = malloc(sizeof(float) * (size_t)p.numel);
      memcpy(grads[pi], p.grad, sizeof(float) * (size_t)p.numel);
      attn_encoder_saved_free(&s);
    }
    for (int pi = 1; pi < 3; pi++) {
      double tol = pi == ATTN_PREC_BF16 ? 1.5e-2 : 2e-3;
      double eo = rel_err(out[pi], out[0], B * L * E), ed = rel_err(dsrc[pi], dsrc[0], B * L * E);
      double eg = 0;
      for (int v = 0; v < p.count; v++) {
        int64_t off = p.views[v].offset;
        double e = rel_err(grads[pi] + off, grads[0] + off, p.views[v].numel);
        if (e > tol) printf("  %s %s grad rel err %.3g\n", attn_precision_name(pi),
                            p.views[v].name, e);
        eg = e > eg ? e : eg;
      }
      printf("  norm_first %d %s: out %.2e dsrc %.2e grads %.2e\n", nf, attn_precision_name(pi),
             eo, ed, eg);
      CHECK(eo < tol && ed < tol && eg < tol);
      CHECK(eo > 0);  // it did run in low precision
    }
    for (int pi = 0; pi < 3; pi++) free(grads[pi]);
    attn_params_free(&p);
  }
}

/* A TransformerDecoderLayer (self + cross attention) in bf16 / fp16 against
 * f32, same tolerances as the encoder: out, dtgt, dmemory, every gradient
 * (GELU: see below). */
static void test_decoder_lowp(void) {
  enum { B = 2, L = 6, LM = 9, E = 32, H = 4, FF = 48 };
  // GELU: with ReLU a pre-activation near 0 that changes sign under bf16
  // rounding switches a unit's gradient on or off (linear1 grads off by ~9%)
  attn_layer_config c = {E, H, FF, 0.0f, ATTN_ACT_GELU, 1e-5f, 0, 1};
  attn_params p;
  attn_params_init(&p);
  attn_decoder_layer m;
  CHECK_OK(attn_decoder_declare(&m, &p, "dec.", &c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_decoder_init(&m, &p, ATTN_INIT_TORCH, 17));
  static float tgt[B * L * E], mem[B * LM * E], dout[B * L * E];
  static float out[3][B * L * E], dtgt[3][B * L * E], dmem[3][B * LM * E];
  fill_uniform(tgt, B * L * E, 18, -1, 1);
  fill_uniform(mem, B * LM * E, 19, -1, 1);
  fill_uniform(dout, B * L * E, 20, -1, 1);
  attn_mha_masks causal = {0};
  causal.causal = 1;
  float *grads[3];
  for (int pi = 0; pi < 3; pi++) {
    attn_nn_ctx ctx = {0};
    ctx.backend = ATTN_BACKEND_MATH;
    ctx.precision = (attn_precision)pi;
    attn_decoder_saved s = {0};
    attn_params_zero_grad(&p);
    memset(dtgt[pi], 0, sizeof dtgt[pi]);
    memset(dmem[pi], 0, sizeof dmem[pi]);
    CHECK_OK(attn_decoder_forward(&m, &p, &ctx, &s, tgt, mem, B, L, LM, &causal, NULL, out[pi]));
    CHECK_OK(attn_decoder_backward(&m, &p, &ctx, &s, tgt, mem, dout, dtgt[pi], dmem[pi]));
    grads[pi] = malloc(sizeof(float) * (size_t)p.numel);
    if (grads[pi]) memcpy(grads[pi], p.grad, sizeof(float) * (size_t)p.numel);
    attn_decoder_saved_free(&s);
  }
  for (int pi = 1; pi < 3 && grads[0] && grads[pi]; pi++) {
    double tol = pi == ATTN_PREC_BF16 ? 1.5e-2 : 2e-3, eg = 0;
    for (int v = 0; v < p.count; v++) {
      int64_t off = p.views[v].offset;
      double e = rel_err(grads[pi] + off, grads[0] + off, p.views[v].numel);
      if (e > tol) printf("  %s %s grad rel err %.3g\n", attn_precision_name((attn_precision)pi),
                          p.views[v].name, e);
      eg = e > eg ? e : eg;
    }
    double eo = rel_err(out[pi], out[0], B * L * E), et = rel_err(dtgt[pi], dtgt[0], B * L * E);
    double em = rel_err(dmem[pi], dmem[0], B * LM * E);
    printf("  decoder %s: out %.2e dtgt %.2e dmemory %.2e grads %.2e\n",
           attn_precision_name((attn_precision)pi), eo, et, em, eg);
    CHECK(eo < tol && et < tol && em < tol && eg < tol && eo > 0);
  }
  for (int pi = 0; pi < 3; pi++) free(grads[pi]);
  attn_params_free(&p);
}

/* GradScaler's rule, hand-worked with init 8, growth 2, backoff 0.5,
 * interval 3 (torch's _amp_update_scale_):
 *   ok ok ok  -> 16 (3 good steps)     inf -> 8     ok -> 8
 *   inf -> 4   inf -> 2   ok ok ok -> 4   ok ok -> 4   ok -> 8 */
static void test_loss_scaler_rule(void) {
  attn_loss_scaler s;
  CHECK_OK(attn_loss_scaler_config(&s, 8.0f, 2.0f, 0.5f, 3));
  const int inf[] = {0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0};
  const float want[] = {8, 8, 16, 8, 8, 4, 2, 2, 2, 4, 4, 4, 8};
  int n = (int)(sizeof inf / sizeof *inf), ok = 1;
  for (int i = 0; i < n; i++) {
    attn_loss_scaler_update(&s, inf[i]);
    if (s.scale != want[i]) {
      printf("  after update %d: scale %g want %g\n", i, (double)s.scale, (double)want[i]);
      ok = 0;
    }
  }
  CHECK(ok);
  CHECK(s.skipped == 3 && s.steps == n);
  // torch defaults
  attn_loss_scaler d;
  attn_loss_scaler_init(&d, 1);
  CHECK(d.scale == 65536.0f && d.growth_factor == 2.0f && d.backoff_factor == 0.5f &&
        d.growth_interval == 2000);
  for (int i = 0; i < 1999; i++) attn_loss_scaler_update(&d, 0);
  CHECK(d.scale == 65536.0f);
  attn_loss_scaler_update(&d, 0);
  CHECK(d.scale == 131072.0f && d.growth_tracker == 0);
  // growth that would overflow keeps the scale
  CHECK_OK(attn_loss_scaler_config(&s, 3e38f, 2.0f, 0.5f, 1));
  attn_loss_scaler_update(&s, 0);
  CHECK(s.scale == 3e38f);
  // disabled: scale 1, never skips
  attn_loss_scaler_init(&d, 0);
  attn_loss_scaler_update(&d, 1);
  CHECK(d.scale == 1.0f && d.skipped == 0);
  CHECK_ERR(attn_loss_scaler_config(&s, 0.0f, 2.0f, 0.5f, 1), ATTN_EINVAL);
  CHECK_ERR(attn_loss_scaler_config(&s, 1.0f, 1.0f, 0.5f, 1), ATTN_EINVAL);
  CHECK_ERR(attn_loss_scaler_config(&s, 1.0f, 2.0f, 1.0f, 1), ATTN_EINVAL);
  CHECK_ERR(attn_loss_scaler_config(&s, 1.0f, 2.0f, 0.5f, 0), ATTN_EINVAL);
}

/* unscale divides every gradient by the scale and reports inf/NaN. */
static void test_loss_scaler_unscale(void) {
  attn_params p;
  attn_params_init(&p);
  int64_t s3 = 3, s2 = 2;
  int a, b;
  CHECK_OK(attn_params_declare(&p, "a", 1, &s3, &a));
  CHECK_OK(attn_params_declare(&p, "b", 1, &s2, &b));
  CHECK_OK(attn_params_alloc(&p));
  attn_loss_scaler s;
  attn_loss_scaler_init(&s, 1);
  float g[3] = {1.0f, -2.0f, 0.25f};
  CHECK_OK(attn_loss_scaler_scale_f32(&s, g, 3));
  CHECK(g[0] == 65536.0f && g[1] == -131072.0f);
  memcpy(attn_params_grad(&p, a), g, sizeof g);
  attn_params_grad(&p, b)[0] = 65536.0f * 3;
  int found = -1;
  CHECK_OK(attn_loss_scaler_unscale(&s, &p, &found));
  CHECK(found == 0);
  CHECK(attn_params_grad(&p, a)[0] == 1.0f && attn_params_grad(&p, a)[1] == -2.0f &&
        attn_params_grad(&p, a)[2] == 0.25f && attn_params_grad(&p, b)[0] == 3.0f);
  attn_params_grad(&p, b)[1] = INFINITY;
  CHECK_OK(attn_loss_scaler_unscale(&s, &p, &found));
  CHECK(found == 1);
  attn_params_grad(&p, b)[1] = NAN;
  CHECK_OK(attn_loss_scaler_unscale(&s, &p, &found));
  CHECK(found == 1);
  CHECK_ERR(attn_loss_scaler_unscale(&s, &p, NULL), ATTN_EINVAL);
  attn_params_free(&p);
}

/* fp16 training step on a Linear with a huge loss gradient: the scaled
 * gradient overflows fp16, the step is skipped and the scale halves; after
 * backing off the same step goes through. */
static void test_fp16_overflow_skips(void) {
  enum { R = 4, I = 8, O = 4 };
  attn_params p;
  attn_params_init(&p);
  attn_linear l;
  CHECK_OK(attn_linear_declare(&l, &p, "fc.", I, O, 1));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_linear_init(&l, &p, ATTN_INIT_TORCH, 5));
  float x[R * I], y[R * O], dy[R * O];
  fill_uniform(x, R * I, 12, -1, 1);
  attn_nn_ctx ctx = {0};
  ctx.precision = ATTN_PREC_F16;
  attn_loss_scaler s;
  CHECK_OK(attn_loss_scaler_config(&s, 65536.0f, 2.0f, 0.5f, 2000));
  int skipped_then_ok = 0;
  for (int it = 0; it < 4; it++) {
    CHECK_OK(attn_linear_forward_ctx(&l, &p, &ctx, x, y, R));
    // 1.5 * 65536 > 65504 overflows fp16, 1.5 * 32768 does not
    for (int i = 0; i < R * O; i++) dy[i] = 1.5f;
    CHECK_OK(attn_loss_scaler_scale_f32(&s, dy, R * O));
    attn_params_zero_grad(&p);
    CHECK_OK(attn_linear_backward_ctx(&l, &p, &ctx, x, dy, NULL, R));
    int found;
    CHECK_OK(attn_loss_scaler_unscale(&s, &p, &found));
    if (it == 0) CHECK(found == 1);
    if (it == 1 && !found) skipped_then_ok = 1;
    attn_loss_scaler_update(&s, found);
  }
  CHECK(skipped_then_ok);
  CHECK(s.skipped == 1 && s.scale == 32768.0f);
  attn_params_free(&p);
}

/* bf16 / fp16 Linears give the same bits for 1 and 2 threads; bad
 * arguments are refused by name. */
static void test_lowp_threads_and_errors(void) {
  enum { R = 130, I = 96, O = 72 };
  static float x[R * I], W[O * I], y1[R * O], y2[R * O];
  fill_uniform(x, R * I, 13, -1, 1);
  fill_uniform(W, O * I, 14, -1, 1);
  int nt = attn_get_num_threads();
  for (int pi = 1; pi <= 2; pi++) {
    attn_nn_ctx ctx = {0};
    ctx.precision = (attn_precision)pi;
    attn_set_num_threads(1);
    CHECK_OK(attn_dense_forward_ctx(&ctx, x, W, NULL, y1, R, I, O));
    attn_set_num_threads(2);
    CHECK_OK(attn_dense_forward_ctx(&ctx, x, W, NULL, y2, R, I, O));
    CHECK(!memcmp(y1, y2, sizeof y1));
  }
  attn_set_num_threads(nt);
  attn_nn_ctx ctx = {0};
  ctx.precision = ATTN_PREC_BF16;
  CHECK_ERR(attn_dense_forward_ctx(&ctx, NULL, W, NULL, y1, R, I, O), ATTN_EINVAL);
  CHECK_ERR(attn_dense_forward_ctx(&ctx, x, W, NULL, y1, -1, I, O), ATTN_EINVAL);
  CHECK_ERR(attn_dense_backward_ctx(&ctx, x, W, y1, NULL, NULL, NULL, R, I, O), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_prec_f32in((attn_precision)7, 0, 0, 1, 1, 1, 1.0f, x, 1, W, 1, 0.0f, y1, 1),
            ATTN_EINVAL);
  CHECK_ERR(attn_gemm_prec_f32in(ATTN_PREC_F16, 0, 0, 2, 2, 4, 1.0f, x, 3, W, 2, 0.0f, y1, 2),
            ATTN_EINVAL);  // lda < K
}

int main(void) {
  RUN(test_precision_names);
  RUN(test_gemm_prec_vs_f32);
  RUN(test_gemm_f16_overflow);
  RUN(test_f16_conversion_paths);
  RUN(test_f32_path_unchanged);
  RUN(test_linear_lowp_fwd_bwd);
  RUN(test_encoder_lowp);
  RUN(test_decoder_lowp);
  RUN(test_loss_scaler_rule);
  RUN(test_loss_scaler_unscale);
  RUN(test_fp16_overflow_skips);
  RUN(test_lowp_threads_and_errors);
  HARNESS_END();
}
