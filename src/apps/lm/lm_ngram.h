/* The language model's baseline (its "Naive Bayes"): an interpolated
 * Kneser-Ney n-gram (order 2 or 3) over the same BPE tokens (Chen & Goodman
 * 1998, "interpolated Kneser-Ney", one discount per order):
 *   order n (top):  P(w | h) = max(c(h w) - D_n, 0) / c(h .)
 *                              + D_n N1+(h .) / c(h .) P(w | h')
 *   order k < n:    the same with continuation counts N1+(. h w) (distinct
 *                   tokens seen before h w) in place of c(h w)
 *   order 1:        max(N1+(. w) - D_1, 0) / N1+(. .) + D_1 N1+ types / N1+(. .) / V
 * (h' = h without its first token; a context never seen falls back to the
 * lower order whole). D_k = n1 / (n1 + 2 n2) from the count-of-counts of
 * order k's counts (Ney's estimate). The last term spreads the mass left
 * over uniformly over the V ids, so every id has p > 0 and every
 * distribution sums to 1 over the vocabulary (tests/test_lm_ngram.c). */
#ifndef ATTN_APPS_LM_NGRAM_H
#define ATTN_APPS_LM_NGRAM_H

#include <stdint.h>

#include "apps/text/u64map.h"
#include "attn/status.h"

typedef struct {
  int order;
  int64_t vocab;
  double D[4];            /* discount of order 1..order */
  attn_u64map cnt[4];     /* order k's (h, w) -> count (raw at the top, continuation below) */
  attn_u64map ctx_sum[4]; /* order k's h -> sum over w */
  attn_u64map ctx_n[4];   /* order k's h -> distinct w */
  int64_t uni_total, uni_types;
} attn_lm_ngram;

/* Counts the n-grams of tokens[0..n) (ids in [0, vocab), vocab <= 2^20). */
attn_status attn_lm_ngram_train(attn_lm_ngram *g, int order, int64_t vocab, const int32_t *tokens,
                                int64_t n);
void attn_lm_ngram_free(attn_lm_ngram *g);
/* P(w | ctx[0..nctx)): the last order-1 tokens of ctx are used (fewer at the start). */
double attn_lm_ngram_prob(const attn_lm_ngram *g, const int32_t *ctx, int nctx, int32_t w);
/* Perplexity of tokens[1..n) each given the tokens before it (the targets
 * the LM's validation predicts): exp of the mean -log p. */
attn_status attn_lm_ngram_perplexity(const attn_lm_ngram *g, const int32_t *tokens, int64_t n,
                                     double *ppl);

#endif
