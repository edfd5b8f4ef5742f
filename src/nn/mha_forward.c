/* MHA forward: project q/k/v into [B, L, E] (head h = columns h*hd..),
 * attention through attn_sdpa_forward on strided views, out projection.
 * With dropout on (training, p > 0) the SDPA descriptor carries it
 * (attn/sdpa.h dropout_*): the flash kernels drop the probabilities in their
 * tiles, or the math path when weights are asked for (the same mask). */
#include <stdlib.h>
#include <string.h>

#include "attn/sdpa_bf16.h"
#include "nn/nn_internal.h"

static const float *pick_src(int i, int self, const float *q, const float *k, const float *v) {
  if (i == 0 || self) return q;
  return i == 1 ? k : v;
}

attn_status attn_nn_mha_project(const attn_mha *m, const attn_params *p, const attn_nn_ctx *ctx,
                                int i, const float *x, float *y, int64_t rows) {
  if (m->c.style == ATTN_MHA_SEED_SHARED) rows *= m->c.num_heads;  // [B*L*H, hd]
  const float *W = attn_params_data(p, m->w[i]) + m->wo[i];
  const float *b = m->b[i] >= 0 ? attn_params_data(p, m->b[i]) + m->bo[i] : NULL;
  return attn_dense_forward_ctx(ctx, x, W, b, y, rows, m->in[i], m->out[i]);
}

static void write_weights(const attn_mha *m, const attn_mha_saved *s, const float *P, float *w,
                          int average) {
  int64_t B = s->B, H = m->c.num_heads, LL = s->Lq * s->Lk;
  if (!average) {
    memcpy(w, P, (size_t)(B * H * LL) * sizeof(float));
    return;
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t e = 0; e < LL; e++) {
      float acc = 0.0f;
      for (int64_t h = 0; h < H; h++) acc += P[(b * H + h) * LL + e];
      w[b * LL + e] = acc / (float)H;
    }
}

/* extra key rows (mha_extra_kv.c): sizes into s, checks */
static attn_status extra_sizes(const attn_mha *m, attn_mha_saved *s, const float *sk,
                               const float *sv, int64_t Ls) {
  s->static_k = sk != NULL;
  s->static_v = sv != NULL;
  s->Lk_base = (sk || sv) ? Ls : s->Lk_in;
  if ((sk || sv) && (m->c.style != ATTN_MHA_TORCH || m->c.num_kv_heads != m->c.num_heads ||
                     m->c.add_bias_kv || Ls <= 0 || (!(sk && sv) && Ls != s->Lk_in)))
    return attn_set_error(ATTN_EINVAL,
                          "mha_forward: static_k / static_v need the TORCH style without grouped "
                          "key/value heads and without add_bias_kv (as torch), Ls %lld > 0 and, "
                          "with one of them only, Ls = Lk %lld",
                          (long long)Ls, (long long)s->Lk_in);
  s->Lk = s->Lk_base + (m->c.add_bias_kv != 0) + (m->c.add_zero_attn != 0);
  return ATTN_OK;
}

attn_status attn_mha_forward(const attn_mha *m, const attn_params *p, const attn_nn_ctx *ctx,
                             attn_mha_saved *s, const float *query, const float *key,
                             const float *value, int64_t B, int64_t Lq, int64_t Lk,
                             const attn_mha_masks *masks, float *out, float *attn_weights,
                             int average_weights) {
  return attn_mha_forward_static(m, p, ctx, s, query, key, value, NULL, NULL, 0, B, Lq, Lk, masks,
                                 out, attn_weights, average_weights);
}

attn_status attn_mha_forward_static(const attn_mha *m, const attn_params *p,
                                    const attn_nn_ctx *ctx, attn_mha_saved *s, const float *query,
                                    const float *key, const float *value, const float *static_k,
                                    const float *static_v, int64_t Ls, int64_t B, int64_t Lq,
                                    int64_t Lk, const attn_mha_masks *masks, float *out,
                                    float *attn_weights, int average_weights) {
  static const attn_nn_ctx zero_ctx;
  if (!ctx) ctx = &zero_ctx;
  if (!m || !p || !p->data || !s || !query || !out)
    return attn_set_error(ATTN_EINVAL, "mha_forward: NULL module, params, saved, query or out");
  if ((key == NULL) != (value == NULL))
    return attn_set_error(ATTN_EINVAL, "mha_forward: give both key and value, or neither");
  int self = key == NULL;
  if (self) Lk = Lq;
  if (B <= 0 || Lq <= 0 || Lk <= 0)
    return attn_set_error(ATTN_EINVAL, "mha_forward: B=%lld Lq=%lld Lk=%lld must be positive",
                          (long long)B, (long long)Lq, (long long)Lk);
  attn_mha_saved_free(s);
  s->B = B;
  s->Lq = Lq;
  s->Lk = s->Lk_in = s->Lk_base = Lk;
  s->self = self;
  int64_t E = m->c.embed_dim, H = m->c.num_heads, Ekv = m->c.num_kv_heads * m->head_dim;
  const int extra = attn_nn_mha_extra(m, static_k, static_v);
  if (extra) {
    attn_status est = extra_sizes(m, s, static_k, static_v, Ls);
    if (est) return est;
    Lk = s->Lk;
  }
  if (masks && masks->cu_seqlens) {  // packed rows (mha_varlen.c)
    attn_status vst = attn_nn_mha_varlen_check(m, ctx, masks, self, extra, attn_weights, B, Lq);
    if (vst) return vst;
    s->cu_seqlens = masks->cu_seqlens;
    s->n_seqs = masks->n_seqs;
    s->max_seqlen = masks->max_seqlen;
  }
  int bf16 = !extra && attn_nn_mha_bf16_applies(m, ctx, self);
  // bf16 flash attention: q, k, v only in bf16 (the math backend stays the f32 reference)
  int flash16 = bf16 && !attn_nn_dropout_on(ctx, m->c.dropout) && !attn_weights &&
                ctx->backend != ATTN_BACKEND_MATH;
  if (!flash16) {
    s->q = NN_ALLOC_F(&s->arena, B * Lq * E);
    s->k = NN_ALLOC_F(&s->arena, B * Lk * Ekv);
    s->v = NN_ALLOC_F(&s->arena, B * Lk * Ekv);
    if (!s->q || !s->k || !s->v) return ATTN_ENOMEM;
  }
  s->ctx = NN_ALLOC_F(&s->arena, B * Lq * E);
  s->lse = NN_ALLOC_F(&s->arena, B * H * Lq);
  if (!s->ctx || !s->lse) return ATTN_ENOMEM;
  float *dst[3] = {s->q, s->k, s->v};
  attn_status st = ATTN_OK;
  if (bf16) st = attn_nn_mha_project_bf16(m, p, s, query, flash16);
  float *kv_in = NULL; /* extra rows: the projections [2, B, Lk_in, E] before extend_kv */
  if (extra) {
    kv_in = attn_nn_scratch(2 * B * s->Lk_in * E);
    if (!kv_in) return ATTN_ENOMEM;
    dst[1] = kv_in;
    dst[2] = kv_in + B * s->Lk_in * E;
  }
  const float *stat[3] = {NULL, static_k, static_v};
  for (int i = 0; i < 3 && !st && !s->xh; i++)
    if (!stat[i])
      st = attn_nn_mha_project(m, p, ctx, i, pick_src(i, self, query, key, value), dst[i],
                               B * (i ? s->Lk_in : Lq));
  if (!st && extra)
    st = attn_nn_mha_extend_kv(m, p, s, static_k ? NULL : dst[1], static_v ? NULL : dst[2],
                               static_k, static_v);
  free(kv_in);
  attn_mha_masks padded;
  if (!st && extra && masks) st = attn_nn_mha_pad_masks(m, masks, s, &padded);
  if (!st) st = attn_nn_mha_build_masks(m, extra && masks ? &padded : masks, s);
  if (st) return st;
  if (attn_nn_dropout_on(ctx, m->c.dropout)) {
    s->drop_p = m->c.dropout;
    s->drop_seed = attn_nn_dropout_seed(ctx, m->site);
    s->drop_batch0 = ctx->shard_rows > 0 ? ctx->shard_row0 : 0;  // a shard draws its rows' masks
  }
  attn_sdpa_desc d;
  attn_nn_mha_desc(m, s, &d);
  float *P = NULL, *tmp = NULL;
  if (attn_weights) {  // the probabilities (after dropout, if any) come from the math path
    tmp = attn_nn_scratch(B * H * Lq * Lk);
    if (!tmp) return ATTN_ENOMEM;
    st = attn_sdpa_forward(&d, &(attn_sdpa_args){.path = ATTN_PATH_MATH,
                                                 .q = s->q,
                                                 .k = s->k,
                                                 .v = s->v,
                                                 .out = s->ctx,
                                                 .lse = s->lse,
                                                 .probs = tmp});
    P = tmp;
  } else if (s->cu_seqlens) {
    st = attn_nn_mha_varlen_sdpa(m, ctx, s, NULL, NULL, NULL, NULL);
  } else {
    attn_sdpa_args a;
    attn_nn_mha_sdpa_call(m, ctx, s, &d, &a);
    st = attn_sdpa_forward(&d, &a);
  }
  if (!st && attn_weights) write_weights(m, s, P, attn_weights, average_weights);
  free(tmp);
  if (st) return st;
  if (s->xh) return attn_nn_mha_out_bf16(m, p, s, out);
  if (m->has_out) return attn_linear_forward_ctx(&m->out_lin, p, ctx, s->ctx, out, B * Lq);
  memcpy(out, s->ctx, (size_t)(B * Lq * E) * sizeof(float));
  return ATTN_OK;
}
