/* MHA backward: out projection, attention (attn_sdpa_backward; with the
 * forward's attention dropout in the descriptor), then the q/k/v projections.
 * Everything accumulates into p->grad and dquery/dkey/dvalue. */
#include <stdlib.h>
#include <string.h>

#include "attn/sdpa_bf16.h"
#include "nn/nn_internal.h"

attn_status attn_mha_backward(const attn_mha *m, attn_params *p, const attn_nn_ctx *ctx,
                              const attn_mha_saved *s, const float *query, const float *key,
                              const float *value, const float *dout, float *dquery,
                              float *dkey, float *dvalue) {
  return attn_mha_backward_static(m, p, ctx, s, query, key, value, dout, dquery, dkey, dvalue,
                                  NULL, NULL);
}

attn_status attn_mha_backward_static(const attn_mha *m, attn_params *p, const attn_nn_ctx *ctx,
                                     const attn_mha_saved *s, const float *query,
                                     const float *key, const float *value, const float *dout,
                                     float *dquery, float *dkey, float *dvalue, float *dstatic_k,
                                     float *dstatic_v) {
  static const attn_nn_ctx zero_ctx;
  if (!ctx) ctx = &zero_ctx;
  if (!m || !p || !p->grad || !s || !query || !dout)
    return attn_set_error(ATTN_EINVAL, "mha_backward: NULL module, params, saved, query or dout");
  if (!s->q && !s->qkvh) return attn_set_error(ATTN_EINVAL, "mha_backward: no saved forward");
  if (!s->self && (!key || !value))
    return attn_set_error(ATTN_EINVAL, "mha_backward: cross attention needs key and value");
  int64_t B = s->B, Lq = s->Lq, Lk = s->Lk, E = m->c.embed_dim;
  int64_t Ekv = m->c.num_kv_heads * m->head_dim;
  /* dctx and dq, dk, dv are written in full before they are read (SDPA
   * overwrites its gradients) */
  float *dctx = attn_nn_scratch_uninit(B * Lq * E), *dq = NULL, *dk = NULL, *dv = NULL;
  float *dqkv = NULL;
  if (s->qkvh) {  // bf16 flash: dq, dk, dv interleaved [B, L, 3E]
    dqkv = attn_nn_scratch_uninit(B * Lq * 3 * E);
  } else {
    dq = attn_nn_scratch_uninit(B * Lq * E);
    dk = attn_nn_scratch_uninit(B * Lk * Ekv);
    dv = attn_nn_scratch_uninit(B * Lk * Ekv);
  }
  attn_status st = (!dctx || (s->qkvh ? !dqkv : (!dq || !dk || !dv))) ? ATTN_ENOMEM : ATTN_OK;
  if (!st) {
    if (s->xh)
      st = attn_nn_mha_out_backward_bf16(m, p, s, dout, dctx);
    else if (m->has_out)
      st = attn_nn_linear_backward_set(&m->out_lin, p, ctx, s->ctx, dout, dctx, B * Lq);
    else
      memcpy(dctx, dout, (size_t)(B * Lq * E) * sizeof(float));
  }
  if (!st && s->cu_seqlens) {  // packed rows (mha_varlen.c)
    st = s->qkvh ? attn_nn_mha_varlen_sdpa(m, ctx, s, dctx, dqkv, dqkv + E, dqkv + 2 * E)
                 : attn_nn_mha_varlen_sdpa(m, ctx, s, dctx, dq, dk, dv);
  } else if (!st) { // bf16 flash: dq, dk, dv interleaved [B, L, 3E] in dqkv
    attn_sdpa_desc d;
    attn_sdpa_args a;
    attn_nn_mha_sdpa_call(m, ctx, s, &d, &a);
    a.dout = dctx;
    a.dq = s->qkvh ? dqkv : dq, a.dk = s->qkvh ? dqkv + E : dk, a.dv = s->qkvh ? dqkv + 2 * E : dv;
    st = attn_sdpa_backward(&d, &a);
  }
  const float *dproj[3] = {dq, dk, dv};
  float *dkv_in = NULL; /* extra rows: dk, dv of the projections [2, B, Lk_in, E] */
  if (!st && (s->static_k || s->static_v || m->c.add_bias_kv || m->c.add_zero_attn)) {
    dkv_in = attn_nn_scratch(2 * B * s->Lk_in * Ekv);
    st = dkv_in ? attn_nn_mha_split_dkv(m, p, s, dk, dv, dkv_in, dkv_in + B * s->Lk_in * Ekv,
                                        dstatic_k, dstatic_v)
                : ATTN_ENOMEM;
    dproj[1] = s->static_k ? NULL : dkv_in;
    dproj[2] = s->static_v ? NULL : dkv_in + B * s->Lk_in * Ekv;
  }
  const float *src[3] = {query, s->self ? query : key, s->self ? query : value};
  float *dsrc[3] = {dquery, s->self ? dquery : dkey, s->self ? dquery : dvalue};
  if (!st && s->qkvh)
    st = attn_nn_mha_project_backward_bf16(m, p, s, dqkv, dqkv + E, dqkv + 2 * E, 3 * E, dquery);
  else if (!st && s->xh)
    st = attn_nn_mha_project_backward_bf16(m, p, s, dq, dk, dv, E, dquery);
  for (int i = 0; i < 3 && !st && !s->xh; i++) {
    if (!dproj[i]) continue; /* static_k / static_v: no projection */
    int64_t rows = B * (i ? s->Lk_in : Lq);
    if (m->c.style == ATTN_MHA_SEED_SHARED) rows *= m->c.num_heads;
    st = attn_dense_backward_ctx(ctx, src[i], attn_params_data(p, m->w[i]) + m->wo[i], dproj[i],
                                 dsrc[i], attn_params_grad(p, m->w[i]) + m->wo[i],
                                 m->b[i] >= 0 ? attn_params_grad(p, m->b[i]) + m->bo[i] : NULL,
                                 rows, m->in[i], m->out[i]);
  }
  free(dctx);
  free(dkv_in);
  free(dqkv);
  free(dq);
  free(dk);
  free(dv);
  return st;
}
