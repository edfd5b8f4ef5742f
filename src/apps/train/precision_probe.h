/* --precision auto: the precision of a training run chosen by measurement on
 * this CPU and the run's own shapes, not by a feature flag (attn train,
 * attn bench train).
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
 * The probe: one model of the run's config, one batch of the run's shapes
 * (attn_prec_probe_batch: rows around the token-weighted median length of the
 * training set, token dropout applied as training does), a warm-up step per
 * precision, then rounds alternating the precisions (a shared machine drifts),
 * best of each kept; a candidate measured under half f32's speed drops out at
 * once (no noise explains 2x; after the warm-up step already at 3x), and the
 * rounds stop after max_seconds. attn train probes ~4096 tokens per step
 * (half a batch of the defaults: a smaller batch runs fewer tokens per
 * second on 2 threads, so the expected duration would come out long): ~1-3 s
 * in all for the classifier's defaults on an idle 2-core machine. */
#ifndef ATTN_APPS_PRECISION_PROBE_H
#define ATTN_APPS_PRECISION_PROBE_H

#include "apps/classifier/classifier_ensemble.h"
#include "apps/train/trainer.h"

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

/* The probe's settings: those of the training step (backend, activation
 * checkpointing, QAT, dropout seed) and the probe's own. */
typedef struct {
  attn_backend backend;
  int ckpt_acts;
  int qat;
  attn_qat_act qat_act;
  uint64_t seed;
  int rounds;         /* timed rounds per precision at most (0: 3) */
  double max_seconds; /* no new round after this (0: 1.5 s); each precision gets one */
} attn_prec_probe_opts;

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

/* The probe batch: up to max_rows rows (and about target_tokens tokens after
 * token dropout) of training examples of similar length around the
 * token-weighted median, gathered as attn_batch_gather does, token dropout p
 * applied (seed, step 0). ids holds max_rows * max_len; *B, *L out. */
attn_status attn_prec_probe_batch(const attn_tok_set *train, int64_t max_len, int max_rows,
                                  int64_t target_tokens, float token_dropout, uint64_t seed,
                                  int32_t *ids, int32_t *lens, int *labels, int64_t *B, int64_t *L);

/* Times a training step of a model of config c (weights drawn with o->seed)
 * on the batch in f32 and in each of cands[0..n) (F32 entries ignored). */
attn_status attn_prec_probe(const attn_clf_config *c, const attn_prec_probe_opts *o,
                            const int32_t *ids, const int32_t *lens, const int *labels, int64_t B,
                            int64_t L, const attn_precision *cands, int n,
                            attn_prec_probe_result *r);

/* p's tokens/s over f32's, per wall second and per CPU second (0 when p
 * was not timed). */
double attn_prec_probe_ratio(const attn_prec_probe_result *r, attn_precision p);
double attn_prec_probe_cpu_ratio(const attn_prec_probe_result *r, attn_precision p);
const attn_prec_timing *attn_prec_probe_timing(const attn_prec_probe_result *r, attn_precision p);

/* Inference: times the ensemble's forward on one batch in f32 and in bf16
 * (alternating, best of 3 each) when bf16 is a candidate here; *ratio =
 * f32 time / bf16 time (0 when not a candidate: nothing timed). auto for
 * inference takes bf16 when *ratio >= ATTN_PREC_AUTO_MARGIN. */
attn_status attn_prec_probe_infer(const attn_clf_ens *e, const int32_t *ids,
                                  const int32_t *lens, int64_t B, int64_t L, double *ratio);

/* --precision auto for inference (attn predict, attn eval): the probe above
 * on ids[B, L], then bf16 when it runs >= ATTN_PREC_AUTO_MARGIN x f32, else
 * f32; *prec is the choice, why (e.g. "bf16 1.52x f32; GEMM ..." or "bf16:
 * no bf16 unit ...") what decided it. */
attn_status attn_prec_auto_infer(const attn_clf_ens *e, const int32_t *ids, const int32_t *lens,
                                 int64_t B, int64_t L, attn_precision *prec, char *why,
                                 size_t why_cap);

/* auto's choice from a probe of the candidates (r may be NULL when none
 * was run: f32) and one line saying why, e.g.
 *   "auto: probe 1.52x f32 tokens/s on this CPU, avx512 level, GEMM avx512_bf16, ..."
 *   "auto: bf16 0.17x f32 here (probe), under the 1.1x margin"
 *   "auto: no candidate but f32 at the avx2 level (bf16: no bf16 unit ...)" */
attn_precision attn_prec_auto_choose(const attn_prec_probe_result *r, int qat, char *why,
                                     size_t why_cap);

#endif
