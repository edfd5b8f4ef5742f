/* --precision auto: the precision of a training run chosen by measurement on
 * this CPU and the run's own shapes, not by a feature flag (attn train,
 * attn bench train, attn g2p train): the candidates, their contracts and the
 * choice from a probe's timings.
 *
 * The candidates and their accuracy contracts:
 *   f32   the reference; always available, the fallback.
 *   bf16  mixed precision (docs/MIXED_PRECISION.md): Linears and flash
 *         attention in bf16 with f32 accumulation; master weights,
 *         gradients, AdamW, LayerNorm, softmax statistics and the loss in
 *         f32. Accuracy: the kernels within tests/test_bf16_train.c's bounds,
 *         and the classifier's validation accuracy within 0.3 points of f32
 *         (docs/CLASSIFIER.md: seeds 1-3 of the defaults, 98.40 % mean for
 *         both, per seed within 0.17 points; validation loss 0.0463 vs
 *         0.0455). A candidate only where a bf16 unit runs its GEMMs (AMX-BF16
 *         or AVX512_BF16): elsewhere the portable path is correct but several
 *         times slower than f32. Not with QAT (not validated together).
 *   fp16  never a candidate: no fp16 arithmetic is used (operands are
 *         converted and multiplied by f32 FMAs, so it cannot beat f32), and
 *         it needs dynamic loss scaling; --precision fp16 picks it.
 * auto picks the fastest candidate whose probe measured at least
 * ATTN_PREC_AUTO_MARGIN times f32's tokens/s both per wall second and per CPU
 * second of the process (on a shared machine other load moves the first, not
 * the second), else f32: it never picks a path slower than f32.
 *
 * The probes are the applications': each times its own training step in f32
 * and each candidate and fills an attn_prec_probe_result
 * (apps/classifier/classifier_precision.h: attn train, attn bench train;
 * apps/seq2seq/g2p_precision.h: attn g2p train).
 */
#ifndef ATTN_APPS_PRECISION_PROBE_H
#define ATTN_APPS_PRECISION_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/nn.h"

#define ATTN_PREC_AUTO_MARGIN 1.1

/* What auto may consider for p at the active ISA level, without running
 * anything (attn version prints it). */
typedef struct {
  attn_precision prec;
  int candidate;     /* auto probes it */
  char units[128];   /* which kernels run it: "GEMM amx, attention amx", ... */
  char why[160];     /* why it is or is not a candidate */
} attn_prec_info;
void attn_prec_info_get(attn_precision p, attn_prec_info *out);

typedef struct {
  attn_precision prec;
  double fb_seconds;  /* best forward + loss + backward time of the probe batch */
  double fb_cpu_seconds; /* the same in process CPU time (all threads; other load on a
                          * shared machine does not move it) */
  double tokens_per_s; /* tokens of the probe batch / fb_seconds */
  int rounds;         /* timed rounds it ran */
  int dropped;        /* left the probe early: under half of f32's speed (its timing is
                       * then the round that showed it, or the warm-up step) */
} attn_prec_timing;

typedef struct {
  int n;
  attn_prec_timing t[3];     /* t[0] is f32 */
  double step_fixed_seconds; /* per optimizer step, whatever the batch: zero_grad, clipping,
                              * AdamW (f32, measured with f32) */
  double eval_tokens_per_s;  /* f32 inference (forward only): validation and test */
  int64_t tokens, B, L;      /* of the probe batch */
  double seconds;            /* the probe's own wall time */
} attn_prec_probe_result;

/* p's tokens/s over f32's, per wall second and per CPU second (0 when p
 * was not timed). */
double attn_prec_probe_ratio(const attn_prec_probe_result *r, attn_precision p);
double attn_prec_probe_cpu_ratio(const attn_prec_probe_result *r, attn_precision p);
const attn_prec_timing *attn_prec_probe_timing(const attn_prec_probe_result *r, attn_precision p);

/* auto's choice from a probe of the candidates (r may be NULL when none
 * was run: f32) and one line saying why, e.g.
 *   "auto: probe 1.52x f32 tokens/s on this CPU, avx512 level, GEMM avx512_bf16, ..."
 *   "auto: bf16 0.17x f32 here (probe), under the 1.1x margin"
 *   "auto: no candidate but f32 at the avx2 level (bf16: no bf16 unit ...)" */
attn_precision attn_prec_auto_choose(const attn_prec_probe_result *r, int qat, char *why,
                                     size_t why_cap);

#endif
