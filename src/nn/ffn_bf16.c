/* Feed-forward block in bf16 mixed precision (ctx.precision = BF16, ReLU,
 * no dropout): x and ReLU(linear1(x)) are kept in bf16 only; linear1's
 * epilogue adds the bias, applies ReLU and writes bf16; in the backward,
 * linear2's dx epilogue applies the ReLU mask, writes dh in bf16 and sums
 * linear1's bias gradient per row block (f32). Weights, gradients and
 * every sum stay f32 (dense_bf16.h). */
#include <stdlib.h>
#include <string.h>

#include "nn/dense_bf16.h"
#include "nn/nn_internal.h"

int attn_nn_ffn_bf16_applies(const attn_ffn *m, const attn_nn_ctx *ctx) {
  return ctx && ctx->precision == ATTN_PREC_BF16 && !ctx->qat && !ctx->qlinears &&
         m->act == ATTN_ACT_RELU && !attn_nn_dropout_on(ctx, m->dropout);
}

attn_status attn_nn_ffn_forward_bf16(const attn_ffn *m, const attn_params *p, attn_ffn_saved *s,
                                const float *x, float *y, int64_t rows) {
  int64_t E = m->l1.in, F = m->l1.out;
  s->xh = NN_ALLOC_BF16(&s->arena, rows * E);
  s->ah = NN_ALLOC_BF16(&s->arena, rows * F);
  if (!s->xh || !s->ah) return ATTN_ENOMEM;
  attn_nn_bf16_convert(x, E, s->xh, E, rows, E, NULL);
  uint16_t *w1 = attn_nn_bf16_copy(attn_params_data(p, m->l1.weight), F * E);
  uint16_t *w2 = attn_nn_bf16_copy(attn_params_data(p, m->l2.weight), E * F);
  attn_status st = (!w1 || !w2) ? ATTN_ENOMEM : ATTN_OK;
  if (!st) {  // ah [rows, F] = bf16(relu(xh · W1ᵀ + b1))
    nn_bf16_epi e = {.bias = m->l1.bias >= 0 ? attn_params_data(p, m->l1.bias) : NULL,
                     .relu = 1, .H = s->ah, .ldh = F};
    st = attn_nn_bf16_gemm(0, 1, rows, F, E, s->xh, E, w1, E, &e, 1);
  }
  if (!st) {  // y [rows, E] = ah · W2ᵀ + b2
    nn_bf16_epi e = {.C = {y}, .ldc = E,
                     .bias = m->l2.bias >= 0 ? attn_params_data(p, m->l2.bias) : NULL};
    st = attn_nn_bf16_gemm(0, 1, rows, E, F, s->ah, F, w2, F, &e, 0);
  }
  free(w1);
  free(w2);
  return st;
}

attn_status attn_nn_ffn_backward_bf16(const attn_ffn *m, attn_params *p, const attn_ffn_saved *s,
                                 const float *dy, float *dx) {
  int64_t rows = s->rows, E = m->l1.in, F = m->l1.out, mr = attn_nn_bf16_tile_rows();
  int64_t blocks = (rows + mr - 1) / mr;
  uint16_t *dyh = malloc(sizeof(uint16_t) * (size_t)(rows * E));
  uint16_t *dhh = malloc(sizeof(uint16_t) * (size_t)(rows * F));
  float *part = m->l1.bias >= 0 ? malloc(sizeof(float) * (size_t)(blocks * F)) : NULL;
  uint16_t *w1 = attn_nn_bf16_copy(attn_params_data(p, m->l1.weight), F * E);
  uint16_t *w2 = attn_nn_bf16_copy(attn_params_data(p, m->l2.weight), E * F);
  attn_status st = ATTN_OK;
  if (!dyh || !dhh || (m->l1.bias >= 0 && !part) || !w1 || !w2)
    st = attn_set_error(ATTN_ENOMEM, "ffn_backward (bf16): out of memory");
  if (!st) {
    // dyh = bf16(dy); b2's gradient Σ_rows dy (f32)
    attn_nn_bf16_convert(dy, E, dyh, E, rows, E,
                    m->l2.bias >= 0 ? attn_params_grad(p, m->l2.bias) : NULL);
    // dh [rows, F] = (dyh · W2) ⊙ [a > 0], in bf16; Σ_rows dh per row block
    nn_bf16_epi e = {.mask = s->ah, .ldm = F, .H = dhh, .ldh = F, .colpart = part};
    st = attn_nn_bf16_gemm(0, 0, rows, F, E, dyh, E, w2, F, &e, 1);
  }
  if (!st) {  // dW2 [E, F] += dyhᵀ · ah
    nn_bf16_epi e = {.C = {attn_params_grad(p, m->l2.weight)}, .ldc = F, .beta = 1.0f};
    st = attn_nn_bf16_gemm(1, 0, E, F, rows, dyh, E, s->ah, F, &e, 0);
  }
  if (!st && dx) {  // dx [rows, E] += dh · W1
    nn_bf16_epi e = {.C = {dx}, .ldc = E, .beta = 1.0f};
    st = attn_nn_bf16_gemm(0, 0, rows, E, F, dhh, F, w1, E, &e, 0);
  }
  if (!st) {  // dW1 [F, E] += dhᵀ · xh
    nn_bf16_epi e = {.C = {attn_params_grad(p, m->l1.weight)}, .ldc = E, .beta = 1.0f};
    st = attn_nn_bf16_gemm(1, 0, F, E, rows, dhh, F, s->xh, E, &e, 0);
  }
  if (!st && part) attn_nn_colpart_add(part, blocks, F, attn_params_grad(p, m->l1.bias));
  free(dyh);
  free(dhh);
  free(part);
  free(w1);
  free(w2);
  return st;
}
