/* The dense maths under ctx: Linear GEMMs in bf16 / fp16 (f32 accumulation,
 * f32 weights and gradients), QAT fake quantization with a straight-through
 * backward, or int8 Linears for inference. Without any of those it is
 * exactly attn_dense_forward_f32 / attn_dense_backward_f32. */
#include <stdlib.h>
#include <string.h>

#include "attn/amp.h"
#include "nn/nn_internal.h"
#include "nn/quant_internal.h"

static int plain(const attn_nn_ctx *ctx) {
  return !ctx || (ctx->precision == ATTN_PREC_F32 && !ctx->qat && !ctx->qlinears);
}

static attn_status check(const char *fn, const float *x, const float *W, const void *y,
                         int64_t rows, int64_t in, int64_t out) {
  if (rows < 0 || in <= 0 || out <= 0)
    return attn_set_error(ATTN_EINVAL, "%s: bad sizes rows=%lld in=%lld out=%lld", fn,
                          (long long)rows, (long long)in, (long long)out);
  if ((!x && rows) || !W || (!y && rows))
    return attn_set_error(ATTN_EINVAL, "%s: NULL x, W or output", fn);
  return ATTN_OK;
}

attn_status attn_dense_forward_ctx(const attn_nn_ctx *ctx, const float *x, const float *W,
                                   const float *b, float *y, int64_t rows, int64_t in,
                                   int64_t out) {
  if (plain(ctx)) return attn_dense_forward_f32(x, W, b, y, rows, in, out);
  attn_status st = check("dense_forward", x, W, y, rows, in, out);
  if (st || rows == 0) return st;
  if (ctx->qlinears) {
    const attn_qlinear *q = attn_qlinear_set_find(ctx->qlinears, W, out, in);
    if (q) return attn_qlinear_forward(q, x, rows, y);
  }
  const float *xa = x, *Wa = W;
  float *xq = NULL, *wq = NULL;
  if (ctx->qat) {
    xq = attn_nn_scratch(rows * in);
    wq = attn_nn_scratch(out * in);
    st = (!xq || !wq) ? ATTN_ENOMEM
                      : attn_nn_qat_apply(ctx->qat, 1, ctx->training, W, x, rows, in, out, xq, NULL,
                                     wq, NULL);
    xa = xq, Wa = wq;
  }
  if (!st && b) attn_nn_bias_rows(y, b, rows, out);
  // y [rows, out] (+)= x [rows, in] · W[out, in]ᵀ
  if (!st)
    st = attn_gemm_prec_f32in(ctx->precision, 0, 1, rows, out, in, 1.0f, xa, in, Wa, in,
                              b ? 1.0f : 0.0f, y, out);
  free(xq);
  free(wq);
  return st;
}

/* acc [n] += t * mask (the straight-through gradient) */
static void add_masked(float *acc, const float *t, const uint8_t *mask, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (mask[i]) acc[i] += t[i];
}

static attn_status qat_backward(const attn_nn_ctx *ctx, const float *x, const float *W,
                                const float *dy, float *dx, float *dW, int64_t rows, int64_t in,
                                int64_t out) {
  float *xq = attn_nn_scratch(rows * in), *wq = attn_nn_scratch(out * in);
  float *t = attn_nn_scratch(rows * in > out * in ? rows * in : out * in);
  uint8_t *mx = malloc((size_t)(rows * in)), *mw = malloc((size_t)(out * in));
  attn_status st = (!xq || !wq || !t || !mx || !mw) ? ATTN_ENOMEM : ATTN_OK;
  if (!st) st = attn_nn_qat_apply(ctx->qat, 0, 0, W, x, rows, in, out, xq, mx, wq, mw);
  if (!st && dx) {  // dx += (dy · Wq) ⊙ mask_x
    st = attn_gemm_prec_f32in(ctx->precision, 0, 0, rows, in, out, 1.0f, dy, out, wq, in, 0.0f,
                              t, in);
    if (!st) add_masked(dx, t, mx, rows * in);
  }
  if (!st) {  // dW += (dyᵀ · xq) ⊙ mask_w
    st = attn_gemm_prec_f32in(ctx->precision, 1, 0, out, in, rows, 1.0f, dy, out, xq, in, 0.0f,
                              t, in);
    if (!st) add_masked(dW, t, mw, out * in);
  }
  free(xq);
  free(wq);
  free(t);
  free(mx);
  free(mw);
  return st;
}

attn_status attn_dense_backward_ctx(const attn_nn_ctx *ctx, const float *x, const float *W,
                                    const float *dy, float *dx, float *dW, float *db,
                                    int64_t rows, int64_t in, int64_t out) {
  return attn_nn_dense_backward(ctx, x, W, dy, dx, 0, dW, db, rows, in, out);
}

attn_status attn_nn_dense_backward(const attn_nn_ctx *ctx, const float *x, const float *W,
                                   const float *dy, float *dx, int dx_set, float *dW, float *db,
                                   int64_t rows, int64_t in, int64_t out) {
  if (plain(ctx)) return attn_nn_dense_backward_f32(x, W, dy, dx, dx_set, dW, db, rows, in, out);
  attn_status st = check("dense_backward", x, W, dy, rows, in, out);
  if (st) return st;
  if (!dW) return attn_set_error(ATTN_EINVAL, "dense_backward: NULL dW");
  if (ctx->qlinears && attn_qlinear_set_find(ctx->qlinears, W, out, in))
    return attn_set_error(ATTN_EINVAL,
                          "dense_backward: Linear [%lld, %lld] runs in int8 (inference only)",
                          (long long)out, (long long)in);
  if (rows == 0) return ATTN_OK;
  if (ctx->qat) {
    if (dx && dx_set) memset(dx, 0, sizeof(float) * (size_t)(rows * in));
    st = qat_backward(ctx, x, W, dy, dx, dW, rows, in, out);
  } else {
    if (dx)  // dx [rows, in] (+)= dy [rows, out] · W [out, in]
      st = attn_gemm_prec_f32in(ctx->precision, 0, 0, rows, in, out, 1.0f, dy, out, W, in,
                                dx_set ? 0.0f : 1.0f, dx, in);
    // dW [out, in] += dyᵀ · x
    if (!st)
      st = attn_gemm_prec_f32in(ctx->precision, 1, 0, out, in, rows, 1.0f, dy, out, x, in, 1.0f,
                                dW, in);
  }
  if (st) return st;
  if (db) attn_nn_bias_grad(db, dy, rows, out);
  return ATTN_OK;
}

attn_status attn_linear_forward_ctx(const attn_linear *m, const attn_params *p,
                                    const attn_nn_ctx *ctx, const float *x, float *y,
                                    int64_t rows) {
  if (!m || !p || !p->data) return attn_set_error(ATTN_EINVAL, "linear_forward: NULL module");
  return attn_dense_forward_ctx(ctx, x, attn_params_data(p, m->weight),
                                m->bias >= 0 ? attn_params_data(p, m->bias) : NULL, y, rows,
                                m->in, m->out);
}

attn_status attn_linear_backward_ctx(const attn_linear *m, attn_params *p, const attn_nn_ctx *ctx,
                                     const float *x, const float *dy, float *dx, int64_t rows) {
  if (!m || !p || !p->grad) return attn_set_error(ATTN_EINVAL, "linear_backward: NULL module");
  return attn_dense_backward_ctx(ctx, x, attn_params_data(p, m->weight), dy, dx,
                                 attn_params_grad(p, m->weight),
                                 m->bias >= 0 ? attn_params_grad(p, m->bias) : NULL, rows, m->in,
                                 m->out);
}

attn_status attn_nn_linear_backward_set(const attn_linear *m, attn_params *p,
                                        const attn_nn_ctx *ctx, const float *x, const float *dy,
                                        float *dx, int64_t rows) {
  if (!m || !p || !p->grad) return attn_set_error(ATTN_EINVAL, "linear_backward: NULL module");
  return attn_nn_dense_backward(ctx, x, attn_params_data(p, m->weight), dy, dx, 1,
                                attn_params_grad(p, m->weight),
                                m->bias >= 0 ? attn_params_grad(p, m->bias) : NULL, rows, m->in,
                                m->out);
}
