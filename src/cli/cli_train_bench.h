/* attn train --bench-varlen N (cli_train_bench.c). */
#ifndef ATTN_CLI_TRAIN_BENCH_H
#define ATTN_CLI_TRAIN_BENCH_H

#include "apps/classifier/classifier_train.h"

/* Times N of the run's training batches padded and packed on model (NULL: a
 * fresh one of config mc, seeded by to->seed) and prints tokens/s of each;
 * returns the command's exit code. */
int cli_train_bench_varlen(const attn_clf_config *mc, attn_clf *model, const attn_train_opts *to,
                           const attn_tok_set *train, int batches);

#endif
