/* attn train --bench-varlen N: padded against packed batches on the run's
 * own data (apps/classifier/classifier_varlen_bench.h). */
#include "cli/cli_train_bench.h"

#include <stdio.h>
#include <string.h>

#include "apps/classifier/classifier_varlen_bench.h"
#include "cli/cli_msg.h"

int cli_train_bench_varlen(const attn_clf_config *mc, attn_clf *model, const attn_train_opts *to,
                           const attn_tok_set *train, int batches) {
  attn_clf fresh;
  memset(&fresh, 0, sizeof fresh);
  attn_clf *m = model;
  if (!m) {
    if (attn_clf_create(&fresh, mc) || attn_clf_init(&fresh, to->seed)) return cli_fail(NULL);
    m = &fresh;
  }
  attn_varlen_bench r;
  attn_status st = attn_train_varlen_bench(m, to, train, batches, 3, &r);
  attn_clf_free(&fresh);
  if (st) return cli_fail(NULL);
  double pad = 100.0 * (1.0 - (double)r.tokens / (double)r.padded);
  printf("varlen bench: %d training batches (batch %d, forward + backward, %s, best of 3 each "
         "way), %lld real tokens in %lld padded (%.1f %% padding); %lld batches packed\n",
         r.batches, to->batch, attn_precision_name(to->precision), (long long)r.tokens, (long long)r.padded, pad,
         (long long)r.packed_batches);
  const char *name[2] = {"padded", "packed"};
  for (int i = 0; i < 2; i++)
    printf("%s  real tokens/s %.1f  per CPU-s %.1f  (%.1f ms/batch, %.1f ms CPU/batch)\n", name[i],
           (double)r.tokens / r.wall[i], (double)r.tokens / r.cpu[i], 1e3 * r.wall[i] / r.batches,
           1e3 * r.cpu[i] / r.batches);
  printf("ratio packed / padded: %.2fx (wall), %.2fx (CPU time)\n", r.wall[0] / r.wall[1],
         r.cpu[0] / r.cpu[1]);
  return 0;
}
