/* MHA self-attention on packed variable-length rows (attn_mha_masks.
 * cu_seqlens): the projections run on the T real rows as on any batch; the
 * attention is attn_sdpa_varlen_* on the [T, H * hd] views (the packed
 * contiguous layout; bf16 training: the bf16 q | k | v rows), each sequence
 * seeing its own rows only. */
#include "attn/sdpa_varlen.h"
#include "nn/nn_internal.h"

attn_status attn_nn_mha_varlen_check(const attn_mha *m, const attn_nn_ctx *ctx,
                                     const attn_mha_masks *masks, int self, int extra,
                                     const float *attn_weights, int64_t B, int64_t Lq) {
  const int32_t *cu = masks->cu_seqlens;
  if (!self || extra || attn_weights || masks->key_padding_bool || masks->key_padding_float ||
      masks->attn_bool || masks->attn_float || masks->causal)
    return attn_set_error(ATTN_EUNSUPPORTED, "mha_forward: packed rows (cu_seqlens) are for plain "
                          "self-attention: no other mask, extra keys or attention weights out");
  if (attn_nn_dropout_on(ctx, m->c.dropout))
    return attn_set_error(ATTN_EUNSUPPORTED, "mha_forward: packed rows (cu_seqlens) have no "
                          "attention dropout (p %g)", (double)m->c.dropout);
  if (B != 1 || masks->n_seqs <= 0 || masks->max_seqlen <= 0 || cu[0] != 0 ||
      cu[masks->n_seqs] != Lq)
    return attn_set_error(ATTN_EINVAL, "mha_forward: packed rows need B = 1 and cu_seqlens from 0 "
                          "to Lq %lld over n_seqs %lld > 0 sequences", (long long)Lq,
                          (long long)masks->n_seqs);
  return ATTN_OK;
}

attn_status attn_nn_mha_varlen_sdpa(const attn_mha *m, const attn_nn_ctx *ctx,
                                    const attn_mha_saved *s, const float *dout, float *dq,
                                    float *dk, float *dv) {
  attn_sdpa_desc d;
  attn_sdpa_args a;
  attn_nn_mha_sdpa_call(m, ctx, s, &d, &a); // bf16 training: the bf16 kernel per sequence
  d.B = s->n_seqs;
  d.Lq = d.Lk = s->max_seqlen;
  d.q_stride[0] = d.k_stride[0] = d.v_stride[0] = d.o_stride[0] = 0;  // (head, row) strides kept
  const attn_sdpa_varlen vl = {s->cu_seqlens, s->cu_seqlens, s->Lq, s->Lq};
  a.varlen = &vl;
  a.dout = dout, a.dq = dq, a.dk = dk, a.dv = dv;
  return dout ? attn_sdpa_backward(&d, &a) : attn_sdpa_forward(&d, &a);
}
