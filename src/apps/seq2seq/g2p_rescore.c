/* N-best rescoring by right-to-left models (g2p_rescore.h). */
#include "apps/seq2seq/g2p_rescore.h"

#include "apps/seq2seq/g2p_chunks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log p(y | logits row x) over the whole vocabulary (the beam's log-softmax;
 * in f32 as the beam's, the sum over a sequence's tokens in double) */
static double row_logp(const float *x, int64_t V, int32_t y) {
  float mx = x[0], z = 0.0f;
  for (int64_t v = 1; v < V; v++)
    mx = x[v] > mx ? x[v] : mx;
  for (int64_t v = 0; v < V; v++)
    z += expf(x[v] - mx);
  return (double)(x[y] - mx) - log((double)z);
}

/* one thread's scoring buffers, kept from chunk to chunk */
typedef struct {
  int32_t *sb, *sl, *rw, *tin, *tout;     /* [C, Ls], [C], [C], [C, Lt], [C, Lt] */
  double *lp;                             /* [nm, C, Lt] each model's log-probabilities */
  attn_g2p_saved sv[ATTN_G2P_MAX_MODELS]; /* each model's (their sizes differ) */
} work;

static void work_free(work *w) {
  free(w->sb), free(w->sl), free(w->rw), free(w->tin), free(w->tout), free(w->lp);
  for (int k = 0; k < ATTN_G2P_MAX_MODELS; k++)
    attn_g2p_saved_free(&w->sv[k]);
}

static int work_alloc(work *w, int nm, int64_t C, int64_t S, int64_t T) {
  w->sb = malloc((size_t)(C * S) * sizeof *w->sb);
  w->sl = malloc((size_t)C * sizeof *w->sl);
  w->rw = malloc((size_t)C * sizeof *w->rw);
  w->tin = malloc((size_t)(C * T) * sizeof *w->tin);
  w->tout = malloc((size_t)(C * T) * sizeof *w->tout);
  w->lp = malloc((size_t)(nm * C * T) * sizeof *w->lp);
  return w->sb && w->sl && w->rw && w->tin && w->tout && w->lp;
}

/* Sequences j0 .. j0 + B into w's teacher-forced batch, in the models'
 * order; a run of sequences of one word shares one encoder row: *W words
 * (w->sb [W, *Ls], w->sl), sequence b reading word w->rw[b]. */
static void gather(const attn_g2p_model *m, const int32_t *const *src, const int32_t *src_lens,
                   const int *word, const int32_t *ph, int64_t stride, const int *len, int64_t j0,
                   int64_t B, int64_t *W, int64_t *Ls, int64_t *Lt, work *w) {
  int64_t nw = 0, ls = 1, lt = 1;
  for (int64_t b = 0; b < B; b++) {
    const int64_t j = j0 + b;
    if (b == 0 || word[j] != word[j - 1]) w->sl[nw++] = src_lens[word[j]];
    w->rw[b] = (int32_t)(nw - 1);
    ls = src_lens[word[j]] > ls ? src_lens[word[j]] : ls;
    lt = len[j] + 1 > lt ? len[j] + 1 : lt;
  }
  for (int64_t b = 0; b < B; b++) {
    const int64_t j = j0 + b, u = w->rw[b];
    if (b > 0 && u == w->rw[b - 1]) continue;
    const int32_t l = src_lens[word[j]];
    for (int64_t t = 0; t < ls; t++)
      w->sb[u * ls + t] = t < l ? src[word[j]][t] : ATTN_G2P_PAD;
  }
  for (int64_t b = 0; b < B; b++) {
    const int64_t j = j0 + b;
    const int32_t n = len[j];
    const int32_t *p = ph + j * stride;
    for (int64_t t = 0; t < lt; t++) {
      const int32_t y = t < n ? p[attn_g2p_scores_r2l(&m->c) ? n - 1 - t : t] : ATTN_G2P_EOS;
      w->tout[b * lt + t] = t <= n ? y : -1;
      w->tin[b * lt + t] = t == 0 ? ATTN_G2P_BOS : t <= n ? w->tout[b * lt + t - 1] : ATTN_G2P_PAD;
    }
  }
  *W = nw, *Ls = ls, *Lt = lt;
}

typedef struct {
  const attn_g2p_model *const *ms;
  int nm;
  attn_nn_ctx run;
  const int32_t *const *src;
  const int32_t *src_lens;
  const int *word;
  const int32_t *ph;
  int64_t stride;
  const int *len;
  int64_t n, batch;
  work *wk;
  double *logp;
} chunks_t;

/* chunk c (sequences j0 .. j0 + B) on a thread: encode each word once,
 * decode, sum */
static attn_status chunk(void *user, int64_t c, int thread) {
  const chunks_t *a = user;
  const int64_t j0 = c * a->batch, B = a->n - j0 < a->batch ? a->n - j0 : a->batch;
  const attn_g2p_model *const *ms = a->ms;
  const int nm = a->nm;
  const int *len = a->len;
  work *w = &a->wk[thread];
  const int64_t V = ms[0]->vocab_tgt;
  int64_t W, Ls, Lt;
  gather(ms[0], a->src, a->src_lens, a->word, a->ph, a->stride, len, j0, B, &W, &Ls, &Lt, w);
  attn_status st = ATTN_OK;
  for (int k = 0; !st && k < nm; k++) {
    const int32_t start = attn_g2p_start(&ms[k]->c, attn_g2p_scores_r2l(&ms[k]->c));
    for (int64_t b = 0; b < B; b++)
      w->tin[b * Lt] = start; /* models may start apart */
    st = attn_g2p_encode_rows(ms[k], &a->run, &w->sv[k], w->sb, w->sl, W, Ls, w->rw, B);
    if (!st) st = attn_g2p_decode(ms[k], &a->run, &w->sv[k], w->tin, Lt);
    for (int64_t r = 0; !st && r < B * Lt; r++)
      if (w->tout[r] >= 0) w->lp[k * B * Lt + r] = row_logp(w->sv[k].logits + r * V, V, w->tout[r]);
  }
  const double log_nm = log((double)nm);
  for (int64_t b = 0; !st && b < B; b++) {
    double sum = 0;
    for (int64_t t = 0; t <= len[j0 + b]; t++) {
      const int64_t r = b * Lt + t;
      if (nm == 1) {
        sum += w->lp[r];
        continue;
      }
      double mx = w->lp[r]; /* log of the mean of the models' probabilities */
      for (int k = 1; k < nm; k++)
        mx = w->lp[k * B * Lt + r] > mx ? w->lp[k * B * Lt + r] : mx;
      double z = 0;
      for (int k = 0; k < nm; k++)
        z += exp(w->lp[k * B * Lt + r] - mx);
      sum += mx + log(z) - log_nm;
    }
    a->logp[j0 + b] = sum;
  }
  return st;
}

attn_status attn_g2p_sequence_logp(const attn_g2p_model *const *ms, int nm, const attn_nn_ctx *ctx,
                                   const int32_t *const *src, const int32_t *src_lens,
                                   const int *word, const int32_t *ph, int64_t stride,
                                   const int *len, int64_t n, int batch, double *logp) {
  attn_status st = attn_g2p_scoring_check(ms, nm);
  if (st) return st;
  const attn_g2p_model *m = ms[0];
  if (n < 0 || batch < 1)
    return attn_set_error(ATTN_EINVAL, "g2p scoring: %lld sequences, batch %d", (long long)n,
                          batch);
  for (int64_t j = 0; j < n; j++) {
    const int32_t l = src_lens[word[j]];
    if (l < 1 || l > m->c.max_src || len[j] < 0 || len[j] + 1 > m->c.max_tgt || len[j] > stride)
      return attn_set_error(ATTN_EINVAL,
                            "g2p scoring: sequence %lld: %d letters (1..%lld), %d phonemes "
                            "(0..%lld)",
                            (long long)j + 1, l, (long long)m->c.max_src, len[j],
                            (long long)m->c.max_tgt - 1);
    for (int t = 0; t < len[j]; t++) {
      const int32_t y = ph[j * stride + t];
      if (y < ATTN_G2P_SPECIAL || y >= m->vocab_tgt)
        return attn_set_error(ATTN_EINVAL, "g2p scoring: sequence %lld: phoneme id %d (%d..%lld)",
                              (long long)j + 1, y, ATTN_G2P_SPECIAL, (long long)m->vocab_tgt - 1);
    }
  }
  /* Chunks of `batch` sequences in parallel (g2p_chunks.h), fixed by the
   * order: the result does not depend on the thread count. */
  const int64_t nb = (n + batch - 1) / batch;
  const int nt = attn_g2p_chunk_threads(nb);
  work *wk = calloc((size_t)nt, sizeof *wk);
  if (!wk) return attn_set_error(ATTN_ENOMEM, "g2p scoring: %d threads", nt);
  for (int t = 0; t < nt && !st; t++)
    if (!work_alloc(&wk[t], nm, batch, m->c.max_src, m->c.max_tgt))
      st = attn_set_error(ATTN_ENOMEM, "g2p scoring: batch of %d", batch);
  chunks_t a = {ms, nm, {0}, src, src_lens, word, ph, stride, len, n, batch, wk, logp};
  if (ctx) a.run = *ctx;
  a.run.training = 0;
  if (!st) st = attn_g2p_run_chunks(nb, nt, chunk, &a);
  for (int t = 0; t < nt; t++)
    work_free(&wk[t]);
  free(wk);
  return st;
}

attn_status attn_g2p_rescore_check(const attn_g2p_model *const *l2r, int nl,
                                   const attn_g2p_model *const *r2l, int nr) {
  if (nl < 1 || nr < 1 || nr > ATTN_G2P_MAX_MODELS)
    return attn_set_error(ATTN_EINVAL,
                          "g2p rescoring: %d left-to-right and %d right-to-left "
                          "models (at least 1, at most %d rescoring)",
                          nl, nr, ATTN_G2P_MAX_MODELS);
  for (int k = 0; k < nl; k++)
    if (l2r[k]->c.reverse)
      return attn_set_error(
          ATTN_EINVAL,
          "g2p rescoring: decoding model %d is a right-to-left model (--reverse); "
          "the beam comes from left-to-right models, --rescore takes the "
          "right-to-left ones",
          k + 1);
  const attn_g2p_model *a = l2r[0];
  for (int k = 0; k < nr; k++) {
    const attn_g2p_model *b = r2l[k];
    if (!attn_g2p_scores_r2l(&b->c))
      return attn_set_error(ATTN_EINVAL,
                            "g2p rescoring: rescoring model %d is a left-to-right model; --rescore "
                            "takes right-to-left models (attn g2p train --reverse or "
                            "--both-directions)",
                            k + 1);
    if (b->c.stress != a->c.stress)
      return attn_set_error(ATTN_EINVAL,
                            "g2p rescoring: rescoring model %d writes %s phonemes, the decoding "
                            "model %s ones (train both with or both without --no-stress)",
                            k + 1, b->c.stress ? "stressed" : "stress-free",
                            a->c.stress ? "stressed" : "stress-free");
    if (!attn_g2p_same_io(a, b))
      return attn_set_error(ATTN_EINVAL,
                            "g2p rescoring: rescoring model %d reads other graphemes or lengths "
                            "than the decoding model (%d vs %d graphemes, max_src %lld vs %lld, "
                            "max_tgt %lld vs %lld)",
                            k + 1, b->g.n, a->g.n, (long long)b->c.max_src, (long long)a->c.max_src,
                            (long long)b->c.max_tgt, (long long)a->c.max_tgt);
  }
  return ATTN_OK;
}

/* the score of a hypothesis of len phonemes (and </s>) with this logp: the
 * beam's length penalty */
static float length_score(double logp, int len, float alpha) {
  return (float)(alpha > 0 ? logp / pow((5.0 + (len + 1)) / 6.0, alpha) : logp);
}

/* hypothesis q's combined logp (l2r + weight * r2l) and its score */
static void combine(attn_g2p_hyps *h, int64_t q, double l2r, double r2l, float weight,
                    float alpha) {
  const double logp = l2r + (double)weight * r2l;
  h->logp[q] = (float)logp;
  h->score[q] = length_score(logp, h->len[q], alpha);
}

/* the highest score hypothesis q can reach (its right-to-left logp <= 0):
 * its score with r2l = 0, computed as combine() computes scores */
static float score_bound(const attn_g2p_hyps *h, int64_t q, float alpha) {
  return length_score((double)h->logp[q], h->len[q], alpha);
}

typedef struct {
  int *word, *len;
  int64_t *at; /* sequence j: hypothesis at[j] */
  double *lp;
  int32_t *ph;
  int64_t n;
} seqs;

static void seqs_add(seqs *a, const attn_g2p_hyps *h, int i, int64_t q) {
  a->word[a->n] = i, a->len[a->n] = h->len[q], a->at[a->n] = q;
  memcpy(a->ph + a->n * h->max_tgt, h->ph + q * h->max_tgt, (size_t)h->len[q] * sizeof *a->ph);
  a->n++;
}

/* the hypotheses in a scored right to left; each one's logp and score combined */
static attn_status score_seqs(seqs *a, attn_g2p_hyps *h, const attn_g2p_model *const *r2l, int nr,
                              float weight, float alpha, const attn_nn_ctx *ctx,
                              const int32_t *const *src, const int32_t *src_lens, int batch) {
  attn_status st = attn_g2p_sequence_logp(r2l, nr, ctx, src, src_lens, a->word, a->ph, h->max_tgt,
                                          a->len, a->n, batch, a->lp);
  for (int64_t j = 0; !st && j < a->n; j++)
    combine(h, a->at[j], (double)h->logp[a->at[j]], a->lp[j], weight, alpha);
  return st;
}

/* best 0: every hypothesis scored, each word's list re-sorted; best 1: the
 * first hypothesis of each word scored, then only those whose bound beats
 * its score, and each word keeps its best (count 1) */
static attn_status rescore(attn_g2p_hyps *h, const attn_g2p_model *const *r2l, int nr, float weight,
                           float alpha, const attn_nn_ctx *ctx, const int32_t *const *src,
                           const int32_t *src_lens, int batch, int best) {
  if (!(weight >= 0.0f && weight <= 1000.0f) || !(alpha >= 0.0f && alpha <= 100.0f))
    return attn_set_error(ATTN_EINVAL,
                          "g2p rescoring: weight %g (0..1000), length penalty %g "
                          "(0..100)",
                          (double)weight, (double)alpha);
  const int64_t nh = (int64_t)h->n * h->n_best;
  seqs a = {malloc((size_t)(nh + 1) * sizeof *a.word),
            malloc((size_t)(nh + 1) * sizeof *a.len),
            malloc((size_t)(nh + 1) * sizeof *a.at),
            malloc((size_t)(nh + 1) * sizeof *a.lp),
            malloc((size_t)(nh + 1) * (size_t)h->max_tgt * sizeof *a.ph),
            0};
  attn_status st =
      a.word && a.len && a.at && a.lp && a.ph
          ? ATTN_OK
          : attn_set_error(ATTN_ENOMEM, "g2p rescoring: %lld hypotheses", (long long)nh);
  for (int i = 0; !st && i < h->n; i++)
    for (int k = 0; k < (best ? (h->count[i] > 0) : h->count[i]); k++)
      seqs_add(&a, h, i, (int64_t)i * h->n_best + k);
  if (!st) st = score_seqs(&a, h, r2l, nr, weight, alpha, ctx, src, src_lens, batch);
  if (best) {
    /* a hypothesis whose bound does not beat the first's combined score
     * cannot come first: its score is at most the bound, and the first
     * wins ties (the beam's order) */
    a.n = 0;
    for (int i = 0; !st && i < h->n; i++) {
      const int64_t q0 = (int64_t)i * h->n_best;
      for (int k = 1; k < h->count[i]; k++)
        if (score_bound(h, q0 + k, alpha) > h->score[q0]) seqs_add(&a, h, i, q0 + k);
    }
    if (!st && a.n > 0) st = score_seqs(&a, h, r2l, nr, weight, alpha, ctx, src, src_lens, batch);
    for (int64_t i = 0, j = 0; !st && i < h->n; i++) {
      const int64_t q0 = i * h->n_best;
      int64_t top = q0;
      for (; j < a.n && a.word[j] == i; j++) /* word i's scored ones, in the beam's order */
        if (h->score[a.at[j]] > h->score[top]) top = a.at[j];
      if (top != q0) {
        h->score[q0] = h->score[top], h->logp[q0] = h->logp[top], h->len[q0] = h->len[top];
        memcpy(h->ph + q0 * h->max_tgt, h->ph + top * h->max_tgt,
               (size_t)h->len[top] * sizeof *h->ph);
      }
      if (h->count[i] > 1) h->count[i] = 1;
    }
  }
  /* each word's list by the new score (insertion: stable, a few entries) */
  int32_t *ph = a.ph;
  for (int i = 0; !st && !best && i < h->n; i++) {
    const int64_t q0 = (int64_t)i * h->n_best;
    for (int k = 1; k < h->count[i]; k++) {
      const float sc = h->score[q0 + k], lg = h->logp[q0 + k];
      const int ln = h->len[q0 + k];
      memcpy(ph, h->ph + (q0 + k) * h->max_tgt, (size_t)ln * sizeof *ph);
      int p = k;
      for (; p > 0 && h->score[q0 + p - 1] < sc; p--) {
        h->score[q0 + p] = h->score[q0 + p - 1];
        h->logp[q0 + p] = h->logp[q0 + p - 1];
        h->len[q0 + p] = h->len[q0 + p - 1];
        memcpy(h->ph + (q0 + p) * h->max_tgt, h->ph + (q0 + p - 1) * h->max_tgt,
               (size_t)h->len[q0 + p] * sizeof *ph);
      }
      h->score[q0 + p] = sc, h->logp[q0 + p] = lg, h->len[q0 + p] = ln;
      memcpy(h->ph + (q0 + p) * h->max_tgt, ph, (size_t)ln * sizeof *ph);
    }
  }
  free(a.word), free(a.len), free(a.at), free(a.lp), free(a.ph);
  return st;
}

attn_status attn_g2p_rescore(attn_g2p_hyps *h, const attn_g2p_model *const *r2l, int nr,
                             float weight, float alpha, const attn_nn_ctx *ctx,
                             const int32_t *const *src, const int32_t *src_lens, int batch) {
  return rescore(h, r2l, nr, weight, alpha, ctx, src, src_lens, batch, 0);
}

attn_status attn_g2p_rescore_best(attn_g2p_hyps *h, const attn_g2p_model *const *r2l, int nr,
                                  float weight, float alpha, const attn_nn_ctx *ctx,
                                  const int32_t *const *src, const int32_t *src_lens, int batch) {
  return rescore(h, r2l, nr, weight, alpha, ctx, src, src_lens, batch, 1);
}
