/* attn train --bench-varlen N: the classifier's training step (forward +
 * backward, no update) on the first N batches of the run's first epoch,
 * exactly as attn train gathers them (shuffled, length-bucketed, token
 * dropout), padded and packed (attn_clf.varlen) alternately on each batch,
 * timed in process CPU time and wall time. */
#ifndef ATTN_APPS_CLASSIFIER_VARLEN_BENCH_H
#define ATTN_APPS_CLASSIFIER_VARLEN_BENCH_H

#include "apps/classifier/classifier_train.h"

typedef struct {
  int batches;
  int64_t tokens, padded;          /* real tokens, padded B x L tokens of those batches */
  int64_t packed_batches;          /* batches the packed run actually packed */
  double cpu[2], wall[2];          /* seconds: [0] padded, [1] packed (best of rounds) */
} attn_varlen_bench;

/* m's varlen is restored; o gives batch, chunk_batches, seed, token_dropout,
 * backend, ckpt_acts, precision (not QAT). rounds >= 1: each
 * batch runs rounds times each way, the least time of each kept. */
attn_status attn_train_varlen_bench(attn_clf *m, const attn_train_opts *o, const attn_tok_set *set,
                                    int batches, int rounds, attn_varlen_bench *r);

#endif
