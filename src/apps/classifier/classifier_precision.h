/* The classifier's side of --precision auto (apps/train/precision_probe.h:
 * the candidates, their contracts and the choice): the probe of its training
 * step on the run's own shapes (attn train, attn bench train), and of an
 * ensemble's inference (attn predict, attn eval).
 *
 * The probe: one model of the run's config, one batch of the run's shapes
 * (attn_prec_probe_batch: rows around the token-weighted median length of the
 * training set, token dropout applied as training does), a warm-up step per
 * precision, then rounds alternating the precisions (a shared machine drifts),
 * best of each kept; a candidate measured under half f32's speed drops out at
 * once (no noise explains 2x; after the warm-up step already at 3x); the
 * rounds (3 to 5) spread over a window of up to 2 s, so that one busy second
 * of a shared machine does not set the best, and stop after max_seconds. attn train probes ~4096
 * tokens per step (half a batch of the defaults: a smaller batch runs fewer tokens per second on 2
 * threads, so the expected duration would come out long): ~1-3 s in all for the classifier's
 * defaults on an idle 2-core machine. */
#ifndef ATTN_APPS_CLASSIFIER_PRECISION_H
#define ATTN_APPS_CLASSIFIER_PRECISION_H

#include "apps/classifier/classifier_ensemble.h"
#include "apps/classifier/classifier_train.h"
#include "apps/train/precision_probe.h"

/* The probe's settings: those of the training step (backend, activation
 * checkpointing, QAT, dropout seed) and the probe's own. */
typedef struct {
  attn_backend backend;
  int ckpt_acts;
  int qat;
  attn_qat_act qat_act;
  uint64_t seed;
  int rounds;         /* timed rounds per precision at most (0: 5); at least 3 (or rounds) */
  double max_seconds; /* no new round past this once the minimum is timed (0: 2 s); the
                       * rounds spread over it (2 s at most), a short round waiting before
                       * the next (apps/train/train_replan.h, attn_probe_window) */
} attn_prec_probe_opts;

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

#endif
