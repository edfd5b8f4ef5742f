/* One TransformerDecoderLayer on the new positions of an incremental decode
 * (include/attn/nn.h), the same sublayers as attn_decoder_forward
 * (src/nn/decoder.c) without dropout:
 *   self-attention: the new positions' K/V appended to the layer's cache, the
 *     queries attending causally to every cached step (q_offset = len - n);
 *   cross-attention: against the memory's K/V projected once; the G = B/B_mem
 *     decoder rows of one memory row are G*n query rows of one SDPA batch
 *     entry ([B, n, E] read as [B_mem, G*n, E]: no copies of the memory). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sdpa.h"
#include "nn/nn_internal.h"

static void attn_desc(const attn_mha *a, attn_sdpa_desc *d, int64_t B, int64_t Lq, int64_t Lk) {
  const int64_t E = a->c.embed_dim, hd = a->head_dim, Ekv = a->c.num_kv_heads * hd;
  attn_sdpa_desc_init(d, B, a->c.num_heads, a->c.num_kv_heads, Lq, Lk, hd, hd);
  if (a->c.scale > 0.0f) {
    d->scale = a->c.scale;
    d->has_scale = 1;
  }
  const int64_t qs[3] = {Lq * E, hd, E}, ks[3] = {Lk * Ekv, hd, Ekv};
  for (int i = 0; i < 3; i++) {
    d->q_stride[i] = d->o_stride[i] = qs[i];
    d->k_stride[i] = d->v_stride[i] = ks[i];
  }
}

/* the SDPA's scale when none is given */
static float default_scale(const attn_mha *a) { return (float)(1.0 / sqrt((double)a->head_dim)); }

/* fout [B*n, E] = self-attention of x's n new positions (appended to kc) */
static attn_status self_attend(const attn_mha *a, const attn_params *p, const attn_nn_ctx *ctx,
                               attn_kv_cache *kc, const float *x, int64_t B, int64_t n,
                               float *fout) {
  const int64_t E = a->c.embed_dim, H = a->c.num_heads, Ekv = a->c.num_kv_heads * a->head_dim;
  const int64_t rows = B * n;
  float *buf = attn_nn_scratch_uninit(2 * rows * E + 4 * rows * Ekv + B * H * n);
  if (!buf) return ATTN_ENOMEM;
  float *q = buf, *o = q + rows * E, *k = o + rows * E, *v = k + rows * Ekv;
  float *kt = v + rows * Ekv, *vt = kt + rows * Ekv, *lse = vt + rows * Ekv;
  attn_status st = ATTN_OK;
  for (int i = 0; i < 3 && !st; i++)
    st = attn_nn_mha_project(a, p, ctx, i, x, i == 0 ? q : i == 1 ? k : v, rows);
  if (!st && n > 1) { /* one position: [B, 1, Hkv, hd] is already heads first */
    attn_nn_heads_first(k, kt, B, n, a->c.num_kv_heads, a->head_dim);
    attn_nn_heads_first(v, vt, B, n, a->c.num_kv_heads, a->head_dim);
  }
  if (!st) st = attn_kv_cache_append(kc, n > 1 ? kt : k, n > 1 ? vt : v, n);
  if (!st && n == 1 && ctx->backend == ATTN_BACKEND_AUTO) { /* one step: no SDPA tiling */
    st = attn_nn_attend_last(kc, H, a->c.scale > 0.0f ? a->c.scale : default_scale(a), q, o);
  } else if (!st) {
    attn_sdpa_desc d;
    attn_desc(a, &d, B, n, kc->len);
    d.causal = 1;
    st = attn_kv_cache_attend(kc, &d, ctx->backend, q, n, o, lse);
  }
  if (!st) st = attn_linear_forward_ctx(&a->out_lin, p, ctx, o, fout, rows);
  free(buf);
  return st;
}

/* probs [B, H, n, Lm] from the SDPA batch entry w's rows g*n + t */
static attn_status write_probs(const attn_sdpa_desc *d, const float *q, const float *k,
                               const float *lse, int64_t G, int64_t n, float *probs) {
  const int64_t H = d->Hq, Lm = d->Lk;
  float *tmp = attn_nn_scratch(d->Lq * Lm);
  if (!tmp) return ATTN_ENOMEM;
  attn_status st = ATTN_OK;
  for (int64_t w = 0; w < d->B && !st; w++)
    for (int64_t h = 0; h < H && !st; h++) {
      st = attn_nn_probs_rows(d, q, k, lse, w, h, 0, d->Lq, tmp);
      for (int64_t g = 0; g < G && !st; g++)
        memcpy(probs + ((w * G + g) * H + h) * n * Lm, tmp + g * n * Lm,
               (size_t)(n * Lm) * sizeof(float));
    }
  free(tmp);
  return st;
}

/* fout [B*n, E] = cross-attention of x's n new positions to layer's memory */
static attn_status cross_attend(const attn_mha *a, const attn_params *p, const attn_nn_ctx *ctx,
                                const attn_decoder_cache *c, int layer, const float *x, int64_t n,
                                float *fout, float *probs) {
  const int64_t E = a->c.embed_dim, H = a->c.num_heads, rows = c->B * n, G = c->B / c->B_mem;
  const int64_t nm = c->B_mem * c->Lm * c->Hkv * c->hd;
  const float *K = c->cross_k + layer * nm, *V = c->cross_v + layer * nm;
  float *buf = attn_nn_scratch_uninit(2 * rows * E + c->B * H * n);
  if (!buf) return ATTN_ENOMEM;
  float *q = buf, *o = q + rows * E, *lse = o + rows * E;
  attn_sdpa_desc d;
  attn_desc(a, &d, c->B_mem, G * n, c->Lm);
  d.key_lens = c->mem_lens;
  attn_status st = attn_nn_mha_project(a, p, ctx, 0, x, q, rows);
  if (!st && n == 1 && !probs && ctx->backend == ATTN_BACKEND_AUTO)
    st = attn_nn_attend_memory(c, K, V, d.has_scale ? d.scale : default_scale(a), q, o);
  else if (!st)
    st = attn_sdpa_forward(
        &d,
        &(attn_sdpa_args){
            .path = (attn_sdpa_path)ctx->backend, .q = q, .k = K, .v = V, .out = o, .lse = lse});
  if (!st && probs) st = write_probs(&d, q, K, lse, G, n, probs);
  if (!st) st = attn_linear_forward_ctx(&a->out_lin, p, ctx, o, fout, rows);
  free(buf);
  return st;
}

static attn_status check_step(const attn_decoder_layer *m, const attn_decoder_cache *c, int layer,
                              int64_t n) {
  if (!c->self || c->B_mem < 1)
    return attn_set_error(ATTN_EINVAL, "decoder_step: cache not initialised or no memory set");
  if (layer < 0 || layer >= c->n_layers)
    return attn_set_error(ATTN_EINVAL, "decoder_step: layer %d of %d", layer, c->n_layers);
  if (n < 1) return attn_set_error(ATTN_EINVAL, "decoder_step: n = %lld", (long long)n);
  const attn_mha *a = &m->self_attn;
  if (m->c.d_model != c->E || a->c.num_heads != c->H || a->c.num_kv_heads != c->Hkv ||
      a->c.style != ATTN_MHA_TORCH)
    return attn_set_error(ATTN_EINVAL,
                          "decoder_step: layer %d does not match the cache (d_model "
                          "%lld, heads %lld; cache %lld, %lld)",
                          layer, (long long)m->c.d_model, (long long)a->c.num_heads,
                          (long long)c->E, (long long)c->H);
  return ATTN_OK;
}

attn_status attn_decoder_step(const attn_decoder_layer *m, const attn_params *p,
                              const attn_nn_ctx *ctx, attn_decoder_cache *c, int layer,
                              const float *x, int64_t n, float *out, float *cross_probs) {
  if (!m || !p || !p->data || !c || !x || !out)
    return attn_set_error(ATTN_EINVAL, "decoder_step: NULL argument");
  attn_status st = check_step(m, c, layer, n);
  if (st) return st;
  attn_nn_ctx run = {0};
  if (ctx) run = *ctx;
  run.training = 0; // inference: no dropout
  const int64_t rows = c->B * n, E = c->E;
  const int nf = m->c.norm_first;
  const float drop = m->c.dropout;
  float *buf = attn_nn_scratch_uninit(3 * rows * E);
  if (!buf) return ATTN_ENOMEM;
  float *x1 = buf, *x2 = x1 + rows * E, *fout = x2 + rows * E;
  attn_sublayer_saved s1 = {0}, s2 = {0}, s3 = {0};
  attn_ffn_saved ff = {0};
  const float *fin;
  st = attn_nn_sub_in(&m->norm1, p, nf, &s1, x, rows, &fin);
  if (!st) st = self_attend(&m->self_attn, p, &run, &c->self[layer], fin, c->B, n, fout);
  if (!st) st = attn_nn_sub_out(&m->norm1, p, &run, nf, drop, m->site + 1, &s1, x, fout, x1);
  if (!st) st = attn_nn_sub_in(&m->norm2, p, nf, &s2, x1, rows, &fin);
  if (!st) st = cross_attend(&m->multihead_attn, p, &run, c, layer, fin, n, fout, cross_probs);
  if (!st) st = attn_nn_sub_out(&m->norm2, p, &run, nf, drop, m->site + 2, &s2, x1, fout, x2);
  if (!st) st = attn_nn_sub_in(&m->norm3, p, nf, &s3, x2, rows, &fin);
  if (!st) st = attn_ffn_forward(&m->ff, p, &run, &ff, fin, fout, rows);
  if (!st) st = attn_nn_sub_out(&m->norm3, p, &run, nf, drop, m->site + 3, &s3, x2, fout, out);
  attn_sublayer_saved_free(&s1);
  attn_sublayer_saved_free(&s2);
  attn_sublayer_saved_free(&s3);
  attn_ffn_saved_free(&ff);
  free(buf);
  return st;
}
