/* Dynamic int8 quantization, the quantized Linear and fake quantization
 * (include/attn/lowp.h).
 * Tolerances: the quantized Linear equals the dequantized maths
 *   y = sx (sw (acc - zx colsum)) + b  computed in double from the same
 *   integers within 4 f32 ulps of |y| + |b| (two roundings in the epilogue);
 * against the f32 Linear it is within the quantization error bound
 *   |dy_ij| <= sum_k (|x_ik| sw_j/2 + |w_jk| sx_i/2 + sx_i sw_j/4) + f32 slack
 * (each weight within sw/2 of its grid point, each activation within sx/2). */
#include <stdint.h>

#include "harness.h"
#include "kernels/rows/elementwise_internal.h"

static const attn_lowp_path PATHS[] = {ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX};

static void test_weight_quantization(void) {
  /* row 0: max 2.54 -> scale 0.02; 1.01/0.02 = 50.5 -> 50 (even), -2.54 -> -127 */
  float W[3 * 4] = {2.54f, 1.01f, -2.54f, 0.0f, 0, 0, 0, 0, -1.0f, 0.5f, 0.25f, 0.004f};
  int8_t q[12];
  float s[3];
  CHECK_OK(attn_quantize_weights_s8(W, 3, 4, q, s));
  CHECK(fabsf(s[0] - 2.54f / 127) == 0 && s[1] == 0 && s[2] == 1.0f / 127);
  CHECK(q[0] == 127 && q[2] == -127 && q[3] == 0);
  CHECK(q[1] == (int8_t)nearbyintf(1.01f / s[0]));
  CHECK(q[4] == 0 && q[5] == 0 && q[6] == 0 && q[7] == 0); /* zero row */
  CHECK(q[8] == -127 && q[9] == 64 && q[10] == 32 && q[11] == 1); /* 63.5 -> 64, 0.508 -> 1 */
  float bad[2] = {1, NAN};
  CHECK_ERR(attn_quantize_weights_s8(bad, 1, 2, q, s), ATTN_ENUMERIC);
  CHECK_ERR(attn_quantize_weights_s8(W, -1, 2, q, s), ATTN_EINVAL);
  CHECK_ERR(attn_quantize_weights_s8(W, 1, 2, NULL, s), ATTN_EINVAL);
}

static void test_row_quantization(void) {
  enum { R = 5, N = 300 };
  float x[R * N];
  fill_uniform(x, R * N, 1, -1.0f, 3.0f);              /* mixed signs */
  for (int k = 0; k < N; k++) x[1 * N + k] = 0.5f + (float)k; /* all positive: zero 0 */
  for (int k = 0; k < N; k++) x[2 * N + k] = -0.25f * (float)(k + 1); /* all negative: zero 255 */
  for (int k = 0; k < N; k++) x[3 * N + k] = 0.0f;      /* zeros: scale 0 */
  x[4 * N] = 1e-30f;                                    /* tiny */
  for (int k = 1; k < N; k++) x[4 * N + k] = 0;
  uint8_t q[R * N];
  float s[R];
  int32_t z[R];
  CHECK_OK(attn_quantize_rows_u8(x, R, N, q, s, z));
  CHECK(z[1] == 0 && z[2] == 255 && s[3] == 0 && z[3] == 0 && q[3 * N + 7] == 0);
  for (int r = 0; r < R; r++) {
    if (s[r] == 0) continue;
    double maxerr = 0;
    for (int k = 0; k < N; k++) {
      double e = fabs((double)x[r * N + k] - (double)s[r] * (q[r * N + k] - z[r]));
      maxerr = e > maxerr ? e : maxerr;
    }
    CHECK(maxerr <= 0.5001 * s[r]); /* every value within half a step */
  }
  float inf[2] = {INFINITY, 1};
  CHECK_ERR(attn_quantize_rows_u8(inf, 1, 2, q, s, z), ATTN_ENUMERIC);
  CHECK_ERR(attn_quantize_rows_u8(x, 1, 2, q, NULL, z), ATTN_EINVAL);
  float sc;
  int32_t zp;
  CHECK_OK(attn_quant_params_u8(-1.0f, 3.0f, &sc, &zp));
  CHECK(sc == 4.0f / 255 && zp == 64); /* 63.75 -> 64 */
}

/* y = quantized Linear on every path: equal bits on all paths, equal to the
 * dequantized maths, within the error bound of the f32 Linear. */
static int qlinear_case(int64_t rows, int64_t in, int64_t out, int with_bias, unsigned seed) {
  float *x = malloc(sizeof(float) * (size_t)(rows * in)), *W = malloc(sizeof(float) * (size_t)(out * in));
  float *b = malloc(sizeof(float) * (size_t)out), *y = malloc(sizeof(float) * (size_t)(rows * out));
  float *y0 = malloc(sizeof(float) * (size_t)(rows * out)), *yf = malloc(sizeof(float) * (size_t)(rows * out));
  fill_uniform(x, (long)(rows * in), seed, -2.0f, 1.0f);
  fill_uniform(W, (long)(out * in), seed + 1, -0.5f, 0.5f);
  fill_uniform(b, (long)out, seed + 2, -1.0f, 1.0f);
  attn_qlinear q;
  int ok = attn_qlinear_quantize(&q, W, with_bias ? b : NULL, out, in) == ATTN_OK;
  ok = ok && attn_dense_forward_f32(x, W, with_bias ? b : NULL, yf, rows, in, out) == ATTN_OK;
  int first = 1;
  for (int pi = 0; pi < 3 && ok; pi++) {
    if (!attn_lowp_path_available(PATHS[pi], "i8")) continue;
    ok = attn_qlinear_forward_path(PATHS[pi], &q, x, rows, first ? y0 : y) == ATTN_OK;
    if (ok && !first && memcmp(y, y0, sizeof(float) * (size_t)(rows * out))) {
      printf("  path %s differs from the portable path\n", attn_lowp_path_name(PATHS[pi], "i8"));
      ok = 0;
    }
    first = 0;
  }
  uint8_t *xq = malloc((size_t)(rows * in));
  float *sx = malloc(sizeof(float) * (size_t)rows);
  int32_t *zx = malloc(sizeof(int32_t) * (size_t)rows);
  ok = ok && attn_quantize_rows_u8(x, rows, in, xq, sx, zx) == ATTN_OK;
  for (int64_t i = 0; i < rows && ok; i++)
    for (int64_t j = 0; j < out && ok; j++) {
      int64_t acc = 0;
      double ax = 0, aw = 0;
      for (int64_t k = 0; k < in; k++) {
        acc += (int64_t)(xq[i * in + k] - zx[i]) * q.w[j * in + k];
        ax += fabs(x[i * in + k]);
        aw += fabs(W[j * in + k]);
      }
      double bj = with_bias ? b[j] : 0.0;
      double deq = (double)sx[i] * q.scale[j] * (double)acc + bj;
      double got = y0[i * out + j];
      double tol_deq = 4 * ldexp(1, -24) * (fabs(deq) + fabs(bj)) + 1e-30;
      double bound = ax * q.scale[j] / 2 + aw * sx[i] / 2 + (double)in * sx[i] * q.scale[j] / 4;
      double tol_f32 = bound * 1.001 + 1e-5 * (ax + fabs(bj));
      if (!(fabs(got - deq) <= tol_deq) || !(fabs(got - yf[i * out + j]) <= tol_f32)) {
        printf("  y[%lld,%lld] = %.9g: dequantized %.9g (tol %.3g), f32 %.9g (bound %.3g)\n",
               (long long)i, (long long)j, got, deq, tol_deq, (double)yf[i * out + j], tol_f32);
        ok = 0;
      }
    }
  if (!ok) printf("  (rows=%lld in=%lld out=%lld bias=%d)\n", (long long)rows, (long long)in,
                  (long long)out, with_bias);
  attn_qlinear_free(&q);
  free(x), free(W), free(b), free(y), free(y0), free(yf), free(xq), free(sx), free(zx);
  return ok;
}

static void test_qlinear_matches_dequantized_maths_on_all_paths(void) {
  static const int64_t S[][3] = {{1, 1, 1},   {3, 17, 31},  {17, 33, 65}, {31, 64, 129},
                                 {65, 129, 33}, {129, 3, 64}, {33, 100, 7}, {64, 1000, 40}};
  for (size_t i = 0; i < sizeof S / sizeof S[0]; i++)
    CHECK(qlinear_case(S[i][0], S[i][1], S[i][2], (int)(i % 2), (unsigned)i));
}

static void test_qlinear_threads_and_size(void) {
  const int64_t rows = 300, in = 256, out = 200;
  float *x = malloc(sizeof(float) * rows * in), *W = malloc(sizeof(float) * out * in);
  float *y1 = malloc(sizeof(float) * rows * out), *y2 = malloc(sizeof(float) * rows * out);
  fill_uniform(x, rows * in, 3, -1, 1);
  fill_uniform(W, out * in, 4, -1, 1);
  attn_qlinear q;
  CHECK_OK(attn_qlinear_quantize(&q, W, NULL, out, in));
  CHECK(attn_qlinear_bytes(&q) == out * in + out * 8); /* ~4x smaller than f32 */
  int saved = attn_get_num_threads();
  attn_set_num_threads(1);
  CHECK_OK(attn_qlinear_forward(&q, x, rows, y1));
  attn_set_num_threads(2);
  CHECK_OK(attn_qlinear_forward(&q, x, rows, y2));
  CHECK(!memcmp(y1, y2, sizeof(float) * rows * out));
  attn_set_num_threads(saved);
  CHECK_OK(attn_qlinear_forward(&q, x, 0, NULL));
  CHECK_ERR(attn_qlinear_forward(&q, NULL, 2, y1), ATTN_EINVAL);
  CHECK_ERR(attn_qlinear_forward(&q, x, -1, y1), ATTN_EINVAL);
  x[5] = NAN;
  CHECK_ERR(attn_qlinear_forward(&q, x, 2, y1), ATTN_ENUMERIC);
  attn_qlinear_free(&q);
  attn_qlinear_free(&q); /* twice is fine */
  CHECK_ERR(attn_qlinear_forward(&q, x, 2, y1), ATTN_EINVAL);
  CHECK_ERR(attn_qlinear_quantize(&q, W, NULL, 0, in), ATTN_EINVAL);
  CHECK_ERR(attn_qlinear_quantize(&q, NULL, NULL, 2, in), ATTN_EINVAL);
  free(x), free(W), free(y1), free(y2);
}

static void test_fake_quant_per_tensor_and_ste(void) {
  /* scale 0.5, zero 10, range [0, 20]: q = round(x/0.5) + 10 */
  float x[7] = {0.0f, 0.26f, -5.0f, 5.0f, -5.3f, 5.3f, 0.25f};
  float y[7], dy[7] = {1, 2, 3, 4, 5, 6, 7}, dx[7];
  uint8_t m[7];
  CHECK_OK(attn_fake_quant_per_tensor_f32(x, y, m, 7, 0.5f, 10, 0, 20));
  CHECK(y[0] == 0 && y[1] == 0.5f && y[2] == -5.0f && y[3] == 5.0f);
  CHECK(y[4] == -5.0f && y[5] == 5.0f && y[6] == 0.0f); /* clipped; 0.5 -> 0 (even) */
  CHECK(m[0] && m[1] && m[2] && m[3] && !m[4] && !m[5] && m[6]);
  CHECK_OK(attn_fake_quant_backward_f32(dy, m, dx, 7));
  CHECK(dx[0] == 1 && dx[3] == 4 && dx[4] == 0 && dx[5] == 0 && dx[6] == 7);
  CHECK_ERR(attn_fake_quant_per_tensor_f32(x, y, m, 7, 0.0f, 0, 0, 255), ATTN_EINVAL);
  CHECK_ERR(attn_fake_quant_per_tensor_f32(x, y, m, 7, 1.0f, 0, 5, 4), ATTN_EINVAL);
  CHECK_ERR(attn_fake_quant_backward_f32(dy, NULL, dx, 7), ATTN_EINVAL);
}

/* Per channel with the weight scales: equals dequantized int8 weights. */
static void test_fake_quant_per_channel_matches_weight_quantization(void) {
  enum { R = 6, N = 37 };
  float w[R * N], y[R * N], s[R];
  int8_t q[R * N];
  uint8_t m[R * N];
  fill_uniform(w, R * N, 8, -3, 2);
  for (int k = 0; k < N; k++) w[2 * N + k] = 0; /* an all-zero channel */
  CHECK_OK(attn_quant_scales_per_channel_f32(w, R, N, s));
  CHECK_OK(attn_quantize_weights_s8(w, R, N, q, s));
  CHECK_OK(attn_fake_quant_per_channel_f32(w, y, m, R, N, s, -127, 127));
  int same = 1, all_in = 1;
  for (int i = 0; i < R * N; i++) {
    same &= y[i] == (float)q[i] * s[i / N];
    all_in &= m[i] == 1;
  }
  CHECK(same && all_in);
  /* a narrower range clips the largest weights, and the mask says so */
  CHECK_OK(attn_fake_quant_per_channel_f32(w, y, m, R, N, s, -63, 63));
  int clipped = 0, consistent = 1;
  for (int i = 0; i < R * N; i++) {
    clipped += !m[i];
    consistent &= m[i] ? y[i] == (float)q[i] * s[i / N] : fabsf(y[i]) == 63 * s[i / N];
  }
  CHECK(clipped > 0 && consistent);
  float bad_s[R] = {1, 1, -1, 1, 1, 1};
  CHECK_ERR(attn_fake_quant_per_channel_f32(w, y, m, R, N, bad_s, -127, 127), ATTN_EINVAL);
}

/* The active level's row quantizer and dequantizer give the scalar code's
 * bits, ties (x / s = k + 1/2) and clamped values included. */
static void test_simd_quantize_matches_scalar(void) {
  const attn_row_ops *L = &attn_kern_get()->row;
  if (L->quantize_row_u8 == attn_quantize_row_u8_generic &&
      L->dequant_row == attn_dequant_row_generic) {
    SKIP("level %s runs the scalar code", attn_isa_name(attn_isa_active()));
    return;
  }
  enum { N = 1037 };
  float x[N], s = 0.01f;
  fill_uniform(x, N, 21, -1.5f, 1.5f);
  for (int k = 0; k < 200; k++) x[k] = ((float)(k - 100) + 0.5f) * s; /* ties */
  uint8_t q1[N], q2[N];
  for (int32_t z = 0; z <= 255; z += 51) {
    attn_quantize_row_u8_generic(x, N, s, z, q1);
    L->quantize_row_u8(x, N, s, z, q2);
    CHECK(!memcmp(q1, q2, N));
  }
  int32_t acc[N], cs[N];
  float sw[N], b[N], y1[N], y2[N];
  unsigned r = 3;
  for (int j = 0; j < N; j++) {
    r = r * 1664525u + 1013904223u;
    acc[j] = (int32_t)(r >> 4) - (1 << 27);
    cs[j] = (int32_t)(r % 20000u) - 10000;
  }
  fill_uniform(sw, N, 22, 0.001f, 0.01f);
  fill_uniform(b, N, 23, -1, 1);
  for (int wb = 0; wb < 2; wb++) {
    attn_dequant_row_generic(acc, N, 0.0123f, 77, sw, cs, wb ? b : NULL, y1);
    L->dequant_row(acc, N, 0.0123f, 77, sw, cs, wb ? b : NULL, y2);
    CHECK(!memcmp(y1, y2, sizeof y1));
  }
}

int main(void) {
  RUN(test_simd_quantize_matches_scalar);
  RUN(test_weight_quantization);
  RUN(test_row_quantization);
  RUN(test_qlinear_matches_dequantized_maths_on_all_paths);
  RUN(test_qlinear_threads_and_size);
  RUN(test_fake_quant_per_tensor_and_ste);
  RUN(test_fake_quant_per_channel_matches_weight_quantization);
  HARNESS_END();
}
