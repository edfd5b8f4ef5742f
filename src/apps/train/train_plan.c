/* Expected duration of a training run and its fit to a time budget
 * (train_plan.h). */
#include "apps/train/train_plan.h"

#include <math.h>
#include <stdio.h>

static double per(double tokens, double tps) { return tps > 0 ? tokens / tps : 0; }

double attn_train_plan_epoch_seconds(const attn_train_plan *p) {
  return p->batches * p->step_fixed_seconds + per(p->train_tokens, p->train_tokens_per_s) +
         per(p->val_tokens, p->eval_tokens_per_s);
}

double attn_train_plan_seconds(const attn_train_plan *p) {
  return p->members * (p->epochs * attn_train_plan_epoch_seconds(p) +
                       per(p->test_tokens, p->eval_tokens_per_s)) +
         p->extra_seconds;
}

void attn_fmt_duration(char *buf, size_t n, double s) {
  if (!(s >= 0) || s > 1e7) s = 0;
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

int attn_train_plan_fit(attn_train_plan *p, double budget, char *note, size_t cap) {
  if (note && cap) note[0] = 0;
  double before = attn_train_plan_seconds(p);
  if (before <= budget) return 0;
  int m0 = p->members, e0 = p->epochs;
  int floor_e = (int)ceil(0.7 * e0);
  if (floor_e < 1) floor_e = 1;
  while (attn_train_plan_seconds(p) > budget && p->epochs > floor_e) p->epochs--;
  while (attn_train_plan_seconds(p) > budget && p->members > 1) p->members--;
  while (p->members < m0 && p->epochs < e0) {  // a member less: its time back to the epochs
    p->epochs++;
    if (attn_train_plan_seconds(p) > budget) {
      p->epochs--;
      break;
    }
  }
  /* no epochs below the floor: a shorter run is no longer the model the
   * demo stands for (1 member x 3 epochs scored under Naive Bayes); past
   * this point the budget gives way, not the accuracy */
  int fits = attn_train_plan_seconds(p) <= budget;
  if (note && cap) {
    char a[32], b[32], c[32];
    attn_fmt_duration(a, sizeof a, budget);
    attn_fmt_duration(b, sizeof b, before);
    attn_fmt_duration(c, sizeof c, attn_train_plan_seconds(p));
    snprintf(note, cap, "time budget %s: %d member%s x %d epoch%s would take ~%s; %s %d member%s x "
             "%d epoch%s (~%s)%s", a, m0, m0 > 1 ? "s" : "", e0, e0 > 1 ? "s" : "", b,
             fits ? "training" : "even", p->members, p->members > 1 ? "s" : "", p->epochs,
             p->epochs > 1 ? "s" : "", c,
             fits ? "" : " does not fit: running it anyway (no fewer epochs: accuracy first)");
  }
  return fits ? 1 : -1;
}
