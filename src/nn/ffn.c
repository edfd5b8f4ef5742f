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

/* the elementwise part of act (for the gated ones: the gate's) */
static attn_status act_forward(attn_activation act, const float *h, float *a, int64_t n) {
  switch (act) {
  case ATTN_ACT_GELU:
  case ATTN_ACT_GEGLU: return attn_gelu_f32(h, a, n);
  case ATTN_ACT_GELU_TANH: return attn_gelu_tanh_f32(h, a, n);
  case ATTN_ACT_TANH: return attn_tanh_f32(h, a, n);
  case ATTN_ACT_SILU:
  case ATTN_ACT_SWIGLU: return attn_silu_f32(h, a, n);
  case ATTN_ACT_RELU: break;
  }
  return attn_relu_f32(h, a, n);
}

static attn_status act_backward(attn_activation act, const float *h, const float *da, float *dh,
                                int64_t n) {
  switch (act) {
  case ATTN_ACT_GELU:
  case ATTN_ACT_GEGLU: return attn_gelu_backward_f32(h, da, dh, n);
  case ATTN_ACT_GELU_TANH: return attn_gelu_tanh_backward_f32(h, da, dh, n);
  case ATTN_ACT_TANH: return attn_tanh_backward_f32(h, da, dh, n);
  case ATTN_ACT_SILU:
  case ATTN_ACT_SWIGLU: return attn_silu_backward_f32(h, da, dh, n);
  case ATTN_ACT_RELU: break;
  }
  return attn_relu_backward_f32(h, da, dh, n);
}

/* "<prefix><n1 with its final '1' made '3'>." into buf (the gate's partner) */
static attn_status gated_name(char *buf, const char *prefix, const char *n1) {
  size_t l = strlen(n1);
  if (l == 0 || n1[l - 1] != '1' || l >= ATTN_PARAM_NAME_MAX)
    return attn_set_error(ATTN_EINVAL,
                          "ffn '%s': a gated activation needs a first Linear named ...1 (got '%.60s')",
                          prefix, n1);
  char n3[ATTN_PARAM_NAME_MAX];
  memcpy(n3, n1, l + 1);
  n3[l - 1] = '3';
  char a[ATTN_PARAM_NAME_MAX];
  attn_status st = attn_nn_name(a, prefix, n3);
  return st ? st : attn_nn_name(buf, a, ".");
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
  if (!(dropout >= 0.0f && dropout < 1.0f) || !strcmp(attn_activation_name(act), "?"))
    return attn_set_error(ATTN_EINVAL,
                          "ffn '%s': dropout must be in [0,1), act relu|gelu|gelu_tanh|tanh|silu|"
                          "swiglu|geglu", prefix);
  memset(m, 0, sizeof *m);
  m->l3.weight = m->l3.bias = -1;
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
  if (!st && attn_activation_gated(act)) st = gated_name(b, prefix, n1);
  if (!st && attn_activation_gated(act)) st = attn_linear_declare(&m->l3, p, b, d_model, d_ff, bias);
  return st;
}

attn_status attn_ffn_init(const attn_ffn *m, attn_params *p, attn_init kind, uint64_t seed) {
  attn_status st = attn_linear_init(&m->l1, p, kind, seed);
  if (!st && m->l3.weight >= 0) st = attn_linear_init(&m->l3, p, kind, seed);
  return st ? st : attn_linear_init(&m->l2, p, kind, seed);
}

/* gated: g = n3(x) (saved), a = act(h) * g */
static attn_status gate_forward(const attn_ffn *m, const attn_params *p, const attn_nn_ctx *ctx,
                                attn_ffn_saved *s, const float *x, int64_t n) {
  s->g = NN_ALLOC_F(&s->arena, n);
  if (!s->g) return ATTN_ENOMEM;
  attn_status st = attn_linear_forward_ctx(&m->l3, p, ctx, x, s->g, s->rows);
  if (st) return st;
  for (int64_t i = 0; i < n; i++) s->a[i] *= s->g[i];
  return ATTN_OK;
}

/* gated, da = ∂L/∂(act(h) * g): n3's gradients from dg = da * act(h), and
 * da *= g in place (then ∂L/∂act(h), for act_backward) */
static attn_status gate_backward(const attn_ffn *m, attn_params *p, const attn_nn_ctx *ctx,
                                 const attn_ffn_saved *s, const float *x, float *da, float *dx) {
  int64_t n = s->rows * m->l1.out;
  float *dg = attn_nn_scratch_uninit(n);
  attn_status st = dg ? act_forward(m->act, s->h, dg, n) : ATTN_ENOMEM;
  if (!st) {
    for (int64_t i = 0; i < n; i++) {
      dg[i] *= da[i];
      da[i] *= s->g[i];
    }
    st = attn_linear_backward_ctx(&m->l3, p, ctx, x, dg, dx, s->rows);
  }
  free(dg);
  return st;
}

attn_status attn_ffn_forward(const attn_ffn *m, const attn_params *p, const attn_nn_ctx *ctx,
                             attn_ffn_saved *s, const float *x, float *y, int64_t rows) {
  if (!m || !p || !s || !x || !y)
    return attn_set_error(ATTN_EINVAL, "ffn_forward: NULL argument");
  attn_ffn_saved_free(s);
  s->rows = rows;
  if (attn_nn_ffn_bf16_applies(m, ctx)) return attn_nn_ffn_forward_bf16(m, p, s, x, y, rows);
  int64_t n = rows * m->l1.out;
  /* ReLU without a gate runs in place (a > 0 exactly where h > 0, even after
   * dropout, which zeroes or scales by 1/(1-p)): one [rows, ff] buffer */
  const int in_place = m->act == ATTN_ACT_RELU && m->l3.weight < 0;
  s->h = NN_ALLOC_F_UNINIT(&s->arena, n);
  s->a = in_place ? s->h : NN_ALLOC_F_UNINIT(&s->arena, n);
  if (!s->h || !s->a) return ATTN_ENOMEM;
  attn_status st = attn_linear_forward_ctx(&m->l1, p, ctx, x, s->h, rows);
  if (st) return st;
  st = act_forward(m->act, s->h, s->a, n);
  if (!st && m->l3.weight >= 0) st = gate_forward(m, p, ctx, s, x, n);
  if (st) return st;
  if (attn_nn_dropout_on(ctx, m->dropout)) {  // in place (attn_dropout_f32 allows x == y)
    s->drop_mask = NN_ALLOC_U8_UNINIT(&s->arena, n);
    if (!s->drop_mask) return ATTN_ENOMEM;
    st = attn_nn_dropout_rows(ctx, s->a, s->a, s->drop_mask, n, m->dropout, m->site);
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
  /* one [rows, ff] buffer: ∂L/∂a, then in place ∂L/∂h */
  float *da = attn_nn_scratch_uninit(n);
  if (!da) return ATTN_ENOMEM;
  attn_status st = attn_nn_linear_backward_set(&m->l2, p, ctx, s->a, dy, da, rows);
  if (!st && s->drop_mask) st = attn_dropout_backward_f32(da, s->drop_mask, da, n, m->dropout);
  if (!st && s->g) st = gate_backward(m, p, ctx, s, x, da, dx);
  if (!st) st = act_backward(m->act, s->h, da, da, n);
  if (!st) st = attn_linear_backward_ctx(&m->l1, p, ctx, x, da, dx, rows);
  free(da);
  return st;
}
