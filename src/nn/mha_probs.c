/* Attention probabilities of a saved MHA forward, recomputed on request from
 * its projected q, k and log-sum-exp: the flash path stores no probabilities,
 * so normal runs pay nothing; a picture asks only for the heads and rows it
 * draws. After a forward with attention dropout: the softmax before it. */
#include "attn/sdpa.h"
#include "nn/nn_internal.h"

attn_status attn_mha_probs(const attn_mha *m, const attn_mha_saved *s, int64_t b, int64_t h,
                           int64_t row0, int64_t nrows, float *probs) {
  if (!m || !s || !probs) return attn_set_error(ATTN_EINVAL, "mha_probs: NULL argument");
  if (s->qkvh)
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "mha_probs: the forward ran bf16 flash attention (q, k kept in bf16 only)");
  if (!s->q || !s->k || !s->lse) return attn_set_error(ATTN_EINVAL, "mha_probs: no saved forward");
  attn_sdpa_desc d;
  attn_nn_mha_desc(m, s, &d);
  return attn_nn_probs_rows(&d, s->q, s->k, s->lse, b, h, row0, nrows, probs);
}

attn_status attn_nn_probs_rows(const attn_sdpa_desc *d, const float *q, const float *k,
                               const float *lse, int64_t b, int64_t h, int64_t row0, int64_t nrows,
                               float *probs) {
  const attn_sdpa_rows rows = {b, h, row0, nrows};
  const attn_sdpa_args a = {.dtype = ATTN_F32, .q = q, .k = k, .lse = (float *)lse, .probs = probs,
                            .probs_rows = &rows};
  return attn_sdpa_forward(d, &a);
}
