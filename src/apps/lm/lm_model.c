/* The language model: parameters, forward, loss and backward (lm_model.h). */
#include "apps/lm/lm_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"

void attn_lm_config_default(attn_lm_config *c) {
  memset(c, 0, sizeof *c);
  c->vocab = 4096;
  c->d_model = 128;
  c->heads = 4;
  c->ff = 512;
  c->layers = 4;
  c->max_len = 2048;
  c->tied = 1;
}

attn_status attn_lm_config_check(const attn_lm_config *c) {
  if (!c) return attn_set_error(ATTN_EINVAL, "lm config: NULL");
  if (c->vocab < 2 || c->vocab > (1 << 20))
    return attn_set_error(ATTN_EINVAL, "lm config: vocab %lld must be in [2, 1048576]",
                          (long long)c->vocab);
  if (c->heads < 1 || c->d_model < 2 || c->d_model > 8192 || c->d_model % c->heads ||
      (c->d_model / c->heads) % 2)
    return attn_set_error(ATTN_EINVAL,
                          "lm config: d_model %lld, heads %lld: heads must divide d_model "
                          "with an even head_dim (RoPE), d_model <= 8192",
                          (long long)c->d_model, (long long)c->heads);
  if (c->ff < 1 || c->ff > 65536)
    return attn_set_error(ATTN_EINVAL, "lm config: ff %lld must be in [1, 65536]",
                          (long long)c->ff);
  if (c->layers < 1 || c->layers > 128)
    return attn_set_error(ATTN_EINVAL, "lm config: layers %lld must be in [1, 128]",
                          (long long)c->layers);
  if (c->max_len < 2 || c->max_len > (1 << 20))
    return attn_set_error(ATTN_EINVAL, "lm config: max_len %lld must be in [2, 1048576]",
                          (long long)c->max_len);
  return ATTN_OK;
}

void attn_lm_free(attn_lm_model *m) {
  if (!m) return;
  attn_params_free(&m->p);
  free(m->ln1);
  free(m->ln2);
  free(m->att);
  free(m->ffn);
  memset(m, 0, sizeof *m);
}

attn_status attn_lm_create(attn_lm_model *m, const attn_lm_config *c) {
  if (!m || !c) return attn_set_error(ATTN_EINVAL, "lm_create: NULL argument");
  memset(m, 0, sizeof *m);
  attn_params_init(&m->p);
  attn_status st = attn_lm_config_check(c);
  if (st) return st;
  m->c = *c;
  const int64_t E = c->d_model, Ln = c->layers;
  const int64_t sh[2] = {c->vocab, E};
  m->ln1 = calloc((size_t)Ln, sizeof *m->ln1);
  m->ln2 = calloc((size_t)Ln, sizeof *m->ln2);
  m->att = calloc((size_t)Ln, sizeof *m->att);
  m->ffn = calloc((size_t)Ln, sizeof *m->ffn);
  if (!m->ln1 || !m->ln2 || !m->att || !m->ffn)
    st = attn_set_error(ATTN_ENOMEM, "lm_create: out of memory");
  if (!st) st = attn_params_declare(&m->p, "tok_embeddings.weight", 2, sh, &m->wte);
  attn_vattn_config ac;
  attn_gqa_attention_config(&ac, E, c->heads, c->heads, 10000.0f);
  char pre[64];
  for (int64_t i = 0; !st && i < Ln; i++) {
    snprintf(pre, sizeof pre, "blocks.%lld.ln1.", (long long)i);
    st = attn_layernorm_declare(&m->ln1[i], &m->p, pre, E, 1e-5f);
    snprintf(pre, sizeof pre, "blocks.%lld.attn.", (long long)i);
    if (!st) st = attn_vattn_declare(&m->att[i], &m->p, pre, &ac);
    snprintf(pre, sizeof pre, "blocks.%lld.ln2.", (long long)i);
    if (!st) st = attn_layernorm_declare(&m->ln2[i], &m->p, pre, E, 1e-5f);
    snprintf(pre, sizeof pre, "blocks.%lld.ffn.", (long long)i);
    if (!st)
      st = attn_ffn_declare(&m->ffn[i], &m->p, pre, "fc1", "fc2", E, c->ff, ATTN_ACT_GELU, 0.0f);
  }
  if (!st) st = attn_layernorm_declare(&m->lnf, &m->p, "ln_f.", E, 1e-5f);
  m->head_w = m->wte;
  if (!st && !c->tied) st = attn_params_declare(&m->p, "lm_head.weight", 2, sh, &m->head_w);
  if (!st) st = attn_params_alloc(&m->p);
  if (st) attn_lm_free(m);
  return st;
}

/* N(0, sd) from a stream of seed and the tensor's name */
static void init_normal(attn_params *p, int idx, uint64_t seed, double sd) {
  float *w = attn_params_data(p, idx);
  uint64_t s = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (const char *c = p->views[idx].name; *c; c++)
    s = (s ^ (unsigned char)*c) * 1099511628211ull;
  for (int64_t i = 0; i < p->views[idx].numel; i++)
    w[i] = (float)(sd * attn_rng_normal(s, (uint64_t)i));
}

static int ends_with(const char *s, const char *t) {
  size_t n = strlen(s), k = strlen(t);
  return n >= k && !strcmp(s + n - k, t);
}

attn_status attn_lm_init(attn_lm_model *m, uint64_t seed) {
  if (!m || !m->p.data) return attn_set_error(ATTN_EINVAL, "lm_init: model not created");
  const double sd = 0.02, sd_res = 0.02 / sqrt(2.0 * (double)m->c.layers);
  for (int v = 0; v < m->p.count; v++) {
    const char *n = m->p.views[v].name;
    attn_status st = ATTN_OK;
    if (strstr(n, "ln1.") || strstr(n, "ln2.") || strstr(n, "ln_f."))
      st = attn_init_const(&m->p, v, ends_with(n, "weight") ? 1.0f : 0.0f);
    else if (ends_with(n, "bias"))
      st = attn_init_const(&m->p, v, 0.0f);
    else
      init_normal(&m->p, v, seed, strstr(n, "o_proj") || strstr(n, "fc2") ? sd_res : sd);
    if (st) return st;
  }
  return ATTN_OK;
}

int attn_lm_decay_rule(const char *name, void *user) {
  (void)user;
  if (strstr(name, "embeddings.") || strstr(name, "ln1.") || strstr(name, "ln2.") ||
      strstr(name, "ln_f."))
    return 0;
  return attn_decay_rule_default(name, NULL);
}

void attn_lm_saved_free(attn_lm_saved *s) {
  if (!s) return;
  for (int i = 0; i < s->nlayers; i++) {
    if (s->as) attn_vattn_saved_free(&s->as[i]);
    if (s->fs) attn_ffn_saved_free(&s->fs[i]);
  }
  free(s->as);
  free(s->fs);
  free(s->ids);
  free(s->x);
  free(s->h);
  free(s->a1);
  free(s->a2);
  free(s->st);
  free(s->xf);
  free(s->stf);
  free(s->logits);
  free(s->work);
  memset(s, 0, sizeof *s);
}

static attn_status reserve(const attn_lm_model *m, attn_lm_saved *s, int64_t rows) {
  const int64_t E = m->c.d_model, Ln = m->c.layers, V = m->c.vocab;
  if (s->nlayers != (int)Ln) {
    attn_lm_saved_free(s);
    s->as = calloc((size_t)Ln, sizeof *s->as);
    s->fs = calloc((size_t)Ln, sizeof *s->fs);
    if (!s->as || !s->fs) {
      attn_lm_saved_free(s);
      return attn_set_error(ATTN_ENOMEM, "lm forward: out of memory");
    }
    s->nlayers = (int)Ln;
  }
  if (rows <= s->cap) return ATTN_OK;
  const size_t f = sizeof(float), r = (size_t)rows, e = (size_t)E;
  void *p[10];
  p[0] = realloc(s->ids, r * sizeof(int32_t)), s->ids = p[0] ? p[0] : s->ids;
  p[1] = realloc(s->x, (size_t)(Ln + 1) * r * e * f), s->x = p[1] ? p[1] : s->x;
  p[2] = realloc(s->h, (size_t)Ln * r * e * f), s->h = p[2] ? p[2] : s->h;
  p[3] = realloc(s->a1, (size_t)Ln * r * e * f), s->a1 = p[3] ? p[3] : s->a1;
  p[4] = realloc(s->a2, (size_t)Ln * r * e * f), s->a2 = p[4] ? p[4] : s->a2;
  p[5] = realloc(s->st, (size_t)Ln * 4 * r * f), s->st = p[5] ? p[5] : s->st;
  p[6] = realloc(s->xf, r * e * f), s->xf = p[6] ? p[6] : s->xf;
  p[7] = realloc(s->stf, 2 * r * f), s->stf = p[7] ? p[7] : s->stf;
  /* logits, then the loss's dlogits (one buffer kept across steps: a fresh one of this
   * size would be a new mmap, its pages faulted in every step) */
  p[8] = realloc(s->logits, 2 * r * (size_t)V * f), s->logits = p[8] ? p[8] : s->logits;
  p[9] = realloc(s->work, 4 * r * e * f), s->work = p[9] ? p[9] : s->work;
  for (int i = 0; i < 10; i++)
    if (!p[i])
      return attn_set_error(ATTN_ENOMEM, "lm forward: out of memory for %lld rows",
                            (long long)rows);
  s->cap = rows;
  return ATTN_OK;
}

attn_status attn_lm_forward(const attn_lm_model *m, const attn_nn_ctx *ctx, attn_lm_saved *s,
                            const int32_t *ids, int64_t B, int64_t T) {
  if (!m || !s || !ids) return attn_set_error(ATTN_EINVAL, "lm forward: NULL argument");
  if (B < 1 || T < 1 || T > m->c.max_len)
    return attn_set_error(ATTN_EINVAL,
                          "lm forward: batch %lld x length %lld (length 1..max_len %lld)",
                          (long long)B, (long long)T, (long long)m->c.max_len);
  const int64_t E = m->c.d_model, V = m->c.vocab, R = B * T;
  for (int64_t i = 0; i < R; i++)
    if (ids[i] < 0 || ids[i] >= V)
      return attn_set_error(ATTN_EINVAL,
                            "lm forward: token %lld has id %d, outside the vocabulary of %lld",
                            (long long)i, ids[i], (long long)V);
  attn_status st = reserve(m, s, R);
  if (st) return st;
  s->B = B, s->T = T;
  memcpy(s->ids, ids, (size_t)R * sizeof *ids);
  const attn_params *p = &m->p;
  if ((st = attn_embedding_f32(ids, R, attn_params_data(p, m->wte), V, E, s->x))) return st;
  for (int64_t l = 0; l < m->c.layers; l++) {
    float *x = s->x + l * R * E, *h = s->h + l * R * E, *a1 = s->a1 + l * R * E;
    float *a2 = s->a2 + l * R * E, *y = s->x + (l + 1) * R * E, *stt = s->st + l * 4 * R;
    if ((st = attn_layernorm_forward(&m->ln1[l], p, x, a1, stt, stt + R, R)) ||
        (st = attn_vattn_forward(&m->att[l], p, ctx, &s->as[l], a1, NULL, B, T, T, NULL, h)))
      return st;
    for (int64_t i = 0; i < R * E; i++)
      h[i] += x[i];
    if ((st = attn_layernorm_forward(&m->ln2[l], p, h, a2, stt + 2 * R, stt + 3 * R, R)) ||
        (st = attn_ffn_forward(&m->ffn[l], p, ctx, &s->fs[l], a2, y, R)))
      return st;
    for (int64_t i = 0; i < R * E; i++)
      y[i] += h[i];
  }
  const float *xl = s->x + m->c.layers * R * E;
  if ((st = attn_layernorm_forward(&m->lnf, p, xl, s->xf, s->stf, s->stf + R, R))) return st;
  return attn_dense_forward_f32(s->xf, attn_params_data(p, m->head_w), NULL, s->logits, R, E, V);
}

static attn_status backward(attn_lm_model *m, const attn_nn_ctx *ctx, attn_lm_saved *s,
                            float *dlogits) {
  const int64_t E = m->c.d_model, V = m->c.vocab, R = s->B * s->T;
  attn_params *p = &m->p;
  float *dx = s->work, *dh = dx + R * E, *da = dh + R * E, *dxf = da + R * E;
  attn_status st;
  memset(dxf, 0, (size_t)(R * E) * sizeof *dxf);
  if ((st = attn_dense_backward_f32(s->xf, attn_params_data(p, m->head_w), dlogits, dxf,
                                    attn_params_grad(p, m->head_w), NULL, R, E, V)))
    return st;
  memset(dx, 0, (size_t)(R * E) * sizeof *dx);
  if ((st = attn_layernorm_backward(&m->lnf, p, s->x + m->c.layers * R * E, s->stf, s->stf + R, dxf,
                                    dx, R)))
    return st;
  for (int64_t l = m->c.layers - 1; l >= 0; l--) {
    const float *x = s->x + l * R * E, *h = s->h + l * R * E, *a1 = s->a1 + l * R * E;
    const float *a2 = s->a2 + l * R * E, *stt = s->st + l * 4 * R;
    /* y = h + ffn(ln2(h)): dh = dy + ln2ᵀ(ffnᵀ(dy)) */
    memcpy(dh, dx, (size_t)(R * E) * sizeof *dh);
    memset(da, 0, (size_t)(R * E) * sizeof *da);
    if ((st = attn_ffn_backward(&m->ffn[l], p, ctx, &s->fs[l], a2, dx, da)) ||
        (st = attn_layernorm_backward(&m->ln2[l], p, h, stt + 2 * R, stt + 3 * R, da, dh, R)))
      return st;
    /* h = x + attn(ln1(x)): dx = dh + ln1ᵀ(attnᵀ(dh)) */
    memcpy(dx, dh, (size_t)(R * E) * sizeof *dx);
    memset(da, 0, (size_t)(R * E) * sizeof *da);
    if ((st = attn_vattn_backward(&m->att[l], p, ctx, &s->as[l], a1, NULL, dh, NULL, da, NULL)) ||
        (st = attn_layernorm_backward(&m->ln1[l], p, x, stt, stt + R, da, dx, R)))
      return st;
  }
  return attn_embedding_backward_f32(s->ids, R, dx, V, E, attn_params_grad(p, m->wte));
}

attn_status attn_lm_loss(attn_lm_model *m, const attn_nn_ctx *ctx, attn_lm_saved *s,
                         const int32_t *targets, int backward_too, float *loss) {
  if (!m || !s || !s->logits || !targets)
    return attn_set_error(ATTN_EINVAL, "lm loss: NULL argument or no forward");
  const int64_t R = s->B * s->T, V = m->c.vocab;
  float *dl = backward_too ? s->logits + s->cap * V : NULL; /* reserve(): after the logits */
  attn_status st = attn_cross_entropy_f32(s->logits, targets, R, V, -1, 0.0f, loss, dl);
  if (!st && backward_too) st = backward(m, ctx, s, dl);
  return st;
}

attn_status attn_lm_nll_sum(const attn_lm_model *m, const attn_lm_saved *s, const int32_t *targets,
                            double *sum, int64_t *count) {
  if (!m || !s || !s->logits || !targets || !sum || !count)
    return attn_set_error(ATTN_EINVAL, "lm nll: NULL argument or no forward");
  const int64_t R = s->B * s->T, V = m->c.vocab;
  int64_t n = 0;
  for (int64_t r = 0; r < R; r++)
    n += targets[r] >= 0;
  float mean = 0;
  attn_status st =
      n ? attn_cross_entropy_f32(s->logits, targets, R, V, -1, 0.0f, &mean, NULL) : ATTN_OK;
  if (st) return st;
  const double acc = (double)mean * (double)n;
  *sum = acc;
  *count = n;
  return ATTN_OK;
}
