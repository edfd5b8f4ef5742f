/* Multinomial Naive Bayes over integer features (token ids), two classes
 * (0 ham, 1 spam), Laplace/Lidstone smoothing alpha:
 *   log P(c | doc) ~ log P(c) + sum_t count(t, doc) * log((N_tc + alpha) / (N_c + alpha V))
 * where N_tc counts feature t in class c's training docs and V is the
 * number of features. With `binary` set, count(t, doc) is 1 for every
 * feature present (boolean multinomial NB: Metsis et al. 2006 found it the
 * best NB variant for spam; long messages then do not drown short ones).
 * Sums run in document order in double: deterministic. */
#ifndef ATTN_APPS_NAIVE_BAYES_H
#define ATTN_APPS_NAIVE_BAYES_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

typedef struct {
  int n_features;
  int binary;
  double alpha;
  double log_prior[2];
  double *log_prob; /* [2][n_features] */
} attn_nb;

/* docs[i][0..lens[i]) feature ids in [0, n_features); labels[i] in {0,1}.
 * Both classes must occur (ATTN_EINVAL otherwise). */
attn_status attn_nb_train(const int32_t *const *docs, const size_t *lens, const int *labels, int n,
                          int n_features, double alpha, int binary, attn_nb **out);
/* P(spam | doc) and the predicted label (1 iff log-odds > 0). Feature ids
 * outside [0, n_features) are ignored. Either output may be NULL. */
attn_status attn_nb_predict(const attn_nb *m, const int32_t *doc, size_t len, double *p_spam,
                            int *label);
void attn_nb_free(attn_nb *m);

#endif
