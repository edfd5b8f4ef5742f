/* Re-planning within a time budget from measured throughput, and the
 * probe's spread best-of-several (train_replan.h). */
#include "apps/train/train_replan.h"

#include <math.h>
#include <stdio.h>

static int floor_of(int epochs) {
  int f = (int)ceil(0.7 * epochs);
  return f < 1 ? 1 : f;
}

/* Seconds of what is left of plan n, at the measured rates of q. */
static double left_seconds(const attn_train_plan *q, const attn_train_pos *pos,
                           const attn_train_next *n) {
  double e = attn_train_plan_epoch_seconds(q);
  double test = q->eval_tokens_per_s > 0 ? q->test_tokens / q->eval_tokens_per_s : 0;
  return (n->stop - pos->done) * e + (double)(n->members - pos->member - 1) * n->epochs * e +
         n->members * test + q->extra_seconds;
}

void attn_train_next_fmt(const attn_train_pos *pos, const attn_train_next *n, char *buf,
                         size_t cap) {
  int later = n->members - pos->member - 1;
  if (pos->member == 0 && (later == 0 || n->stop == n->epochs))
    snprintf(buf, cap, "%d x %d", n->members, n->stop);
  else if (later == 0)
    snprintf(buf, cap, "%d members, the last %d epoch%s", n->members, n->stop,
             n->stop > 1 ? "s" : "");
  else
    snprintf(buf, cap, "%d members: member %d %d epoch%s, then %d x %d", n->members,
             pos->member + 1, n->stop, n->stop > 1 ? "s" : "", later, n->epochs);
}

int attn_train_replan(const attn_train_plan *p, const attn_train_pos *pos,
                      const attn_train_measured *m, double left, attn_train_next *cur, int *fits,
                      char *note, size_t cap) {
  if (note && cap) note[0] = 0;
  attn_train_plan q = *p;
  if (m->train_seconds > 0 && m->train_tokens > 0) {
    q.train_tokens_per_s = m->train_tokens / m->train_seconds;
    q.step_fixed_seconds = 0; // in the measured time
  }
  if (m->val_seconds > 0 && m->val_tokens > 0) q.eval_tokens_per_s = m->val_tokens / m->val_seconds;
  int lo_stop = floor_of(pos->sched);
  if (lo_stop < pos->done) lo_stop = pos->done;
  if (lo_stop > pos->sched) lo_stop = pos->sched;
  int floor_e = floor_of(pos->want_epochs);
  int max_m = pos->want_members > pos->member + 1 ? pos->want_members : pos->member + 1;
  attn_train_next best = {lo_stop, pos->member + 1, floor_e};
  int found = 0;
  for (int M = max_m; M > pos->member && !found; M--) {
    int score = -1;
    int e_hi = M > pos->member + 1 ? pos->want_epochs : floor_e;
    for (int e = e_hi; e >= floor_e; e--)
      for (int s = pos->sched; s >= lo_stop; s--) {
        attn_train_next n = {s, M, e};
        int sc = s + (M - pos->member - 1) * e;
        /* more epochs in all, then the running member's own */
        if (left_seconds(&q, pos, &n) <= left && (sc > score || (sc == score && s > best.stop))) {
          best = n;
          score = sc;
          found = 1;
        }
      }
  }
  if (!found) best = (attn_train_next){lo_stop, pos->member + 1, floor_e};
  if (best.members == pos->member + 1) best.epochs = cur->epochs; // no later member: unchanged
  *fits = found;
  int changed = best.stop != cur->stop || best.members != cur->members ||
                (best.members > pos->member + 1 && best.epochs != cur->epochs);
  if (changed && note && cap) {
    char a[96], b[96], ep[32];
    attn_train_next_fmt(pos, cur, a, sizeof a);
    attn_train_next_fmt(pos, &best, b, sizeof b);
    if (m->epochs == 1)
      snprintf(ep, sizeof ep, "epoch 1");
    else
      snprintf(ep, sizeof ep, "%d epochs", m->epochs);
    int n = snprintf(note, cap, "plan: %s -> %s: measured %.1fk tokens/s over %s, probe said %.1fk",
                     a, b, q.train_tokens_per_s / 1e3, ep, p->train_tokens_per_s / 1e3);
    if (n > 0 && (size_t)n < cap && !found)
      n += snprintf(note + n, cap - (size_t)n, "; does not fit even so: running it anyway");
    if (n > 0 && (size_t)n < cap && best.members < 2 && pos->want_members >= 2)
      snprintf(note + n, cap - (size_t)n,
               "; the budget holds 1 member, not the ensemble of %d: "
               "the result may fall below the Naive Bayes baseline",
               pos->want_members);
  }
  *cur = best;
  return changed;
}

double attn_probe_window_next(const attn_probe_window *w, int rounds, double elapsed) {
  int mx = w->max_rounds > 0 ? w->max_rounds : 1;
  if (rounds >= mx) return -1;
  if (rounds >= w->min_rounds && elapsed >= w->window_s) return -1;
  double at = w->window_s * rounds / mx; // round r starts no earlier than this
  double wait = at - elapsed;
  if (wait < 0) wait = 0;
  if (rounds >= w->min_rounds && elapsed + wait >= w->window_s) return -1;
  return wait;
}
