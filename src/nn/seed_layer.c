/* The seed 004 blocks: MultiHeadAttention (q/k/v/fc_out Linears, residual +
 * layer_norm inside) and TransformerLayer = that, then FeedForward
 * (fc1, ReLU, fc2, residual + layer_norm). Post-norm sublayers, no dropout. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

void attn_seed_layer_saved_free(attn_seed_layer_saved *s) {
  if (!s) return;
  attn_mha_saved_free(&s->sa);
  attn_ffn_saved_free(&s->ff);
  attn_sublayer_saved_free(&s->s1);
  attn_sublayer_saved_free(&s->s2);
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
}

attn_status attn_seed_layer_declare(attn_seed_layer *m, attn_params *p, const char *prefix,
                                    int64_t embed, int64_t heads, int64_t ff_dim, int has_ffn) {
  if (!m || !p || !prefix) return attn_set_error(ATTN_EINVAL, "seed_layer_declare: NULL argument");
  memset(m, 0, sizeof *m);
  m->has_ffn = has_ffn;
  char ap[ATTN_PARAM_NAME_MAX], buf[ATTN_PARAM_NAME_MAX];
  attn_status st = attn_nn_name(ap, prefix, has_ffn ? "attention." : "");
  attn_mha_config c;
  memset(&c, 0, sizeof c);
  c.embed_dim = embed;
  c.num_heads = heads;
  c.bias = 1;
  c.out_proj = 1;
  c.style = ATTN_MHA_SEED_LINEAR;
  if (!st) st = attn_mha_declare(&m->attn, p, ap, &c);
  if (!st) st = attn_nn_name(buf, ap, "layer_norm.");
  if (!st) st = attn_layernorm_declare(&m->ln_attn, p, buf, embed, 1e-5f);
  if (st || !has_ffn) return st;
  st = attn_nn_name(ap, prefix, "ffn.");
  if (!st) st = attn_ffn_declare(&m->ffn, p, ap, "fc1", "fc2", embed, ff_dim, ATTN_ACT_RELU, 0.0f);
  if (!st) st = attn_nn_name(buf, ap, "layer_norm.");
  if (!st) st = attn_layernorm_declare(&m->ln_ffn, p, buf, embed, 1e-5f);
  return st;
}

attn_status attn_seed_layer_init(const attn_seed_layer *m, attn_params *p, attn_init kind,
                                 uint64_t seed) {
  attn_status st = attn_mha_init(&m->attn, p, kind, seed);
  if (!st) st = attn_layernorm_init(&m->ln_attn, p);
  if (!st && m->has_ffn) st = attn_ffn_init(&m->ffn, p, kind, seed);
  if (!st && m->has_ffn) st = attn_layernorm_init(&m->ln_ffn, p);
  return st;
}

attn_status attn_seed_layer_forward(const attn_seed_layer *m, const attn_params *p,
                                    const attn_nn_ctx *ctx, attn_seed_layer_saved *s,
                                    const float *x, int64_t B, int64_t L, float *out) {
  if (!m || !p || !s || !x || !out)
    return attn_set_error(ATTN_EINVAL, "seed_layer_forward: NULL argument");
  if (B <= 0 || L <= 0) return attn_set_error(ATTN_EINVAL, "seed_layer_forward: B, L must be > 0");
  attn_seed_layer_saved_free(s);
  s->B = B;
  s->L = L;
  int64_t rows = B * L, E = m->attn.c.embed_dim;
  s->x1 = NN_ALLOC_F(&s->arena, rows * E);
  s->f_out = NN_ALLOC_F(&s->arena, rows * E);
  if (!s->x1 || !s->f_out) return ATTN_ENOMEM;
  const float *fin;
  float *y1 = m->has_ffn ? s->x1 : out;
  attn_status st = attn_nn_sub_in(&m->ln_attn, p, 0, &s->s1, x, rows, &fin);
  if (!st)
    st = attn_mha_forward(&m->attn, p, ctx, &s->sa, fin, NULL, NULL, B, L, L, NULL, s->f_out,
                          NULL, 0);
  if (!st) st = attn_nn_sub_out(&m->ln_attn, p, ctx, 0, 0.0f, 0, &s->s1, x, s->f_out, y1);
  if (st || !m->has_ffn) return st;
  st = attn_nn_sub_in(&m->ln_ffn, p, 0, &s->s2, s->x1, rows, &fin);
  if (!st) st = attn_ffn_forward(&m->ffn, p, ctx, &s->ff, fin, s->f_out, rows);
  if (!st) st = attn_nn_sub_out(&m->ln_ffn, p, ctx, 0, 0.0f, 0, &s->s2, s->x1, s->f_out, out);
  return st;
}

attn_status attn_seed_layer_backward(const attn_seed_layer *m, attn_params *p,
                                     const attn_nn_ctx *ctx, const attn_seed_layer_saved *s,
                                     const float *x, const float *dout, float *dx) {
  if (!m || !p || !s || !s->x1 || !x || !dout || !dx)
    return attn_set_error(ATTN_EINVAL, "seed_layer_backward: NULL argument or no saved forward");
  int64_t n = s->B * s->L * m->attn.c.embed_dim;
  float *dx1 = attn_nn_scratch(n), *df = attn_nn_scratch(n);
  attn_status st = (!dx1 || !df) ? ATTN_ENOMEM : ATTN_OK;
  const float *dy1 = dout;
  if (!st && m->has_ffn) {
    st = attn_nn_sub_out_backward(&m->ln_ffn, p, 0, 0.0f, &s->s2, dout, dx1, df);
    if (!st) st = attn_ffn_backward(&m->ffn, p, ctx, &s->ff, s->x1, df, dx1);
    dy1 = dx1;
  }
  if (!st) st = attn_nn_sub_out_backward(&m->ln_attn, p, 0, 0.0f, &s->s1, dy1, dx, df);
  if (!st) st = attn_mha_backward(&m->attn, p, ctx, &s->sa, x, NULL, NULL, df, dx, NULL, NULL);
  free(dx1);
  free(df);
  return st;
}
