/* The LM's Kneser-Ney n-gram baseline (src/apps/lm/lm_ngram.h): every
 * distribution sums to 1 over the vocabulary, the discounts and a
 * probability worked out by hand, perplexity as the mean of -log p, bad input. */
#include "apps/lm/lm_ngram.h"
#include "harness.h"

static void check_sums(const attn_lm_ngram *g, const int32_t *ctx, int nctx) {
  double sum = 0, minp = 1;
  for (int32_t w = 0; w < g->vocab; w++) {
    const double p = attn_lm_ngram_prob(g, ctx, nctx, w);
    sum += p;
    if (p < minp) minp = p;
  }
  if (fabs(sum - 1.0) > 1e-9 || !(minp > 0)) {
    printf("  context of %d: sum %.12f, min p %g\n", nctx, sum, minp);
    h_case_failed = 1;
  }
}

static void test_distributions_sum_to_one(void) {
  enum { V = 37, N = 3000 };
  static int32_t t[N];
  unsigned s = 7;
  for (int i = 0; i < N; i++) { /* a skewed stream with some structure */
    s = s * 1103515245u + 12345u;
    t[i] = i > 0 && (s >> 16) % 3 == 0 ? (t[i - 1] * 5 + 1) % V : (int32_t)((s >> 16) % (V - 5));
  }
  for (int order = 2; order <= 3; order++) {
    attn_lm_ngram g;
    CHECK_OK(attn_lm_ngram_train(&g, order, V, t, N));
    CHECK(g.D[1] > 0 && g.D[1] <= 1 && g.D[order] > 0 && g.D[order] <= 1);
    const int32_t seen[2] = {t[100], t[101]}, unseen[2] = {V - 1, V - 2}, mixed[2] = {V - 1, t[5]};
    check_sums(&g, seen, 2);
    check_sums(&g, unseen, 2); /* never seen: the unigram, uniform mass for the unseen ids */
    check_sums(&g, mixed, 2);
    check_sums(&g, seen + 1, 1);
    check_sums(&g, seen, 0);
    double ppl = 0, nll = 0;
    CHECK_OK(attn_lm_ngram_perplexity(&g, t, 500, &ppl));
    for (int i = 1; i < 500; i++) {
      const int from = i >= order - 1 ? i - (order - 1) : 0;
      nll -= log(attn_lm_ngram_prob(&g, t + from, i - from, t[i]));
    }
    CHECK(fabs(ppl - exp(nll / 499)) < 1e-9 * ppl);
    CHECK(ppl > 1 && ppl < V);
    attn_lm_ngram_free(&g);
  }
}

/* "a b a b a c" (ids 0 1 0 1 0 2), bigram, V = 4, worked out by hand:
 * bigram counts ab 2, ba 2, ac 1: n1 = 1, n2 = 2, D2 = 1/5;
 * continuation counts N1+(.b) 1, N1+(.a) 1, N1+(.c) 1: n1 = 3, n2 = 0, D1 = 1;
 * P1(w) = (1 - 1)/3 + 1 * 3/3 / 4 = 1/4 for every w (all mass uniform);
 * P(b | a) = (2 - 0.2)/3 + 0.2 * 2/3 * 1/4 = 0.6 + 1/30 */
static void test_hand_worked_bigram(void) {
  const int32_t t[6] = {0, 1, 0, 1, 0, 2};
  attn_lm_ngram g;
  CHECK_OK(attn_lm_ngram_train(&g, 2, 4, t, 6));
  CHECK(fabs(g.D[2] - 0.2) < 1e-12 && fabs(g.D[1] - 1.0) < 1e-12);
  const int32_t a = 0;
  CHECK(fabs(attn_lm_ngram_prob(&g, &a, 1, 1) - (0.6 + 1.0 / 30)) < 1e-12);
  CHECK(fabs(attn_lm_ngram_prob(&g, &a, 1, 3) - 0.2 * 2 / 3 / 4) < 1e-12);
  const int32_t c = 2; /* c is never followed: the unigram */
  CHECK(fabs(attn_lm_ngram_prob(&g, &c, 1, 1) - 0.25) < 1e-12);
  attn_lm_ngram_free(&g);
}

static void test_bad_input(void) {
  const int32_t t[4] = {0, 1, 5, 1};
  attn_lm_ngram g;
  CHECK_ERR(attn_lm_ngram_train(&g, 4, 8, t, 4), ATTN_EINVAL);
  CHECK_ERR(attn_lm_ngram_train(&g, 3, 4, t, 4), ATTN_EINVAL); /* id 5 >= vocab 4 */
  CHECK(strstr(attn_last_error(), "token 2") != NULL);
  CHECK_ERR(attn_lm_ngram_train(&g, 3, 8, t, 2), ATTN_EINVAL);
  CHECK_OK(attn_lm_ngram_train(&g, 2, 8, t, 4));
  double p;
  CHECK_ERR(attn_lm_ngram_perplexity(&g, t, 1, &p), ATTN_EINVAL);
  attn_lm_ngram_free(&g);
}

int main(void) {
  RUN(test_distributions_sum_to_one);
  RUN(test_hand_worked_bigram);
  RUN(test_bad_input);
  HARNESS_END();
}
