/* MHA projections in bf16 mixed precision (ctx.precision = BF16,
 * self-attention with torch's packed in_proj_weight [3E, E]): the input is
 * converted to bf16 once and q, k, v come from one GEMM (N = 3E) whose
 * epilogue adds the bias and splits the columns; the backward converts
 * [dq dk dv] into one bf16 [rows, 3E] operand, so dx is one GEMM of depth 3E
 * and the in-projection gradient one of 3E rows. The attention itself is
 * unchanged (f32). Weights, gradients and sums stay f32 (dense_bf16.h). */
#include <stdlib.h>
#include <string.h>

#include "nn/dense_bf16.h"
#include "nn/nn_internal.h"

int attn_nn_mha_bf16_applies(const attn_mha *m, const attn_nn_ctx *ctx, int self) {
  if (!ctx || ctx->precision != ATTN_PREC_BF16 || ctx->qat || ctx->qlinears || !self) return 0;
  int64_t E = m->c.embed_dim;
  if (m->c.style != ATTN_MHA_TORCH || !m->has_out || m->c.num_kv_heads != m->c.num_heads)
    return 0;
  for (int i = 0; i < 3; i++) {
    if (m->in[i] != E || m->out[i] != E || m->w[i] != m->w[0] || m->wo[i] != i * E * E) return 0;
    if (m->b[i] != m->b[0] || (m->b[i] >= 0 && m->bo[i] != i * E)) return 0;
  }
  return m->out_lin.in == E && m->out_lin.out == E;
}

void attn_nn_mha_desc_bf16(const attn_mha *m, const attn_mha_saved *s, attn_sdpa_desc *d) {
  attn_nn_mha_desc(m, s, d);
  int64_t E3 = 3 * m->c.embed_dim, qs[3] = {s->Lq * E3, m->head_dim, E3};
  for (int i = 0; i < 3; i++) d->q_stride[i] = d->k_stride[i] = d->v_stride[i] = qs[i];
}

attn_status attn_nn_mha_project_bf16(const attn_mha *m, const attn_params *p, attn_mha_saved *s,
                                const float *x, int flash16) {
  int64_t E = m->c.embed_dim, rows = s->B * s->Lq;
  s->xh = NN_ALLOC_BF16(&s->arena, rows * E);
  if (flash16) s->qkvh = NN_ALLOC_BF16(&s->arena, rows * 3 * E);
  if (!s->xh || (flash16 && !s->qkvh)) return ATTN_ENOMEM;
  attn_nn_bf16_convert(x, E, s->xh, E, rows, E, NULL);
  uint16_t *w = attn_nn_bf16_copy(attn_params_data(p, m->w[0]), 3 * E * E);
  if (!w) return ATTN_ENOMEM;
  // [q k v] [rows, 3E] = xh · W_inᵀ + b_in: in bf16 into s->qkvh, or the
  // columns split into s->q, s->k, s->v
  nn_bf16_epi e = {.C = {s->q, s->k, s->v}, .ldc = E, .seg = E,
                   .bias = m->b[0] >= 0 ? attn_params_data(p, m->b[0]) : NULL};
  if (flash16) {
    e.C[0] = e.C[1] = e.C[2] = NULL;
    e.seg = 3 * E;
    e.H = s->qkvh;
    e.ldh = 3 * E;
  }
  attn_status st = attn_nn_bf16_gemm(0, 1, rows, 3 * E, E, s->xh, E, w, E, &e, 0);
  free(w);
  return st;
}

attn_status attn_nn_mha_out_bf16(const attn_mha *m, const attn_params *p, attn_mha_saved *s,
                            float *out) {
  int64_t E = m->c.embed_dim, rows = s->B * s->Lq;
  s->ctxh = NN_ALLOC_BF16(&s->arena, rows * E);
  if (!s->ctxh) return ATTN_ENOMEM;
  attn_nn_bf16_convert(s->ctx, E, s->ctxh, E, rows, E, NULL);
  uint16_t *w = attn_nn_bf16_copy(attn_params_data(p, m->out_lin.weight), E * E);
  if (!w) return ATTN_ENOMEM;
  nn_bf16_epi e = {.C = {out}, .ldc = E,
                   .bias = m->out_lin.bias >= 0 ? attn_params_data(p, m->out_lin.bias) : NULL};
  attn_status st = attn_nn_bf16_gemm(0, 1, rows, E, E, s->ctxh, E, w, E, &e, 0);
  free(w);
  return st;
}

attn_status attn_nn_mha_out_backward_bf16(const attn_mha *m, attn_params *p, const attn_mha_saved *s,
                                     const float *dout, float *dctx) {
  int64_t E = m->c.embed_dim, rows = s->B * s->Lq;
  uint16_t *dh = malloc(sizeof(uint16_t) * (size_t)(rows * E));
  uint16_t *w = attn_nn_bf16_copy(attn_params_data(p, m->out_lin.weight), E * E);
  attn_status st = (!dh || !w) ? attn_set_error(ATTN_ENOMEM, "mha_backward (bf16): out of memory")
                               : ATTN_OK;
  if (!st) {  // dctx = dout · Wo
    attn_nn_bf16_convert(dout, E, dh, E, rows, E,  // and bo's gradient Σ_rows dout
                    m->out_lin.bias >= 0 ? attn_params_grad(p, m->out_lin.bias) : NULL);
    nn_bf16_epi e = {.C = {dctx}, .ldc = E};
    st = attn_nn_bf16_gemm(0, 0, rows, E, E, dh, E, w, E, &e, 0);
  }
  if (!st) {  // dWo += doutᵀ · ctx
    nn_bf16_epi e = {.C = {attn_params_grad(p, m->out_lin.weight)}, .ldc = E, .beta = 1.0f};
    st = attn_nn_bf16_gemm(1, 0, E, E, rows, dh, E, s->ctxh, E, &e, 0);
  }
  free(dh);
  free(w);
  return st;
}

attn_status attn_nn_mha_project_backward_bf16(const attn_mha *m, attn_params *p,
                                         const attn_mha_saved *s, const float *dq,
                                         const float *dk, const float *dv, int64_t ld, float *dx) {
  int64_t E = m->c.embed_dim, rows = s->B * s->Lq, E3 = 3 * E;
  uint16_t *dh = malloc(sizeof(uint16_t) * (size_t)(rows * E3));
  uint16_t *w = attn_nn_bf16_copy(attn_params_data(p, m->w[0]), E3 * E);
  attn_status st = (!dh || !w) ? attn_set_error(ATTN_ENOMEM, "mha_backward (bf16): out of memory")
                               : ATTN_OK;
  if (!st) {  // [dq dk dv] in bf16; in_proj_bias's gradient Σ_rows (f32)
    float *db = m->b[0] >= 0 ? attn_params_grad(p, m->b[0]) : NULL;
    const float *d[3] = {dq, dk, dv};
    if (ld == E3 && dk == dq + E && dv == dq + 2 * E)  // already interleaved
      attn_nn_bf16_convert(dq, E3, dh, E3, rows, E3, db);
    else
      for (int i = 0; i < 3; i++) attn_nn_bf16_convert(d[i], ld, dh + i * E, E3, rows, E, db ? db + i * E : NULL);
  }
  if (!st && dx) {  // dx += [dq dk dv] · W_in
    nn_bf16_epi e = {.C = {dx}, .ldc = E, .beta = 1.0f};
    st = attn_nn_bf16_gemm(0, 0, rows, E, E3, dh, E3, w, E, &e, 0);
  }
  if (!st) {  // dW_in [3E, E] += [dq dk dv]ᵀ · x
    nn_bf16_epi e = {.C = {attn_params_grad(p, m->w[0])}, .ldc = E, .beta = 1.0f};
    st = attn_nn_bf16_gemm(1, 0, E3, E, rows, dh, E3, s->xh, E, &e, 0);
  }
  free(dh);
  free(w);
  return st;
}
