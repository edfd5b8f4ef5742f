/* The LM's incremental decoder: each block on the new positions only, keys
 * and values through the KV cache seam (lm_generate.h, lm_kvcache.h). */
#include <stdlib.h>
#include <string.h>

#include "apps/lm/lm_generate.h"
#include "attn/kernels.h"

void attn_lm_decoder_free(attn_lm_decoder *d) {
  if (!d) return;
  attn_lm_kv_free(&d->kv);
  attn_ffn_saved_free(&d->fs);
  free(d->scratch);
  memset(d, 0, sizeof *d);
}

attn_status attn_lm_decoder_init(attn_lm_decoder *d, const attn_lm_model *m,
                                 const attn_lm_kv_spec *kv, int64_t cap) {
  if (!d || !m || !m->p.data) return attn_set_error(ATTN_EINVAL, "lm decoder: NULL argument");
  memset(d, 0, sizeof *d);
  d->m = m;
  const int64_t H = m->c.heads;
  return attn_lm_kv_init(&d->kv, kv, (int)m->c.layers, H, H, m->c.d_model / H,
                         cap > 0 && cap < m->c.max_len ? cap : m->c.max_len);
}

int64_t attn_lm_decoder_len(const attn_lm_decoder *d) { return d ? attn_lm_kv_len(&d->kv, 0) : 0; }

static attn_status reserve(attn_lm_decoder *d, int64_t n) {
  if (n <= d->cap) return ATTN_OK;
  const int64_t E = d->m->c.d_model;
  float *s = realloc(d->scratch, (size_t)(n * (7 * E + 2)) * sizeof *s);
  if (!s)
    return attn_set_error(ATTN_ENOMEM, "lm decoder: out of memory for %lld positions",
                          (long long)n);
  d->scratch = s;
  d->cap = n;
  return ATTN_OK;
}

attn_status attn_lm_decoder_step(attn_lm_decoder *d, const int32_t *ids, int64_t n, float *logits,
                                 float *last, float *probs) {
  if (!d || !d->m || !ids) return attn_set_error(ATTN_EINVAL, "lm decoder step: NULL argument");
  const attn_lm_model *m = d->m;
  const int64_t E = m->c.d_model, H = m->c.heads, hd = E / H, V = m->c.vocab;
  const int64_t pos = attn_lm_decoder_len(d);
  if (n < 1 || pos + n > d->kv.cap)
    return attn_set_error(
        ATTN_EINVAL, "lm decoder: %lld new positions after %lld exceed the %s of %lld tokens",
        (long long)n, (long long)pos,
        d->kv.cap == m->c.max_len ? "model's context" : "decoder's cache", (long long)d->kv.cap);
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= V)
      return attn_set_error(ATTN_EINVAL, "lm decoder: token id %d outside the vocabulary of %lld",
                            ids[i], (long long)V);
  attn_status st = reserve(d, n);
  if (st) return st;
  const int64_t R = n * E;
  float *x = d->scratch, *a = x + R, *q = a + R, *k = q + R, *v = k + R, *c = v + R, *o = c + R;
  float *mean = o + R, *rstd = mean + n;
  const attn_params *p = &m->p;
  const attn_nn_ctx ctx = {0};
  if ((st = attn_embedding_f32(ids, n, attn_params_data(p, m->wte), V, E, x))) return st;
  for (int l = 0; l < (int)m->c.layers; l++) {
    const attn_vattn *at = &m->att[l];
    if ((st = attn_layernorm_forward(&m->ln1[l], p, x, a, mean, rstd, n)) ||
        (st = attn_linear_forward(&at->q, p, a, q, n)) ||
        (st = attn_linear_forward(&at->k, p, a, k, n)) ||
        (st = attn_linear_forward(&at->v, p, a, v, n)) ||
        (st = attn_rope_partial_f32(q, q, 1, n, H, hd, hd, 10000.0f, pos, ATTN_ROPE_HALF)) ||
        (st = attn_rope_partial_f32(k, k, 1, n, H, hd, hd, 10000.0f, pos, ATTN_ROPE_HALF)) ||
        (st = attn_lm_kv_step(&d->kv, l, q, k, v, n, c,
                              probs ? probs + (int64_t)l * H * n * (pos + n) : NULL)))
      return st;
    if ((st = attn_linear_forward(&at->o, p, c, o, n))) return st;
    for (int64_t i = 0; i < R; i++)
      x[i] += o[i];
    if ((st = attn_layernorm_forward(&m->ln2[l], p, x, a, mean, rstd, n)) ||
        (st = attn_ffn_forward(&m->ffn[l], p, &ctx, &d->fs, a, o, n)))
      return st;
    for (int64_t i = 0; i < R; i++)
      x[i] += o[i];
  }
  if ((st = attn_layernorm_forward(&m->lnf, p, x, a, mean, rstd, n))) return st;
  const float *W = attn_params_data(p, m->head_w);
  if (logits) {
    st = attn_dense_forward_f32(a, W, NULL, logits, n, E, V);
    if (!st && last) memcpy(last, logits + (n - 1) * V, (size_t)V * sizeof *last);
    return st;
  }
  return last ? attn_dense_forward_f32(a + (n - 1) * E, W, NULL, last, 1, E, V) : ATTN_OK;
}
