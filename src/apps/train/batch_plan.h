/* Length-bucketed batch plans (attn train, attn g2p train): the order of an
 * epoch's examples cut into batches, a pure function of (seed, epoch), so a
 * run resumed from a checkpoint sees the same batches as the uninterrupted
 * run. Each application gathers its own batches from a plan. */
#ifndef ATTN_APPS_BATCH_PLAN_H
#define ATTN_APPS_BATCH_PLAN_H

#include <stdint.h>

#include "attn/status.h"

/* Plan of one epoch: order[n] (example indices) cut into nb batches,
 * batch b = order[start[b] .. start[b+1]). With shuffle: examples shuffled
 * by (seed, epoch), then each chunk of chunk_batches*batch examples sorted
 * by length (longest first, ties by position), then the batch order
 * shuffled. Without: all sorted by length (evaluation). */
typedef struct {
  int n, nb;
  int *order, *start;
} attn_batch_plan;
attn_status attn_batch_plan_make(const int32_t *lens, int n, int batch, int chunk_batches,
                                 int shuffle, uint64_t seed, int64_t epoch, attn_batch_plan *plan);
/* Plan by a token budget (fairseq's max_tokens): lens[i] the padded length
 * example i costs (e.g. the longer of its source and target); the examples
 * (shuffled by (seed, epoch) with shuffle, so equal lengths come in a random
 * order) sorted by length, longest first, over the whole set, and cut into
 * batches of consecutive examples with count * longest <= max_tokens (one
 * example alone when it is longer than that); with shuffle the batch order is
 * then shuffled. The cut depends only on the multiset of lengths: every
 * epoch has the same number of batches. */
attn_status attn_batch_plan_tokens(const int32_t *lens, int n, int64_t max_tokens, int shuffle,
                                   uint64_t seed, int64_t epoch, attn_batch_plan *plan);
void attn_batch_plan_free(attn_batch_plan *plan);

#endif
