/* TransformerDecoderLayer (batch_first), as torch 1.13:
 *   post-norm: x = norm1(x + sa(x)); x = norm2(x + mha(x, mem)); x = norm3(x + ff(x))
 *   pre-norm:  x = x + sa(norm1(x)); x = x + mha(norm2(x), mem); x = x + ff(norm3(x))
 * each sublayer output through dropout1/2/3. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

void attn_decoder_saved_free(attn_decoder_saved *s) {
  if (!s) return;
  attn_mha_saved_free(&s->sa);
  attn_mha_saved_free(&s->ca);
  attn_ffn_saved_free(&s->ff);
  attn_sublayer_saved_free(&s->s1);
  attn_sublayer_saved_free(&s->s2);
  attn_sublayer_saved_free(&s->s3);
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
}

attn_status attn_decoder_declare(attn_decoder_layer *m, attn_params *p, const char *prefix,
                                 const attn_layer_config *c) {
  if (!m || !p || !prefix) return attn_set_error(ATTN_EINVAL, "decoder_declare: NULL argument");
  attn_status st = attn_nn_layer_check(c, prefix);
  if (st) return st;
  memset(m, 0, sizeof *m);
  m->c = *c;
  m->site = attn_nn_hash(prefix, attn_nn_hash("decoder", 0));
  st = attn_nn_layer_attn(&m->self_attn, p, prefix, "self_attn.", c);
  if (!st) st = attn_nn_layer_attn(&m->multihead_attn, p, prefix, "multihead_attn.", c);
  if (!st)
    st = attn_ffn_declare_bias(&m->ff, p, prefix, "linear1", "linear2", c->d_model,
                               c->dim_feedforward, c->activation, c->dropout, c->bias);
  if (!st) st = attn_nn_layer_norm(&m->norm1, p, prefix, "norm1.", c);
  if (!st) st = attn_nn_layer_norm(&m->norm2, p, prefix, "norm2.", c);
  if (!st) st = attn_nn_layer_norm(&m->norm3, p, prefix, "norm3.", c);
  return st;
}

attn_status attn_decoder_init(const attn_decoder_layer *m, attn_params *p, attn_init kind,
                              uint64_t seed) {
  attn_status st = attn_mha_init(&m->self_attn, p, kind, seed);
  if (!st) st = attn_mha_init(&m->multihead_attn, p, kind, seed);
  if (!st) st = attn_ffn_init(&m->ff, p, kind, seed);
  if (!st) st = attn_layernorm_init(&m->norm1, p);
  if (!st) st = attn_layernorm_init(&m->norm2, p);
  if (!st) st = attn_layernorm_init(&m->norm3, p);
  return st;
}

attn_status attn_decoder_forward(const attn_decoder_layer *m, const attn_params *p,
                                 const attn_nn_ctx *ctx, attn_decoder_saved *s, const float *tgt,
                                 const float *memory, int64_t B, int64_t L, int64_t Lm,
                                 const attn_mha_masks *tgt_masks,
                                 const attn_mha_masks *memory_masks, float *out) {
  if (!m || !p || !s || !tgt || !memory || !out)
    return attn_set_error(ATTN_EINVAL, "decoder_forward: NULL argument");
  if (B <= 0 || L <= 0 || Lm <= 0)
    return attn_set_error(ATTN_EINVAL, "decoder_forward: B, L, Lm must be > 0");
  attn_decoder_saved_free(s);
  s->B = B;
  s->L = L;
  s->Lm = Lm;
  int64_t rows = B * L, E = m->c.d_model;
  int nf = m->c.norm_first;
  float drop = m->c.dropout;
  s->x1 = NN_ALLOC_F_UNINIT(&s->arena, rows * E);  // each written whole before it is read
  s->x2 = NN_ALLOC_F_UNINIT(&s->arena, rows * E);
  s->f_out = NN_ALLOC_F_UNINIT(&s->arena, rows * E);
  if (!s->x1 || !s->x2 || !s->f_out) return ATTN_ENOMEM;
  const float *fin;
  attn_status st = attn_nn_sub_in(&m->norm1, p, nf, &s->s1, tgt, rows, &fin);
  if (!st)
    st = attn_mha_forward(&m->self_attn, p, ctx, &s->sa, fin, NULL, NULL, B, L, L, tgt_masks,
                          s->f_out, NULL, 0);
  if (!st) st = attn_nn_sub_out(&m->norm1, p, ctx, nf, drop, m->site + 1, &s->s1, tgt, s->f_out, s->x1);
  if (!st) st = attn_nn_sub_in(&m->norm2, p, nf, &s->s2, s->x1, rows, &fin);
  if (!st)
    st = attn_mha_forward(&m->multihead_attn, p, ctx, &s->ca, fin, memory, memory, B, L, Lm,
                          memory_masks, s->f_out, NULL, 0);
  if (!st)
    st = attn_nn_sub_out(&m->norm2, p, ctx, nf, drop, m->site + 2, &s->s2, s->x1, s->f_out, s->x2);
  if (!st) st = attn_nn_sub_in(&m->norm3, p, nf, &s->s3, s->x2, rows, &fin);
  if (!st) st = attn_ffn_forward(&m->ff, p, ctx, &s->ff, fin, s->f_out, rows);
  if (!st) st = attn_nn_sub_out(&m->norm3, p, ctx, nf, drop, m->site + 3, &s->s3, s->x2, s->f_out, out);
  return st;
}

attn_status attn_decoder_backward(const attn_decoder_layer *m, attn_params *p,
                                  const attn_nn_ctx *ctx, const attn_decoder_saved *s,
                                  const float *tgt, const float *memory, const float *dout,
                                  float *dtgt, float *dmemory) {
  if (!m || !p || !s || !s->x1 || !tgt || !memory || !dout || !dtgt)
    return attn_set_error(ATTN_EINVAL, "decoder_backward: NULL argument or no saved forward");
  int64_t n = s->B * s->L * m->c.d_model;
  int nf = m->c.norm_first;
  float drop = m->c.dropout;
  /* dx2, dx1 and dfin accumulate; df is written whole by each sub_out_backward */
  float *dx2 = attn_nn_scratch(n), *dx1 = attn_nn_scratch(n), *df = attn_nn_scratch_uninit(n);
  float *dfin = attn_nn_scratch(n);
  attn_status st = (!dx2 || !dx1 || !df || !dfin) ? ATTN_ENOMEM : ATTN_OK;
  // third sublayer: feed-forward
  if (!st) st = attn_nn_sub_out_backward(&m->norm3, p, nf, drop, &s->s3, dout, dx2, df);
  if (!st) st = attn_ffn_backward(&m->ff, p, ctx, &s->ff, nf ? s->s3.a : s->x2, df, dfin);
  if (!st) st = attn_nn_sub_in_backward(&m->norm3, p, nf, &s->s3, s->x2, dfin, dx2);
  // second: cross attention on memory
  if (!st) st = attn_nn_sub_out_backward(&m->norm2, p, nf, drop, &s->s2, dx2, dx1, df);
  if (!st) {
    memset(dfin, 0, (size_t)n * sizeof(float));
    st = attn_mha_backward(&m->multihead_attn, p, ctx, &s->ca, nf ? s->s2.a : s->x1, memory,
                           memory, df, dfin, dmemory, dmemory);
  }
  if (!st) st = attn_nn_sub_in_backward(&m->norm2, p, nf, &s->s2, s->x1, dfin, dx1);
  // first: self attention
  if (!st) st = attn_nn_sub_out_backward(&m->norm1, p, nf, drop, &s->s1, dx1, dtgt, df);
  if (!st) {
    memset(dfin, 0, (size_t)n * sizeof(float));
    st = attn_mha_backward(&m->self_attn, p, ctx, &s->sa, nf ? s->s1.a : tgt, NULL, NULL, df,
                           dfin, NULL, NULL);
  }
  if (!st) st = attn_nn_sub_in_backward(&m->norm1, p, nf, &s->s1, tgt, dfin, dtgt);
  free(dx2);
  free(dx1);
  free(df);
  free(dfin);
  return st;
}
