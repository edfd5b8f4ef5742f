/* G2P evaluation (g2p_eval.h). */
#include "apps/seq2seq/g2p_eval.h"

#include "apps/seq2seq/g2p_rescore.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void attn_g2p_eval_result_free(attn_g2p_eval_result *r) {
  free(r->first);
  free(r->nrefs);
  free(r->hyp);
  free(r->hyp_len);
  free(r->dist);
  memset(r, 0, sizeof *r);
}

void attn_g2p_phones_format(const int32_t *ids, int n, int stress, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k + 1 < cap; i++) {
    int w =
        snprintf(buf + k, cap - k, "%s%s", i ? " " : "", attn_g2p_phone_name_for(ids[i], stress));
    if (w < 0 || (size_t)w >= cap - k) break;
    k += (size_t)w;
  }
}

static int by_key(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

attn_status attn_g2p_evaluate(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                              const attn_g2p_decode_opts *o, const attn_g2p_set *set, int limit,
                              attn_g2p_eval_result *r) {
  return attn_g2p_evaluate_ensemble(&m, 1, ctx, o, set, limit, r);
}

attn_status attn_g2p_evaluate_ensemble(const attn_g2p_model *const *ms, int nm,
                                       const attn_nn_ctx *ctx, const attn_g2p_decode_opts *o,
                                       const attn_g2p_set *set, int limit,
                                       attn_g2p_eval_result *r) {
  return attn_g2p_evaluate_rescored(ms, nm, NULL, 0, 1.0f, ctx, o, set, limit, r);
}

attn_status attn_g2p_evaluate_rescored(const attn_g2p_model *const *ms, int nm,
                                       const attn_g2p_model *const *rs, int nr, float wr,
                                       const attn_nn_ctx *ctx, const attn_g2p_decode_opts *o,
                                       const attn_g2p_set *set, int limit,
                                       attn_g2p_eval_result *r) {
  memset(r, 0, sizeof *r);
  if (nr > 0) {
    attn_status st = attn_g2p_rescore_check(ms, nm, rs, nr);
    if (st) return st;
  }
  const attn_g2p_model *m = ms[0];
  int n = 0;
  for (int i = 0; i < set->n; i++) n += i == 0 || set->word[i] != set->word[i - 1];
  if (limit > 0 && n > limit) n = limit;
  int64_t T = m->c.max_tgt;
  r->first = malloc((size_t)(n + 1) * sizeof *r->first);
  r->nrefs = malloc((size_t)(n + 1) * sizeof *r->nrefs);
  r->hyp = malloc((size_t)((int64_t)(n + 1) * T) * sizeof *r->hyp);
  r->hyp_len = malloc((size_t)(n + 1) * sizeof *r->hyp_len);
  r->dist = malloc((size_t)(n + 1) * sizeof *r->dist);
  // decode in order of length (key = len * 2^20 + word) for full batches
  int64_t *key = malloc((size_t)(n + 1) * sizeof *key);
  const int32_t **src = malloc((size_t)(n + 1) * sizeof *src);
  int32_t *sl = malloc((size_t)(n + 1) * sizeof *sl), *oh = NULL;
  int *ol = malloc((size_t)(n + 1) * sizeof *ol);
  oh = malloc((size_t)((int64_t)(n + 1) * T) * sizeof *oh);
  attn_status st = ATTN_OK;
  if (!r->first || !r->nrefs || !r->hyp || !r->hyp_len || !r->dist || !key || !src || !sl || !ol || !oh)
    st = attn_set_error(ATTN_ENOMEM, "g2p eval: out of memory");
  r->nwords = n;
  r->stress = m->c.stress;
  for (int i = 0, w = -1; !st && i < set->n; i++) {
    if (i == 0 || set->word[i] != set->word[i - 1]) {
      if (++w >= n) break;
      r->first[w] = i;
      r->nrefs[w] = 0;
      key[w] = ((int64_t)set->src_len[i] << 32) | w;
    }
    r->nrefs[w]++;
  }
  if (!st) {
    qsort(key, (size_t)n, sizeof *key, by_key);
    for (int k = 0; k < n; k++) {
      int w = (int)(key[k] & 0xffffffff);
      src[k] = set->src[r->first[w]];
      sl[k] = set->src_len[r->first[w]];
    }
    attn_g2p_decode_opts one = *o;
    one.n_best = nr > 0 ? o->beam : 1; /* rescoring: every hypothesis of the beam */
    attn_g2p_hyps h;
    double t0 = now();
    st = attn_g2p_search_ensemble(ms, nm, ctx, &one, src, sl, n, &h);
    if (!st && nr > 0) st = attn_g2p_rescore_best(&h, rs, nr, wr, o->alpha, ctx, src, sl, o->batch);
    r->decode_seconds = now() - t0;
    for (int k = 0; !st && k < n; k++) {
      const int64_t j = (int64_t)k * h.n_best;
      ol[k] = h.count[k] > 0 ? h.len[j] : 0;
      /* a stress-free model's phonemes as the stressed inventory's stress-1 ids */
      for (int t = 0; t < ol[k]; t++)
        oh[(int64_t)k * T + t] =
            m->c.stress ? h.ph[j * T + t] : attn_g2p_phone_restore(h.ph[j * T + t]);
    }
    attn_g2p_hyps_free(&h);
  }
  for (int k = 0; !st && k < n; k++) {
    int w = (int)(key[k] & 0xffffffff), f = r->first[w];
    memcpy(r->hyp + (int64_t)w * T, oh + (int64_t)k * T, (size_t)ol[k] * sizeof *oh);
    r->hyp_len[w] = ol[k];
    r->dist[w] = attn_g2p_score_word(&r->stress_score, r->hyp + (int64_t)w * T, ol[k], set->tgt + f,
                                     set->tgt_len + f, r->nrefs[w], 1);
    const int d0 = attn_g2p_score_word(&r->no_stress, r->hyp + (int64_t)w * T, ol[k], set->tgt + f,
                                       set->tgt_len + f, r->nrefs[w], 0);
    if (!r->stress) r->dist[w] = d0;
  }
  free(key);
  free(src);
  free(sl);
  free(ol);
  free(oh);
  if (st) attn_g2p_eval_result_free(r);
  return st;
}

typedef struct {
  double rate;
  int w;
} worst;
static int by_rate(const void *a, const void *b) {
  const worst *x = a, *y = b;
  if (x->rate != y->rate) return x->rate > y->rate ? -1 : 1;
  return (x->w > y->w) - (x->w < y->w);
}

void attn_g2p_print_worst(FILE *f, const attn_g2p_eval_result *r, const attn_g2p_set *set,
                          const attn_g2p_dict *d, int64_t max_tgt, int n) {
  worst *ws = malloc((size_t)(r->nwords + 1) * sizeof *ws);
  if (!ws) return;
  int k = 0;
  for (int w = 0; w < r->nwords; w++)
    if (r->dist[w] > 0) ws[k++] = (worst){(double)r->dist[w] / set->tgt_len[r->first[w]], w};
  qsort(ws, (size_t)k, sizeof *ws, by_rate);
  if (k > 0) fprintf(f, "%-20s %-32s %-32s %s\n", "word", "predicted", "reference", "edits");
  char hyp[512], ref[512];
  int32_t hb[256], rb[256]; /* a stress-free model's: both sides without digits */
  for (int i = 0; i < k && i < n; i++) {
    int w = ws[i].w, fi = r->first[w];
    const int32_t *hp = r->hyp + (int64_t)w * max_tgt, *rp = set->tgt[fi];
    const int nh = r->hyp_len[w] < 256 ? r->hyp_len[w] : 256;
    const int nr = set->tgt_len[fi] < 256 ? set->tgt_len[fi] : 256;
    if (!r->stress) {
      for (int t = 0; t < nh; t++)
        hb[t] = attn_g2p_phone_strip(hp[t]);
      for (int t = 0; t < nr; t++)
        rb[t] = attn_g2p_phone_strip(rp[t]);
      hp = hb, rp = rb;
    }
    attn_g2p_phones_format(hp, nh, r->stress, hyp, sizeof hyp);
    attn_g2p_phones_format(rp, nr, r->stress, ref, sizeof ref);
    fprintf(f, "%-20s %-32s %-32s %d%s\n", d->words[set->word[fi]], hyp, ref, r->dist[w],
            r->nrefs[w] > 1 ? " (+ alternates)" : "");
  }
  free(ws);
}
