/* Beam search (beam.h): per step, the best 2K candidates of each source by
 * a bounded insertion (ties keep the earlier (k, v): deterministic), then
 * finished / live bookkeeping and one reorder of the model's rows. */
#include "apps/seq2seq/beam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void attn_beam_config_default(attn_beam_config *c) {
  memset(c, 0, sizeof *c);
  c->K = 1;
  c->max_len = 64;
  c->n_best = 1;
  c->norm = ATTN_BEAM_NORM_GNMT;
  c->alpha = 0.6f;
}

void attn_beam_result_free(attn_beam_result *r) {
  if (!r) return;
  free(r->hyps);
  free(r->count);
  free(r->store);
  memset(r, 0, sizeof *r);
}

typedef struct {
  float x;   /* score(k) + logp[k, v] */
  int k;     /* hypothesis */
  int32_t v; /* token */
} cand;

typedef struct { /* a finished hypothesis, tokens in the search's fin_tok */
  int len, finished, order;
  float logp, score;
} fin;

typedef struct {
  const attn_beam_config *c;
  int64_t B, rows;
  int K, cap_fin;        /* finished slots per source: 2K (K by eos + K at max_len) */
  int32_t *hist, *nhist; /* [rows, max_len] tokens so far */
  float *score, *nscore; /* [rows] sum of log-probabilities; -inf = no hypothesis */
  int32_t *last;         /* [rows] last token */
  int64_t *src;          /* [rows] reorder map */
  float *logp;           /* [rows, V] */
  cand *top;             /* [2K] */
  fin *fins;             /* [B, cap_fin] */
  int32_t *fin_tok;      /* [B, cap_fin, max_len] */
  int *nfin, *done;      /* [B] */
} search;

static double normalised(const attn_beam_config *c, double logp, int len) {
  if (c->norm == ATTN_BEAM_NORM_LENGTH) return logp / len;
  if (c->norm == ATTN_BEAM_NORM_GNMT) return logp / pow((5.0 + len) / 6.0, c->alpha);
  return logp;
}

/* the best 2K candidates of source s, best first; returns how many */
static int rank(search *z, int64_t s) {
  const int M = 2 * z->K;
  const int64_t V = z->c->V;
  int n = 0;
  for (int k = 0; k < z->K; k++) {
    const int64_t r = s * z->K + k;
    if (isinf(z->score[r])) continue;
    const float *lp = z->logp + r * V;
    for (int64_t v = 0; v < V; v++) {
      const float x = z->score[r] + lp[v];
      if (isinf(x) && x < 0) continue;
      if (n == M && !(x > z->top[n - 1].x)) continue;
      int p = n < M ? n : M - 1;
      while (p > 0 && z->top[p - 1].x < x) {
        z->top[p] = z->top[p - 1];
        p--;
      }
      z->top[p] = (cand){x, k, (int32_t)v};
      if (n < M) n++;
    }
  }
  return n;
}

static void add_fin(search *z, int64_t s, int64_t row, int t, int32_t tok, float logp,
                    int finished) {
  const int max_len = z->c->max_len;
  fin *f = &z->fins[s * z->cap_fin + z->nfin[s]];
  int32_t *dst = z->fin_tok + (s * z->cap_fin + z->nfin[s]) * max_len;
  memcpy(dst, z->hist + row * max_len, (size_t)t * sizeof(int32_t));
  f->len = t;
  if (!finished) dst[f->len++] = tok;
  f->finished = finished;
  f->order = z->nfin[s]++;
  f->logp = logp;
  f->score = (float)normalised(z->c, logp, t + 1);
}

/* step t's choices for source s: finished hypotheses, and live rows
 * (src, nscore, last, nhist) */
static void choose(search *z, int64_t s, int t) {
  const int K = z->K, max_len = z->c->max_len;
  const int n = rank(z, s);
  int live = 0;
  for (int i = 0; i < n && live < K; i++) {
    const cand *c = &z->top[i];
    const int64_t from = s * K + c->k;
    if (c->v == z->c->eos) {
      if (i < K && z->nfin[s] < K) add_fin(z, s, from, t, c->v, c->x, 1);
      continue;
    }
    const int64_t r = s * K + live++;
    z->src[r] = from;
    z->nscore[r] = c->x;
    z->last[r] = c->v;
    memcpy(z->nhist + r * max_len, z->hist + from * max_len, (size_t)t * sizeof(int32_t));
    z->nhist[r * max_len + t] = c->v;
  }
  for (int j = live; j < K; j++) { /* no hypothesis: a placeholder row */
    const int64_t r = s * K + j;
    z->src[r] = s * K;
    z->nscore[r] = -INFINITY;
    z->last[r] = z->c->eos;
  }
  if (z->nfin[s] >= K || live == 0) {
    z->done[s] = 1;
  } else if (t == max_len - 1) { /* out of steps: the live ones finish as they stand */
    for (int j = 0; j < live; j++) {
      const int64_t r = s * K + j;
      add_fin(z, s, z->src[r], t, z->last[r], z->nscore[r], 0);
    }
    z->done[s] = 1;
  }
}

static int fin_better(const fin *a, const fin *b) {
  return a->score > b->score || (a->score == b->score && a->order < b->order);
}

static attn_status collect(search *z, attn_beam_result *out) {
  const int nb = z->c->n_best, max_len = z->c->max_len;
  out->B = z->B;
  out->n_best = nb;
  out->hyps = calloc((size_t)(z->B * nb), sizeof *out->hyps);
  out->count = calloc((size_t)z->B, sizeof *out->count);
  out->store = malloc((size_t)(z->B * nb * max_len) * sizeof(int32_t));
  if (!out->hyps || !out->count || !out->store) {
    attn_beam_result_free(out);
    return attn_set_error(ATTN_ENOMEM, "beam search: results of %lld sources", (long long)z->B);
  }
  int *idx = malloc((size_t)z->cap_fin * sizeof(int)); /* one source's finished, best first */
  if (!idx) {
    attn_beam_result_free(out);
    return attn_set_error(ATTN_ENOMEM, "beam search: results");
  }
  for (int64_t s = 0; s < z->B; s++) {
    const fin *f = z->fins + s * z->cap_fin;
    for (int i = 0; i < z->nfin[s]; i++) {
      int p = i;
      while (p > 0 && fin_better(&f[i], &f[idx[p - 1]])) {
        idx[p] = idx[p - 1];
        p--;
      }
      idx[p] = i;
    }
    out->count[s] = z->nfin[s] < nb ? z->nfin[s] : nb;
    for (int i = 0; i < out->count[s]; i++) {
      const fin *g = &f[idx[i]];
      attn_beam_hyp *h = &out->hyps[s * nb + i];
      h->tokens = out->store + (s * nb + i) * max_len;
      memcpy(h->tokens, z->fin_tok + (s * z->cap_fin + idx[i]) * max_len,
             (size_t)g->len * sizeof(int32_t));
      h->len = g->len;
      h->finished = g->finished;
      h->logp = g->logp;
      h->score = g->score;
    }
  }
  free(idx);
  return ATTN_OK;
}

static attn_status check_config(const attn_beam_config *c, const attn_beam_model *m, int64_t B) {
  if (!c || !m || !m->step || !m->reorder)
    return attn_set_error(ATTN_EINVAL, "beam search: NULL config, model or callback");
  if (c->K < 1 || c->max_len < 1 || c->n_best < 1 || c->n_best > c->K || c->V < 1 || B < 1 ||
      c->K > 4096 || c->max_len > 1 << 20 || B > INT64_MAX / c->K / c->V / c->max_len)
    return attn_set_error(ATTN_EINVAL,
                          "beam search: K %d, max_len %d, n_best %d (1..K), V %lld, B %lld", c->K,
                          c->max_len, c->n_best, (long long)c->V, (long long)B);
  if (c->bos < 0 || c->bos >= c->V || c->eos < 0 || c->eos >= c->V)
    return attn_set_error(ATTN_EINVAL, "beam search: bos %d / eos %d outside the vocabulary (%lld)",
                          (int)c->bos, (int)c->eos, (long long)c->V);
  if (c->norm < ATTN_BEAM_NORM_NONE || c->norm > ATTN_BEAM_NORM_GNMT)
    return attn_set_error(ATTN_EINVAL, "beam search: length normalisation %d", (int)c->norm);
  return ATTN_OK;
}

static void search_free(search *z) {
  free(z->hist), free(z->nhist), free(z->score), free(z->nscore), free(z->last);
  free(z->src), free(z->logp), free(z->top), free(z->fins), free(z->fin_tok);
  free(z->nfin), free(z->done);
}

static attn_status search_alloc(search *z, const attn_beam_config *c, int64_t B) {
  memset(z, 0, sizeof *z);
  z->c = c;
  z->B = B;
  z->K = c->K;
  z->rows = B * c->K;
  z->cap_fin = 2 * c->K;
  const size_t rows = (size_t)z->rows, L = (size_t)c->max_len, nf = (size_t)B * z->cap_fin;
  z->hist = calloc(rows * L, sizeof(int32_t));
  z->nhist = calloc(rows * L, sizeof(int32_t));
  z->score = malloc(rows * sizeof(float));
  z->nscore = malloc(rows * sizeof(float));
  z->last = malloc(rows * sizeof(int32_t));
  z->src = malloc(rows * sizeof(int64_t));
  z->logp = malloc(rows * (size_t)c->V * sizeof(float));
  z->top = malloc((size_t)z->cap_fin * sizeof(cand));
  z->fins = calloc(nf, sizeof(fin));
  z->fin_tok = malloc(nf * L * sizeof(int32_t));
  z->nfin = calloc((size_t)B, sizeof(int));
  z->done = calloc((size_t)B, sizeof(int));
  if (!z->hist || !z->nhist || !z->score || !z->nscore || !z->last || !z->src || !z->logp ||
      !z->top || !z->fins || !z->fin_tok || !z->nfin || !z->done) {
    search_free(z);
    return attn_set_error(ATTN_ENOMEM, "beam search: %lld rows of %lld tokens", (long long)rows,
                          (long long)c->V);
  }
  for (size_t r = 0; r < rows; r++) {
    z->score[r] = r % (size_t)c->K == 0 ? 0.0f : -INFINITY;
    z->last[r] = c->bos;
  }
  return ATTN_OK;
}

static attn_status check_logp(const search *z) {
  for (int64_t r = 0; r < z->rows; r++) {
    if (z->done[r / z->K]) continue;
    for (int64_t v = 0; v < z->c->V; v++)
      if (isnan(z->logp[r * z->c->V + v]))
        return attn_set_error(ATTN_EINVAL,
                              "beam search: the model gave NaN for token %lld of row %lld",
                              (long long)v, (long long)r);
  }
  return ATTN_OK;
}

attn_status attn_beam_search(const attn_beam_config *c, const attn_beam_model *m, int64_t B,
                             attn_beam_result *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!out) return attn_set_error(ATTN_EINVAL, "beam search: NULL result");
  attn_status st = check_config(c, m, B);
  search z;
  if (!st) st = search_alloc(&z, c, B);
  if (st) return st;
  int64_t left = B;
  for (int t = 0; t < c->max_len && left > 0 && !st; t++) {
    const int64_t was_left = left;
    st = m->step(m->user, z.last, z.rows, t, z.logp);
    if (!st) st = check_logp(&z);
    for (int64_t s = 0; s < B && !st; s++) {
      if (z.done[s]) { /* identity rows fed eos */
        for (int k = 0; k < z.K; k++) {
          const int64_t r = s * z.K + k;
          z.src[r] = r;
          z.nscore[r] = z.score[r];
          z.last[r] = c->eos;
        }
        continue;
      }
      choose(&z, s, t);
      left -= z.done[s];
    }
    if (st) break;
    if (m->retire && left < was_left) st = m->retire(m->user, z.done, B);
    if (st) break;
    float *ts = z.score;
    z.score = z.nscore, z.nscore = ts;
    int32_t *th = z.hist;
    z.hist = z.nhist, z.nhist = th;
    if (left > 0 && t + 1 < c->max_len) st = m->reorder(m->user, z.src, z.rows);
  }
  if (!st) st = collect(&z, out);
  search_free(&z);
  return st;
}
