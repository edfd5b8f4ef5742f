/* Interpolated Kneser-Ney n-gram baseline (lm_ngram.h). */
#include "apps/lm/lm_ngram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* tokens t[0..k) packed in base V, plus k in the top bits (keys of different
 * lengths never collide; never UINT64_MAX for V <= 2^20, k <= 3) */
static uint64_t pack(const int32_t *t, int k, int64_t V) {
  uint64_t x = 0;
  for (int i = 0; i < k; i++)
    x = x * (uint64_t)V + (uint64_t)t[i];
  return x | ((uint64_t)k << 61);
}

static int add(attn_u64map *m, uint64_t key, int32_t by, int32_t *before) {
  int32_t v = attn_u64map_get(m, key);
  if (before) *before = v < 0 ? 0 : v;
  return attn_u64map_put(m, key, (v < 0 ? 0 : v) + by);
}

void attn_lm_ngram_free(attn_lm_ngram *g) {
  if (!g) return;
  for (int k = 0; k < 4; k++) {
    attn_u64map_free(&g->cnt[k]);
    attn_u64map_free(&g->ctx_sum[k]);
    attn_u64map_free(&g->ctx_n[k]);
  }
  memset(g, 0, sizeof *g);
}

/* order k's context totals and its discount from its counts */
static int finish_level(attn_lm_ngram *g, int k) {
  int64_t n1 = 0, n2 = 0;
  const attn_u64map *c = &g->cnt[k];
  for (size_t i = 0; i < c->cap; i++) {
    if (c->keys[i] == UINT64_MAX) continue;
    const uint64_t key = c->keys[i] & ~(7ull << 61);
    const int32_t v = c->vals[i];
    n1 += v == 1, n2 += v == 2;
    if (k > 1) {
      const uint64_t h = (key / (uint64_t)g->vocab) | ((uint64_t)(k - 1) << 61);
      if (add(&g->ctx_sum[k], h, v, NULL) || add(&g->ctx_n[k], h, 1, NULL)) return -1;
    } else {
      g->uni_total += v;
      g->uni_types++;
    }
  }
  g->D[k] = n1 + n2 > 0 ? (double)n1 / (double)(n1 + 2 * n2) : 0.5;
  if (g->D[k] <= 0) g->D[k] = 0.5;
  return 0;
}

attn_status attn_lm_ngram_train(attn_lm_ngram *g, int order, int64_t vocab, const int32_t *tokens,
                                int64_t n) {
  if (!g) return attn_set_error(ATTN_EINVAL, "ngram: NULL model");
  memset(g, 0, sizeof *g);
  if (order < 2 || order > 3) return attn_set_error(ATTN_EINVAL, "ngram: order %d (2 or 3)", order);
  if (vocab < 2 || vocab > (1 << 20))
    return attn_set_error(ATTN_EINVAL, "ngram: vocab %lld (2 .. 2^20)", (long long)vocab);
  if (n < order || !tokens)
    return attn_set_error(ATTN_EINVAL, "ngram: %lld training tokens; at least %d needed",
                          (long long)n, order);
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return attn_set_error(ATTN_EINVAL, "ngram: token %lld has id %d, outside [0, %lld)",
                            (long long)i, tokens[i], (long long)vocab);
  g->order = order;
  g->vocab = vocab;
  int bad = 0;
  for (int64_t i = order - 1; i < n && !bad; i++)
    bad = add(&g->cnt[order], pack(tokens + i - order + 1, order, vocab), 1, NULL);
  /* order k - 1's continuation count of (h w): distinct tokens before it at order k */
  for (int k = order; k > 1 && !bad; k--) {
    const attn_u64map *c = &g->cnt[k];
    for (size_t i = 0; i < c->cap && !bad; i++) {
      if (c->keys[i] == UINT64_MAX) continue;
      const uint64_t key = c->keys[i] & ~(7ull << 61);
      uint64_t div = 1;
      for (int j = 1; j < k; j++)
        div *= (uint64_t)vocab;
      bad = add(&g->cnt[k - 1], (key % div) | ((uint64_t)(k - 1) << 61), 1, NULL);
    }
  }
  for (int k = 1; k <= order && !bad; k++)
    bad = finish_level(g, k);
  if (bad) {
    attn_lm_ngram_free(g);
    return attn_set_error(ATTN_ENOMEM, "ngram: out of memory");
  }
  return ATTN_OK;
}

static double get(const attn_u64map *m, uint64_t key) {
  int32_t v = attn_u64map_get(m, key);
  return v < 0 ? 0.0 : (double)v;
}

double attn_lm_ngram_prob(const attn_lm_ngram *g, const int32_t *ctx, int nctx, int32_t w) {
  if (!g || !g->order || w < 0 || w >= g->vocab) return 0.0;
  const double V = (double)g->vocab;
  double p = g->uni_total > 0 ? fmax(get(&g->cnt[1], pack(&w, 1, g->vocab)) - g->D[1], 0.0) /
                                        (double)g->uni_total +
                                    g->D[1] * (double)g->uni_types / (double)g->uni_total / V
                              : 1.0 / V;
  int32_t t[3];
  for (int k = 2; k <= g->order; k++) {
    if (nctx < k - 1) break;
    memcpy(t, ctx + nctx - (k - 1), (size_t)(k - 1) * sizeof *t);
    t[k - 1] = w;
    const uint64_t h = pack(t, k - 1, g->vocab);
    const double tot = get(&g->ctx_sum[k], h);
    if (tot <= 0) continue; /* a context never seen: the lower order whole */
    const double c = get(&g->cnt[k], pack(t, k, g->vocab));
    p = fmax(c - g->D[k], 0.0) / tot + g->D[k] * get(&g->ctx_n[k], h) / tot * p;
  }
  return p;
}

attn_status attn_lm_ngram_perplexity(const attn_lm_ngram *g, const int32_t *tokens, int64_t n,
                                     double *ppl) {
  if (!g || !g->order || !tokens || !ppl)
    return attn_set_error(ATTN_EINVAL, "ngram perplexity: NULL argument");
  if (n < 2)
    return attn_set_error(ATTN_EINVAL, "ngram perplexity: %lld tokens (at least 2)", (long long)n);
  double nll = 0;
  for (int64_t i = 1; i < n; i++) {
    if (tokens[i] < 0 || tokens[i] >= g->vocab)
      return attn_set_error(ATTN_EINVAL,
                            "ngram perplexity: token %lld has id %d, outside [0, %lld)",
                            (long long)i, tokens[i], (long long)g->vocab);
    const int64_t from = i >= g->order - 1 ? i - (g->order - 1) : 0;
    nll -= log(attn_lm_ngram_prob(g, tokens + from, (int)(i - from), tokens[i]));
  }
  *ppl = exp(nll / (double)(n - 1));
  return ATTN_OK;
}
