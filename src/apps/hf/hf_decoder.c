/* GPT-2's incremental decoder (hf_generate.h): each block on the new
 * positions only, keys and values through the LM's KV cache seam. */
#include <stdlib.h>
#include <string.h>

#include "apps/hf/hf_generate.h"
#include "attn/kernels.h"

void attn_hf_decoder_free(attn_hf_decoder *d) {
  if (!d) return;
  attn_lm_decoder_work_free(&d->work);
  memset(d, 0, sizeof *d);
}

/* every Linear of the layers and the LM head, quantized into d->work.ql */
static attn_status quantize(attn_hf_decoder *d) {
  const attn_hf *h = d->h;
  const attn_params *p = &h->p;
  const attn_hf_model *m = &h->m;
  attn_status st = ATTN_OK;
  for (int l = 0; l < (int)h->c.num_layers && !st; l++) {
    const attn_encoder_layer *L = &m->layers[l];
    const attn_mha *a = &L->self_attn;
    for (int j = 0; j < 3 && !st; j++)
      st = attn_qlinear_set_add_f32(&d->work.ql, attn_params_data(p, a->w[j]) + a->wo[j],
                                    a->b[j] >= 0 ? attn_params_data(p, a->b[j]) + a->bo[j] : NULL,
                                    a->out[j], a->in[j]);
    const attn_linear *lin[3] = {&a->out_lin, &L->ff.l1, &L->ff.l2};
    for (int j = 0; j < 3 && !st; j++)
      st = attn_qlinear_set_add_f32(&d->work.ql, attn_params_data(p, lin[j]->weight),
                                    lin[j]->bias >= 0 ? attn_params_data(p, lin[j]->bias) : NULL,
                                    lin[j]->out, lin[j]->in);
  }
  if (!st)
    st = attn_qlinear_set_add_f32(&d->work.ql,
                                  attn_params_data(p, m->lm_head >= 0 ? m->lm_head : m->word), NULL,
                                  h->c.vocab_size, h->c.hidden_size);
  return st;
}

attn_status attn_hf_decoder_init(attn_hf_decoder *d, const attn_hf *h, const attn_lm_kv_spec *kv,
                                 attn_hf_weights weights, int64_t cap) {
  if (!d || !h || !h->p.data) return attn_set_error(ATTN_EINVAL, "hf decoder: NULL argument");
  memset(d, 0, sizeof *d);
  const attn_hf_config *c = &h->c;
  if (c->arch != ATTN_HF_GPT2)
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "hf decoder: model_type '%s' is an encoder; generation needs gpt2",
                          h->model_type);
  if (weights != ATTN_HF_WEIGHTS_F32 && weights != ATTN_HF_WEIGHTS_INT8)
    return attn_set_error(ATTN_EINVAL, "hf decoder: unknown weights %d", (int)weights);
  if (attn_activation_gated(c->activation))
    return attn_set_error(ATTN_EUNSUPPORTED, "hf decoder: a gated activation");
  d->h = h;
  const int64_t H = c->num_heads, P = c->max_positions;
  attn_status st = attn_lm_kv_init(&d->work.kv, kv, (int)c->num_layers, H, H, c->hidden_size / H,
                                   cap > 0 && cap < P ? cap : P);
  if (!st && weights == ATTN_HF_WEIGHTS_INT8) st = quantize(d);
  if (st) attn_hf_decoder_free(d);
  return st;
}

int64_t attn_hf_decoder_len(const attn_hf_decoder *d) {
  return d && d->h ? attn_lm_kv_len(&d->work.kv, 0) : 0;
}

/* y [n, out] = x · W_jᵀ + b_j: projection j (q, k, v) of the packed in_proj */
static attn_status project(const attn_nn_ctx *ctx, const attn_mha *a, const attn_params *p, int j,
                           const float *x, float *y, int64_t n) {
  const float *W = attn_params_data(p, a->w[j]) + a->wo[j];
  const float *b = a->b[j] >= 0 ? attn_params_data(p, a->b[j]) + a->bo[j] : NULL;
  return attn_dense_forward_ctx(ctx, x, W, b, y, n, a->in[j], a->out[j]);
}

static void add_rows(float *x, const float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    x[i] += y[i];
}

attn_status attn_hf_decoder_step(attn_hf_decoder *d, const int32_t *ids, int64_t n, float *logits,
                                 float *last, float *probs) {
  if (!d || !d->h || !ids) return attn_set_error(ATTN_EINVAL, "hf decoder step: NULL argument");
  const attn_hf *h = d->h;
  const attn_hf_model *m = &h->m;
  const attn_params *p = &h->p;
  const int64_t E = h->c.hidden_size, V = h->c.vocab_size;
  const int64_t pos = attn_hf_decoder_len(d);
  attn_status st = attn_lm_step_check(
      "hf decoder", ids, n, pos, d->work.kv.cap,
      d->work.kv.cap == h->c.max_positions ? "model's n_positions" : "decoder's cache", V);
  if (st) return st;
  st = attn_lm_scratch_reserve(&d->work.scratch, &d->work.cap, n, E);
  if (st) return st;
  const int64_t R = n * E;
  float *x = d->work.scratch, *a = x + R, *q = a + R, *k = q + R, *v = k + R, *c = v + R,
        *o = c + R;
  float *mean = o + R, *rstd = mean + n;
  attn_nn_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.qlinears = d->work.ql; /* NULL: the f32 path */
  if ((st = attn_embedding_f32(ids, n, attn_params_data(p, m->word), V, E, x))) return st;
  add_rows(x, attn_params_data(p, m->position) + pos * E, R);
  for (int l = 0; l < (int)h->c.num_layers; l++) {
    const attn_encoder_layer *L = &m->layers[l];
    if ((st = attn_layernorm_forward(&L->norm1, p, x, a, mean, rstd, n)) ||
        (st = project(&ctx, &L->self_attn, p, 0, a, q, n)) ||
        (st = project(&ctx, &L->self_attn, p, 1, a, k, n)) ||
        (st = project(&ctx, &L->self_attn, p, 2, a, v, n)) ||
        (st =
             attn_lm_kv_step(&d->work.kv, l, q, k, v, n, c,
                             probs ? probs + (int64_t)l * h->c.num_heads * n * (pos + n) : NULL)) ||
        (st = attn_linear_forward_ctx(&L->self_attn.out_lin, p, &ctx, c, o, n)))
      return st;
    add_rows(x, o, R);
    if ((st = attn_layernorm_forward(&L->norm2, p, x, a, mean, rstd, n)) ||
        (st = attn_ffn_forward(&L->ff, p, &ctx, &d->work.fs, a, o, n)))
      return st;
    add_rows(x, o, R);
  }
  if ((st = attn_layernorm_forward(&m->norm, p, x, a, mean, rstd, n))) return st;
  const float *W = attn_params_data(p, m->lm_head >= 0 ? m->lm_head : m->word);
  return attn_lm_head_logits(&ctx, a, W, n, E, V, logits, last);
}

static attn_status step(void *d, const int32_t *ids, int64_t n, float *last, float *probs) {
  return attn_hf_decoder_step(d, ids, n, NULL, last, probs);
}

attn_status attn_hf_generate(const attn_hf *h, const int32_t *prompt, int64_t np, int64_t n_new,
                             const attn_lm_sampling *s, const attn_lm_kv_spec *kv,
                             attn_hf_weights weights, int32_t eos, int want_probs,
                             attn_lm_token_fn cb, void *user, attn_lm_generation *out) {
  if (!h || !prompt || !s || !out) return attn_set_error(ATTN_EINVAL, "hf generate: NULL argument");
  memset(out, 0, sizeof *out);
  if (h->c.arch != ATTN_HF_GPT2)
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "hf generate: model_type '%s' is an encoder; generation needs gpt2",
                          h->model_type);
  const int64_t P = h->c.max_positions;
  if (np >= 1 && n_new >= 1 && np + n_new > P)
    return attn_set_error(ATTN_EINVAL,
                          "hf generate: the prompt's %lld tokens + %lld new ones exceed the "
                          "model's %lld positions (n_positions; shorten the prompt or ask fewer)",
                          (long long)np, (long long)n_new, (long long)P);
  attn_hf_decoder d;
  attn_status st = attn_hf_decoder_init(&d, h, kv, weights, np >= 1 && n_new >= 1 ? np + n_new : 1);
  if (st) return st;
  const attn_lm_stepper sp = {step, &d, h->c.vocab_size, h->c.num_layers * h->c.num_heads, eos};
  st = attn_lm_generate_steps(&sp, prompt, np, n_new, s, want_probs, cb, user, out);
  attn_hf_decoder_free(&d);
  return st;
}
