/* Batch plans (batch_plan.h). */
#include "apps/train/batch_plan.h"

#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void shuffle_ints(int *v, int n, uint64_t *rng) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(splitmix64(rng) % (uint64_t)(i + 1));
    int t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

/* Stable sort of idx[0..n) by lens descending (insertion into a merge sort). */
static void sort_by_len(int *idx, int n, const int32_t *lens, int *tmp) {
  for (int w = 1; w < n; w *= 2) {
    for (int lo = 0; lo < n; lo += 2 * w) {
      int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = lens[idx[j]] > lens[idx[i]] ? idx[j++] : idx[i++];
      while (i < mid) tmp[k++] = idx[i++];
      while (j < hi) tmp[k++] = idx[j++];
    }
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
  }
}

attn_status attn_batch_plan_make(const int32_t *lens, int n, int batch, int chunk_batches,
                                 int shuffle, uint64_t seed, int64_t epoch, attn_batch_plan *plan) {
  if (!lens || !plan || n <= 0 || batch <= 0)
    return attn_set_error(ATTN_EINVAL, "batch_plan: need lens, n > 0 and batch > 0 (n=%d, batch=%d)", n, batch);
  memset(plan, 0, sizeof *plan);
  if (chunk_batches <= 0) chunk_batches = 1;
  int nb = (n + batch - 1) / batch;
  plan->order = malloc((size_t)n * sizeof(int));
  plan->start = malloc((size_t)(nb + 1) * sizeof(int));
  int *tmp = malloc((size_t)n * sizeof(int)), *bo = malloc((size_t)nb * sizeof(int));
  if (!plan->order || !plan->start || !tmp || !bo) {
    free(tmp);
    free(bo);
    attn_batch_plan_free(plan);
    return attn_set_error(ATTN_ENOMEM, "batch_plan: out of memory");
  }
  plan->n = n;
  plan->nb = nb;
  for (int i = 0; i < n; i++) plan->order[i] = i;
  uint64_t rng = seed * 0xD1B54A32D192ED03ull ^ ((uint64_t)epoch + 1) * 0x8CB92BA72F3D8DD7ull;
  if (shuffle) {
    shuffle_ints(plan->order, n, &rng);
    int chunk = batch * chunk_batches;
    for (int lo = 0; lo < n; lo += chunk)
      sort_by_len(plan->order + lo, n - lo < chunk ? n - lo : chunk, lens, tmp);
  } else {
    sort_by_len(plan->order, n, lens, tmp);
  }
  // batches of consecutive examples, then (shuffle) in a random order
  for (int b = 0; b < nb; b++) bo[b] = b;
  if (shuffle) shuffle_ints(bo, nb, &rng);
  memcpy(tmp, plan->order, (size_t)n * sizeof(int));
  int k = 0;
  for (int b = 0; b < nb; b++) {
    plan->start[b] = k;
    int lo = bo[b] * batch, hi = lo + batch < n ? lo + batch : n;
    for (int i = lo; i < hi; i++) plan->order[k++] = tmp[i];
  }
  plan->start[nb] = k;
  free(tmp);
  free(bo);
  return ATTN_OK;
}

attn_status attn_batch_plan_tokens(const int32_t *lens, int n, int64_t max_tokens, int shuffle,
                                   uint64_t seed, int64_t epoch, attn_batch_plan *plan) {
  if (!lens || !plan || n <= 0 || max_tokens <= 0)
    return attn_set_error(ATTN_EINVAL,
                          "batch_plan: need lens, n > 0 and a token budget > 0 (n=%d, tokens=%lld)",
                          n, (long long)max_tokens);
  memset(plan, 0, sizeof *plan);
  plan->order = malloc((size_t)n * sizeof(int));
  plan->start = malloc((size_t)(n + 1) * sizeof(int));
  int *tmp = malloc((size_t)n * sizeof(int)), *bo = malloc((size_t)n * sizeof(int));
  int *lo = malloc((size_t)(n + 1) * sizeof(int));
  if (!plan->order || !plan->start || !tmp || !bo || !lo) {
    free(tmp), free(bo), free(lo);
    attn_batch_plan_free(plan);
    return attn_set_error(ATTN_ENOMEM, "batch_plan: out of memory");
  }
  plan->n = n;
  for (int i = 0; i < n; i++)
    plan->order[i] = i;
  uint64_t rng = seed * 0xD1B54A32D192ED03ull ^ ((uint64_t)epoch + 1) * 0x8CB92BA72F3D8DD7ull;
  if (shuffle) shuffle_ints(plan->order, n, &rng);
  sort_by_len(plan->order, n, lens, tmp);
  int nb = 0;
  for (int i = 0; i < n;) { /* descending: a batch's first example is its longest */
    const int64_t longest = lens[plan->order[i]] > 0 ? lens[plan->order[i]] : 1;
    int64_t count = 1;
    lo[nb++] = i++;
    while (i < n && (count + 1) * longest <= max_tokens)
      count++, i++;
  }
  lo[nb] = n;
  plan->nb = nb;
  for (int b = 0; b < nb; b++)
    bo[b] = b;
  if (shuffle) shuffle_ints(bo, nb, &rng);
  memcpy(tmp, plan->order, (size_t)n * sizeof(int));
  int k = 0;
  for (int b = 0; b < nb; b++) {
    plan->start[b] = k;
    for (int i = lo[bo[b]]; i < lo[bo[b] + 1]; i++)
      plan->order[k++] = tmp[i];
  }
  plan->start[nb] = k;
  free(tmp), free(bo), free(lo);
  return ATTN_OK;
}

void attn_batch_plan_free(attn_batch_plan *plan) {
  if (!plan) return;
  free(plan->order);
  free(plan->start);
  memset(plan, 0, sizeof *plan);
}
