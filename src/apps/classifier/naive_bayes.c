#include "apps/classifier/naive_bayes.h"

#include <math.h>
#include <stdlib.h>

void attn_nb_free(attn_nb *m) {
  if (!m) return;
  free(m->log_prob);
  free(m);
}

attn_status attn_nb_train(const int32_t *const *docs, const size_t *lens, const int *labels, int n,
                          int n_features, double alpha, int binary, attn_nb **out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "nb_train: NULL out");
  *out = NULL;
  if (n <= 0 || !docs || !lens || !labels)
    return attn_set_error(ATTN_EINVAL, "nb_train: no documents (n = %d) or NULL arrays", n);
  if (n_features <= 0) return attn_set_error(ATTN_EINVAL, "nb_train: n_features = %d", n_features);
  if (!(alpha > 0) || !isfinite(alpha))
    return attn_set_error(ATTN_EINVAL, "nb_train: alpha = %g must be finite and > 0", alpha);
  long docs_of[2] = {0, 0};
  for (int i = 0; i < n; i++) {
    if (labels[i] != 0 && labels[i] != 1)
      return attn_set_error(ATTN_EINVAL, "nb_train: labels[%d] = %d, expected 0 or 1", i, labels[i]);
    if (lens[i] && !docs[i]) return attn_set_error(ATTN_EINVAL, "nb_train: docs[%d] is NULL", i);
    docs_of[labels[i]]++;
  }
  if (!docs_of[0] || !docs_of[1])
    return attn_set_error(ATTN_EINVAL, "nb_train: class %d has no training document", docs_of[0] ? 1 : 0);
  attn_nb *m = calloc(1, sizeof *m);
  double *cnt = calloc(2 * (size_t)n_features, sizeof *cnt);
  int *seen = calloc((size_t)n_features, sizeof *seen); /* binary: doc index + 1 that last had t */
  if (!m || !cnt || !seen) {
    free(m);
    free(cnt);
    free(seen);
    return attn_set_error(ATTN_ENOMEM, "nb_train: out of memory for %d features", n_features);
  }
  double total[2] = {0, 0};
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < lens[i]; k++) {
      int32_t t = docs[i][k];
      if (t < 0 || t >= n_features) {
        free(m);
        free(cnt);
        free(seen);
        return attn_set_error(ATTN_EINVAL, "nb_train: docs[%d][%zu] = %d is outside [0, %d)", i, k,
                              (int)t, n_features);
      }
      if (binary && seen[t] == i + 1) continue;
      seen[t] = i + 1;
      cnt[(size_t)labels[i] * (size_t)n_features + (size_t)t] += 1;
      total[labels[i]] += 1;
    }
  free(seen);
  m->n_features = n_features;
  m->binary = binary != 0;
  m->alpha = alpha;
  for (int c = 0; c < 2; c++) {
    m->log_prior[c] = log((double)docs_of[c] / n);
    double denom = log(total[c] + alpha * n_features);
    for (int t = 0; t < n_features; t++) {
      double *v = &cnt[(size_t)c * (size_t)n_features + (size_t)t];
      *v = log(*v + alpha) - denom;
    }
  }
  m->log_prob = cnt;
  *out = m;
  return ATTN_OK;
}

attn_status attn_nb_predict(const attn_nb *m, const int32_t *doc, size_t len, double *p_spam,
                            int *label) {
  if (!m || (len && !doc)) return attn_set_error(ATTN_EINVAL, "nb_predict: NULL model or document");
  double s[2] = {m->log_prior[0], m->log_prior[1]};
  unsigned char *seen = NULL;
  if (m->binary && !(seen = calloc((size_t)m->n_features / 8 + 1, 1)))
    return attn_set_error(ATTN_ENOMEM, "nb_predict: out of memory");
  for (size_t k = 0; k < len; k++) {
    int32_t t = doc[k];
    if (t < 0 || t >= m->n_features) continue;
    if (seen) {
      if (seen[t >> 3] & (1u << (t & 7))) continue;
      seen[t >> 3] |= (unsigned char)(1u << (t & 7));
    }
    s[0] += m->log_prob[t];
    s[1] += m->log_prob[(size_t)m->n_features + (size_t)t];
  }
  free(seen);
  double odds = s[1] - s[0]; /* log P(spam|doc) - log P(ham|doc) */
  if (p_spam) *p_spam = odds >= 0 ? 1 / (1 + exp(-odds)) : exp(odds) / (1 + exp(odds));
  if (label) *label = odds > 0;
  return ATTN_OK;
}
