/* Linear (and the dense maths under every projection): y = x Wᵀ + b. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "nn/nn_internal.h"

static attn_status dense_check(const char *fn, const float *x, const float *W, const void *y,
                               int64_t rows, int64_t in, int64_t out) {
  if (rows < 0 || in <= 0 || out <= 0)
    return attn_set_error(ATTN_EINVAL, "%s: bad sizes rows=%lld in=%lld out=%lld", fn,
                          (long long)rows, (long long)in, (long long)out);
  if ((!x && rows) || !W || (!y && rows))
    return attn_set_error(ATTN_EINVAL, "%s: NULL x, W or output", fn);
  return ATTN_OK;
}

/* Columns of db per thread task: a fixed width, so the sums never depend on
 * the thread count; narrow enough that a 128- to 512-wide projection's bias
 * still splits across the threads (a dy row's slice is 256 bytes). */
enum { BIAS_COLS = 64 };

void attn_nn_bias_rows(float *y, const float *b, int64_t rows, int64_t out) {
#pragma omp parallel for num_threads(attn_nn_pass_threads(rows * out)) schedule(static)
  for (int64_t r = 0; r < rows; r++) memcpy(y + r * out, b, sizeof(float) * (size_t)out);
}

void attn_nn_bias_grad(float *restrict db, const float *restrict dy, int64_t rows, int64_t out) {
  /* by blocks of BIAS_COLS columns, one thread each, row by row: each db[o]
   * sums dy[r][o] in r order (vectorised across o) */
  int64_t nb = (out + BIAS_COLS - 1) / BIAS_COLS;
#pragma omp parallel for num_threads(attn_nn_pass_threads(rows * out)) schedule(static)
  for (int64_t cb = 0; cb < nb; cb++) {
    int64_t o0 = cb * BIAS_COLS, o1 = o0 + BIAS_COLS < out ? o0 + BIAS_COLS : out;
    for (int64_t r = 0; r < rows; r++) {
      const float *restrict y = dy + r * out;
#pragma omp simd
      for (int64_t o = o0; o < o1; o++) db[o] += y[o];
    }
  }
}

attn_status attn_dense_forward_f32(const float *x, const float *W, const float *b, float *y,
                                   int64_t rows, int64_t in, int64_t out) {
  attn_status st = dense_check("dense_forward", x, W, y, rows, in, out);
  if (st || rows == 0) return st;
  if (b) attn_nn_bias_rows(y, b, rows, out);
  // y [rows, out] (+)= x [rows, in] · W[out, in]ᵀ
  return attn_gemm_f32(0, 1, rows, out, in, 1.0f, x, in, W, in, b ? 1.0f : 0.0f, y, out);
}

attn_status attn_dense_backward_f32(const float *x, const float *W, const float *dy, float *dx,
                                    float *dW, float *db, int64_t rows, int64_t in, int64_t out) {
  return attn_nn_dense_backward_f32(x, W, dy, dx, 0, dW, db, rows, in, out);
}

attn_status attn_nn_dense_backward_f32(const float *x, const float *W, const float *dy, float *dx,
                                       int dx_set, float *dW, float *db, int64_t rows,
                                       int64_t in, int64_t out) {
  attn_status st = dense_check("dense_backward", x, W, dy, rows, in, out);
  if (st) return st;
  if (!dW) return attn_set_error(ATTN_EINVAL, "dense_backward: NULL dW");
  if (rows == 0) return ATTN_OK;
  if (dx) {  // dx [rows, in] (+)= dy [rows, out] · W [out, in]
    st = attn_gemm_f32(0, 0, rows, in, out, 1.0f, dy, out, W, in, dx_set ? 0.0f : 1.0f, dx, in);
    if (st) return st;
  }
  // dW [out, in] += dyᵀ · x
  st = attn_gemm_f32(1, 0, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dW, in);
  if (st) return st;
  if (db) attn_nn_bias_grad(db, dy, rows, out);
  return ATTN_OK;
}

attn_status attn_linear_declare(attn_linear *m, attn_params *p, const char *prefix, int64_t in,
                                int64_t out, int bias) {
  if (!m || !p || !prefix) return attn_set_error(ATTN_EINVAL, "linear_declare: NULL argument");
  if (in <= 0 || out <= 0)
    return attn_set_error(ATTN_EINVAL, "linear '%s': in=%lld out=%lld must be positive", prefix,
                          (long long)in, (long long)out);
  char name[ATTN_PARAM_NAME_MAX];
  m->in = in;
  m->out = out;
  m->bias = -1;
  int64_t ws[2] = {out, in};
  attn_status st = attn_nn_name(name, prefix, "weight");
  if (!st) st = attn_params_declare(p, name, 2, ws, &m->weight);
  if (!st && bias) {
    st = attn_nn_name(name, prefix, "bias");
    if (!st) st = attn_params_declare(p, name, 1, &out, &m->bias);
  }
  return st;
}

attn_status attn_linear_init(const attn_linear *m, attn_params *p, attn_init kind, uint64_t seed) {
  float bound = (float)(1.0 / sqrt((double)m->in));
  attn_status st = kind == ATTN_INIT_XAVIER ? attn_init_xavier(p, m->weight, seed)
                                            : attn_init_uniform(p, m->weight, bound, seed);
  if (st || m->bias < 0) return st;
  return kind == ATTN_INIT_XAVIER ? attn_init_const(p, m->bias, 0.0f)
                                  : attn_init_uniform(p, m->bias, bound, seed);
}

attn_status attn_linear_forward(const attn_linear *m, const attn_params *p, const float *x,
                                float *y, int64_t rows) {
  if (!m || !p || !p->data) return attn_set_error(ATTN_EINVAL, "linear_forward: NULL module");
  return attn_dense_forward_f32(x, attn_params_data(p, m->weight),
                                m->bias >= 0 ? attn_params_data(p, m->bias) : NULL, y, rows,
                                m->in, m->out);
}

attn_status attn_linear_backward(const attn_linear *m, attn_params *p, const float *x,
                                 const float *dy, float *dx, int64_t rows) {
  if (!m || !p || !p->grad) return attn_set_error(ATTN_EINVAL, "linear_backward: NULL module");
  return attn_dense_backward_f32(x, attn_params_data(p, m->weight), dy, dx,
                                 attn_params_grad(p, m->weight),
                                 m->bias >= 0 ? attn_params_grad(p, m->bias) : NULL, rows, m->in,
                                 m->out);
}
