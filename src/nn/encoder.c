/* TransformerEncoderLayer (batch_first), as torch 1.13:
 *   post-norm: x = norm1(x + drop1(self_attn(x))); x = norm2(x + drop2(ff(x)))
 *   pre-norm:  x = x + drop1(self_attn(norm1(x))); x = x + drop2(ff(norm2(x)))
 * ff(x) = linear2(dropout(act(linear1(x)))); self_attn has dropout p too. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

attn_status attn_nn_layer_check(const attn_layer_config *c, const char *prefix) {
  if (!c || c->d_model <= 0 || c->nhead <= 0 || c->d_model % c->nhead || c->dim_feedforward <= 0)
    return attn_set_error(ATTN_EINVAL,
                          "layer '%s': d_model %lld must be a positive multiple of nhead "
                          "(num_heads) %lld, dim_feedforward %lld positive",
                          prefix, c ? (long long)c->d_model : 0LL, c ? (long long)c->nhead : 0LL,
                          c ? (long long)c->dim_feedforward : 0LL);
  if (!(c->dropout >= 0.0f && c->dropout < 1.0f) || !(c->layer_norm_eps > 0.0f))
    return attn_set_error(ATTN_EINVAL, "layer '%s': dropout must be in [0,1) and eps > 0", prefix);
  return ATTN_OK;
}

attn_status attn_nn_layer_attn(attn_mha *a, attn_params *p, const char *prefix, const char *name,
                          const attn_layer_config *c) {
  attn_mha_config mc;
  memset(&mc, 0, sizeof mc);
  mc.embed_dim = c->d_model;
  mc.num_heads = c->nhead;
  mc.bias = c->bias;
  mc.dropout = c->dropout;
  mc.style = ATTN_MHA_TORCH;
  char buf[ATTN_PARAM_NAME_MAX];
  attn_status st = attn_nn_name(buf, prefix, name);
  return st ? st : attn_mha_declare(a, p, buf, &mc);
}

attn_status attn_nn_layer_norm(attn_layernorm *ln, attn_params *p, const char *prefix,
                          const char *name, const attn_layer_config *c) {
  char buf[ATTN_PARAM_NAME_MAX];
  attn_status st = attn_nn_name(buf, prefix, name);
  return st ? st : attn_layernorm_declare_bias(ln, p, buf, c->d_model, c->layer_norm_eps, c->bias);
}

void attn_encoder_saved_free(attn_encoder_saved *s) {
  if (!s) return;
  attn_mha_saved_free(&s->sa);
  attn_ffn_saved_free(&s->ff);
  attn_sublayer_saved_free(&s->s1);
  attn_sublayer_saved_free(&s->s2);
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
}

attn_status attn_encoder_declare(attn_encoder_layer *m, attn_params *p, const char *prefix,
                                 const attn_layer_config *c) {
  if (!m || !p || !prefix) return attn_set_error(ATTN_EINVAL, "encoder_declare: NULL argument");
  attn_status st = attn_nn_layer_check(c, prefix);
  if (st) return st;
  memset(m, 0, sizeof *m);
  m->c = *c;
  m->site = attn_nn_hash(prefix, attn_nn_hash("encoder", 0));
  st = attn_nn_layer_attn(&m->self_attn, p, prefix, "self_attn.", c);
  if (!st)
    st = attn_ffn_declare_bias(&m->ff, p, prefix, "linear1", "linear2", c->d_model,
                               c->dim_feedforward, c->activation, c->dropout, c->bias);
  if (!st) st = attn_nn_layer_norm(&m->norm1, p, prefix, "norm1.", c);
  if (!st) st = attn_nn_layer_norm(&m->norm2, p, prefix, "norm2.", c);
  return st;
}

attn_status attn_encoder_init(const attn_encoder_layer *m, attn_params *p, attn_init kind,
                              uint64_t seed) {
  attn_status st = attn_mha_init(&m->self_attn, p, kind, seed);
  if (!st) st = attn_ffn_init(&m->ff, p, kind, seed);
  if (!st) st = attn_layernorm_init(&m->norm1, p);
  if (!st) st = attn_layernorm_init(&m->norm2, p);
  return st;
}

attn_status attn_encoder_forward(const attn_encoder_layer *m, const attn_params *p,
                                 const attn_nn_ctx *ctx, attn_encoder_saved *s, const float *src,
                                 int64_t B, int64_t L, const attn_mha_masks *masks, float *out) {
  if (!m || !p || !s || !src || !out)
    return attn_set_error(ATTN_EINVAL, "encoder_forward: NULL argument");
  if (B <= 0 || L <= 0) return attn_set_error(ATTN_EINVAL, "encoder_forward: B, L must be > 0");
  attn_encoder_saved_free(s);
  s->B = B;
  s->L = L;
  int64_t rows = B * L, E = m->c.d_model;
  int nf = m->c.norm_first;
  s->x1 = NN_ALLOC_F_UNINIT(&s->arena, rows * E);
  s->f_out = NN_ALLOC_F_UNINIT(&s->arena, rows * E);
  if (!s->x1 || !s->f_out) return ATTN_ENOMEM;
  const float *fin;
  attn_status st = attn_nn_sub_in(&m->norm1, p, nf, &s->s1, src, rows, &fin);
  if (!st)
    st = attn_mha_forward(&m->self_attn, p, ctx, &s->sa, fin, NULL, NULL, B, L, L, masks,
                          s->f_out, NULL, 0);
  if (!st)
    st = attn_nn_sub_out(&m->norm1, p, ctx, nf, m->c.dropout, m->site + 1, &s->s1, src, s->f_out,
                    s->x1);
  if (!st) st = attn_nn_sub_in(&m->norm2, p, nf, &s->s2, s->x1, rows, &fin);
  if (!st) st = attn_ffn_forward(&m->ff, p, ctx, &s->ff, fin, s->f_out, rows);
  if (!st)
    st = attn_nn_sub_out(&m->norm2, p, ctx, nf, m->c.dropout, m->site + 2, &s->s2, s->x1, s->f_out,
                    out);
  return st;
}

attn_status attn_encoder_backward(const attn_encoder_layer *m, attn_params *p,
                                  const attn_nn_ctx *ctx, const attn_encoder_saved *s,
                                  const float *src, const float *dout, float *dsrc) {
  if (!m || !p || !s || !s->x1 || !src || !dout || !dsrc)
    return attn_set_error(ATTN_EINVAL, "encoder_backward: NULL argument or no saved forward");
  int64_t n = s->B * s->L * m->c.d_model;
  int nf = m->c.norm_first;
  /* post-norm: f's input is x itself, so f's input gradient adds straight
   * into dx (sub_in_backward's dx += df_in) and dfin is not needed */
  float *dx1 = attn_nn_scratch(n), *df = attn_nn_scratch_uninit(n);
  float *dfin = nf ? attn_nn_scratch(n) : NULL;
  attn_status st = (!dx1 || !df || (nf && !dfin)) ? ATTN_ENOMEM : ATTN_OK;
  if (!st) st = attn_nn_sub_out_backward(&m->norm2, p, nf, m->c.dropout, &s->s2, dout, dx1, df);
  if (!st) st = attn_ffn_backward(&m->ff, p, ctx, &s->ff, nf ? s->s2.a : s->x1, df, nf ? dfin : dx1);
  if (!st && nf) st = attn_nn_sub_in_backward(&m->norm2, p, nf, &s->s2, s->x1, dfin, dx1);
  if (!st) st = attn_nn_sub_out_backward(&m->norm1, p, nf, m->c.dropout, &s->s1, dx1, dsrc, df);
  if (!st && nf) memset(dfin, 0, (size_t)n * sizeof(float));
  if (!st)
    st = attn_mha_backward(&m->self_attn, p, ctx, &s->sa, nf ? s->s1.a : src, NULL, NULL, df,
                           nf ? dfin : dsrc, NULL, NULL);
  if (!st && nf) st = attn_nn_sub_in_backward(&m->norm1, p, nf, &s->s1, src, dfin, dsrc);
  free(dx1);
  free(df);
  free(dfin);
  return st;
}
