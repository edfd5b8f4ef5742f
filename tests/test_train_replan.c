/* Re-planning a training run within its time budget (src/apps/train/
 * train_replan.h), without timing anything: the planner fed a slow probe and
 * fast epochs grows the plan (a second member, more epochs); fed a fast probe
 * and slow epochs shrinks it (later epochs, then the member; the running
 * member ends early, never below its floor), and says so; it is a pure
 * function of its inputs. The probe's rounds spread over their window with
 * injected round times: a busy first second does not set the best. And the
 * trainer's epoch-end hook: a run whose re-plans leave it alone gives the
 * same numbers as one without, and a member ended early at epoch e is bit for
 * bit the first e epochs of its scheduled run (a tiny training). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "apps/classifier/classifier_train.h"
#include "apps/train/train_replan.h"
#include "harness.h"

/* Epochs of 1000 training tokens, no validation or test: at the probe's
 * 100 tokens/s an epoch is 10 s. */
static attn_train_plan plan_probe(int members, int epochs, double probe_tps) {
  attn_train_plan p = {members, epochs, 10, 1000.0, 0, 0, probe_tps, 0, 1000.0, 0};
  return p;
}

static attn_train_measured measured(int epochs, double seconds_per_epoch) {
  attn_train_measured m = {epochs, 1000.0 * epochs, seconds_per_epoch * epochs, 0, 0};
  return m;
}

static void test_slow_probe_fast_epochs_grow(void) {
  // the probe said 100 tokens/s: 10 s per epoch; a budget of 55 s held 1 x 5
  attn_train_plan p = plan_probe(2, 7, 100.0);
  char note[640];
  CHECK(attn_train_plan_fit(&p, 55, note, sizeof note) == 1);
  CHECK(p.members == 1 && p.epochs == 5);
  // epoch 1 measured 2.5 s (400 tokens/s); 45 s left: member 1 keeps its 5
  // (4 more: 10 s) and a second member of 7 epochs (17.5 s) fits
  attn_train_pos pos = {2, 7, 0, 5, 1};
  attn_train_next cur = {5, 1, 5};
  attn_train_measured m = measured(1, 2.5);
  int fits = 0;
  CHECK(attn_train_replan(&p, &pos, &m, 45.0, &cur, &fits, note, sizeof note) == 1);
  printf("  %s\n", note);
  CHECK(fits && cur.stop == 5 && cur.members == 2 && cur.epochs == 7);
  CHECK(strstr(note, "plan: 1 x 5 -> 2 members: member 1 5 epochs, then 1 x 7: measured 0.4k "
                     "tokens/s over epoch 1, probe said 0.1k") != NULL);
  CHECK(strstr(note, "Naive Bayes") == NULL);
  // the same measurement again: nothing changes, nothing said
  CHECK(attn_train_replan(&p, &pos, &m, 42.5, &cur, &fits, note, sizeof note) == 0);
  CHECK(fits && note[0] == 0 && cur.members == 2 && cur.epochs == 7);
  // never above the command's plan, however fast
  attn_train_measured fast = measured(1, 0.01);
  CHECK(attn_train_replan(&p, &pos, &fast, 1e6, &cur, &fits, note, sizeof note) == 0);
  CHECK(cur.stop == 5 && cur.members == 2 && cur.epochs == 7);
  // at the start of a fresh member (schedule 7, nothing done) with time for less than 7
  // later epochs at 2.5 s... the second of 2 members: no third
  attn_train_pos pos2 = {2, 7, 1, 7, 0};
  attn_train_next cur2 = {7, 2, 7};
  CHECK(attn_train_replan(&p, &pos2, &m, 100.0, &cur2, &fits, note, sizeof note) == 0);
  CHECK(cur2.members == 2 && cur2.stop == 7);
}

static void test_fast_probe_slow_epochs_shrink(void) {
  // the probe said 400 tokens/s (2.5 s per epoch): 2 x 7 fitted; epochs measure 10 s
  attn_train_plan p = plan_probe(2, 7, 400.0);
  attn_train_pos pos = {2, 7, 0, 7, 1};
  attn_train_next cur = {7, 2, 7};
  attn_train_measured m = measured(1, 10.0);
  char note[640];
  int fits = 0;
  /* 100 s left = 10 epochs: both members kept; the most epochs in all (11 - 1 done),
   * the running member's first: member 1 ends at 6 of its 7, member 2 gets 5 */
  CHECK(attn_train_replan(&p, &pos, &m, 100.0, &cur, &fits, note, sizeof note) == 1);
  printf("  %s\n", note);
  CHECK(fits && cur.stop == 6 && cur.members == 2 && cur.epochs == 5);
  CHECK(strstr(note, "plan: 2 x 7 -> 2 members: member 1 6 epochs, then 1 x 5: measured 0.1k "
                     "tokens/s over epoch 1, probe said 0.4k") != NULL);
  // 60 s left: two members need >= 4 + 5 epochs: the second member goes, member 1
  // trains its whole schedule, and the log says the result may fall below the baseline
  CHECK(attn_train_replan(&p, &pos, &m, 60.0, &cur, &fits, note, sizeof note) == 1);
  printf("  %s\n", note);
  CHECK(fits && cur.stop == 7 && cur.members == 1);
  CHECK(strstr(note, "the result may fall below the Naive Bayes baseline") != NULL);
  // 20 s left: not even the floor (5 of 7: 4 more epochs) fits: the floor, said so
  CHECK(attn_train_replan(&p, &pos, &m, 20.0, &cur, &fits, note, sizeof note) == 1);
  printf("  %s\n", note);
  CHECK(!fits && cur.stop == 5 && cur.members == 1);
  CHECK(strstr(note, "does not fit even so: running it anyway") != NULL);
  // past the floor already (6 done), no time left: the member ends where it is
  attn_train_pos late = {2, 7, 0, 7, 6};
  attn_train_next c2 = {7, 1, 7};
  CHECK(attn_train_replan(&p, &late, &m, 1.0, &c2, &fits, note, sizeof note) == 1);
  CHECK(fits && c2.stop == 6 && c2.members == 1);
  // at the floor (5 done) with no time: it ends at 5, never earlier
  attn_train_pos at_floor = {2, 7, 0, 7, 5};
  c2 = (attn_train_next){7, 1, 7};
  CHECK(attn_train_replan(&p, &at_floor, &m, -10.0, &c2, &fits, note, sizeof note) == 1);
  CHECK(!fits && c2.stop == 5);
  // the second member, slower than planned: it ends at 5 of its 7 (2 done, 35 s left)
  attn_train_pos second = {2, 7, 1, 7, 2};
  attn_train_next c4 = {7, 2, 7};
  CHECK(attn_train_replan(&p, &second, &m, 35.0, &c4, &fits, note, sizeof note) == 1);
  printf("  %s\n", note);
  CHECK(fits && c4.stop == 5 && c4.members == 2);
  CHECK(strstr(note, "plan: 2 members, the last 7 epochs -> 2 members, the last 5 epochs: ") !=
        NULL);
  // validation measured: its time counts (an epoch 10 s of training + 5 s validation)
  p.val_tokens = 500;
  attn_train_measured mv = {1, 1000.0, 10.0, 500.0, 5.0};
  attn_train_next c3 = {7, 2, 7};
  CHECK(attn_train_replan(&p, &pos, &mv, 100.0, &c3, &fits, note, sizeof note) == 1);
  CHECK(fits && c3.members == 1 && c3.stop == 7); // 6 more epochs x 15 s = 90 s
}

static void test_replan_is_pure(void) {
  attn_train_plan p = plan_probe(3, 6, 50.0);
  attn_train_pos pos = {3, 6, 1, 5, 2};
  attn_train_measured m = measured(7, 3.3);
  for (double left = 0; left < 120; left += 7.5) {
    attn_train_next a = {5, 2, 5}, b = {5, 2, 5};
    char na[640], nb[640];
    int fa = 0, fb = 0;
    int ra = attn_train_replan(&p, &pos, &m, left, &a, &fa, na, sizeof na);
    int rb = attn_train_replan(&p, &pos, &m, left, &b, &fb, nb, sizeof nb);
    CHECK(ra == rb && fa == fb && !memcmp(&a, &b, sizeof a) && !strcmp(na, nb));
    // within bounds: the running member between its floor and schedule, the later
    // ones between the command's floor (ceil(0.7 x 6) = 5) and 6, members 2..3
    CHECK(a.stop >= 4 && a.stop <= 5 && a.members >= 2 && a.members <= 3);
    if (a.members > 2) CHECK(a.epochs >= 5 && a.epochs <= 6);
  }
}

/* Rounds of the probe with injected durations: busy (0.5 s a round) for
 * the first `busy_until` seconds, 0.1 s after. Returns the rounds run. */
static int probe_rounds(const attn_probe_window *w, double busy_until, double quiet_s,
                        double *starts, double *times) {
  double t = 0;
  int r = 0;
  for (;;) {
    double wait = attn_probe_window_next(w, r, t);
    if (wait < 0) break;
    CHECK(wait >= 0 && wait <= w->window_s);
    t += wait;
    starts[r] = t;
    times[r] = t < busy_until ? 0.5 : quiet_s;
    t += times[r];
    r++;
    if (r > 100) break;
  }
  return r;
}

static double best_of(const double *x, int n) {
  double b = x[0];
  for (int i = 1; i < n; i++)
    b = x[i] < b ? x[i] : b;
  return b;
}

static void test_probe_window(void) {
  attn_probe_window w = {2.0, 3, 5};
  double starts[128], times[128];
  // quiet: 5 short rounds spread over the window, 0.4 s apart at least
  int n = probe_rounds(&w, 0, 0.1, starts, times);
  CHECK(n == 5);
  for (int i = 1; i < n; i++)
    CHECK(starts[i] - starts[i - 1] >= 0.4 - 1e-12);
  CHECK(starts[n - 1] < w.window_s);
  // busy for the first 1.2 s: the rounds after it measure the quiet machine
  n = probe_rounds(&w, 1.2, 0.1, starts, times);
  CHECK(n >= 3 && times[0] == 0.5 && best_of(times, n) == 0.1);
  // back to back (no window), the same busy second sets every round of three
  attn_probe_window tight = {0.0, 3, 3};
  int n2 = probe_rounds(&tight, 1.2, 0.1, starts, times);
  CHECK(n2 == 3 && best_of(times, n2) == 0.5);
  // busy throughout: still the minimum of 3 rounds, then done past the window
  n = probe_rounds(&w, 1e9, 0.1, starts, times);
  CHECK(n == 4 || n == 3);
  CHECK(attn_probe_window_next(&w, 3, 2.5) < 0 && attn_probe_window_next(&w, 5, 0) < 0);
  CHECK(attn_probe_window_next(&w, 1, 5.0) == 0); // under the minimum: at once
}

/* ---- the trainer's epoch-end hook on a tiny training ---------------------- */
#define N_TRAIN 64
#define N_VAL 16
#define MAXL 10

static int32_t tok[N_TRAIN + N_VAL][MAXL];
static const int32_t *rows[N_TRAIN + N_VAL];
static int32_t lens[N_TRAIN + N_VAL];
static int labels[N_TRAIN + N_VAL];

static void make_data(void) {
  unsigned s = 777;
  for (int i = 0; i < N_TRAIN + N_VAL; i++) {
    s = s * 1664525u + 1013904223u;
    lens[i] = 2 + (int32_t)((s >> 16) % (MAXL - 1));
    labels[i] = i % 2;
    for (int t = 0; t < lens[i]; t++) {
      s = s * 1664525u + 1013904223u;
      tok[i][t] = 6 + (int32_t)((s >> 16) % 10);
    }
    if (labels[i]) tok[i][(s >> 8) % (unsigned)lens[i]] = 5;
    rows[i] = tok[i];
  }
}

typedef struct {
  int end_at, calls, after; /* end_at from the epoch `after` on (0: o->epochs) */
  double tokens, val_tokens;
} hook_state;

static int hook(void *user, const attn_train_epoch_info *e) {
  hook_state *h = user;
  h->calls++;
  h->tokens = e->train_tokens;
  h->val_tokens = e->val_tokens;
  CHECK(e->epochs_done == h->calls && e->train_seconds >= 0 && e->val_seconds >= 0);
  return h->end_at && e->epochs_done >= h->after ? h->end_at : 1000;
}

/* Trains the tiny model with epochs (its schedule) and hook h (NULL: none),
 * stop_after steps at most (0: no limit); losses and parameters out. */
static void train_tiny(int epochs, hook_state *h, int64_t stop_after, float *losses, int cap,
                       float *params, int64_t *numel, int *epochs_done) {
  attn_clf m;
  attn_adam opt;
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = 16;
  c.d_model = 16;
  c.heads = 2;
  c.ff = 32;
  c.layers = 1;
  c.max_len = MAXL;
  c.dropout = 0.1f;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 1));
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&opt, &m.p, &ac));
  attn_train_opts o;
  attn_train_opts_default(&o);
  o.epochs = epochs;
  o.batch = 16;
  o.chunk_batches = 2;
  o.lr = 3e-3;
  o.progress = 2;
  o.seed = 11;
  o.token_dropout = 0.2f;
  o.stop_after = stop_after;
  o.log = fopen("/dev/null", "w");
  if (h) {
    o.epoch_end = hook;
    o.epoch_end_user = h;
  }
  attn_train_state s;
  attn_train_state_init(&s);
  attn_tok_set tr = {N_TRAIN, rows, lens, labels};
  attn_tok_set va = {N_VAL, rows + N_TRAIN, lens + N_TRAIN, labels + N_TRAIN};
  for (int i = 0; i < cap; i++)
    losses[i] = -1.0f;
  CHECK_OK(attn_train_run(&m, &opt, &o, &tr, &va, &s, NULL, losses, cap));
  *numel = m.p.numel;
  memcpy(params, m.p.data, (size_t)m.p.numel * sizeof(float));
  *epochs_done = s.epoch;
  fclose(o.log);
  attn_train_state_free(&s);
  attn_adam_free(&opt);
  attn_clf_free(&m);
}

static void test_hook_keeps_numbers(void) {
  make_data();
  enum { NB = N_TRAIN / 16, CAP = 3 * NB + 4, PMAX = 1 << 16 };
  static float full[CAP], hooked[CAP], ended[CAP], cut[CAP];
  static float p_full[PMAX], p_hooked[PMAX], p_ended[PMAX], p_cut[PMAX];
  int64_t n1 = 0, n2 = 0, n3 = 0, n4 = 0;
  int e1 = 0, e2 = 0, e3 = 0, e4 = 0;
  // the plan of 3 epochs, up front, no re-planning
  train_tiny(3, NULL, 0, full, CAP, p_full, &n1, &e1);
  CHECK(n1 > 0 && n1 <= PMAX && e1 == 3);
  // re-planned at every epoch end, the running member left alone: the same numbers
  hook_state h = {0, 0, 0, 0, 0};
  train_tiny(3, &h, 0, hooked, CAP, p_hooked, &n2, &e2);
  CHECK(h.calls == 3 && e2 == 3 && h.tokens > 0);
  double vt = 0;
  for (int i = N_TRAIN; i < N_TRAIN + N_VAL; i++)
    vt += lens[i];
  CHECK(h.val_tokens == vt);
  CHECK(!memcmp(full, hooked, sizeof full) && n2 == n1 &&
        !memcmp(p_full, p_hooked, (size_t)n1 * sizeof(float)));
  // ended early at 2 of its 3 scheduled epochs (a re-plan after epoch 1): its losses are
  // the first 2 epochs' of the 3-epoch run, and its weights those of the 3-epoch run
  // stopped at that step
  hook_state h2 = {2, 0, 1, 0, 0};
  train_tiny(3, &h2, 0, ended, CAP, p_ended, &n3, &e3);
  CHECK(e3 == 2 && h2.calls == 2);
  CHECK(!memcmp(full, ended, 2 * NB * sizeof(float)) && ended[2 * NB] == -1.0f);
  train_tiny(3, NULL, 2 * NB, cut, CAP, p_cut, &n4, &e4);
  CHECK(n4 == n3 && !memcmp(p_ended, p_cut, (size_t)n3 * sizeof(float)));
  // and not the weights of a plan of 2 epochs up front (another schedule): the rule
  // that fixes a member's schedule at its start is what the numbers follow
  CHECK(memcmp(p_ended, p_full, (size_t)n1 * sizeof(float)) != 0);
}

int main(void) {
  RUN(test_slow_probe_fast_epochs_grow);
  RUN(test_fast_probe_slow_epochs_shrink);
  RUN(test_replan_is_pure);
  RUN(test_probe_window);
  RUN(test_hook_keeps_numbers);
  HARNESS_END();
}
