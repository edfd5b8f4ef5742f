/* G2P decoding through the incremental decoder and the beam search
 * (g2p_decode.h). */
#include "apps/seq2seq/g2p_decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/seq2seq/beam.h"
#include "apps/seq2seq/g2p_chunks.h"
#include "attn/kernels.h"

void attn_g2p_decode_opts_default(attn_g2p_decode_opts *o) {
  o->beam = 1;
  o->n_best = 1;
  o->alpha = 0.6f;
  o->batch = 128;
}

void attn_g2p_hyps_free(attn_g2p_hyps *h) {
  if (!h) return;
  free(h->ph);
  free(h->len);
  free(h->score);
  free(h->logp);
  free(h->count);
  memset(h, 0, sizeof *h);
}

/* ---- the incremental decoder ----------------------------------------------- */
void attn_g2p_stepper_free(attn_g2p_stepper *d) {
  if (!d) return;
  attn_decoder_cache_free(&d->cache);
  free(d->x);
  free(d->y);
  free(d->logits);
  memset(d, 0, sizeof *d);
}

/* room for rows decoder rows: x, y, logits and the cache, reserved for every
 * step a word can take (max_tgt) so that later batches reuse them as they are */
static attn_status stepper_reserve(attn_g2p_stepper *d, const attn_g2p_model *m, int64_t rows) {
  if (d->cache.self && rows <= d->rows_cap) return ATTN_OK;
  const int64_t E = m->c.d_model;
  free(d->x), free(d->y), free(d->logits);
  d->rows_cap = 0;
  d->x = malloc((size_t)(rows * E) * sizeof(float));
  d->y = malloc((size_t)(rows * E) * sizeof(float));
  d->logits = malloc((size_t)(rows * m->vocab_tgt) * sizeof(float));
  if (!d->x || !d->y || !d->logits)
    return attn_set_error(ATTN_ENOMEM, "g2p decoder: %lld rows", (long long)rows);
  attn_decoder_cache_free(&d->cache);
  attn_status st =
      attn_decoder_cache_init(&d->cache, m->dec, (int)m->c.dec_layers, rows, m->c.max_tgt);
  if (!st) d->rows_cap = rows;
  return st;
}

/* the B words last encoded in s, group rows each: (re)start the cache on their memory */
static attn_status stepper_start(attn_g2p_stepper *d, const attn_g2p_model *m,
                                 const attn_nn_ctx *ctx, const attn_g2p_saved *s, int64_t group) {
  if (!s->xs || s->B < 1 || group < 1)
    return attn_set_error(ATTN_EINVAL, "g2p decoder: encode first (group %lld)", (long long)group);
  const int64_t B = s->B, Ls = s->Ls, E = m->c.d_model, rows = B * group;
  d->m = m;
  if (ctx) d->ctx = *ctx;
  d->ctx.training = 0;
  d->rows = rows;
  attn_status st = stepper_reserve(d, m, rows);
  if (!st) st = attn_decoder_cache_restart(&d->cache, rows);
  int32_t *lens = st ? NULL : malloc((size_t)B * sizeof *lens);
  if (!st && !lens) st = attn_set_error(ATTN_ENOMEM, "g2p decoder: %lld words", (long long)B);
  for (int64_t b = 0; !st && b < B; b++) {
    lens[b] = 0;
    for (int64_t t = 0; t < Ls; t++) lens[b] += !s->src_pad[b * Ls + t];
  }
  const float *mem = s->xs + m->c.enc_layers * B * Ls * E;
  if (!st) st = attn_decoder_cache_set_memory(&d->cache, m->dec, &m->p, &d->ctx, mem, B, Ls, lens);
  free(lens);
  return st;
}

attn_status attn_g2p_stepper_init(attn_g2p_stepper *d, const attn_g2p_model *m,
                                  const attn_nn_ctx *ctx, const attn_g2p_saved *s, int64_t group) {
  memset(d, 0, sizeof *d);
  attn_status st = stepper_start(d, m, ctx, s, group);
  if (st) attn_g2p_stepper_free(d);
  return st;
}

attn_status attn_g2p_stepper_step(attn_g2p_stepper *d, const int32_t *tokens, int64_t t) {
  return attn_g2p_stepper_step_cross(d, tokens, t, NULL);
}

attn_status attn_g2p_stepper_step_cross(attn_g2p_stepper *d, const int32_t *tokens, int64_t t,
                                        float *cross) {
  const attn_g2p_model *m = d->m;
  const int64_t per_layer = d->rows * m->c.heads * d->cache.Lm;
  if (t != attn_decoder_cache_len(&d->cache))
    return attn_set_error(ATTN_EINVAL, "g2p decoder: step %lld after %lld", (long long)t,
                          (long long)attn_decoder_cache_len(&d->cache));
  attn_status st = attn_g2p_embed_tgt(m, tokens, d->rows, t, d->x);
  for (int64_t l = 0; !st && l < m->c.dec_layers; l++) {
    st = attn_decoder_step(&m->dec[l], &m->p, &d->ctx, &d->cache, (int)l, d->x, 1, d->y,
                           cross ? cross + l * per_layer : NULL);
    float *tmp = d->x;
    d->x = d->y;
    d->y = tmp;
  }
  if (!st) st = attn_g2p_project(m, &d->ctx, d->x, d->rows, d->logits);
  return st;
}

/* ---- the beam's model -------------------------------------------------------- *
 * The stepper computes only the words not finished yet: compact word i is
 * the batch's word live[i], its rows i*K .. i*K+K-1 (attn_decoder_cache_keep
 * drops the others as the beam retires them). */
typedef struct {
  attn_g2p_stepper d[ATTN_G2P_MAX_MODELS]; /* one per model of the ensemble */
  int nm;         /* models */
  float *lp;      /* [V] a row of one model's log-probabilities (ensembles) */
  int64_t K, n_words, n_live;
  int64_t *live;  /* [n_words] batch word of compact word i */
  int32_t *tok;   /* [n_words * K] the compact rows' tokens */
  int64_t *src;   /* [n_words * K] the compact rows' reorder */
  int64_t cap;    /* rows the three above hold (live: cap / K words at least) */
} beam_glue;

static void glue_free(beam_glue *g) {
  free(g->live), free(g->tok), free(g->src), free(g->lp);
  for (int k = 0; k < ATTN_G2P_MAX_MODELS; k++) attn_g2p_stepper_free(&g->d[k]);
}

/* n_words words of K rows each (buffers kept from batch to batch) */
static attn_status glue_start(beam_glue *g, int nm, int64_t K, int64_t n_words) {
  g->nm = nm;
  if (nm > 1 && !g->lp && !(g->lp = malloc((size_t)g->d[0].m->vocab_tgt * sizeof *g->lp)))
    return attn_set_error(ATTN_ENOMEM, "g2p decoding: an ensemble's row");
  if (n_words * K > g->cap) {
    free(g->live), free(g->tok), free(g->src);
    g->cap = 0;
    g->live = malloc((size_t)n_words * sizeof *g->live);
    g->tok = malloc((size_t)(n_words * K) * sizeof *g->tok);
    g->src = malloc((size_t)(n_words * K) * sizeof *g->src);
    if (!g->live || !g->tok || !g->src)
      return attn_set_error(ATTN_ENOMEM, "g2p decoding: %lld words", (long long)n_words);
    g->cap = n_words * K;
  }
  g->K = K;
  g->n_words = g->n_live = n_words;
  for (int64_t i = 0; i < n_words; i++) g->live[i] = i;
  return ATTN_OK;
}

/* y [V] := log-softmax(x), then specials but </s> out */
static void log_softmax_row(const float *x, int64_t V, float *y) {
  float mx = x[0];
  for (int64_t v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
  double z = 0;
  for (int64_t v = 0; v < V; v++) z += exp((double)(x[v] - mx));
  const float lz = mx + (float)log(z);
  for (int64_t v = 0; v < V; v++)
    y[v] = v < ATTN_G2P_SPECIAL && v != ATTN_G2P_EOS ? -INFINITY : x[v] - lz;
}

/* y := log(exp(y) + exp(x)), element-wise (-inf stays -inf) */
static void log_add_row(float *y, const float *x, int64_t V) {
  for (int64_t v = 0; v < V; v++) {
    const float a = y[v] > x[v] ? y[v] : x[v], b = y[v] > x[v] ? x[v] : y[v];
    if (b != -INFINITY) y[v] = a + log1pf(expf(b - a));
    else y[v] = a;
  }
}

/* One model: its log-softmax. An ensemble: log of the mean of the models'
 * probabilities (fairseq's ensembles), summed in model order. */
static attn_status beam_step(void *user, const int32_t *tokens, int64_t rows, int64_t t,
                             float *logp) {
  beam_glue *g = user;
  const int64_t V = g->d[0].m->vocab_tgt, K = g->K;
  if (rows != g->n_words * K)
    return attn_set_error(ATTN_EINVAL, "g2p decoder: %lld rows", (long long)rows);
  for (int64_t i = 0; i < g->n_live; i++)
    memcpy(g->tok + i * K, tokens + g->live[i] * K, (size_t)K * sizeof *g->tok);
  attn_status st = ATTN_OK;
  for (int k = 0; !st && k < g->nm; k++) {
    st = attn_g2p_stepper_step(&g->d[k], g->tok, t);
    for (int64_t r = 0; !st && r < g->n_live * K; r++) {
      float *y = logp + (g->live[r / K] * K + r % K) * V;
      log_softmax_row(g->d[k].logits + r * V, V, k == 0 ? y : g->lp);
      if (k > 0) log_add_row(y, g->lp, V);
    }
  }
  const float log_nm = logf((float)g->nm);
  for (int64_t r = 0; !st && g->nm > 1 && r < g->n_live * K; r++) {
    float *y = logp + (g->live[r / K] * K + r % K) * V;
    for (int64_t v = 0; v < V; v++) y[v] -= log_nm;
  }
  return st;
}

static attn_status beam_reorder(void *user, const int64_t *src, int64_t rows) {
  beam_glue *g = user;
  const int64_t K = g->K;
  (void)rows;
  for (int64_t r = 0; r < g->n_live * K; r++) {
    const int64_t w = g->live[r / K];
    g->src[r] = r - r % K + (src[w * K + r % K] - w * K);
  }
  attn_status st = ATTN_OK;
  for (int k = 0; !st && k < g->nm; k++) st = attn_decoder_cache_reorder(&g->d[k].cache, g->src);
  return st;
}

static attn_status beam_retire(void *user, const int *done, int64_t B) {
  beam_glue *g = user;
  int64_t n = 0;
  (void)B;
  for (int64_t i = 0; i < g->n_live; i++) /* keep: compact indices, then their batch words */
    if (!done[g->live[i]]) g->src[n++] = i;
  if (n == g->n_live) return ATTN_OK;
  attn_status st = ATTN_OK;
  for (int k = 0; !st && n > 0 && k < g->nm; k++)
    st = attn_decoder_cache_keep(&g->d[k].cache, g->src, n);
  for (int64_t i = 0; !st && i < n; i++) g->live[i] = g->live[g->src[i]];
  if (!st) g->n_live = n;
  for (int k = 0; !st && k < g->nm; k++) g->d[k].rows = n * g->K;
  return st;
}

static attn_status check_words(const attn_g2p_model *m, const attn_g2p_decode_opts *o,
                               const int32_t *src_lens, int n) {
  if (n < 0 || o->batch < 1 || o->beam < 1 || o->beam > 4096 || o->n_best < 1 ||
      o->n_best > o->beam || !(o->alpha >= 0.0f && o->alpha <= 100.0f))
    return attn_set_error(ATTN_EINVAL,
                          "g2p decoding: %d words, batch %d, beam %d (1..4096), n-best %d "
                          "(1..beam), length penalty %g (0..100)",
                          n, o->batch, o->beam, o->n_best, (double)o->alpha);
  for (int i = 0; i < n; i++)
    if (src_lens[i] < 1 || src_lens[i] > m->c.max_src)
      return attn_set_error(ATTN_EINVAL, "word %d has %d letters; this model reads 1 to %lld",
                            i + 1, src_lens[i], (long long)m->c.max_src);
  return ATTN_OK;
}

static attn_status hyps_alloc(attn_g2p_hyps *h, int n, int n_best, int64_t T) {
  const size_t k = (size_t)n * (size_t)n_best + 1;
  h->n = n;
  h->n_best = n_best;
  h->max_tgt = T;
  h->ph = malloc(k * (size_t)T * sizeof *h->ph);
  h->len = calloc(k, sizeof *h->len);
  h->score = calloc(k, sizeof *h->score);
  h->logp = calloc(k, sizeof *h->logp);
  h->count = calloc((size_t)n + 1, sizeof *h->count);
  if (h->ph && h->len && h->score && h->logp && h->count) return ATTN_OK;
  attn_g2p_hyps_free(h);
  return attn_set_error(ATTN_ENOMEM, "g2p decoding: results of %d words", n);
}

/* one thread's decoding state, kept from batch to batch */
typedef struct {
  attn_g2p_saved sv[ATTN_G2P_MAX_MODELS]; /* each model's encoder output */
  int32_t *sb;       /* [batch, max_src] the batch's letters, padded */
  beam_glue g;       /* the stepper (decoder cache) and the beam's row maps */
} worker;

static void worker_free(worker *w) {
  for (int k = 0; k < ATTN_G2P_MAX_MODELS; k++) attn_g2p_saved_free(&w->sv[k]);
  free(w->sb);
  glue_free(&w->g);
}

/* words [i0, i0 + W) of src: encode, then the beam */
static attn_status search_batch(const attn_g2p_model *const *ms, int nm, const attn_nn_ctx *ctx,
                                const attn_beam_config *bc, const int32_t *const *src,
                                const int32_t *src_lens, int i0, int W, worker *wk,
                                attn_g2p_hyps *out) {
  int64_t Ls = 0;
  int32_t *sb = wk->sb;
  for (int b = 0; b < W; b++) Ls = src_lens[i0 + b] > Ls ? src_lens[i0 + b] : Ls;
  for (int b = 0; b < W; b++) {
    const int64_t l = src_lens[i0 + b];
    memcpy(sb + b * Ls, src[i0 + b], (size_t)l * sizeof *sb);
    for (int64_t t = l; t < Ls; t++) sb[b * Ls + t] = ATTN_G2P_PAD;
  }
  attn_nn_ctx run = {0};
  if (ctx) run = *ctx;
  run.training = 0;
  beam_glue *g = &wk->g;
  attn_status st = ATTN_OK;
  for (int k = 0; !st && k < nm; k++) {
    st = attn_g2p_encode(ms[k], &run, &wk->sv[k], sb, src_lens + i0, W, Ls);
    if (!st) st = stepper_start(&g->d[k], ms[k], &run, &wk->sv[k], bc->K);
  }
  if (!st) st = glue_start(g, nm, bc->K, W);
  attn_beam_model bm = {g, beam_step, beam_reorder, beam_retire};
  attn_beam_result res;
  if (!st) st = attn_beam_search(bc, &bm, W, &res);
  if (st) return st;
  const int nb = out->n_best;
  for (int b = 0; b < W; b++) {
    const int i = i0 + b;
    out->count[i] = res.count[b];
    for (int k = 0; k < res.count[b]; k++) {
      const attn_beam_hyp *h = &res.hyps[b * res.n_best + k];
      const int64_t j = (int64_t)i * nb + k;
      memcpy(out->ph + j * out->max_tgt, h->tokens, (size_t)h->len * sizeof *out->ph);
      out->len[j] = h->len;
      out->score[j] = h->score;
      out->logp[j] = h->logp;
    }
  }
  attn_beam_result_free(&res);
  return ATTN_OK;
}

typedef struct {
  const attn_g2p_model *const *ms;
  int nm, n, batch;
  const attn_nn_ctx *ctx;
  const attn_beam_config *bc;
  const int32_t *const *src;
  const int32_t *src_lens;
  worker *wk;
  attn_g2p_hyps *out;
} batches_t;

static attn_status batch_chunk(void *user, int64_t c, int t) {
  const batches_t *a = user;
  const int i0 = (int)c * a->batch, W = a->n - i0 < a->batch ? a->n - i0 : a->batch;
  return search_batch(a->ms, a->nm, a->ctx, a->bc, a->src, a->src_lens, i0, W, &a->wk[t], a->out);
}

/* Batches in parallel (g2p_chunks.h). A batch's words decode as they would
 * alone (its composition is fixed by the word order), so the result does
 * not depend on the thread count. One batch: its operations take the
 * threads. */
static attn_status search_batches(const attn_g2p_model *const *ms, int nm, const attn_nn_ctx *ctx,
                                  const attn_beam_config *bc, const int32_t *const *src,
                                  const int32_t *src_lens, int n, int batch, attn_g2p_hyps *out) {
  const int nb = (n + batch - 1) / batch, nt = attn_g2p_chunk_threads(nb);
  worker *wk = calloc((size_t)nt, sizeof *wk);
  if (!wk) return attn_set_error(ATTN_ENOMEM, "g2p decoding: %d threads", nt);
  attn_status st = ATTN_OK;
  for (int t = 0; t < nt && !st; t++) {
    wk[t].sb = malloc((size_t)((int64_t)batch * ms[0]->c.max_src) * sizeof *wk[t].sb);
    if (!wk[t].sb) st = attn_set_error(ATTN_ENOMEM, "g2p decoding: batch of %d words", batch);
  }
  batches_t a = {ms, nm, n, batch, ctx, bc, src, src_lens, wk, out};
  if (!st) st = attn_g2p_run_chunks(nb, nt, batch_chunk, &a);
  for (int t = 0; t < nt; t++) worker_free(&wk[t]);
  free(wk);
  return st;
}

/* the direction m decodes in (scoring 0: a both-directions model left to
 * right) or scores in (scoring 1: right to left) */
static int direction(const attn_g2p_model *m, int scoring) {
  return scoring ? attn_g2p_scores_r2l(&m->c) : m->c.reverse;
}

static attn_status check_models(const attn_g2p_model *const *ms, int nm, int scoring) {
  if (nm < 1 || nm > ATTN_G2P_MAX_MODELS)
    return attn_set_error(ATTN_EINVAL, "g2p: %d models in an ensemble (1 to %d)", nm,
                          ATTN_G2P_MAX_MODELS);
  const attn_g2p_model *a = ms[0];
  for (int k = 1; k < nm; k++) {
    const attn_g2p_model *b = ms[k];
    if (b->c.stress != a->c.stress || direction(b, scoring) != direction(a, scoring))
      return attn_set_error(ATTN_EINVAL,
                            "g2p ensemble: model %d %s %s phonemes %s, model 1 %s phonemes %s "
                            "(the models of an ensemble are trained alike)",
                            k + 1, scoring ? "scores" : "writes",
                            b->c.stress ? "stressed" : "stress-free",
                            direction(b, scoring) ? "right to left" : "left to right",
                            a->c.stress ? "stressed" : "stress-free",
                            direction(a, scoring) ? "right to left" : "left to right");
    if (!attn_g2p_same_io(a, b))
      return attn_set_error(ATTN_EINVAL,
                            "g2p ensemble: model %d reads other graphemes or lengths than model 1 "
                            "(%d vs %d graphemes, max_src %lld vs %lld, max_tgt %lld vs %lld)",
                            k + 1, b->g.n, a->g.n, (long long)b->c.max_src, (long long)a->c.max_src,
                            (long long)b->c.max_tgt, (long long)a->c.max_tgt);
  }
  return ATTN_OK;
}

attn_status attn_g2p_ensemble_check(const attn_g2p_model *const *ms, int nm) {
  return check_models(ms, nm, 0);
}

attn_status attn_g2p_scoring_check(const attn_g2p_model *const *ms, int nm) {
  return check_models(ms, nm, 1);
}

/* a right-to-left model's outputs in reading order */
static void hyps_reverse(attn_g2p_hyps *h) {
  for (int64_t j = 0; j < (int64_t)h->n * h->n_best; j++) {
    int32_t *p = h->ph + j * h->max_tgt;
    for (int a = 0, b = h->len[j] - 1; a < b; a++, b--) {
      const int32_t x = p[a];
      p[a] = p[b];
      p[b] = x;
    }
  }
}

attn_status attn_g2p_search(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                            const attn_g2p_decode_opts *o, const int32_t *const *src,
                            const int32_t *src_lens, int n, attn_g2p_hyps *out) {
  return attn_g2p_search_ensemble(&m, 1, ctx, o, src, src_lens, n, out);
}

attn_status attn_g2p_search_ensemble(const attn_g2p_model *const *ms, int nm,
                                     const attn_nn_ctx *ctx, const attn_g2p_decode_opts *o,
                                     const int32_t *const *src, const int32_t *src_lens, int n,
                                     attn_g2p_hyps *out) {
  memset(out, 0, sizeof *out);
  attn_status st = attn_g2p_ensemble_check(ms, nm);
  if (st) return st;
  const attn_g2p_model *m = ms[0];
  st = check_words(m, o, src_lens, n);
  if (st) return st;
  const int64_t T = m->c.max_tgt;
  if ((st = hyps_alloc(out, n, o->n_best, T))) return st;
  attn_beam_config bc;
  attn_beam_config_default(&bc);
  bc.K = o->beam;
  bc.n_best = o->n_best;
  bc.max_len = (int)(T - 1); /* positions 0 .. T-2 fed: at most T-1 tokens out */
  bc.V = m->vocab_tgt;
  bc.bos = ATTN_G2P_BOS;
  bc.eos = ATTN_G2P_EOS;
  bc.norm = o->alpha > 0.0f ? ATTN_BEAM_NORM_GNMT : ATTN_BEAM_NORM_NONE;
  bc.alpha = o->alpha;
  if (n > 0) st = search_batches(ms, nm, ctx, &bc, src, src_lens, n, o->batch, out);
  if (!st && m->c.reverse) hyps_reverse(out);
  if (st) attn_g2p_hyps_free(out);
  return st;
}

attn_status attn_g2p_greedy(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                            const int32_t *const *src, const int32_t *src_lens, int n, int batch,
                            int32_t *out, int *out_len) {
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.batch = batch;
  attn_g2p_hyps h;
  attn_status st = attn_g2p_search(m, ctx, &o, src, src_lens, n, &h);
  if (st) return st;
  for (int i = 0; i < n; i++) {
    out_len[i] = h.count[i] > 0 ? h.len[i] : 0;
    memcpy(out + (int64_t)i * h.max_tgt, h.ph + (int64_t)i * h.max_tgt,
           (size_t)out_len[i] * sizeof *out);
  }
  attn_g2p_hyps_free(&h);
  return ATTN_OK;
}
