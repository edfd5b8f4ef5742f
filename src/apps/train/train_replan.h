/* Re-planning a training run within its time budget from the throughput its
 * epochs measured (attn train --time-budget), and the probe's best of
 * several measurements spread over its window. Pure functions of their
 * inputs (no clock): tests feed them measurements.
 *
 * The rule that keeps a run deterministic for its final plan: a member's
 * learning-rate schedule is fixed when the member starts, by the epochs
 * planned for it then (warm-up + cosine over epochs x steps). A re-plan, at
 * every epoch end, may then change only
 *   - the members not started yet: how many (up to the command's --members)
 *     and their epochs (up to the command's --epochs, at least the floor
 *     ceil(0.7 x --epochs));
 *   - the running member's end: earlier (never below the floor of its own
 *     schedule, ceil(0.7 x its epochs)), never later than its schedule.
 * A member ended early at epoch e of a schedule of E is bit for bit the first
 * e epochs of the member trained to E (the steps do not depend on when the
 * run ends). So the trained numbers are a function of the final plan, one
 * (scheduled epochs, trained epochs) per member, whether it was planned up
 * front or reached by re-planning.
 *
 * Preference (accuracy first, docs/CLASSIFIER.md "Within a time budget"):
 * the most members that fit (an ensemble of two is what beats the Naive
 * Bayes baseline), then the most epochs, the running member's own before
 * the later ones'. When nothing fits: the running member to its floor and
 * no further members ("does not fit": the budget gives way). */
#ifndef ATTN_APPS_TRAIN_REPLAN_H
#define ATTN_APPS_TRAIN_REPLAN_H

#include <stddef.h>

#include "apps/train/train_plan.h"

/* What the run's epochs measured so far (every member's, this process). */
typedef struct {
  int epochs;                         /* epochs measured */
  double train_tokens, train_seconds; /* tokens trained on (after token dropout) and the wall
                                       * time of their steps (the fixed per-step cost included) */
  double val_tokens, val_seconds;     /* the validations' tokens and wall time */
} attn_train_measured;

/* Where the run stands. */
typedef struct {
  int want_members, want_epochs; /* the command's (the ceiling of any plan) */
  int member;                    /* the member training or ending (0-based) */
  int sched;                     /* its scheduled epochs (its schedule; fixed) */
  int done;                      /* its epochs trained */
} attn_train_pos;

/* The re-planned part: the running member's end and the members after it. */
typedef struct {
  int stop;    /* the running member ends after this many epochs (done..sched) */
  int members; /* members in all (> member) */
  int epochs;  /* epochs of each member not started yet */
} attn_train_next;

/* Re-plans from m (its rates replace the probe's in p: tokens/s of training,
 * the per-step cost included, and of validation; p's other fields are the
 * run's sizes) with `left` seconds of the budget to go (the test report and
 * p->extra_seconds included). *cur: the plan so far, replaced by the new one.
 * Returns 1 when the plan changed, 0 when not; *fits: whether the new plan
 * is expected to fit. note (when changed): "plan: 1 x 5 -> 2 x 7: measured
 * 19.8k tokens/s over 1 epoch, probe said 5.6k" and, when the budget cannot
 * hold two members of a run that asked for two or more, that the result may
 * fall below the baseline. */
int attn_train_replan(const attn_train_plan *p, const attn_train_pos *pos,
                      const attn_train_measured *m, double left, attn_train_next *cur, int *fits,
                      char *note, size_t cap);

/* "2 x 7", or "1 of 5 + 2 x 7" style text of a plan: the running member
 * (member k, `stop` of `sched` epochs) and the members after it. */
void attn_train_next_fmt(const attn_train_pos *pos, const attn_train_next *n, char *buf,
                         size_t cap);

/* The probe's best of several measurements spread over its window: rounds
 * of a probe are timed at least min_rounds times, at most max_rounds, and
 * spread over window_s seconds (a short round waits before the next), so a
 * busy second sets none of the plan alone; the probe keeps the best (the
 * shortest) of each precision's rounds. */
typedef struct {
  double window_s;
  int min_rounds, max_rounds;
} attn_probe_window;

/* After `rounds` rounds, `elapsed` seconds into the probe: seconds to wait
 * before the next round (>= 0), or -1 when the probe is done. Rounds start
 * at most every window_s / max_rounds seconds. */
double attn_probe_window_next(const attn_probe_window *w, int rounds, double elapsed);

#endif
