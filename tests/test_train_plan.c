/* --precision auto and the time budget (src/apps/train/precision_probe.h,
 * train_plan.h; the classifier's probe, src/apps/classifier/
 * classifier_precision.h): the expected duration of a plan; the plan shrunk to a
 * budget in the documented order (epochs to the floor, members, epochs),
 * never silently; auto never leaves f32 without a bf16 unit or under the
 * margin (per wall and per CPU second); the probe times f32 and the
 * candidate on the run's shapes; the probe batch; each epoch line shows its
 * own time and the total; the overall ETA. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "apps/classifier/classifier_precision.h"
#include "apps/train/train_plan.h"
#include "harness.h"

/* 10 s per epoch (1000 tokens at 100 tokens/s), nothing else. */
static attn_train_plan plan_10s(int members, int epochs) {
  attn_train_plan p = {members, epochs, 10, 1000.0, 0, 0, 100.0, 0, 1000.0, 0};
  return p;
}

static void test_plan_seconds(void) {
  attn_train_plan p = {2, 3, 10, 5000.0, 600.0, 900.0, 1000.0, 0.01, 3000.0, 4.0};
  // epoch: 10 * 0.01 + 5000 / 1000 + 600 / 3000 = 5.3 s; test 900 / 3000 = 0.3 s per member
  CHECK(fabs(attn_train_plan_epoch_seconds(&p) - 5.3) < 1e-9);
  CHECK(fabs(attn_train_plan_seconds(&p) - (2 * (3 * 5.3 + 0.3) + 4.0)) < 1e-9);
  char b[32];
  attn_fmt_duration(b, sizeof b, 552.4);
  CHECK(!strcmp(b, "9m12s"));
  attn_fmt_duration(b, sizeof b, 3720);
  CHECK(!strcmp(b, "1h02m"));
}

static void test_plan_fit_order(void) {
  char note[320];
  attn_train_plan p = plan_10s(2, 7);  // 140 s
  CHECK(attn_train_plan_fit(&p, 200, note, sizeof note) == 0);
  CHECK(p.members == 2 && p.epochs == 7 && note[0] == 0);
  // epochs first, down to the floor ceil(0.7 * 7) = 5, keeping both members
  CHECK(attn_train_plan_fit(&p, 100, note, sizeof note) == 1);
  CHECK(p.members == 2 && p.epochs == 5);
  printf("  %s\n", note);
  CHECK(strstr(note, "time budget 1m40s: 2 members x 7 epochs would take ~2m20s; training 2 "
                     "members x 5 epochs (~1m40s)") != NULL);
  // below the floor a member goes, and the epochs come back as far as they fit
  p = plan_10s(2, 7);
  CHECK(attn_train_plan_fit(&p, 90, note, sizeof note) == 1);
  CHECK(p.members == 1 && p.epochs == 7);
  p = plan_10s(2, 7);
  CHECK(attn_train_plan_fit(&p, 55, note, sizeof note) == 1);
  CHECK(p.members == 1 && p.epochs == 5);
  // nothing fits: 1 member x the floor (5 of 7), never fewer epochs, and
  // the note says it runs anyway
  p = plan_10s(2, 7);
  CHECK(attn_train_plan_fit(&p, 45, note, sizeof note) == -1);
  CHECK(p.members == 1 && p.epochs == 5);
  p = plan_10s(3, 7);
  CHECK(attn_train_plan_fit(&p, 5, note, sizeof note) == -1);
  CHECK(p.members == 1 && p.epochs == 5);
  CHECK(strstr(note, "does not fit: running it anyway (no fewer epochs") != NULL);
  p = plan_10s(2, 7);  // a budget already spent (left < 0)
  CHECK(attn_train_plan_fit(&p, -3, note, sizeof note) == -1 && p.epochs == 5);
}

/* A result with f32 and bf16 timed: wall and CPU seconds of the step. */
static attn_prec_probe_result fake(double bf_wall, double bf_cpu) {
  attn_prec_probe_result r;
  memset(&r, 0, sizeof r);
  r.n = 2;
  r.t[0] = (attn_prec_timing){ATTN_PREC_F32, 1.0, 2.0, 1000, 3, 0};
  r.t[1] = (attn_prec_timing){ATTN_PREC_BF16, bf_wall, bf_cpu, 1000 / bf_wall, 3, 0};
  return r;
}

static void test_auto_choice(void) {
  char why[320];
  attn_prec_probe_result fast = fake(0.5, 1.0);
  attn_isa best = attn_isa_active();
  // the generic level has no bf16 unit: f32 whatever a probe said
  CHECK_OK(attn_set_isa(ATTN_ISA_GENERIC));
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  CHECK(!bf.candidate && strstr(bf.units, "GEMM portable") && strstr(bf.why, "no bf16 unit"));
  CHECK(attn_prec_auto_choose(&fast, 0, why, sizeof why) == ATTN_PREC_F32);
  CHECK(strstr(why, "no candidate but f32 at the generic level") != NULL);
  attn_prec_info f16;
  attn_prec_info_get(ATTN_PREC_F16, &f16);
  CHECK(!f16.candidate);
  CHECK_OK(attn_set_isa(best));
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  if (!bf.candidate) {
    SKIP("no bf16 unit at the %s level: the margin rule is not reachable here",
         attn_isa_name(best));
    return;
  }
  CHECK(attn_prec_auto_choose(&fast, 0, why, sizeof why) == ATTN_PREC_BF16);
  printf("  %s\n", why);
  CHECK(strstr(why, "auto: probe 2.00x f32 tokens/s on this CPU (2.00x per CPU-second)") != NULL);
  attn_prec_probe_result r = fake(0.95, 1.9);  // 1.05x: under the margin
  CHECK(attn_prec_auto_choose(&r, 0, why, sizeof why) == ATTN_PREC_F32);
  CHECK(strstr(why, "bf16 1.05x f32 here") && strstr(why, "under the 1.10x margin"));
  r = fake(0.5, 1.9);  // fast on the wall clock only (other load): not enough
  CHECK(attn_prec_auto_choose(&r, 0, why, sizeof why) == ATTN_PREC_F32);
  r = fake(4.0, 8.0);  // 0.25x: a slow path is never picked
  CHECK(attn_prec_auto_choose(&r, 0, why, sizeof why) == ATTN_PREC_F32);
  CHECK(strstr(why, "bf16 0.25x f32 here") != NULL);
  CHECK(attn_prec_auto_choose(&fast, 1, why, sizeof why) == ATTN_PREC_F32);  // QAT
  CHECK(attn_prec_auto_choose(NULL, 0, why, sizeof why) == ATTN_PREC_F32);   // not probed
}

#define NT 40
#define MAXL 24
static int32_t tok[NT][MAXL];
static const int32_t *rows[NT];
static int32_t lens[NT];
static int labels[NT];

static attn_tok_set data(void) {
  unsigned s = 99;
  for (int i = 0; i < NT; i++) {
    s = s * 1664525u + 1013904223u;
    lens[i] = 2 + (int32_t)((s >> 16) % (MAXL - 1));
    labels[i] = i % 2;
    for (int t = 0; t < lens[i]; t++) tok[i][t] = 1 + (t * 7 + i) % 30;
    rows[i] = tok[i];
  }
  return (attn_tok_set){NT, rows, lens, labels};
}

static attn_clf_config config(void) {
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = 32;
  c.d_model = 16;
  c.heads = 2;
  c.ff = 32;
  c.layers = 1;
  c.max_len = MAXL;
  c.dropout = 0.1f;
  return c;
}

static void test_probe_batch(void) {
  attn_tok_set set = data();
  int32_t ids[8 * MAXL], bl[8];
  int bl_lab[8];
  int64_t B = 0, L = 0;
  CHECK_OK(attn_prec_probe_batch(&set, MAXL, 8, 1 << 20, 0.0f, 1, ids, bl, bl_lab, &B, &L));
  CHECK(B == 8);  // the token target is far: max_rows
  // rows of similar length around the token-weighted median
  int32_t lo = MAXL, hi = 0;
  for (int b = 0; b < B; b++) {
    lo = bl[b] < lo ? bl[b] : lo;
    hi = bl[b] > hi ? bl[b] : hi;
  }
  printf("  probe rows of %d..%d tokens\n", (int)lo, (int)hi);
  CHECK(L == hi && hi - lo <= 10 && lo >= 6);
  CHECK_OK(attn_prec_probe_batch(&set, MAXL, 8, 40, 0.0f, 1, ids, bl, bl_lab, &B, &L));
  CHECK(B >= 2 && B <= 4);  // ~40 tokens of rows of ~15
  CHECK_OK(attn_prec_probe_batch(&set, MAXL, 8, 1 << 20, 0.5f, 1, ids, bl, bl_lab, &B, &L));
  long kept = 0;
  for (int b = 0; b < B; b++) kept += bl[b];
  CHECK(kept < 8 * hi);  // token dropout applied
  attn_tok_set empty = {0, rows, lens, labels};
  CHECK_ERR(attn_prec_probe_batch(&empty, MAXL, 8, 40, 0.0f, 1, ids, bl, bl_lab, &B, &L), ATTN_EINVAL);
}

static void test_probe_times_each(void) {
  attn_tok_set set = data();
  attn_clf_config c = config();
  int32_t ids[8 * MAXL], bl[8];
  int bl_lab[8];
  int64_t B = 0, L = 0;
  CHECK_OK(attn_prec_probe_batch(&set, MAXL, 8, 1 << 20, 0.2f, 1, ids, bl, bl_lab, &B, &L));
  attn_prec_probe_opts po = {ATTN_BACKEND_AUTO, 0, 0, ATTN_QAT_ACT_TENSOR, 3, 2, 60};
  attn_precision cands[2] = {ATTN_PREC_BF16, ATTN_PREC_F32};  // the F32 entry is ignored
  attn_prec_probe_result r;
  CHECK_OK(attn_prec_probe(&c, &po, ids, bl, bl_lab, B, L, cands, 2, &r));
  long tokens = 0;
  for (int b = 0; b < B; b++) tokens += bl[b];
  CHECK(r.n == 2 && r.t[0].prec == ATTN_PREC_F32 && r.t[1].prec == ATTN_PREC_BF16);
  CHECK(r.tokens == tokens && r.B == B && r.L == L);
  CHECK(r.t[0].rounds == 2 && r.t[0].tokens_per_s > 0 && r.t[0].fb_cpu_seconds > 0);
  CHECK(r.t[1].rounds >= 1 && r.t[1].tokens_per_s > 0);
  CHECK(r.eval_tokens_per_s > 0 && r.step_fixed_seconds > 0 && r.seconds > 0);
  CHECK(attn_prec_probe_ratio(&r, ATTN_PREC_BF16) > 0 && attn_prec_probe_ratio(&r, ATTN_PREC_F16) == 0);
  printf("  f32 %.0f tokens/s, bf16 %.2fx (%s), inference %.0f tokens/s\n", r.t[0].tokens_per_s,
         attn_prec_probe_ratio(&r, ATTN_PREC_BF16), r.t[1].dropped ? "dropped early" : "all rounds",
         r.eval_tokens_per_s);
  CHECK_OK(attn_prec_probe(&c, &po, ids, bl, bl_lab, B, L, NULL, 0, &r));  // f32 alone
  CHECK(r.n == 1 && r.t[0].rounds == 2);
  CHECK_ERR(attn_prec_probe(&c, &po, ids, bl, bl_lab, 0, L, NULL, 0, &r), ATTN_EINVAL);
}

/* Each epoch line: "| X s (total Y s)", X the epoch's own time; the ETA. */
static void test_epoch_time_and_eta(void) {
  attn_tok_set set = data();
  attn_clf_config c = config();
  attn_clf m;
  attn_adam opt;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 1));
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&opt, &m.p, &ac));
  attn_train_opts o;
  attn_train_opts_default(&o);
  o.epochs = 3;
  o.batch = 8;
  o.progress = 2;
  char path[] = "/tmp/attn_test_train_plan.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  o.log = fdopen(fd, "w+");
  attn_train_eta eta;
  memset(&eta, 0, sizeof eta);
  eta.steps_total = 3 * 5 * 2;  // as if a second member of 15 steps followed
  eta.predicted_s = 123;
  CHECK(attn_train_eta_left(&eta, 0) == 123);  // nothing timed yet: the prediction
  o.eta = &eta;
  attn_train_state s;
  attn_train_state_init(&s);
  CHECK_OK(attn_train_run(&m, &opt, &o, &set, &set, &s, NULL, NULL, 0));
  CHECK(eta.t0 > 0 && eta.steps_at_t0 == 0 && s.step == 15);
  CHECK(attn_train_eta_left(&eta, 30) == 0 && attn_train_eta_left(&eta, 15) >= 0);
  rewind(o.log);
  char line[512];
  int n = 0;
  double sum = 0, total = 0, prev = 0;
  while (fgets(line, sizeof line, o.log)) {
    const char *q = strstr(line, " s (total ");
    CHECK(q != NULL);
    if (!q) continue;
    const char *x = q;
    while (x > line && x[-1] != ' ') x--;
    double own = atof(x);
    total = atof(q + strlen(" s (total "));
    CHECK(own >= 0 && total >= prev);
    sum += own;
    prev = total;
    n++;
  }
  CHECK(n == 3);
  CHECK(fabs(sum - total) <= 2.0);  // each printed to the second
  CHECK(fabs(s.seconds - total) <= 0.5);
  fclose(o.log);
  unlink(path);
  attn_train_state_free(&s);
  attn_adam_free(&opt);
  attn_clf_free(&m);
}

int main(void) {
  RUN(test_plan_seconds);
  RUN(test_plan_fit_order);
  RUN(test_auto_choice);
  RUN(test_probe_batch);
  RUN(test_probe_times_each);
  RUN(test_epoch_time_and_eta);
  HARNESS_END();
}
