/* Attention of tokens read in the units a person reads: the characters or
 * words the tokens make up (viz.h: attn_viz_merge_f32, the rule). */
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz_internal.h"

/* The units of one axis as a table: for token i, pieces [off[i], off[i+1])
 * of (unit, share); identity (one piece per token, share 1) for u NULL. */
typedef struct {
  int64_t n_units;
  const int64_t *off, *unit;
  const float *share;
} axis_map;

static int64_t piece_unit(const axis_map *m, int64_t i, int64_t p) {
  return m->unit ? m->unit[p] : i;
}
static double piece_share(const axis_map *m, int64_t p) { return m->share ? m->share[p] : 1.0; }
static int64_t piece_begin(const axis_map *m, int64_t i) { return m->off ? m->off[i] : i; }
static int64_t piece_end(const axis_map *m, int64_t i) { return m->off ? m->off[i + 1] : i + 1; }

static axis_map map_of(const attn_tok_units *u, int64_t n) {
  axis_map m = {n, NULL, NULL, NULL};
  if (u) m = (axis_map){u->n_units, u->off, u->unit, u->share};
  return m;
}

attn_status attn_viz_merge_f32(const float *probs, int64_t mats, int64_t lq, int64_t lk,
                               const attn_tok_units *q, const attn_tok_units *k, float **out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "merge: NULL result");
  *out = NULL;
  if (!probs || mats < 1 || lq < 1 || lk < 1)
    return attn_set_error(ATTN_EINVAL, "merge: NULL weights or an empty shape");
  if ((q && q->n_tokens != lq) || (k && k->n_tokens != lk))
    return attn_set_error(ATTN_EINVAL,
                          "merge: units of %lld x %lld tokens for weights of %lld x %lld",
                          (long long)(q ? q->n_tokens : lq), (long long)(k ? k->n_tokens : lk),
                          (long long)lq, (long long)lk);
  attn_status st = viz_check_finite(probs, mats * lq * lk, "merge: weights");
  if (st) return st;
  axis_map qm = map_of(q, lq), km = map_of(k, lk);
  int64_t uq = qm.n_units, uk = km.n_units;
  if (uq < 1 || uk < 1) return attn_set_error(ATTN_EINVAL, "merge: no units (no text)");
  double *keys = malloc((size_t)(lq * uk) * sizeof *keys); /* [lq, uk]: keys merged */
  double *acc = malloc((size_t)(uq * uk) * sizeof *acc);
  double *qsum = calloc((size_t)uq, sizeof *qsum); /* sum of the shares of a unit's queries */
  float *o = malloc((size_t)(mats * uq * uk) * sizeof *o);
  if (!keys || !acc || !qsum || !o) {
    st = attn_set_error(ATTN_ENOMEM, "merge: out of memory for %lld x %lld units", (long long)uq,
                        (long long)uk);
    goto done;
  }
  for (int64_t i = 0; i < lq; i++)
    for (int64_t p = piece_begin(&qm, i); p < piece_end(&qm, i); p++)
      qsum[piece_unit(&qm, i, p)] += piece_share(&qm, p);
  for (int64_t m = 0; m < mats; m++) {
    const float *a = probs + m * lq * lk;
    memset(keys, 0, (size_t)(lq * uk) * sizeof *keys);
    memset(acc, 0, (size_t)(uq * uk) * sizeof *acc);
    for (int64_t i = 0; i < lq; i++)
      for (int64_t j = 0; j < lk; j++)
        for (int64_t p = piece_begin(&km, j); p < piece_end(&km, j); p++)
          keys[i * uk + piece_unit(&km, j, p)] += piece_share(&km, p) * a[i * lk + j];
    for (int64_t i = 0; i < lq; i++)
      for (int64_t p = piece_begin(&qm, i); p < piece_end(&qm, i); p++) {
        int64_t u = piece_unit(&qm, i, p);
        double w = piece_share(&qm, p) / qsum[u];
        for (int64_t v = 0; v < uk; v++)
          acc[u * uk + v] += w * keys[i * uk + v];
      }
    for (int64_t e = 0; e < uq * uk; e++)
      o[m * uq * uk + e] = (float)acc[e];
  }
  *out = o, o = NULL;
done:
  free(keys), free(acc), free(qsum), free(o);
  return st;
}

attn_status attn_viz_input_merge(attn_viz_input *in, attn_unit_kind kind) {
  if (!in || !in->probs) return attn_set_error(ATTN_EINVAL, "merge: no weights");
  if (kind == ATTN_UNITS_TOKENS || in->merged != ATTN_UNITS_TOKENS) return ATTN_OK;
  if (!in->q_bytes || !in->k_bytes)
    return attn_set_error(ATTN_EINVAL,
                          "merging into %s needs the tokens' bytes, metadata 'token_bytes' (or "
                          "'query_token_bytes' and 'key_token_bytes'), which attn predict "
                          "--save-attention and attn.viz write; the file has %s",
                          attn_unit_kind_noun(kind),
                          in->q_bytes || in->k_bytes ? "them for one axis only" : "none");
  attn_tok_units q = {0}, k = {0};
  float *probs = NULL;
  attn_status st = attn_tok_units_make(in->q_bytes, kind, 0, &q);
  if (!st) st = attn_tok_units_make(in->k_bytes, kind, 0, &k);
  if (!st)
    st = attn_viz_merge_f32(in->probs, in->layers * in->heads, in->lq, in->lk, &q, &k, &probs);
  if (!st) {
    free(in->probs);
    attn_viz_labels_free(in->q_labels, in->lq);
    attn_viz_labels_free(in->k_labels, in->lk);
    in->probs = probs;
    in->tok_lq = in->lq, in->tok_lk = in->lk;
    in->lq = q.n_units, in->lk = k.n_units;
    in->q_labels = q.labels, in->k_labels = k.labels; /* taken from the units */
    q.labels = k.labels = NULL;
    q.n_units = k.n_units = 0;
    free(in->freq); /* per key token: it does not carry over to units */
    in->freq = NULL;
    in->merged = kind;
  }
  attn_tok_units_free(&q);
  attn_tok_units_free(&k);
  return st;
}
