/* Multinomial Naive Bayes (hand-computed probabilities), metrics, and a
 * small end-to-end run: BPE on synthetic mail, NB, test metrics. */
#include "harness.h"

#include "apps/text/bpe.h"
#include "apps/classifier/metrics.h"
#include "apps/classifier/naive_bayes.h"

static void test_nb_matches_hand_computation(void) {
  /* V = 3, alpha = 1. ham doc [0,0,1], spam doc [2,2,1].
   * P(0|ham) = (2+1)/(3+3) = 1/2, P(1|ham) = 2/6, P(2|ham) = 1/6; spam mirrored. */
  const int32_t ham[] = {0, 0, 1}, spam[] = {2, 2, 1};
  const int32_t *docs[] = {ham, spam};
  size_t lens[] = {3, 3};
  int labels[] = {0, 1};
  attn_nb *m = NULL;
  CHECK_OK(attn_nb_train(docs, lens, labels, 2, 3, 1.0, 0, &m));
  if (!m) return;
  CHECK(fabs(m->log_prob[0] - log(0.5)) < 1e-12 && fabs(m->log_prob[2] - log(1.0 / 6)) < 1e-12);
  CHECK(fabs(m->log_prob[3 + 2] - log(0.5)) < 1e-12 && fabs(m->log_prior[1] - log(0.5)) < 1e-12);
  double p;
  int y;
  const int32_t d0[] = {0}, d2[] = {2}, d1[] = {1}, d000[] = {0, 0, 0};
  CHECK_OK(attn_nb_predict(m, d0, 1, &p, &y));
  CHECK(y == 0 && fabs(p - 0.25) < 1e-12); /* (1/6) / (1/6 + 1/2) */
  CHECK_OK(attn_nb_predict(m, d2, 1, &p, &y));
  CHECK(y == 1 && fabs(p - 0.75) < 1e-12);
  CHECK_OK(attn_nb_predict(m, d1, 1, &p, &y));
  CHECK(y == 0 && fabs(p - 0.5) < 1e-12); /* a tie is ham */
  CHECK_OK(attn_nb_predict(m, d000, 3, &p, NULL));
  CHECK(fabs(p - 1.0 / 28) < 1e-12); /* (1/6)^3 / ((1/6)^3 + (1/2)^3) */
  attn_nb_free(m);
  /* binary: a feature counts once per document, in training and prediction */
  const int32_t ham2[] = {0, 0, 0, 0, 1};
  docs[0] = ham2;
  lens[0] = 5;
  CHECK_OK(attn_nb_train(docs, lens, labels, 2, 3, 1.0, 1, &m));
  if (!m) return;
  CHECK(fabs(m->log_prob[0] - log(2.0 / 5)) < 1e-12); /* (1+1)/(2+3) */
  double p1, p3;
  CHECK_OK(attn_nb_predict(m, d0, 1, &p1, NULL));
  CHECK_OK(attn_nb_predict(m, d000, 3, &p3, NULL));
  CHECK(p1 == p3);
  attn_nb_free(m);
}

static void test_nb_errors(void) {
  const int32_t a[] = {0, 5};
  const int32_t *docs[] = {a, a};
  size_t lens[] = {1, 1};
  int one_class[] = {1, 1}, labels[] = {0, 1}, bad_label[] = {0, 2};
  attn_nb *m = NULL;
  CHECK_ERR(attn_nb_train(docs, lens, one_class, 2, 3, 1.0, 0, &m), ATTN_EINVAL);
  CHECK_ERR(attn_nb_train(docs, lens, bad_label, 2, 3, 1.0, 0, &m), ATTN_EINVAL);
  CHECK_ERR(attn_nb_train(docs, lens, labels, 2, 3, 0.0, 0, &m), ATTN_EINVAL);
  CHECK_ERR(attn_nb_train(docs, lens, labels, 0, 3, 1.0, 0, &m), ATTN_EINVAL);
  lens[1] = 2; /* feature 5 >= V = 3 */
  CHECK_ERR(attn_nb_train(docs, lens, labels, 2, 3, 1.0, 0, &m), ATTN_EINVAL);
  CHECK(m == NULL);
  CHECK_ERR(attn_nb_predict(NULL, a, 1, NULL, NULL), ATTN_EINVAL);
}

static void test_metrics_known_values(void) {
  const int pred[] = {1, 1, 0, 0, 1}, label[] = {1, 0, 0, 1, 1};
  attn_binary_metrics m;
  CHECK_OK(attn_binary_metrics_compute(pred, label, 5, &m));
  CHECK(m.tp == 2 && m.fp == 1 && m.tn == 1 && m.fn == 1);
  CHECK(fabs(m.accuracy - 0.6) < 1e-15 && fabs(m.precision - 2.0 / 3) < 1e-15);
  CHECK(fabs(m.recall - 2.0 / 3) < 1e-15 && fabs(m.f1 - 2.0 / 3) < 1e-15);
  const int none[] = {0, 0, 0, 0, 0};
  CHECK_OK(attn_binary_metrics_compute(none, label, 5, &m));
  CHECK(m.precision == 0 && m.recall == 0 && m.f1 == 0 && fabs(m.accuracy - 0.4) < 1e-15);
  const int p2[] = {1, 1}, l2[] = {1, 0};
  CHECK_OK(attn_binary_metrics_compute(p2, l2, 2, &m)); /* P = 1/2, R = 1, F1 = 2/3 */
  CHECK(fabs(m.f1 - 2.0 / 3) < 1e-15);
  CHECK_OK(attn_binary_metrics_compute(NULL, NULL, 0, &m));
  CHECK(m.accuracy == 0 && m.tp + m.fp + m.tn + m.fn == 0);
  const int bad[] = {2};
  CHECK_ERR(attn_binary_metrics_compute(bad, label, 1, &m), ATTN_EINVAL);
}

/* Synthetic mail: spam talks about offers, ham about meetings; BPE learns on
 * the training part, NB must separate the held-out part perfectly. */
static void test_end_to_end_bpe_naive_bayes(void) {
  const char *spam_w[] = {"FREE", "offer", "click", "winner", "cash", "pills", "cheap", "now!!!"};
  const char *ham_w[] = {"meeting", "report", "agenda", "tomorrow", "project", "review", "notes", "thanks"};
  const char *common[] = {"the", "a", "for", "you", "and", "is", "to", "of"};
  enum { N = 200 };
  char *texts[N];
  size_t lens[N];
  int labels[N];
  unsigned s = 99;
  for (int i = 0; i < N; i++) {
    labels[i] = i % 2;
    char buf[512];
    int at = snprintf(buf, sizeof buf, "Subject: %s\n\n", labels[i] ? "hello" : "hello");
    for (int w = 0; w < 30; w++) {
      s = s * 1664525u + 1013904223u;
      const char **pool = (s >> 28) < 6 ? common : (labels[i] ? spam_w : ham_w);
      at += snprintf(buf + at, sizeof buf - (size_t)at, "%s ", pool[(s >> 8) % 8]);
    }
    texts[i] = strdup(buf);
    lens[i] = strlen(buf);
  }
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  cfg.vocab_size = 400;
  attn_bpe *b = NULL;
  CHECK_OK(attn_bpe_train((const char *const *)texts, lens, 150, &cfg, &b));
  int32_t *ids[N];
  size_t n_ids[N];
  for (int i = 0; i < N; i++) {
    ids[i] = NULL;
    n_ids[i] = 0;
    if (b) CHECK_OK(attn_bpe_encode_alloc(b, texts[i], lens[i], &ids[i], &n_ids[i]));
  }
  attn_nb *m = NULL;
  if (b) CHECK_OK(attn_nb_train((const int32_t *const *)ids, n_ids, labels, 150, attn_bpe_vocab_size(b), 1.0, 1, &m));
  attn_binary_metrics met = {0};
  for (int i = 150; i < N && m; i++) {
    int y;
    CHECK_OK(attn_nb_predict(m, ids[i], n_ids[i], NULL, &y));
    attn_binary_metrics_add(&met, y, labels[i]);
  }
  attn_binary_metrics_finish(&met);
  CHECK(met.tp + met.fp + met.tn + met.fn == 50 && met.accuracy == 1.0 && met.f1 == 1.0);
  for (int i = 0; i < N; i++) {
    free(texts[i]);
    free(ids[i]);
  }
  attn_nb_free(m);
  attn_bpe_free(b);
}

int main(void) {
  RUN(test_nb_matches_hand_computation);
  RUN(test_nb_errors);
  RUN(test_metrics_known_values);
  RUN(test_end_to_end_bpe_naive_bayes);
  HARNESS_END();
}
