/* The LM's incremental decoder: each block on the new positions only, keys
 * and values through the KV cache seam (lm_generate.h, apps/gen/gen_kvcache.h). */
#include <stdlib.h>
#include <string.h>

#include "apps/lm/lm_generate.h"
#include "attn/kernels.h"

void attn_lm_decoder_free(attn_lm_decoder *d) {
  if (!d) return;
  attn_lm_decoder_work_free(&d->work);
  memset(d, 0, sizeof *d);
}

attn_status attn_lm_decoder_init(attn_lm_decoder *d, const attn_lm_model *m,
                                 const attn_lm_kv_spec *kv, int64_t cap) {
  if (!d || !m || !m->p.data) return attn_set_error(ATTN_EINVAL, "lm decoder: NULL argument");
  memset(d, 0, sizeof *d);
  d->m = m;
  const int64_t H = m->c.heads;
  return attn_lm_kv_init(&d->work.kv, kv, (int)m->c.layers, H, H, m->c.d_model / H,
                         cap > 0 && cap < m->c.max_len ? cap : m->c.max_len);
}

static attn_status add_linear(attn_lm_decoder *d, const attn_linear *l) {
  const attn_params *p = &d->m->p;
  return attn_qlinear_set_add_f32(&d->work.ql, attn_params_data(p, l->weight),
                                  l->bias >= 0 ? attn_params_data(p, l->bias) : NULL, l->out,
                                  l->in);
}

attn_status attn_lm_decoder_set_int8(attn_lm_decoder *d) {
  if (!d || !d->m) return attn_set_error(ATTN_EINVAL, "lm decoder: NULL argument");
  if (d->work.ql) return ATTN_OK;
  const attn_lm_model *m = d->m;
  attn_status st = ATTN_OK;
  for (int l = 0; l < (int)m->c.layers && !st; l++) {
    const attn_linear *lin[6] = {&m->att[l].q, &m->att[l].k,  &m->att[l].v,
                                 &m->att[l].o, &m->ffn[l].l1, &m->ffn[l].l2};
    for (int j = 0; j < 6 && !st; j++)
      st = add_linear(d, lin[j]);
  }
  if (!st)
    st = attn_qlinear_set_add_f32(&d->work.ql, attn_params_data(&m->p, m->head_w), NULL, m->c.vocab,
                                  m->c.d_model);
  if (st) {
    attn_qlinear_set_free(d->work.ql);
    d->work.ql = NULL;
  }
  return st;
}

int64_t attn_lm_decoder_len(const attn_lm_decoder *d) {
  return d ? attn_lm_kv_len(&d->work.kv, 0) : 0;
}

attn_status attn_lm_decoder_step(attn_lm_decoder *d, const int32_t *ids, int64_t n, float *logits,
                                 float *last, float *probs) {
  if (!d || !d->m || !ids) return attn_set_error(ATTN_EINVAL, "lm decoder step: NULL argument");
  const attn_lm_model *m = d->m;
  const int64_t E = m->c.d_model, H = m->c.heads, hd = E / H, V = m->c.vocab;
  const int64_t pos = attn_lm_decoder_len(d);
  attn_status st =
      attn_lm_step_check("lm decoder", ids, n, pos, d->work.kv.cap,
                         d->work.kv.cap == m->c.max_len ? "model's context" : "decoder's cache", V);
  if (st) return st;
  st = attn_lm_scratch_reserve(&d->work.scratch, &d->work.cap, n, E);
  if (st) return st;
  const int64_t R = n * E;
  float *x = d->work.scratch, *a = x + R, *q = a + R, *k = q + R, *v = k + R, *c = v + R,
        *o = c + R;
  float *mean = o + R, *rstd = mean + n;
  const attn_params *p = &m->p;
  attn_nn_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.qlinears = d->work.ql; /* NULL: f32 */
  if ((st = attn_embedding_f32(ids, n, attn_params_data(p, m->wte), V, E, x))) return st;
  for (int l = 0; l < (int)m->c.layers; l++) {
    const attn_vattn *at = &m->att[l];
    if ((st = attn_layernorm_forward(&m->ln1[l], p, x, a, mean, rstd, n)) ||
        (st = attn_linear_forward_ctx(&at->q, p, &ctx, a, q, n)) ||
        (st = attn_linear_forward_ctx(&at->k, p, &ctx, a, k, n)) ||
        (st = attn_linear_forward_ctx(&at->v, p, &ctx, a, v, n)) ||
        (st = attn_rope_partial_f32(q, q, 1, n, H, hd, hd, 10000.0f, pos, ATTN_ROPE_HALF)) ||
        (st = attn_rope_partial_f32(k, k, 1, n, H, hd, hd, 10000.0f, pos, ATTN_ROPE_HALF)) ||
        (st = attn_lm_kv_step(&d->work.kv, l, q, k, v, n, c,
                              probs ? probs + (int64_t)l * H * n * (pos + n) : NULL)))
      return st;
    if ((st = attn_linear_forward_ctx(&at->o, p, &ctx, c, o, n))) return st;
    for (int64_t i = 0; i < R; i++)
      x[i] += o[i];
    if ((st = attn_layernorm_forward(&m->ln2[l], p, x, a, mean, rstd, n)) ||
        (st = attn_ffn_forward(&m->ffn[l], p, &ctx, &d->work.fs, a, o, n)))
      return st;
    for (int64_t i = 0; i < R; i++)
      x[i] += o[i];
  }
  if ((st = attn_layernorm_forward(&m->lnf, p, x, a, mean, rstd, n))) return st;
  return attn_lm_head_logits(&ctx, a, attn_params_data(p, m->head_w), n, E, V, logits, last);
}
