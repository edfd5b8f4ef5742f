/* TextClassifier forward and backward (with optional gradient
 * checkpointing), inference probabilities, attention maps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier/classifier.h"

void attn_clf_acts_free(attn_clf_acts *a) {
  if (!a) return;
  if (a->saved)
    for (int64_t l = 0; l < a->n_layers; l++) attn_encoder_saved_free(&a->saved[l]);
  if (a->x)
    for (int64_t l = 0; l <= a->n_layers; l++) free(a->x[l]);
  free(a->saved);
  free(a->x);
  free(a->kpm);
  free(a->lens);
  free(a->ids);
  free(a->pooled);
  free(a->argmax);
  free(a->logits);
  free(a->cu);
  memset(a, 0, sizeof *a);
}

/* Bytes an encoder layer's saved struct holds (its allocations, counted
 * from the pointers that are set). */
static size_t enc_saved_bytes(const attn_encoder_saved *s, const attn_clf_config *c) {
  size_t rows = (size_t)(s->B * s->L), E = (size_t)c->d_model, F = (size_t)c->ff;
  size_t H = (size_t)c->heads, LL = (size_t)(s->L * s->L), B = (size_t)s->B, f = sizeof(float);
  size_t n = 0;
  if (s->x1) n += rows * E * f;
  if (s->f_out) n += rows * E * f;
  if (s->a_out) n += rows * E * f;
  const attn_mha_saved *a = &s->sa;
  n += (a->q ? 1 : 0) * rows * E * f + (a->k ? 1 : 0) * rows * E * f + (a->v ? 1 : 0) * rows * E * f;
  n += (a->ctx ? 1 : 0) * rows * E * f + (a->lse ? 1 : 0) * B * H * (size_t)s->L * f;
  size_t hm = (size_t)(a->mask_heads > 0 ? a->mask_heads : 1);
  if (a->mask_add) n += B * hm * LL * f;
  if (a->mask_allow) n += B * hm * LL;
  if (a->key_lens) n += B * sizeof(int32_t);
  size_t h2 = sizeof(uint16_t);  // bf16 training buffers (nn.h)
  n += (a->xh ? rows * E * h2 : 0) + (a->ctxh ? rows * E * h2 : 0) + (a->qkvh ? 3 * rows * E * h2 : 0);
  n += (s->ff.xh ? rows * E * h2 : 0) + (s->ff.ah ? rows * F * h2 : 0);
  if (s->ff.h) n += rows * F * f;
  if (s->ff.a && s->ff.a != s->ff.h) n += rows * F * f;
  if (s->ff.drop_mask) n += rows * F;
  const attn_sublayer_saved *sub[2] = {&s->s1, &s->s2};
  for (int i = 0; i < 2; i++) {
    if (sub[i]->mean) n += rows * f;
    if (sub[i]->rstd) n += rows * f;
    if (sub[i]->a) n += rows * E * f;
    if (sub[i]->h) n += rows * E * f;
    if (sub[i]->drop_mask) n += rows * E;
  }
  return n;
}

/* The row of token t of sequence b: packed (a->cu) or padded [B, L]. */
static int64_t row_of(const attn_clf_acts *a, int64_t b, int64_t t) {
  return a->cu ? a->cu[b] + t : b * a->L + t;
}

/* Rows (B, L as the encoder sees them) and masks of a's layout. */
static void layer_masks(const attn_clf_acts *a, attn_mha_masks *mk, int64_t *B, int64_t *L) {
  memset(mk, 0, sizeof *mk);
  *B = a->cu ? 1 : a->B;
  *L = a->cu ? a->T : a->L;
  if (!a->cu) {
    mk->key_padding_bool = a->kpm;
    return;
  }
  mk->cu_seqlens = a->cu;
  mk->n_seqs = a->B;
  mk->max_seqlen = a->max_len;
}

/* x = embedding(ids) + positions over B sequences of L rows, or packed
 * (cu: sequence b the rows cu[b] .. cu[b+1]-1, L unused). */
static attn_status embed(const attn_clf *m, const int32_t *ids, int64_t B, int64_t L,
                         const int32_t *cu, float *x) {
  int64_t E = m->c.d_model, rows = cu ? cu[B] : B * L;
  attn_status st = attn_embedding_f32(ids, rows, attn_params_data(&m->p, m->emb), m->c.vocab, E, x);
  if (st) return st;
  const float *P = m->pos >= 0 ? attn_params_data(&m->p, m->pos) : m->sin_table;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < (cu ? cu[b + 1] - cu[b] : L); t++) {
      float *row = x + ((cu ? cu[b] : b * L) + t) * E;
      const float *pr = P + t * E;
      for (int64_t e = 0; e < E; e++) row[e] += pr[e];
    }
  return ATTN_OK;
}

static attn_status check_batch(const attn_clf *m, const int32_t *ids, const int32_t *lens,
                               int64_t B, int64_t L) {
  if (!m || !m->p.data || !ids || !lens)
    return attn_set_error(ATTN_EINVAL, "classifier: NULL model, ids or lens");
  if (B <= 0 || L <= 0 || L > m->c.max_len)
    return attn_set_error(ATTN_EINVAL, "classifier: batch B=%lld L=%lld (L must be 1..max_len %lld)",
                          (long long)B, (long long)L, (long long)m->c.max_len);
  for (int64_t b = 0; b < B; b++) {
    if (lens[b] < 1 || lens[b] > L)
      return attn_set_error(ATTN_EINVAL, "classifier: lens[%lld] = %d not in 1..%lld", (long long)b,
                            lens[b], (long long)L);
    for (int64_t t = 0; t < lens[b]; t++)
      if (ids[b * L + t] < 0 || ids[b * L + t] >= m->c.vocab)
        return attn_set_error(ATTN_EINVAL, "classifier: ids[%lld][%lld] = %d outside the vocabulary (%lld)",
                              (long long)b, (long long)t, ids[b * L + t], (long long)m->c.vocab);
  }
  return ATTN_OK;
}

attn_status attn_clf_forward(const attn_clf *m, const attn_nn_ctx *ctx, int ckpt,
                             attn_clf_acts *a, const int32_t *ids, const int32_t *lens,
                             int64_t B, int64_t L, float *logits) {
  if (!a) return attn_set_error(ATTN_EINVAL, "clf_forward: NULL acts");
  attn_status st = check_batch(m, ids, lens, B, L);
  if (st) return st;
  int64_t E = m->c.d_model, N = m->c.layers, rows = B * L, C = m->c.classes;
  int packed = attn_clf_varlen_applies(m, ctx, lens, B, L);
  attn_clf_acts_free(a);
  if (packed && !(a->cu = malloc((size_t)(B + 1) * sizeof *a->cu)))
    return attn_set_error(ATTN_ENOMEM, "clf_forward: out of memory");
  if (packed) {
    a->cu[0] = 0;
    for (int64_t b = 0; b < B; b++) {
      a->cu[b + 1] = a->cu[b] + lens[b];
      if (lens[b] > a->max_len) a->max_len = lens[b];
    }
    rows = a->T = a->cu[B];
  }
  static const attn_nn_ctx zero_ctx;
  a->ctx = ctx ? *ctx : zero_ctx;
  if (!a->ctx.qlinears) a->ctx.qlinears = m->qlinears;
  if (packed) {  // row-wise dropout draws as in the padded batch (nn.h)
    a->ctx.pack_cu = a->cu;
    a->ctx.pack_seqs = B;
    a->ctx.pack_len = L;
  }
  a->B = B;
  a->L = L;
  a->ckpt = ckpt;
  a->n_layers = N;
  a->x = calloc((size_t)N + 1, sizeof *a->x);
  a->saved = calloc((size_t)(N ? N : 1), sizeof *a->saved);
  a->kpm = packed ? NULL : malloc((size_t)rows);
  a->lens = malloc((size_t)B * sizeof *a->lens);
  a->ids = malloc((size_t)rows * sizeof *a->ids);
  int meanmax = m->c.pool == ATTN_CLF_POOL_MEANMAX;
  int64_t P = meanmax ? 2 * E : E;
  a->pooled = malloc((size_t)(B * P) * sizeof(float));
  a->argmax = meanmax ? malloc((size_t)(B * E) * sizeof(int32_t)) : NULL;
  a->logits = malloc((size_t)(B * C) * sizeof(float));
  if (!a->x || !a->saved || (!packed && !a->kpm) || !a->lens || !a->ids || !a->pooled || !a->logits ||
      (meanmax && !a->argmax))
    return attn_set_error(ATTN_ENOMEM, "clf_forward: out of memory");
  for (int64_t l = 0; l <= N; l++)
    if (!(a->x[l] = malloc((size_t)(rows * E) * sizeof(float))))
      return attn_set_error(ATTN_ENOMEM, "clf_forward: out of memory");
  memcpy(a->lens, lens, (size_t)B * sizeof *lens);
  // padding ids are replaced by 0 so any id may sit there
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < L; t++) {
      if (packed) {
        if (t < lens[b]) a->ids[a->cu[b] + t] = ids[b * L + t];
        continue;
      }
      a->ids[b * L + t] = t < lens[b] ? ids[b * L + t] : 0;
      a->kpm[b * L + t] = (uint8_t)(t >= lens[b]);
    }
  st = embed(m, a->ids, B, L, a->cu, a->x[0]);
  attn_mha_masks masks;
  int64_t eB, eL;
  layer_masks(a, &masks, &eB, &eL);
  size_t fixed = (size_t)(N + 1) * (size_t)(rows * E) * sizeof(float) + (size_t)rows * 5;
  size_t held = 0, peak_layer = 0;
  for (int64_t l = 0; !st && l < N; l++) {
    st = attn_encoder_forward(&m->layer[l], &m->p, &a->ctx, &a->saved[l], a->x[l], eB, eL, &masks,
                              a->x[l + 1]);
    if (st) break;
    size_t lb = enc_saved_bytes(&a->saved[l], &m->c);
    if (lb > peak_layer) peak_layer = lb;
    if (ckpt) attn_encoder_saved_free(&a->saved[l]);
    else held += lb;
  }
  if (st) return st;
  // masked mean pooling: pooled[b] = mean over t < lens[b] of x[b, t]; with
  // mean+max, then the max over the same tokens (first token on ties)
  const float *xl = a->x[N];
  for (int64_t b = 0; b < B; b++) {
    float *pb = a->pooled + b * P;
    memset(pb, 0, (size_t)E * sizeof(float));
    for (int64_t t = 0; t < lens[b]; t++)
      for (int64_t e = 0; e < E; e++) pb[e] += xl[row_of(a, b, t) * E + e];
    float inv = 1.0f / (float)lens[b];
    for (int64_t e = 0; e < E; e++) pb[e] *= inv;
    if (!meanmax) continue;
    float *mb = pb + E;
    int32_t *ib = a->argmax + b * E;
    for (int64_t e = 0; e < E; e++) mb[e] = xl[row_of(a, b, 0) * E + e], ib[e] = 0;
    for (int64_t t = 1; t < lens[b]; t++) {
      const float *xr = xl + row_of(a, b, t) * E;
      for (int64_t e = 0; e < E; e++)
        if (xr[e] > mb[e]) mb[e] = xr[e], ib[e] = (int32_t)t;
    }
  }
  st = attn_linear_forward_ctx(&m->fc, &m->p, &a->ctx, a->pooled, a->logits, B);
  if (!st && logits) memcpy(logits, a->logits, (size_t)(B * C) * sizeof(float));
  a->saved_bytes = fixed + held;
  a->peak_bytes = fixed + held + (ckpt ? peak_layer : 0);
  return st;
}

/* The lowest offset in the flat buffer of the parameters named prefix*. */
static int64_t grads_lo(const attn_params *p, const char *prefix) {
  int64_t lo = p->numel;
  size_t n = strlen(prefix);
  for (int i = 0; i < p->count; i++)
    if (!strncmp(p->views[i].name, prefix, n) && p->views[i].offset < lo) lo = p->views[i].offset;
  return lo;
}

/* ready(user, lo) after the module named prefix* got its gradients. */
static attn_status grads_ready(const attn_clf *m, const char *prefix,
                               attn_status (*ready)(void *, int64_t), void *user) {
  return ready ? ready(user, grads_lo(&m->p, prefix)) : ATTN_OK;
}

attn_status attn_clf_backward(attn_clf *m, attn_clf_acts *a, const float *dlogits) {
  return attn_clf_backward_ready(m, a, dlogits, NULL, NULL);
}

attn_status attn_clf_backward_ready(attn_clf *m, attn_clf_acts *a, const float *dlogits,
                                    attn_status (*ready)(void *user, int64_t lo), void *user) {
  if (!m || !a || !a->x || !dlogits || !m->p.grad)
    return attn_set_error(ATTN_EINVAL, "clf_backward: NULL argument or no forward");
  int64_t B = a->B, E = m->c.d_model, N = m->c.layers, rows = a->cu ? a->T : B * a->L;
  int meanmax = m->c.pool == ATTN_CLF_POOL_MEANMAX;
  int64_t P = meanmax ? 2 * E : E;
  float *dpool = calloc((size_t)(B * P), sizeof(float));
  float *dcur = calloc((size_t)(rows * E), sizeof(float));
  float *dprev = calloc((size_t)(rows * E), sizeof(float));
  float *tmp = a->ckpt ? malloc((size_t)(rows * E) * sizeof(float)) : NULL;
  attn_status st = ATTN_OK;
  if (!dpool || !dcur || !dprev || (a->ckpt && !tmp))
    st = attn_set_error(ATTN_ENOMEM, "clf_backward: out of memory");
  if (!st) st = attn_linear_backward_ctx(&m->fc, &m->p, &a->ctx, a->pooled, dlogits, dpool, B);
  if (!st) st = grads_ready(m, "fc.", ready, user);
  for (int64_t b = 0; !st && b < B; b++) {
    float inv = 1.0f / (float)a->lens[b];
    for (int64_t t = 0; t < a->lens[b]; t++)
      for (int64_t e = 0; e < E; e++) dcur[row_of(a, b, t) * E + e] = dpool[b * P + e] * inv;
    if (meanmax)
      for (int64_t e = 0; e < E; e++)
        dcur[row_of(a, b, a->argmax[b * E + e]) * E + e] += dpool[b * P + E + e];
  }
  attn_mha_masks masks;
  int64_t eB, eL;
  layer_masks(a, &masks, &eB, &eL);
  for (int64_t l = N - 1; !st && l >= 0; l--) {
    if (a->ckpt)  // recompute this layer's saved state (same ctx: same dropout masks)
      st = attn_encoder_forward(&m->layer[l], &m->p, &a->ctx, &a->saved[l], a->x[l], eB, eL, &masks, tmp);
    if (st) break;
    memset(dprev, 0, (size_t)(rows * E) * sizeof(float));
    st = attn_encoder_backward(&m->layer[l], &m->p, &a->ctx, &a->saved[l], a->x[l], dcur, dprev);
    if (a->ckpt) attn_encoder_saved_free(&a->saved[l]);
    if (!st && ready) {
      char prefix[64];
      snprintf(prefix, sizeof prefix, "layers.%lld.", (long long)l);
      st = grads_ready(m, prefix, ready, user);
    }
    float *sw = dcur;
    dcur = dprev;
    dprev = sw;
  }
  if (!st)
    st = attn_embedding_backward_f32(a->ids, rows, dcur, m->c.vocab, E, attn_params_grad(&m->p, m->emb));
  if (!st && m->pos >= 0) {
    float *gp = attn_params_grad(&m->p, m->pos);
    for (int64_t b = 0; b < B; b++)
      for (int64_t t = 0; t < (a->cu ? a->lens[b] : a->L); t++)
        for (int64_t e = 0; e < E; e++) gp[t * E + e] += dcur[row_of(a, b, t) * E + e];
  }
  free(dpool);
  free(dcur);
  free(dprev);
  free(tmp);
  return st;
}

attn_status attn_clf_predict(const attn_clf *m, const int32_t *ids, const int32_t *lens,
                             int64_t B, int64_t L, float *probs) {
  return attn_clf_predict_ctx(m, NULL, ids, lens, B, L, probs);
}

attn_status attn_clf_predict_ctx(const attn_clf *m, const attn_nn_ctx *ctx, const int32_t *ids,
                                 const int32_t *lens, int64_t B, int64_t L, float *probs) {
  if (!probs) return attn_set_error(ATTN_EINVAL, "clf_predict: NULL probs");
  if (ctx && ctx->training)
    return attn_set_error(ATTN_EINVAL, "clf_predict: ctx->training must be 0 (inference)");
  attn_clf_acts a;
  memset(&a, 0, sizeof a);
  attn_status st = attn_clf_forward(m, ctx, 0, &a, ids, lens, B, L, NULL);
  if (!st) st = attn_softmax_f32(a.logits, probs, B, m->c.classes);
  attn_clf_acts_free(&a);
  return st;
}

attn_status attn_clf_attention(const attn_clf *m, const int32_t *ids, int64_t n, float *probs) {
  int32_t len = (int32_t)n;
  attn_status st = check_batch(m, ids, &len, 1, n);
  if (st) return st;
  if (!probs) return attn_set_error(ATTN_EINVAL, "clf_attention: NULL probs");
  int64_t E = m->c.d_model, H = m->c.heads;
  float *x = malloc((size_t)(n * E) * sizeof(float)), *y = malloc((size_t)(n * E) * sizeof(float));
  float *ln = malloc((size_t)(n * E) * sizeof(float)), *mr = malloc((size_t)(2 * n) * sizeof(float));
  if (!x || !y || !ln || !mr) st = attn_set_error(ATTN_ENOMEM, "clf_attention: out of memory");
  if (!st) st = embed(m, ids, 1, n, NULL, x);
  for (int64_t l = 0; !st && l < m->c.layers; l++) {
    const attn_encoder_layer *ly = &m->layer[l];
    const float *in = x;
    if (m->c.norm_first) {  // the attention sees norm1(x)
      st = attn_layernorm_forward(&ly->norm1, &m->p, x, ln, mr, mr + n, n);
      in = ln;
    }
    attn_mha_saved ms;
    memset(&ms, 0, sizeof ms);
    if (!st)
      st = attn_mha_forward(&ly->self_attn, &m->p, NULL, &ms, in, NULL, NULL, 1, n, n, NULL, y,
                            probs + l * H * n * n, 0);
    attn_mha_saved_free(&ms);
    attn_encoder_saved es;
    memset(&es, 0, sizeof es);
    if (!st) st = attn_encoder_forward(ly, &m->p, NULL, &es, x, 1, n, NULL, y);
    attn_encoder_saved_free(&es);
    float *sw = x;
    x = y;
    y = sw;
  }
  free(x);
  free(y);
  free(ln);
  free(mr);
  return st;
}
