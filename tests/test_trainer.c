/* The classifier's trainer (src/apps/classifier/classifier_train.h) on a
 * tiny synthetic task (label 1 iff token 5 occurs): the loss falls; batch
 * plans (src/apps/train/batch_plan.h) cover every example once and bucket by
 * length; the same seed gives bit-identical losses with 1 and 2
 * threads; a run stopped mid-epoch and resumed from its checkpoint gives
 * bit-identical losses and parameters to the uninterrupted run (also in fp16
 * with its loss scaler, and with token dropout); token dropout keeps an
 * in-order subsequence of each row at the expected rate; state JSON. */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/classifier/classifier_train.h"
#include "harness.h"

#define N_TRAIN 96
#define N_VAL 32
#define MAXL 12

static int32_t tok[N_TRAIN + N_VAL][MAXL];
static const int32_t *rows[N_TRAIN + N_VAL];
static int32_t lens[N_TRAIN + N_VAL];
static int labels[N_TRAIN + N_VAL];

static void make_data(void) {
  unsigned s = 12345;
  for (int i = 0; i < N_TRAIN + N_VAL; i++) {
    s = s * 1664525u + 1013904223u;
    lens[i] = 2 + (int32_t)((s >> 16) % (MAXL - 1));
    labels[i] = i % 2;
    for (int t = 0; t < lens[i]; t++) {
      s = s * 1664525u + 1013904223u;
      int32_t v = 6 + (int32_t)((s >> 16) % 10);  // 6..15: never 5
      tok[i][t] = v;
    }
    if (labels[i]) tok[i][(s >> 8) % (unsigned)lens[i]] = 5;
    rows[i] = tok[i];
  }
}

static attn_tok_set train_set(void) { return (attn_tok_set){N_TRAIN, rows, lens, labels}; }
static attn_tok_set val_set(void) {
  return (attn_tok_set){N_VAL, rows + N_TRAIN, lens + N_TRAIN, labels + N_TRAIN};
}

static void model(attn_clf *m, attn_adam *opt) {
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = 16;
  c.d_model = 16;
  c.heads = 2;
  c.ff = 32;
  c.layers = 1;
  c.max_len = MAXL;
  c.dropout = 0.1f;
  CHECK_OK(attn_clf_create(m, &c));
  CHECK_OK(attn_clf_init(m, 1));
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(opt, &m->p, &ac));
  CHECK_OK(attn_adam_set_decay_rule(opt, &m->p, attn_clf_decay_rule, NULL));
}

static attn_train_opts opts(int epochs) {
  attn_train_opts o;
  attn_train_opts_default(&o);
  o.epochs = epochs;
  o.batch = 16;
  o.chunk_batches = 2;
  o.lr = 3e-3;
  o.progress = 2;
  o.seed = 7;
  o.log = fopen("/dev/null", "w");
  return o;
}

static void test_batch_plan(void) {
  make_data();
  attn_batch_plan p, q;
  CHECK_OK(attn_batch_plan_make(lens, N_TRAIN, 16, 2, 1, 3, 0, &p));
  CHECK(p.nb == 6 && p.start[0] == 0 && p.start[6] == N_TRAIN);
  int seen[N_TRAIN] = {0};
  for (int i = 0; i < N_TRAIN; i++) seen[p.order[i]]++;
  int once = 1;
  for (int i = 0; i < N_TRAIN; i++) once &= seen[i] == 1;
  CHECK(once);
  // within a batch lengths do not increase (each batch comes from one sorted chunk)
  int sorted = 1;
  for (int b = 0; b < p.nb; b++)
    for (int i = p.start[b] + 1; i < p.start[b + 1]; i++)
      sorted &= lens[p.order[i]] <= lens[p.order[i - 1]];
  CHECK(sorted);
  // same (seed, epoch): same plan; another epoch: another order
  CHECK_OK(attn_batch_plan_make(lens, N_TRAIN, 16, 2, 1, 3, 0, &q));
  CHECK(memcmp(p.order, q.order, sizeof(int) * N_TRAIN) == 0);
  attn_batch_plan_free(&q);
  CHECK_OK(attn_batch_plan_make(lens, N_TRAIN, 16, 2, 1, 3, 1, &q));
  CHECK(memcmp(p.order, q.order, sizeof(int) * N_TRAIN) != 0);
  attn_batch_plan_free(&q);
  // gather pads with 0 to the longest
  attn_tok_set ts = train_set();
  int32_t ids[16 * MAXL], bl[16];
  int lab[16];
  int64_t B, L;
  attn_batch_gather(&ts, &p, 0, ids, bl, lab, &B, &L);
  CHECK(B == 16 && L == bl[0] && bl[15] <= L);
  CHECK(bl[15] == L || ids[15 * L + L - 1] == 0);
  attn_batch_plan_free(&p);
  CHECK_ERR(attn_batch_plan_make(lens, 0, 16, 2, 1, 3, 0, &p), ATTN_EINVAL);
}

/* The tiny model trained 20 epochs at lr 1e-2 (losses[k] of step k < cap). */
static void train_tiny(attn_clf *m, attn_adam *opt, attn_train_state *s, float *losses,
                       int64_t cap) {
  make_data();
  model(m, opt);
  attn_train_opts o = opts(20);
  o.lr = 1e-2;
  attn_train_state_init(s);
  attn_tok_set tr = train_set(), va = val_set();
  CHECK_OK(attn_train_run(m, opt, &o, &tr, &va, s, NULL, losses, cap));
  fclose(o.log);
}

static void test_loss_falls(void) {
  attn_clf m;
  attn_adam opt;
  attn_train_state s;
  float losses[128];
  train_tiny(&m, &opt, &s, losses, 128);
  attn_tok_set va = val_set();
  CHECK(s.step == 120 && s.epoch == 20);
  double first = 0, last = 0;
  for (int i = 0; i < 6; i++) first += losses[i], last += losses[114 + i];
  printf("  first epoch loss %.4f, last %.4f\n", first / 6, last / 6);
  CHECK(last < 0.5 * first);
  double vl, va_acc;
  CHECK_OK(attn_clf_evaluate(&m, &va, 8, &vl, &va_acc, NULL, NULL));
  printf("  val loss %.4f acc %.3f\n", vl, va_acc);
  CHECK(va_acc >= 0.9);
  attn_adam_free(&opt);
  attn_clf_free(&m);
}

static void run_losses(int threads, float *losses, int n, int ckpt) {
  attn_set_num_threads(threads);
  attn_clf m;
  attn_adam opt;
  model(&m, &opt);
  attn_train_opts o = opts(2);
  o.ckpt_acts = ckpt;
  attn_train_state s;
  attn_train_state_init(&s);
  attn_tok_set tr = train_set(), va = val_set();
  CHECK_OK(attn_train_run(&m, &opt, &o, &tr, &va, &s, NULL, losses, n));
  fclose(o.log);
  attn_adam_free(&opt);
  attn_clf_free(&m);
  attn_set_num_threads(0);
}

static void test_threads_and_ckpt_same_losses(void) {
  make_data();
  float a[12], b[12], c[12];
  run_losses(1, a, 12, 0);
  run_losses(2, b, 12, 0);
  run_losses(2, c, 12, 1);
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) == 0);
}

static void resume_identical(float token_dropout, double ema) {
  make_data();
  attn_tok_set tr = train_set(), va = val_set();
  float full[12], part[12];
  attn_clf m;
  attn_adam opt;
  model(&m, &opt);
  attn_train_opts o = opts(2);
  o.token_dropout = token_dropout;
  o.ema = ema;
  attn_train_state s;
  attn_train_state_init(&s);
  CHECK_OK(attn_train_run(&m, &opt, &o, &tr, &va, &s, NULL, full, 12));

  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/attn_test_trainer_%d", (int)getpid());
  mkdir(dir, 0700);
  attn_clf m2;
  attn_adam opt2;
  model(&m2, &opt2);
  attn_train_opts o2 = opts(2);
  o2.token_dropout = token_dropout;
  o2.ema = ema;
  o2.out_dir = dir;
  o2.stop_after = 4;  // mid first epoch (6 batches per epoch)
  attn_train_state s2;
  attn_train_state_init(&s2);
  memset(part, 0, sizeof part);
  CHECK_OK(attn_train_run(&m2, &opt2, &o2, &tr, &va, &s2, NULL, part, 12));
  CHECK(s2.step == 4 && s2.epoch == 0 && s2.batch == 4);
  attn_train_state_free(&s2);
  attn_adam_free(&opt2);
  attn_clf_free(&m2);

  // a fresh process would do this: model from the checkpoint, then go on
  char path[128];
  snprintf(path, sizeof path, "%s/last.safetensors", dir);
  attn_clf m3;
  attn_adam opt3;
  CHECK_OK(attn_clf_load(path, &m3, NULL));
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&opt3, &m3.p, &ac));
  CHECK_OK(attn_adam_set_decay_rule(&opt3, &m3.p, attn_clf_decay_rule, NULL));
  attn_train_state s3;
  CHECK_OK(attn_clf_load_train_state(path, &m3, &opt3, &s3));
  CHECK(s3.step == 4 && s3.batch == 4 && opt3.step == 4);
  CHECK(ema > 0 ? s3.ema.avg && s3.ema.updates == 4 && s3.ema.decay == ema : !s3.ema.avg);
  o2.stop_after = 0;
  CHECK_OK(attn_train_run(&m3, &opt3, &o2, &tr, &va, &s3, NULL, part, 12));
  CHECK(memcmp(full, part, sizeof full) == 0);
  CHECK(memcmp(m.p.data, m3.p.data, (size_t)m.p.numel * sizeof(float)) == 0);
  CHECK(s3.epoch == 2 && s.best_epoch == s3.best_epoch && s.best == s3.best);
  if (ema > 0) {  // the same average, and it is not the raw weights
    CHECK(s.ema.avg && s3.ema.avg && s.ema.updates == 12 && s3.ema.updates == 12);
    CHECK(s.ema.avg && s3.ema.avg &&
          memcmp(s.ema.avg, s3.ema.avg, (size_t)m.p.numel * sizeof(float)) == 0);
    CHECK(s.ema.avg && memcmp(s.ema.avg, m.p.data, (size_t)m.p.numel * sizeof(float)) != 0);
  }
  snprintf(path, sizeof path, "%s/best.safetensors", dir);
  CHECK(access(path, F_OK) == 0);
  {  // best.safetensors holds the model that was validated (the average with ema)
    attn_clf b;
    CHECK_OK(attn_clf_load(path, &b, NULL));
    double vl = 0, vacc = 0;
    CHECK_OK(attn_clf_evaluate(&b, &va, o.eval_batch, &vl, &vacc, NULL, NULL));
    CHECK(vl == s3.best);
    attn_clf_free(&b);
  }
  unlink(path);
  snprintf(path, sizeof path, "%s/last.safetensors", dir);
  unlink(path);
  rmdir(dir);
  fclose(o2.log);
  fclose(o.log);
  attn_train_state_free(&s);
  attn_train_state_free(&s3);
  attn_adam_free(&opt);
  attn_adam_free(&opt3);
  attn_clf_free(&m);
  attn_clf_free(&m3);
}

static void test_resume_identical(void) { resume_identical(0.0f, 0.0); }
static void test_resume_identical_token_dropout(void) { resume_identical(0.3f, 0.0); }
/* With a weight average: saved in last.safetensors, restored, the same bits;
 * the best checkpoint is the average that was validated. */
static void test_resume_identical_ema(void) { resume_identical(0.3f, 0.9); }

/* Token dropout: rows become in-order subsequences (at least one token),
 * padded with 0 to the new longest row; the same (seed, step) drops the same
 * tokens, another step others; about p of the tokens go; p = 0 is a no-op. */
static void test_token_dropout(void) {
  enum { B = 64, L = 100 };
  static int32_t ids[B * L], ids2[B * L], orig[B * L];
  int32_t tl[B], lens2[B], olens[B];
  for (int r = 0; r < B; r++) {
    olens[r] = r == 0 ? 1 : 1 + (r * 37) % L;
    for (int t = 0; t < L; t++) orig[r * L + t] = t < olens[r] ? 1000 * r + t + 1 : 0;
  }
  memcpy(ids, orig, sizeof ids);
  memcpy(tl, olens, sizeof tl);
  int64_t L1 = L;
  CHECK_OK(attn_token_dropout(ids, tl, B, &L1, 0.25f, 9, 3));
  CHECK(L1 >= 1 && L1 <= L);
  long kept = 0, total = 0;
  int subseq = 1, padded = 1, longest = 0;
  for (int r = 0; r < B; r++) {
    subseq &= tl[r] >= 1 && tl[r] <= olens[r];
    if (tl[r] > longest) longest = tl[r];
    int32_t prev = 1000 * r;
    for (int t = 0; t < tl[r]; t++) {
      int32_t v = ids[r * L1 + t];
      subseq &= v > prev && v <= 1000 * r + olens[r];
      prev = v;
    }
    for (int t = tl[r]; t < L1; t++) padded &= ids[r * L1 + t] == 0;
    kept += tl[r];
    total += olens[r];
  }
  CHECK(subseq);
  CHECK(padded);
  CHECK(longest == L1);
  double rate = 1.0 - (double)kept / (double)total;
  printf("  dropped %.3f of %ld tokens (p 0.25)\n", rate, total);
  CHECK(rate > 0.20 && rate < 0.30);
  // same (seed, step): same result; another step: another
  memcpy(ids2, orig, sizeof ids2);
  memcpy(lens2, olens, sizeof lens2);
  int64_t L2 = L;
  CHECK_OK(attn_token_dropout(ids2, lens2, B, &L2, 0.25f, 9, 3));
  CHECK(L2 == L1 && memcmp(tl, lens2, sizeof tl) == 0 &&
        memcmp(ids, ids2, sizeof(int32_t) * (size_t)(B * L1)) == 0);
  memcpy(ids2, orig, sizeof ids2);
  memcpy(lens2, olens, sizeof lens2);
  L2 = L;
  CHECK_OK(attn_token_dropout(ids2, lens2, B, &L2, 0.25f, 9, 4));
  CHECK(memcmp(tl, lens2, sizeof tl) != 0);
  // p = 0: unchanged; nearly everything dropped: one token per row remains
  memcpy(ids2, orig, sizeof ids2);
  memcpy(lens2, olens, sizeof lens2);
  L2 = L;
  CHECK_OK(attn_token_dropout(ids2, lens2, B, &L2, 0.0f, 9, 3));
  CHECK(L2 == L && memcmp(ids2, orig, sizeof ids2) == 0);
  L2 = L;
  CHECK_OK(attn_token_dropout(ids2, lens2, B, &L2, 0.9999f, 9, 3));
  int ones = L2 == 1;
  for (int r = 0; r < B; r++) ones &= lens2[r] == 1 && ids2[r] / 1000 == r;
  CHECK(ones);
  L2 = L;
  CHECK_ERR(attn_token_dropout(ids2, lens2, B, &L2, 1.0f, 9, 3), ATTN_EINVAL);
  lens2[3] = 0;
  CHECK_ERR(attn_token_dropout(ids2, lens2, B, &L2, 0.5f, 9, 3), ATTN_EINVAL);
}

/* eval_start: the starting model is validated first and competes for best;
 * a fine-tune whose epochs are worse on validation (here: lr so high that
 * training diverges) leaves the starting model as best.safetensors. With
 * QAT (per-row activations) validation runs the fake-quantized model. */
static void test_eval_start_keeps_start(void) {
  attn_clf m;
  attn_adam opt;
  attn_train_state s;
  train_tiny(&m, &opt, &s, NULL, 0);  // a trained start
  attn_tok_set tr = train_set(), va = val_set();
  double vl0, va0;
  CHECK_OK(attn_clf_evaluate(&m, &va, 8, &vl0, &va0, NULL, NULL));
  char dir[64], path[128];
  snprintf(dir, sizeof dir, "/tmp/attn_test_evalstart_%d", (int)getpid());
  mkdir(dir, 0700);
  attn_adam opt2;
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&opt2, &m.p, &ac));
  attn_train_opts o2 = opts(1);
  o2.out_dir = dir;
  o2.eval_start = 1;
  o2.lr = 5.0;  // wrecks the model
  o2.clip = 0;
  o2.qat = 1;
  o2.qat_act = ATTN_QAT_ACT_ROW;
  attn_train_state s2;
  attn_train_state_init(&s2);
  CHECK_OK(attn_train_run(&m, &opt2, &o2, &tr, &va, &s2, NULL, NULL, 0));
  printf("  start val loss %.4f, best %.4f (epoch %d)\n", vl0, s2.best, s2.best_epoch);
  CHECK(s2.best_epoch == ATTN_TRAIN_BEST_START);
  CHECK(fabs(s2.best - vl0) < 0.05 * vl0 + 1e-3);  // the int8-simulated start, close to f32
  snprintf(path, sizeof path, "%s/best.safetensors", dir);
  attn_clf b;
  CHECK_OK(attn_clf_load(path, &b, NULL));
  double vl1, va1;
  CHECK_OK(attn_clf_evaluate(&b, &va, 8, &vl1, &va1, NULL, NULL));
  CHECK(vl1 == vl0 && va1 == va0);  // best.safetensors is the starting model
  unlink(path);
  snprintf(path, sizeof path, "%s/last.safetensors", dir);
  unlink(path);
  rmdir(dir);
  fclose(o2.log);
  attn_clf_free(&b);
  attn_adam_free(&opt);
  attn_adam_free(&opt2);
  attn_clf_free(&m);
}

/* fp16 with dynamic loss scaling: a run stopped mid-epoch and resumed from
 * its checkpoint goes on with the saved scaler (scale, good-step counter,
 * skipped steps) and gives bit-identical losses, parameters and scaler to
 * the uninterrupted run. The scale starts at 2^24 (the scaled loss
 * gradient overflows fp16, steps are skipped and the scale backs off) and
 * grows every 3 good steps, so the scaler at the stop differs from a fresh
 * one and a resume that restarted it would take other steps. */
static void fp16_opts(attn_train_opts *o) {
  o->precision = ATTN_PREC_F16;
  o->loss_scale = 16777216.0f;
  o->loss_scale_interval = 3;
}

static void test_resume_identical_fp16(void) {
  make_data();
  attn_tok_set tr = train_set(), va = val_set();
  float full[12], part[12];
  attn_clf m;
  attn_adam opt;
  model(&m, &opt);
  attn_train_opts o = opts(2);
  fp16_opts(&o);
  attn_train_state s;
  attn_train_state_init(&s);
  CHECK_OK(attn_train_run(&m, &opt, &o, &tr, &va, &s, NULL, full, 12));
  printf("  uninterrupted: scale %g, tracker %lld, %lld of %lld steps skipped\n",
         (double)s.scaler.scale, (long long)s.scaler.growth_tracker, (long long)s.scaler.skipped,
         (long long)s.scaler.steps);
  CHECK(s.scaler.enabled && s.scaler.steps == 12 && s.scaler.skipped > 0);

  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/attn_test_trainer_fp16_%d", (int)getpid());
  mkdir(dir, 0700);
  attn_clf m2;
  attn_adam opt2;
  model(&m2, &opt2);
  attn_train_opts o2 = opts(2);
  fp16_opts(&o2);
  o2.out_dir = dir;
  o2.stop_after = 5;  // mid first epoch (6 batches per epoch)
  attn_train_state s2;
  attn_train_state_init(&s2);
  memset(part, 0, sizeof part);
  CHECK_OK(attn_train_run(&m2, &opt2, &o2, &tr, &va, &s2, NULL, part, 12));
  CHECK(s2.step == 5 && s2.epoch == 0 && s2.batch == 5);
  printf("  at the stop (step 5): scale %g, tracker %lld, %lld of %lld steps skipped\n",
         (double)s2.scaler.scale, (long long)s2.scaler.growth_tracker,
         (long long)s2.scaler.skipped, (long long)s2.scaler.steps);
  // the test means something only if the scaler has moved from its start
  CHECK(s2.scaler.skipped > 0 && s2.scaler.scale != o2.loss_scale && s2.scaler.growth_tracker > 0);
  attn_adam_free(&opt2);
  attn_clf_free(&m2);

  char path[128];
  snprintf(path, sizeof path, "%s/last.safetensors", dir);
  attn_clf m3;
  attn_adam opt3;
  CHECK_OK(attn_clf_load(path, &m3, NULL));
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&opt3, &m3.p, &ac));
  CHECK_OK(attn_adam_set_decay_rule(&opt3, &m3.p, attn_clf_decay_rule, NULL));
  attn_train_state s3;
  CHECK_OK(attn_clf_load_train_state(path, &m3, &opt3, &s3));
  CHECK(s3.scaler.enabled && s3.scaler.scale == s2.scaler.scale &&
        s3.scaler.growth_tracker == s2.scaler.growth_tracker &&
        s3.scaler.steps == s2.scaler.steps && s3.scaler.skipped == s2.scaler.skipped);
  o2.stop_after = 0;
  CHECK_OK(attn_train_run(&m3, &opt3, &o2, &tr, &va, &s3, NULL, part, 12));
  CHECK(memcmp(full, part, sizeof full) == 0);
  CHECK(memcmp(m.p.data, m3.p.data, (size_t)m.p.numel * sizeof(float)) == 0);
  CHECK(s3.scaler.scale == s.scaler.scale && s3.scaler.growth_tracker == s.scaler.growth_tracker &&
        s3.scaler.steps == s.scaler.steps && s3.scaler.skipped == s.scaler.skipped);
  CHECK(s3.epoch == 2 && s.best_epoch == s3.best_epoch && s.best == s3.best);

  // an f32 resume of the fp16 checkpoint runs without a scaler
  attn_clf m4;
  attn_adam opt4;
  CHECK_OK(attn_clf_load(path, &m4, NULL));
  CHECK_OK(attn_adam_init(&opt4, &m4.p, &ac));
  attn_train_state s4;
  CHECK_OK(attn_clf_load_train_state(path, &m4, &opt4, &s4));
  attn_train_opts o4 = opts(2);
  CHECK_OK(attn_train_run(&m4, &opt4, &o4, &tr, &va, &s4, NULL, NULL, 0));
  CHECK(!s4.scaler.enabled && s4.scaler.scale == 1.0f);

  snprintf(path, sizeof path, "%s/best.safetensors", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/last.safetensors", dir);
  unlink(path);
  rmdir(dir);
  fclose(o2.log);
  fclose(o4.log);
  attn_adam_free(&opt);
  attn_adam_free(&opt3);
  attn_adam_free(&opt4);
  attn_clf_free(&m);
  attn_clf_free(&m3);
  attn_clf_free(&m4);
}

static void test_state_json(void) {
  attn_train_state s, t;
  attn_train_state_init(&s);
  s.step = 123;
  s.epoch = 2;
  s.batch = 7;
  s.loss_sum = 1.0 / 3.0;
  s.best = 0.0123456789012345;
  s.best_epoch = 1;
  char *j;
  CHECK_OK(attn_train_state_to_json(&s, &j));
  CHECK_OK(attn_train_state_from_json(j, &t));
  CHECK(t.step == 123 && t.epoch == 2 && t.batch == 7 && t.loss_sum == s.loss_sum &&
        t.best == s.best && t.best_epoch == 1);
  free(j);
  CHECK(!t.scaler.enabled);  // no loss scaler keys: none
  // fp16: the loss scaler round-trips
  attn_loss_scaler_init(&s.scaler, 1);
  s.scaler.scale = 1536.0f;
  s.scaler.growth_tracker = 17;
  s.scaler.steps = 40;
  s.scaler.skipped = 6;
  CHECK_OK(attn_train_state_to_json(&s, &j));
  CHECK_OK(attn_train_state_from_json(j, &t));
  CHECK(t.scaler.enabled && t.scaler.scale == 1536.0f && t.scaler.growth_tracker == 17 &&
        t.scaler.steps == 40 && t.scaler.skipped == 6 && t.step == 123);
  free(j);
  static const char *const bad[] = {
      "{\"step\":1,\"epoch\":0,\"batch\":0,\"loss_sum\":0,\"best\":0,\"best_epoch\":-1,"
      "\"seconds\":0,\"loss_scale\":8}",  // incomplete
      "{\"step\":1,\"epoch\":0,\"batch\":0,\"loss_sum\":0,\"best\":0,\"best_epoch\":-1,"
      "\"seconds\":0,\"loss_scale\":0,\"loss_scale_tracker\":0,\"loss_scale_steps\":1,"
      "\"loss_scale_skipped\":0}",  // scale 0
      "{\"step\":1,\"epoch\":0,\"batch\":0,\"loss_sum\":0,\"best\":0,\"best_epoch\":-1,"
      "\"seconds\":0,\"loss_scale\":8,\"loss_scale_tracker\":0,\"loss_scale_steps\":1,"
      "\"loss_scale_skipped\":2}",  // more skipped than steps
      "{\"step\":1,\"epoch\":0,\"batch\":0,\"loss_sum\":0,\"best\":0,\"best_epoch\":-1,"
      "\"seconds\":0,\"loss_scale\":\"8\",\"loss_scale_tracker\":0,\"loss_scale_steps\":1,"
      "\"loss_scale_skipped\":0}"};  // not a number
  for (int i = 0; i < 4; i++) CHECK_ERR(attn_train_state_from_json(bad[i], &t), ATTN_EFORMAT);
  CHECK_ERR(attn_train_state_from_json("{\"step\":1}", &t), ATTN_EFORMAT);
  CHECK_ERR(attn_train_state_from_json(NULL, &t), ATTN_EFORMAT);
}

/* Training options as JSON ("train.options" of attn train's checkpoints):
 * every field back exactly; absent keys keep the caller's values; bad types
 * and out-of-range values are errors that change nothing. */
static void test_opts_json(void) {
  attn_train_opts o, t, d;
  attn_train_opts_default(&o);
  o.epochs = 9;
  o.batch = 24;
  o.lr = 1.0 / 3.0;
  o.min_lr = 1e-7;
  o.warmup_frac = 0.0625;
  o.token_dropout = 0.45f;
  o.label_smoothing = 0.1f;
  o.ema = 0.995;
  o.seed = 18446744073709551557ull;  // above 2^53: kept as a string
  o.precision = ATTN_PREC_BF16;
  o.qat = 1;
  o.qat_act = ATTN_QAT_ACT_ROW;
  o.select_by_acc = 1;
  o.loss_scale_interval = 77;
  char *j = NULL;
  CHECK_OK(attn_train_opts_to_json(&o, &j));
  attn_train_opts_default(&t);
  CHECK_OK(attn_train_opts_from_json(j, &t));
  CHECK(t.epochs == 9 && t.batch == 24 && t.lr == o.lr && t.min_lr == o.min_lr &&
        t.warmup_frac == 0.0625 && t.token_dropout == 0.45f && t.label_smoothing == 0.1f &&
        t.ema == 0.995 && t.seed == o.seed && t.precision == ATTN_PREC_BF16 && t.qat == 1 &&
        t.qat_act == ATTN_QAT_ACT_ROW && t.select_by_acc == 1 && t.loss_scale_interval == 77);
  free(j);
  // absent keys keep the caller's values
  attn_train_opts_default(&d);
  t = d;
  CHECK_OK(attn_train_opts_from_json("{\"epochs\":3}", &t));
  CHECK(t.epochs == 3 && t.lr == d.lr && t.seed == d.seed && t.token_dropout == d.token_dropout);
  static const char *const bad[] = {
      "[1]", "{\"epochs\":\"3\"}", "{\"epochs\":0}", "{\"token_dropout\":1}",
      "{\"ema\":-0.5}", "{\"seed\":7}", "{\"seed\":\"x\"}", "{\"precision\":\"f64\"}",
      "{\"qat_act\":\"col\"}", "{\"batch\":5000}", "{\"lr\":1e999}", "{"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    t = d;
    attn_status st = attn_train_opts_from_json(bad[i], &t);
    CHECK(st == ATTN_EFORMAT || st == ATTN_EINVAL);
    if (st == ATTN_OK) printf("  accepted: %s\n", bad[i]);
    CHECK(memcmp(&t, &d, sizeof t) == 0);
  }
}

int main(void) {
  RUN(test_batch_plan);
  RUN(test_state_json);
  RUN(test_opts_json);
  RUN(test_loss_falls);
  RUN(test_threads_and_ckpt_same_losses);
  RUN(test_resume_identical);
  RUN(test_token_dropout);
  RUN(test_resume_identical_token_dropout);
  RUN(test_resume_identical_ema);
  RUN(test_eval_start_keeps_start);
  RUN(test_resume_identical_fp16);
  HARNESS_END();
}
