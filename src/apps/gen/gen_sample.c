/* Temperature / top-k / top-p sampling with a counter-based seed (lm_generate.h). */
#include <math.h>
#include <stdlib.h>

#include "apps/gen/gen.h"
#include "attn/kernels.h"

void attn_lm_sampling_default(attn_lm_sampling *s) {
  s->temperature = 0.8f;
  s->top_k = 40;
  s->top_p = 0.95f;
  s->seed = 1;
  s->min_id = 0;
}

attn_status attn_lm_sampling_check(const attn_lm_sampling *s) {
  if (!s) return attn_set_error(ATTN_EINVAL, "sampling: NULL");
  if (!(s->temperature >= 0.0f) || !isfinite(s->temperature))
    return attn_set_error(ATTN_EINVAL, "--temperature %g: must be >= 0 (0: greedy)",
                          (double)s->temperature);
  if (s->top_k < 0)
    return attn_set_error(ATTN_EINVAL, "--top-k %d: must be >= 0 (0: all)", s->top_k);
  if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
    return attn_set_error(ATTN_EINVAL, "--top-p %g: must be in (0, 1]", (double)s->top_p);
  if (s->min_id < 0) return attn_set_error(ATTN_EINVAL, "sampling: min_id %d", s->min_id);
  return ATTN_OK;
}

typedef struct {
  double p;
  int32_t id;
} cand;

/* most likely first; equal probabilities by id: a total order, so the same
 * candidates come out of any sort */
static int by_prob(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->p != y->p) return x->p > y->p ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* c[i] sifted down the heap c[0..k) whose every parent comes after its
 * children in by_prob's order (the root: the last of them) */
static void sift_down(cand *c, int64_t k, int64_t i) {
  for (;;) {
    int64_t w = 2 * i + 1; /* the child that comes later */
    if (w >= k) return;
    if (w + 1 < k && by_prob(&c[w + 1], &c[w]) > 0) w++;
    if (by_prob(&c[w], &c[i]) <= 0) return;
    const cand t = c[i];
    c[i] = c[w], c[w] = t;
    i = w;
  }
}

/* h[i] sifted down the min-heap h[0..k) */
static void fsift_down(float *h, int64_t k, int64_t i) {
  for (;;) {
    int64_t w = 2 * i + 1; /* the smaller child */
    if (w >= k) return;
    if (w + 1 < k && h[w + 1] < h[w]) w++;
    if (!(h[w] < h[i])) return;
    const float t = h[i];
    h[i] = h[w], h[w] = t;
    i = w;
  }
}

/* c[0..k) = the first k of c[0..n) in by_prob's order, sorted (the rest of
 * c in no order): a heap of the k first so far, each later candidate
 * replacing its root when it comes before it. The order is total, so these
 * are the first k of the full sort, in its order (it sorted all n: 28 % of
 * a generated token's time with the LM's 4,096 ids and top-k 40). */
static void first_k(cand *c, int64_t n, int64_t k) {
  for (int64_t i = k / 2 - 1; i >= 0; i--)
    sift_down(c, k, i);
  for (int64_t j = k; j < n; j++)
    if (by_prob(&c[j], &c[0]) < 0) {
      c[0] = c[j];
      sift_down(c, k, 0);
    }
  qsort(c, (size_t)k, sizeof *c, by_prob);
}

/* the k-th largest of x[0..n) (1 <= k <= n, none NaN), counted with
 * multiplicity: a min-heap h[0..k) of the k largest so far */
static float kth_largest(const float *x, int64_t n, int64_t k, float *h) {
  for (int64_t i = 0; i < k; i++)
    h[i] = x[i];
  for (int64_t i = k / 2 - 1; i >= 0; i--)
    fsift_down(h, k, i);
  for (int64_t j = k; j < n; j++)
    if (x[j] > h[0]) {
      h[0] = x[j];
      fsift_down(h, k, 0);
    }
  return h[0];
}

/* The candidates whose probability can be among the keep most likely, with
 * their probabilities, into c; how many (>= keep), or -1 where this does
 * not apply (the caller then takes every id). The keep-th largest logit L
 * has p(L) = e^((L - best) / T); an id whose logit is below L - T / 100 has
 * an exact p at most e^(-1/100) p(L), and its computed p (exp within an ulp,
 * the argument's rounding far below 1/100) is below the computed p(L): it
 * comes after the keep ids of logit >= L in by_prob's order, whatever its
 * id. So the first keep of the candidates are the first keep of all ids, in
 * the same order, with the same p: the same draw, for ~keep exponentials
 * instead of V. Not where a logit is NaN (by_prob's order is not total
 * there) or p(L) is below 2^-1000 (subnormal spacing). */
static int64_t likely(const attn_lm_sampling *s, const float *logits, int64_t V, int32_t best,
                      int64_t keep, cand *c) {
  const int64_t n = V - s->min_id;
  if (keep * 4 > n) return -1; /* most ids kept anyway */
  const float *x = logits + s->min_id;
  for (int64_t j = 0; j < n; j++)
    if (x[j] != x[j]) return -1;
  float *h = malloc((size_t)keep * sizeof *h);
  if (!h) return -1;
  const float L = kth_largest(x, n, keep, h);
  free(h);
  const double T = s->temperature, top = logits[best];
  if (!(exp(((double)L - top) / T) >= 0x1p-1000)) return -1;
  const double cut = (double)L - T / 100.0;
  int64_t m = 0;
  for (int64_t j = 0; j < n; j++)
    if ((double)x[j] >= cut) {
      c[m].id = (int32_t)(j + s->min_id);
      c[m].p = exp(((double)x[j] - top) / T);
      m++;
    }
  return m;
}

attn_status attn_lm_sample(const attn_lm_sampling *s, const float *logits, int64_t V, uint64_t step,
                           int32_t *out) {
  attn_status st = attn_lm_sampling_check(s);
  if (st) return st;
  if (!logits || !out || V <= s->min_id)
    return attn_set_error(ATTN_EINVAL, "sampling: no logits or no id at or above %d", s->min_id);
  int32_t best = s->min_id;
  for (int64_t j = s->min_id; j < V; j++)
    if (logits[j] > logits[best]) best = (int32_t)j;
  if (s->temperature == 0.0f || !isfinite(logits[best])) {
    *out = best;
    return ATTN_OK;
  }
  int64_t n = V - s->min_id;
  cand *c = malloc((size_t)n * sizeof *c);
  if (!c) return attn_set_error(ATTN_ENOMEM, "sampling: out of memory");
  int64_t keep = s->top_k > 0 && s->top_k < n ? s->top_k : n;
  const int64_t m = keep < n ? likely(s, logits, V, best, keep, c) : -1;
  if (m >= keep) {
    n = m;
  } else {
    for (int64_t j = 0; j < n; j++) {
      c[j].id = (int32_t)(j + s->min_id);
      c[j].p = exp(((double)logits[c[j].id] - logits[best]) / s->temperature);
    }
  }
  if (keep < n)
    first_k(c, n, keep);
  else
    qsort(c, (size_t)n, sizeof *c, by_prob);
  double mass = 0;
  for (int64_t j = 0; j < keep; j++)
    mass += c[j].p;
  if (s->top_p < 1.0f) { /* the smallest prefix reaching top_p of the top-k mass */
    const double want = (double)s->top_p * mass;
    double acc = 0;
    for (int64_t j = 0; j < keep; j++) {
      acc += c[j].p;
      if (acc >= want) {
        keep = j + 1;
        mass = acc;
        break;
      }
    }
  }
  const double u = (double)attn_rng_uniform(s->seed, step) * mass;
  double acc = 0;
  int32_t pick = c[keep - 1].id;
  for (int64_t j = 0; j < keep; j++) {
    acc += c[j].p;
    if (u < acc) {
      pick = c[j].id;
      break;
    }
  }
  free(c);
  *out = pick;
  return ATTN_OK;
}
