/* How long a training run is expected to take (from a precision probe's
 * measured throughput, apps/train/precision_probe.h), and the plan shrunk to fit a
 * time budget (attn train --time-budget, make demo).
 *
 * Expected seconds of a plan:
 *   members * epochs * (batches * step_fixed + train_tokens / train_tps
 *                       + val_tokens / eval_tps)
 *   + members * test_tokens / eval_tps + extra
 * train_tokens: the tokens one epoch trains on (after token dropout, in
 * expectation); eval_tps: f32 inference (validation and the test report run
 * it); extra: what else the run does (pictures, the Naive Bayes baseline).
 *
 * Shrinking (the order is argued in docs/CLASSIFIER.md, "Within a time
 * budget", from validation figures): first the epochs, down to the floor
 * ceil(0.7 * epochs) (5 of 7), keeping the members; then the members, one
 * at a time, at the floor (the epochs then go back up as far as the budget
 * allows, to the original at most). Never below 1 member x the floor: a
 * plan that does not fit even then runs as that and says so (the budget
 * gives way, not the accuracy: 1 member x 3 epochs of the demo's model
 * scored under the Naive Bayes baseline). */
#ifndef ATTN_APPS_TRAIN_PLAN_H
#define ATTN_APPS_TRAIN_PLAN_H

#include <stddef.h>

typedef struct {
  int members, epochs;
  int batches;               /* optimizer steps per epoch */
  double train_tokens;       /* per epoch */
  double val_tokens;         /* per validation (one per epoch) */
  double test_tokens;        /* the test report, per member */
  double train_tokens_per_s; /* forward + backward at the run's precision */
  double step_fixed_seconds; /* per step: zero_grad, clipping, AdamW */
  double eval_tokens_per_s;  /* f32 inference */
  double extra_seconds;
} attn_train_plan;

/* One epoch of one member, its validation included. */
double attn_train_plan_epoch_seconds(const attn_train_plan *p);
/* The whole plan. */
double attn_train_plan_seconds(const attn_train_plan *p);

/* Shrinks p until attn_train_plan_seconds(p) <= budget (see above). Returns
 * 0 when it already fits (p unchanged), 1 when shrunk to fit, -1 when even 1
 * member x the floor does not (p is then that). note: one line saying what was
 * done and why ("" when unchanged). */
int attn_train_plan_fit(attn_train_plan *p, double budget, char *note, size_t cap);

/* "9m12s", "1h02m" */
void attn_fmt_duration(char *buf, size_t n, double seconds);

#endif
