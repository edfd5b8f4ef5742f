/* Feed-forward block y = n2(dropout(act(n1(x)))): torch's linear1/linear2
 * inside the Transformer layers, the seed's fc1/fc2. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

void attn_ffn_saved_free(attn_ffn_saved *s) {
  if (!s) return;
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
}

static attn_status act_forward(attn_activation act, const float *h, float *a, int64_t n) {
  if (act == ATTN_ACT_GELU) return attn_gelu_f32(h, a, n);
  if (act == ATTN_ACT_GELU_TANH) return attn_gelu_tanh_f32(h, a, n);
  return attn_relu_f32(h, a, n);
}

static attn_status act_backward(attn_activation act, const float *h, const float *da, float *dh,
                                int64_t n) {
  if (act == ATTN_ACT_GELU) return attn_gelu_backward_f32(h, da, dh, n);
  if (act == ATTN_ACT_GELU_TANH) return attn_gelu_tanh_backward_f32(h, da, dh, n);
  return attn_relu_backward_f32(h, da, dh, n);
}

attn_status attn_ffn_declare(attn_ffn *m, attn_params *p, const char *prefix, const char *n1,
                             const char *n2, int64_t d_model, int64_t d_ff, attn_activation act,
                             float dropout) {
  return attn_ffn_declare_bias(m, p, prefix, n1, n2, d_model, d_ff, act, dropout, 1);
}

attn_status attn_ffn_declare_bias(attn_ffn *m, attn_params *p, const char *prefix, const char *n1,
                                  const char *n2, int64_t d_model, int64_t d_ff,
                                  attn_activation act, float dropout, int bias) {
  if (!m || !p || !prefix || !n1 || !n2)
    return attn_set_error(ATTN_EINVAL, "ffn_declare: NULL argument");
  if (!(dropout >= 0.0f && dropout < 1.0f) ||
      (act != ATTN_ACT_RELU && act != ATTN_ACT_GELU && act != ATTN_ACT_GELU_TANH))
    return attn_set_error(ATTN_EINVAL,
                          "ffn '%s': dropout must be in [0,1), act relu|gelu|gelu_tanh", prefix);
  memset(m, 0, sizeof *m);
  m->act = act;
  m->dropout = dropout;
  m->site = attn_nn_hash(prefix, attn_nn_hash("ffn", 0));
  char a[ATTN_PARAM_NAME_MAX], b[ATTN_PARAM_NAME_MAX];
  attn_status st = attn_nn_name(a, prefix, n1);
  if (!st) st = attn_nn_name(b, a, ".");
  if (!st) st = attn_linear_declare(&m->l1, p, b, d_model, d_ff, bias);
  if (!st) st = attn_nn_name(a, prefix, n2);
  if (!st) st = attn_nn_name(b, a, ".");
  if (!st) st = attn_linear_declare(&m->l2, p, b, d_ff, d_model, bias);
  return st;
}

attn_status attn_ffn_init(const attn_ffn *m, attn_params *p, attn_init kind, uint64_t seed) {
  attn_status st = attn_linear_init(&m->l1, p, kind, seed);
  return st ? st : attn_linear_init(&m->l2, p, kind, seed);
}

attn_status attn_ffn_forward(const attn_ffn *m, const attn_params *p, const attn_nn_ctx *ctx,
                             attn_ffn_saved *s, const float *x, float *y, int64_t rows) {
  if (!m || !p || !s || !x || !y)
    return attn_set_error(ATTN_EINVAL, "ffn_forward: NULL argument");
  attn_ffn_saved_free(s);
  s->rows = rows;
  if (attn_nn_ffn_bf16_applies(m, ctx)) return attn_nn_ffn_forward_bf16(m, p, s, x, y, rows);
  int64_t n = rows * m->l1.out;
  s->h = NN_ALLOC_F(&s->arena, n);
  s->a = NN_ALLOC_F(&s->arena, n);
  if (!s->h || !s->a) return ATTN_ENOMEM;
  attn_status st = attn_linear_forward_ctx(&m->l1, p, ctx, x, s->h, rows);
  if (st) return st;
  st = act_forward(m->act, s->h, s->a, n);
  if (st) return st;
  if (attn_nn_dropout_on(ctx, m->dropout)) {
    s->drop_mask = NN_ALLOC_U8(&s->arena, n);
    float *t = attn_nn_scratch(n);
    if (!s->drop_mask || !t) {
      free(t);
      return ATTN_ENOMEM;
    }
    memcpy(t, s->a, (size_t)n * sizeof(float));
    st = attn_dropout_f32(t, s->a, s->drop_mask, n, m->dropout, attn_nn_dropout_seed(ctx, m->site),
                          attn_nn_dropout_offset(ctx, n));
    free(t);
    if (st) return st;
  }
  return attn_linear_forward_ctx(&m->l2, p, ctx, s->a, y, rows);
}

attn_status attn_ffn_backward(const attn_ffn *m, attn_params *p, const attn_nn_ctx *ctx,
                              const attn_ffn_saved *s, const float *x, const float *dy,
                              float *dx) {
  if (!m || !p || !s || !(s->h || s->ah) || !x || !dy)
    return attn_set_error(ATTN_EINVAL, "ffn_backward: NULL argument or no saved forward");
  if (s->ah) return attn_nn_ffn_backward_bf16(m, p, s, dy, dx);
  int64_t rows = s->rows, n = rows * m->l1.out;
  float *da = attn_nn_scratch(n), *dh = attn_nn_scratch(n);
  attn_status st = (!da || !dh) ? ATTN_ENOMEM : ATTN_OK;
  if (!st) st = attn_linear_backward_ctx(&m->l2, p, ctx, s->a, dy, da, rows);
  if (!st && s->drop_mask) {
    st = attn_dropout_backward_f32(da, s->drop_mask, dh, n, m->dropout);
    memcpy(da, dh, (size_t)n * sizeof(float));
  }
  if (!st)
    st = act_backward(m->act, s->h, da, dh, n);
  if (!st) st = attn_linear_backward_ctx(&m->l1, p, ctx, x, dh, dx, rows);
  free(da);
  free(dh);
  return st;
}
