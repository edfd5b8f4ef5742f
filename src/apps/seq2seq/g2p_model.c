/* The G2P Transformer: parameters, forward and backward (g2p_model.h). */
#include "apps/seq2seq/g2p_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "attn/train.h"

void attn_g2p_config_default(attn_g2p_config *c) {
  memset(c, 0, sizeof *c);
  c->d_model = 128;
  c->heads = 4;
  c->ff = 512;
  c->enc_layers = 3;
  c->dec_layers = 3;
  c->max_src = 40;
  c->max_tgt = 40;
  c->dropout = 0.0f; /* docs/G2P.md: better and ~1.2x cheaper at an hour's budget */
  c->tied = 1;
  c->stress = 1;
  c->reverse = 0;
  c->both = 0;
}

int32_t attn_g2p_start(const attn_g2p_config *c, int r2l) {
  return c->both && r2l ? ATTN_G2P_BOS_R2L : ATTN_G2P_BOS;
}

int attn_g2p_scores_r2l(const attn_g2p_config *c) { return c->reverse || c->both; }

static attn_status check_config(const attn_g2p_config *c) {
  if (c->d_model < 2 || c->d_model % 2 || c->d_model > 4096)
    return attn_set_error(ATTN_EINVAL, "g2p config: d_model %lld must be even, 2..4096",
                          (long long)c->d_model);
  if (c->heads < 1 || c->d_model % c->heads)
    return attn_set_error(ATTN_EINVAL, "g2p config: heads %lld must divide d_model %lld",
                          (long long)c->heads, (long long)c->d_model);
  if (c->ff < 1 || c->ff > 65536 || c->enc_layers < 1 || c->enc_layers > 64 ||
      c->dec_layers < 1 || c->dec_layers > 64)
    return attn_set_error(ATTN_EINVAL, "g2p config: ff 1..65536 and 1..64 layers expected");
  if (c->max_src < 1 || c->max_src > 4096 || c->max_tgt < 2 || c->max_tgt > 4096)
    return attn_set_error(ATTN_EINVAL, "g2p config: max lengths out of range");
  if ((c->stress != 0 && c->stress != 1) || (c->reverse != 0 && c->reverse != 1) ||
      (c->both != 0 && c->both != 1))
    return attn_set_error(ATTN_EINVAL,
                          "g2p config: stress %d, reverse %d and both %d must be 0 or 1", c->stress,
                          c->reverse, c->both);
  if (c->reverse && c->both)
    return attn_set_error(ATTN_EINVAL, "g2p config: a model is right to left (--reverse) or "
                                       "trained both ways (--both-directions), not both");
  if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
    return attn_set_error(ATTN_EINVAL, "g2p config: dropout must be in [0, 1)");
  return ATTN_OK;
}

static attn_layer_config layer_config(const attn_g2p_config *c) {
  attn_layer_config lc = {0};
  lc.d_model = c->d_model;
  lc.nhead = c->heads;
  lc.dim_feedforward = c->ff;
  lc.dropout = c->dropout;
  lc.activation = ATTN_ACT_RELU;
  lc.layer_norm_eps = 1e-5f;
  lc.bias = 1;
  return lc;
}

void attn_g2p_free(attn_g2p_model *m) {
  if (!m) return;
  attn_params_free(&m->p);
  free(m->enc);
  free(m->dec);
  free(m->pe);
  memset(m, 0, sizeof *m);
}

attn_status attn_g2p_create(attn_g2p_model *m, const attn_g2p_config *c,
                            const attn_g2p_graphemes *g) {
  if (!m || !c || !g) return attn_set_error(ATTN_EINVAL, "g2p_create: NULL argument");
  memset(m, 0, sizeof *m);
  attn_params_init(&m->p);
  attn_status st = check_config(c);
  if (st) return st;
  m->c = *c;
  m->g = *g;
  m->vocab_src = ATTN_G2P_SPECIAL + g->n;
  m->vocab_tgt = attn_g2p_phone_count_for(c->stress);
  int64_t E = c->d_model;
  int64_t s1[2] = {m->vocab_src, E}, s2[2] = {m->vocab_tgt, E}, s3[1] = {m->vocab_tgt};
  m->out_w = -1;
  st = attn_params_declare(&m->p, "src_embedding.weight", 2, s1, &m->src_emb);
  if (!st) st = attn_params_declare(&m->p, "tgt_embedding.weight", 2, s2, &m->tgt_emb);
  m->enc = calloc((size_t)c->enc_layers, sizeof *m->enc);
  m->dec = calloc((size_t)c->dec_layers, sizeof *m->dec);
  int64_t L = c->max_src > c->max_tgt ? c->max_src : c->max_tgt;
  m->pe = malloc((size_t)(L * E) * sizeof(float));
  if (!st && (!m->enc || !m->dec || !m->pe)) st = attn_set_error(ATTN_ENOMEM, "g2p_create: out of memory");
  attn_layer_config lc = layer_config(c);
  char prefix[64];
  for (int64_t i = 0; !st && i < c->enc_layers; i++) {
    snprintf(prefix, sizeof prefix, "encoder.layers.%lld.", (long long)i);
    st = attn_encoder_declare(&m->enc[i], &m->p, prefix, &lc);
  }
  for (int64_t i = 0; !st && i < c->dec_layers; i++) {
    snprintf(prefix, sizeof prefix, "decoder.layers.%lld.", (long long)i);
    st = attn_decoder_declare(&m->dec[i], &m->p, prefix, &lc);
  }
  if (!st && !c->tied) st = attn_params_declare(&m->p, "out.weight", 2, s2, &m->out_w);
  if (!st) st = attn_params_declare(&m->p, "out.bias", 1, s3, &m->out_b);
  if (!st) st = attn_params_alloc(&m->p);
  // PE[t, 2i] = sin(t / 10000^(2i/E)), PE[t, 2i+1] = cos(...)
  for (int64_t t = 0; !st && t < L; t++)
    for (int64_t i = 0; i < E / 2; i++) {
      double ang = (double)t / pow(10000.0, (double)(2 * i) / (double)E);
      m->pe[t * E + 2 * i] = (float)sin(ang);
      m->pe[t * E + 2 * i + 1] = (float)cos(ang);
    }
  if (st) attn_g2p_free(m);
  return st;
}

static void init_embedding(attn_params *p, int idx, uint64_t seed, double sd) {
  float *w = attn_params_data(p, idx);
  uint64_t s = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (const char *c = p->views[idx].name; *c; c++) s = (s ^ (unsigned char)*c) * 1099511628211ull;
  for (int64_t i = 0; i < p->views[idx].numel; i++)
    w[i] = (float)(sd * attn_rng_normal(s, (uint64_t)i));
}

attn_status attn_g2p_init(attn_g2p_model *m, uint64_t seed) {
  if (!m || !m->p.data) return attn_set_error(ATTN_EINVAL, "g2p_init: model not created");
  double sd = 1.0 / sqrt((double)m->c.d_model);
  init_embedding(&m->p, m->src_emb, seed, sd);
  init_embedding(&m->p, m->tgt_emb, seed, sd);
  attn_status st = ATTN_OK;
  for (int64_t i = 0; !st && i < m->c.enc_layers; i++)
    st = attn_encoder_init(&m->enc[i], &m->p, ATTN_INIT_XAVIER, seed + 1000 * (uint64_t)i);
  for (int64_t i = 0; !st && i < m->c.dec_layers; i++)
    st = attn_decoder_init(&m->dec[i], &m->p, ATTN_INIT_XAVIER, seed + 500 + 1000 * (uint64_t)i);
  if (!st && m->out_w >= 0) st = attn_init_xavier(&m->p, m->out_w, seed + 7);
  if (!st) st = attn_init_const(&m->p, m->out_b, 0.0f);
  return st;
}

int attn_g2p_decay_rule(const char *name, void *user) {
  (void)user;
  if (strstr(name, "embedding.")) return 0;
  return attn_decay_rule_default(name, NULL);
}

void attn_g2p_saved_free(attn_g2p_saved *s) {
  if (!s) return;
  for (int64_t i = 0; s->es && i < s->cap_l; i++) attn_encoder_saved_free(&s->es[i]);
  for (int64_t i = 0; s->ds && i < s->cap_l; i++) attn_decoder_saved_free(&s->ds[i]);
  free(s->es);
  free(s->ds);
  free(s->src);
  free(s->tgt);
  free(s->src_pad);
  free(s->xs);
  free(s->yt);
  free(s->logits);
  free(s->dlogits);
  free(s->dmem);
  free(s->dbuf);
  for (int i = 0; s->sub && i < s->nsub; i++)
    attn_g2p_saved_free(&s->sub[i]);
  free(s->sub);
  free(s->sub_grad);
  memset(s, 0, sizeof *s);
}

static int grow(void **p, size_t bytes) {
  void *q = realloc(*p, bytes ? bytes : 1);
  if (!q) return 0;
  *p = q;
  return 1;
}

/* s's source-side buffers for n = B * Ls positions (contents kept) */
static int reserve_src(const attn_g2p_model *m, attn_g2p_saved *s, int64_t n) {
  if (n <= s->cap_s) return 1;
  const size_t E = (size_t)m->c.d_model, z = (size_t)n;
  if (!grow((void **)&s->src, z * sizeof *s->src) || !grow((void **)&s->src_pad, z) ||
      !grow((void **)&s->xs, (size_t)(m->c.enc_layers + 1) * z * E * sizeof(float)) ||
      !grow((void **)&s->dmem, z * E * sizeof(float)))
    return 0;
  s->cap_s = n;
  return 1;
}

/* x [rows of B, L] = table[ids] * sqrt(E) + PE[t0 + t] */
static void embed_at(const attn_g2p_model *m, int tbl, const int32_t *ids, int64_t B, int64_t L,
                     int64_t t0, float *x) {
  int64_t E = m->c.d_model;
  const float *w = attn_params_data(&m->p, tbl);
  float sc = (float)sqrt((double)E);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < L; t++) {
      const float *e = w + (int64_t)ids[b * L + t] * E, *pe = m->pe + (t0 + t) * E;
      float *y = x + (b * L + t) * E;
      for (int64_t k = 0; k < E; k++) y[k] = e[k] * sc + pe[k];
    }
}

static void embed(const attn_g2p_model *m, int tbl, const int32_t *ids, int64_t B, int64_t L,
                  float *x) {
  embed_at(m, tbl, ids, B, L, 0, x);
}

static attn_status check_ids(const int32_t *ids, int64_t n, int64_t V, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= V)
      return attn_set_error(ATTN_EINVAL, "g2p: %s id %d out of range [0, %lld)", what, ids[i],
                            (long long)V);
  return ATTN_OK;
}

attn_status attn_g2p_embed_tgt(const attn_g2p_model *m, const int32_t *ids, int64_t rows,
                               int64_t pos, float *x) {
  if (pos < 0 || pos >= m->c.max_tgt)
    return attn_set_error(ATTN_EINVAL, "g2p: phoneme position %lld (0..%lld)", (long long)pos,
                          (long long)m->c.max_tgt - 1);
  attn_status st = check_ids(ids, rows, m->vocab_tgt, "phoneme");
  if (!st) embed_at(m, m->tgt_emb, ids, rows, 1, pos, x);
  return st;
}

attn_status attn_g2p_project(const attn_g2p_model *m, const attn_nn_ctx *ctx, const float *h,
                             int64_t rows, float *logits) {
  const float *W = attn_params_data(&m->p, m->out_w >= 0 ? m->out_w : m->tgt_emb);
  return attn_dense_forward_ctx(ctx, h, W, attn_params_data(&m->p, m->out_b), logits, rows,
                                m->c.d_model, m->vocab_tgt);
}

attn_status attn_g2p_encode(const attn_g2p_model *m, const attn_nn_ctx *ctx, attn_g2p_saved *s,
                            const int32_t *src, const int32_t *src_lens, int64_t B, int64_t Ls) {
  if (B < 1 || Ls < 1 || Ls > m->c.max_src)
    return attn_set_error(ATTN_EINVAL, "g2p: %lld letters (1..%lld) in a batch of %lld",
                          (long long)Ls, (long long)m->c.max_src, (long long)B);
  attn_status st = check_ids(src, B * Ls, m->vocab_src, "grapheme");
  if (st) return st;
  int64_t E = m->c.d_model, nl = m->c.enc_layers > m->c.dec_layers ? m->c.enc_layers : m->c.dec_layers;
  if (!s->es) {
    s->es = calloc((size_t)nl, sizeof *s->es);
    s->ds = calloc((size_t)nl, sizeof *s->ds);
    s->cap_l = nl;
    if (!s->es || !s->ds) return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
  }
  if (!reserve_src(m, s, B * Ls)) return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
  s->B = B;
  s->Ls = Ls;
  memcpy(s->src, src, (size_t)(B * Ls) * sizeof *src);
  for (int64_t b = 0; b < B; b++) {
    if (src_lens[b] < 1 || src_lens[b] > Ls)
      return attn_set_error(ATTN_EINVAL, "g2p: word length %d not in 1..%lld", src_lens[b],
                            (long long)Ls);
    for (int64_t t = 0; t < Ls; t++) s->src_pad[b * Ls + t] = t >= src_lens[b];
  }
  embed(m, m->src_emb, src, B, Ls, s->xs);
  attn_mha_masks mk = {0};
  mk.key_padding_bool = s->src_pad;
  size_t blk = (size_t)(B * Ls * E);
  for (int64_t l = 0; !st && l < m->c.enc_layers; l++)
    st = attn_encoder_forward(&m->enc[l], &m->p, ctx, &s->es[l], s->xs + l * blk, B, Ls, &mk,
                              s->xs + (l + 1) * blk);
  return st;
}

attn_status attn_g2p_encode_rows(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                                 attn_g2p_saved *s, const int32_t *src, const int32_t *src_lens,
                                 int64_t W, int64_t Ls, const int32_t *row_word, int64_t B) {
  if (B < 1 || !row_word)
    return attn_set_error(ATTN_EINVAL, "g2p: %lld decoder rows (at least 1, each naming a word)",
                          (long long)B);
  for (int64_t b = 0; b < B; b++)
    if (row_word[b] < 0 || row_word[b] >= W)
      return attn_set_error(ATTN_EINVAL, "g2p: decoder row %lld reads word %d of %lld",
                            (long long)b, row_word[b], (long long)W);
  attn_status st = attn_g2p_encode(m, ctx, s, src, src_lens, W, Ls);
  if (st) return st;
  const int64_t E = m->c.d_model, L = m->c.enc_layers;
  const size_t row = (size_t)(Ls * E);
  /* the last block's W rows gathered to B rows through s->dmem (backward
   * work, B * Ls * E floats once reserved: the B-row block starts elsewhere
   * and may overlap the W-row one), the padding and ids likewise */
  int32_t *ids = malloc((size_t)(B * Ls) * (sizeof *ids + 1));
  if (!ids || !reserve_src(m, s, B * Ls)) {
    free(ids);
    return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
  }
  uint8_t *pad = (uint8_t *)(ids + B * Ls);
  float *mem = s->dmem;
  const float *last = s->xs + L * W * (int64_t)row;
  for (int64_t b = 0; b < B; b++) {
    const int64_t w = row_word[b];
    memcpy(mem + b * (int64_t)row, last + w * (int64_t)row, row * sizeof *mem);
    memcpy(pad + b * Ls, s->src_pad + w * Ls, (size_t)Ls);
    memcpy(ids + b * Ls, s->src + w * Ls, (size_t)Ls * sizeof *ids);
  }
  memcpy(s->xs + L * B * (int64_t)row, mem, (size_t)B * row * sizeof *mem);
  memcpy(s->src_pad, pad, (size_t)(B * Ls));
  memcpy(s->src, ids, (size_t)(B * Ls) * sizeof *ids);
  s->B = B;
  free(ids);
  return ATTN_OK;
}

attn_status attn_g2p_decode(const attn_g2p_model *m, const attn_nn_ctx *ctx, attn_g2p_saved *s,
                            const int32_t *tgt, int64_t Lt) {
  int64_t B = s->B, Ls = s->Ls, E = m->c.d_model, V = m->vocab_tgt;
  if (!s->xs || B < 1) return attn_set_error(ATTN_EINVAL, "g2p_decode: encode first");
  if (Lt < 1 || Lt > m->c.max_tgt)
    return attn_set_error(ATTN_EINVAL, "g2p: %lld phonemes (1..%lld)", (long long)Lt,
                          (long long)m->c.max_tgt);
  attn_status st = check_ids(tgt, B * Lt, V, "phoneme");
  if (st) return st;
  if (B * Lt > s->cap_t) {
    size_t n = (size_t)(B * Lt);
    if (!grow((void **)&s->tgt, n * sizeof *s->tgt) ||
        !grow((void **)&s->yt, (size_t)(m->c.dec_layers + 1) * n * (size_t)E * sizeof(float)) ||
        !grow((void **)&s->logits, n * (size_t)V * sizeof(float)) ||
        !grow((void **)&s->dlogits, n * (size_t)V * sizeof(float)))
      return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
    s->cap_t = B * Lt;
  }
  s->Lt = Lt;
  memcpy(s->tgt, tgt, (size_t)(B * Lt) * sizeof *tgt);
  embed(m, m->tgt_emb, tgt, B, Lt, s->yt);
  attn_mha_masks tm = {0}, mm = {0};
  tm.causal = 1;
  mm.key_padding_bool = s->src_pad;
  size_t blk = (size_t)(B * Lt * E);
  const float *mem = s->xs + m->c.enc_layers * B * Ls * E;
  for (int64_t l = 0; !st && l < m->c.dec_layers; l++)
    st = attn_decoder_forward(&m->dec[l], &m->p, ctx, &s->ds[l], s->yt + l * blk, mem, B, Lt, Ls,
                              &tm, &mm, s->yt + (l + 1) * blk);
  if (!st) st = attn_g2p_project(m, ctx, s->yt + m->c.dec_layers * blk, B * Lt, s->logits);
  return st;
}

/* dx of the embedding sum (scaled by sqrt(E)) into the table's gradient */
static attn_status embed_backward(attn_g2p_model *m, int tbl, const int32_t *ids, int64_t n,
                                  float *dx, int64_t V) {
  int64_t E = m->c.d_model;
  float sc = (float)sqrt((double)E);
  for (int64_t i = 0; i < n * E; i++) dx[i] *= sc;
  return attn_embedding_backward_f32(ids, n, dx, V, E, attn_params_grad(&m->p, tbl));
}

attn_status attn_g2p_loss_backward(attn_g2p_model *m, const attn_nn_ctx *ctx, attn_g2p_saved *s,
                                   const int32_t *targets, float smoothing, int64_t norm,
                                   float *loss) {
  int64_t B = s->B, Ls = s->Ls, Lt = s->Lt, E = m->c.d_model, V = m->vocab_tgt;
  if (!s->logits || Lt < 1) return attn_set_error(ATTN_EINVAL, "g2p: backward before forward");
  attn_status st = attn_cross_entropy_norm_f32(s->logits, targets, B * Lt, V, -1, smoothing, norm,
                                               loss, s->dlogits);
  if (st) return st;
  int64_t rows = (B * Lt > B * Ls ? B * Lt : B * Ls);
  if (!grow((void **)&s->dbuf, 2 * (size_t)(rows * E) * sizeof(float)))
    return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
  float *cur = s->dbuf, *nxt = s->dbuf + rows * E;
  size_t tb = (size_t)(B * Lt * E), sb = (size_t)(B * Ls * E);
  int wi = m->out_w >= 0 ? m->out_w : m->tgt_emb;
  memset(cur, 0, tb * sizeof(float));
  st = attn_dense_backward_ctx(ctx, s->yt + m->c.dec_layers * tb, attn_params_data(&m->p, wi),
                               s->dlogits, cur, attn_params_grad(&m->p, wi),
                               attn_params_grad(&m->p, m->out_b), B * Lt, E, V);
  const float *mem = s->xs + m->c.enc_layers * sb;
  memset(s->dmem, 0, sb * sizeof(float));
  for (int64_t l = m->c.dec_layers - 1; !st && l >= 0; l--) {
    memset(nxt, 0, tb * sizeof(float));
    st = attn_decoder_backward(&m->dec[l], &m->p, ctx, &s->ds[l], s->yt + l * tb, mem, cur, nxt,
                               s->dmem);
    float *t = cur;
    cur = nxt;
    nxt = t;
  }
  if (!st) st = embed_backward(m, m->tgt_emb, s->tgt, B * Lt, cur, V);
  if (!st) memcpy(cur, s->dmem, sb * sizeof(float));
  for (int64_t l = m->c.enc_layers - 1; !st && l >= 0; l--) {
    memset(nxt, 0, sb * sizeof(float));
    st = attn_encoder_backward(&m->enc[l], &m->p, ctx, &s->es[l], s->xs + l * sb, cur, nxt);
    float *t = cur;
    cur = nxt;
    nxt = t;
  }
  if (!st) st = embed_backward(m, m->src_emb, s->src, B * Ls, cur, m->vocab_src);
  return st;
}
