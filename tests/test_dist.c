/* Data parallelism (apps/dist.h, docs/DISTRIBUTED.md):
 * - shards cut a batch exactly (uneven sizes too) and the local group adds
 *   the shards' gradients in shard order;
 * - the cross-entropy of a shard normalised by the whole batch gives the
 *   batch's gradient rows, bit for bit;
 * - dropout of a shard draws the masks of its rows in the whole batch;
 * - training with 2 and 3 shards in one process follows the 1-shard run
 *   within float rounding (the order of a sum), and repeats to the bit;
 * - with the attn tool of an MPI build and mpirun: `mpirun -np 2` (and 3,
 *   with small buckets sent during the backward) leaves the parameters of
 *   `attn train --shards 2` (3) to the bit; a resume with another process
 *   count is said; a batch smaller than the processes, and a rank that
 *   cannot read the data, end every rank with a message, no hang and no
 *   checkpoint. Skipped, counted, without MPI or mpirun. */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/classifier/classifier_train.h"
#include "harness.h"
#include "apps/train/dist.h"

static void test_shard_rows(void) {
  int64_t lo, hi, next = 0;
  for (int s = 0; s < 3; s++) {  // 7 rows over 3 shards: 2, 2, 3, contiguous
    attn_dist_shard_rows(7, 3, s, &lo, &hi);
    CHECK(lo == next && hi - lo == (s < 2 ? 2 : 3));
    next = hi;
  }
  CHECK(next == 7);
  attn_dist_shard_rows(1, 2, 0, &lo, &hi);  // fewer rows than shards: an empty shard
  CHECK(lo == 0 && hi == 0);
}

static void test_local_sum_in_shard_order(void) {
  attn_dist *d = NULL;
  CHECK_OK(attn_dist_open(&d, 3));
  if (!d) return;
  CHECK(attn_dist_shards(d) == 3 && attn_dist_local_shards(d) == 3 && attn_dist_size(d) == 1);
  CHECK(!strcmp(attn_dist_kind(d), "local"));
  float g[4];
  const float parts[3][4] = {{1e8f, 1.0f, 0.1f, -2.0f}, {-1e8f, 2.0f, 0.2f, 3.0f}, {1.0f, 3.0f, 0.3f, 0.5f}};
  CHECK_OK(attn_dist_step_begin(d, g, 4));
  for (int s = 0; s < 3; s++) {
    memcpy(g, parts[s], sizeof g);
    CHECK_OK(attn_dist_grad_ready(d, 0));
    CHECK_OK(attn_dist_shard_done(d, 0.25 * (s + 1)));
  }
  double loss = 0;
  CHECK_OK(attn_dist_step_end(d, &loss));
  for (int i = 0; i < 4; i++) {  // ((g0 + g1) + g2): 1e8 - 1e8 + 1 = 1 exactly (not 0)
    float want = (parts[0][i] + parts[1][i]) + parts[2][i];
    CHECK(memcmp(&g[i], &want, sizeof want) == 0);
  }
  CHECK(loss == 0.25 + 0.5 + 0.75);
  CHECK_ERR(attn_dist_step_end(d, &loss), ATTN_EINVAL);  // no step begun
  attn_dist_close(d);
  CHECK_ERR(attn_dist_open(&d, -1), ATTN_EINVAL);
}

/* The rows [2, 5) of a batch of 5 as a shard normalised by 5: the batch's
 * dlogits rows, the same floats; the shards' losses add up to the batch's. */
static void test_cross_entropy_norm(void) {
  float x[5 * 3], d_all[5 * 3], d_a[2 * 3], d_b[3 * 3], l_all, la, lb;
  int32_t t[5] = {0, 2, 1, 1, 0};
  fill_uniform(x, 15, 7, -3.0f, 3.0f);
  CHECK_OK(attn_cross_entropy_f32(x, t, 5, 3, -1, 0.1f, &l_all, d_all));
  CHECK_OK(attn_cross_entropy_norm_f32(x, t, 2, 3, -1, 0.1f, 5, &la, d_a));
  CHECK_OK(attn_cross_entropy_norm_f32(x + 6, t + 2, 3, 3, -1, 0.1f, 5, &lb, d_b));
  CHECK(memcmp(d_a, d_all, sizeof d_a) == 0 && memcmp(d_b, d_all + 6, sizeof d_b) == 0);
  CHECK(fabs((double)la + lb - l_all) < 1e-6);
  CHECK_ERR(attn_cross_entropy_norm_f32(x, t, 2, 3, -1, 0.0f, -1, &la, d_a), ATTN_EINVAL);
  float l0;  // norm 0: the plain mean
  CHECK_OK(attn_cross_entropy_norm_f32(x, t, 5, 3, -1, 0.1f, 0, &l0, NULL));
  CHECK(l0 == l_all);
}

static void tiny_config(attn_clf_config *c) {
  attn_clf_config_default(c);
  c->vocab = 16;
  c->d_model = 16;
  c->heads = 2;
  c->ff = 32;
  c->layers = 1;
  c->max_len = 12;
  c->dropout = 0.3f;
  c->attn_dropout = 0.3f;  // the attention probabilities' dropout too
}

/* Every dropout site (attention probabilities, feed-forward, both residual
 * sublayers) draws for a shard's rows what it draws for them in the batch. */
static void test_shard_dropout_masks(void) {
  attn_clf_config c;
  tiny_config(&c);
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 3));
  enum { B = 5, L = 6, R0 = 2, R = 2 };
  int32_t ids[B * L], lens[B] = {6, 5, 6, 3, 4};
  for (int i = 0; i < B * L; i++) ids[i] = 1 + i % 15;
  attn_nn_ctx ctx = {.training = 1, .seed = 9, .step = 4};
  attn_clf_acts all, part;
  memset(&all, 0, sizeof all);
  memset(&part, 0, sizeof part);
  CHECK_OK(attn_clf_forward(&m, &ctx, 0, &all, ids, lens, B, L, NULL));
  attn_nn_ctx sc = ctx;
  sc.shard_row0 = R0;
  sc.shard_rows = R;
  CHECK_OK(attn_clf_forward(&m, &sc, 0, &part, ids + R0 * L, lens + R0, R, L, NULL));
  const attn_encoder_saved *a = &all.saved[0], *p = &part.saved[0];
  int64_t E = c.d_model, F = c.ff, H = c.heads;
  CHECK(a->ff.drop_mask && a->s1.drop_mask && a->s2.drop_mask);
  /* attention dropout: the mask is regenerated from the descriptor; the shard
   * draws batch row b as row R0 + b */
  CHECK(a->sa.drop_p == c.attn_dropout && p->sa.drop_p == c.attn_dropout);
  CHECK(a->sa.drop_seed == p->sa.drop_seed && a->sa.drop_batch0 == 0 && p->sa.drop_batch0 == R0);
  attn_sdpa_desc da, dp;
  attn_sdpa_desc_init(&da, B, H, H, L, L, E / H, E / H);
  attn_sdpa_desc_init(&dp, R, H, H, L, L, E / H, E / H);
  da.dropout_p = dp.dropout_p = a->sa.drop_p;
  da.dropout_seed = a->sa.drop_seed, dp.dropout_seed = p->sa.drop_seed;
  da.dropout_batch0 = a->sa.drop_batch0, dp.dropout_batch0 = p->sa.drop_batch0;
  uint8_t ma[L * L], mp[L * L];
  for (int64_t b = 0; b < R; b++)
    for (int64_t h = 0; h < H; h++) {
      CHECK_OK(attn_sdpa_dropout_mask(&da, R0 + b, h, ma));
      CHECK_OK(attn_sdpa_dropout_mask(&dp, b, h, mp));
      CHECK(!memcmp(ma, mp, sizeof ma));
    }
  if (a->ff.drop_mask && a->s1.drop_mask && a->s2.drop_mask) {
    CHECK(!memcmp(p->ff.drop_mask, a->ff.drop_mask + R0 * L * F, (size_t)(R * L * F)));
    CHECK(!memcmp(p->s1.drop_mask, a->s1.drop_mask + R0 * L * E, (size_t)(R * L * E)));
    CHECK(!memcmp(p->s2.drop_mask, a->s2.drop_mask + R0 * L * E, (size_t)(R * L * E)));
    // and a shard without its place would not (the masks of rows 0..R)
    CHECK(memcmp(p->ff.drop_mask, a->ff.drop_mask, (size_t)(R * L * F)) != 0);
  }
  attn_clf_acts_free(&all);
  attn_clf_acts_free(&part);
  attn_clf_free(&m);
}

/* ---- training in one process with S shards ------------------------------- */
#define N_TRAIN 45
#define N_VAL 16
#define MAXL 12
static int32_t tok[N_TRAIN + N_VAL][MAXL];
static const int32_t *rowp[N_TRAIN + N_VAL];
static int32_t lens_[N_TRAIN + N_VAL];
static int labels_[N_TRAIN + N_VAL];

static void make_data(void) {
  unsigned s = 777;
  for (int i = 0; i < N_TRAIN + N_VAL; i++) {
    s = s * 1664525u + 1013904223u;
    lens_[i] = 2 + (int32_t)((s >> 16) % (MAXL - 1));
    labels_[i] = i % 2;
    for (int t = 0; t < lens_[i]; t++) {
      s = s * 1664525u + 1013904223u;
      tok[i][t] = 6 + (int32_t)((s >> 16) % 10);
    }
    if (labels_[i]) tok[i][(s >> 8) % (unsigned)lens_[i]] = 5;
    rowp[i] = tok[i];
  }
}

/* The tiny model (seed 1) and its AdamW. */
static void new_model(attn_clf *m, attn_adam *opt) {
  attn_clf_config c;
  tiny_config(&c);
  memset(opt, 0, sizeof *opt);
  CHECK_OK(attn_clf_create(m, &c));
  CHECK_OK(attn_clf_init(m, 1));
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(opt, &m->p, &ac));
}

/* 3 epochs of batch 7 (the last batch of each epoch: 3 rows) with dropout
 * and token dropout; the losses of every step and the final parameters. */
static void train_sharded(int shards, float *losses, int cap, float **params, int64_t *n) {
  attn_clf m;
  attn_adam opt;
  new_model(&m, &opt);
  attn_train_opts o;
  attn_train_opts_default(&o);
  o.epochs = 3;
  o.batch = 7;
  o.lr = 1e-2;
  o.token_dropout = 0.2f;
  o.progress = 2;
  FILE *devnull = fopen("/dev/null", "w");
  o.log = devnull;
  attn_dist *d = NULL;
  CHECK_OK(attn_dist_open(&d, shards));
  o.dist = shards > 1 ? d : NULL;
  attn_tok_set tr = {N_TRAIN, rowp, lens_, labels_};
  attn_tok_set va = {N_VAL, rowp + N_TRAIN, lens_ + N_TRAIN, labels_ + N_TRAIN};
  attn_train_state s;
  attn_train_state_init(&s);
  CHECK_OK(attn_train_run(&m, &opt, &o, &tr, &va, &s, NULL, losses, cap));
  CHECK(s.shards == shards);
  *n = m.p.numel;
  *params = malloc((size_t)m.p.numel * sizeof(float));
  if (*params) memcpy(*params, m.p.data, (size_t)m.p.numel * sizeof(float));
  attn_train_state_free(&s);
  attn_dist_close(d);
  if (devnull) fclose(devnull);
  attn_adam_free(&opt);
  attn_clf_free(&m);
}

static void test_train_shards_in_one_process(void) {
  make_data();
  enum { STEPS = 21 };
  float l1[STEPS], l2[STEPS], l2b[STEPS], l3[STEPS];
  float *p1 = NULL, *p2 = NULL, *p2b = NULL, *p3 = NULL;
  int64_t n1 = 0, n2 = 0, n2b = 0, n3 = 0;
  train_sharded(1, l1, STEPS, &p1, &n1);
  train_sharded(2, l2, STEPS, &p2, &n2);
  train_sharded(2, l2b, STEPS, &p2b, &n2b);
  train_sharded(3, l3, STEPS, &p3, &n3);
  CHECK(p1 && p2 && p2b && p3 && n1 == n2 && n2 == n2b && n2 == n3);
  if (!p1 || !p2 || !p2b || !p3) goto out;
  CHECK(!memcmp(l2, l2b, sizeof l2) && !memcmp(p2, p2b, (size_t)n2 * sizeof(float)));
  // the first step's loss: the same rows, the same masks, a sum in another order
  CHECK(fabsf(l1[0] - l2[0]) <= 1e-6f * fabsf(l1[0]) && fabsf(l1[0] - l3[0]) <= 1e-6f * fabsf(l1[0]));
  double worst = 0, dp = 0;
  int64_t off = 0;
  for (int k = 0; k < STEPS; k++) {
    double e2 = fabs((double)l1[k] - l2[k]) / fabs((double)l1[k]);
    double e3 = fabs((double)l1[k] - l3[k]) / fabs((double)l1[k]);
    worst = fmax(worst, fmax(e2, e3));
  }
  for (int64_t i = 0; i < n1; i++) {
    double e = fabs((double)p1[i] - p2[i]);
    dp = fmax(dp, e);
    off += e > 1e-5;
  }
  printf("  1 vs 2 and 3 shards: losses within %.2g (relative) over %d steps; parameters: %lld of "
         "%lld differ by > 1e-5 (at most %.2g)\n", worst, STEPS, (long long)off, (long long)n1, dp);
  CHECK(worst < 1e-5);  // docs/DISTRIBUTED.md: float rounding of the order of a sum
  /* Adam turns a gradient that is 0 but for rounding (the key bias: softmax
   * ignores it) into lr-sized steps of either sign: a few parameters may
   * differ by ~lr; the rest agree to float rounding. */
  CHECK(off * 50 < n1);
out:
  free(p1);
  free(p2);
  free(p2b);
  free(p3);
}

static void test_refusals(void) {
  attn_clf m;
  attn_adam opt;
  new_model(&m, &opt);
  make_data();
  attn_train_opts o;
  attn_train_opts_default(&o);
  o.batch = 2;
  o.progress = 2;
  attn_dist *d = NULL;
  CHECK_OK(attn_dist_open(&d, 3));
  o.dist = d;
  attn_tok_set tr = {N_TRAIN, rowp, lens_, labels_};
  attn_train_state s;
  attn_train_state_init(&s);
  CHECK_ERR(attn_train_run(&m, &opt, &o, &tr, NULL, &s, NULL, NULL, 0), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "--batch 2 over 3 shards"));
  o.batch = 8;
  o.qat = 1;
  CHECK_ERR(attn_train_run(&m, &opt, &o, &tr, NULL, &s, NULL, NULL, 0), ATTN_EUNSUPPORTED);
  attn_train_state_free(&s);
  attn_dist_close(d);
  attn_adam_free(&opt);
  attn_clf_free(&m);
}

/* ---- the tool under mpirun -------------------------------------------------- */
static char DIR_[64] = "/tmp/attn_test_dist.XXXXXX";

static void write_corpus(void) {
  static const char *const words[2][8] = {
      {"meeting", "build", "patch", "review", "kernel", "release", "notes", "lunch"},
      {"cheap", "pills", "winner", "click", "offer", "money", "free", "prize"}};
  char path[256];
  snprintf(path, sizeof path, "%s/corpus", DIR_);
  mkdir(path, 0700);
  for (int g = 0; g < 2; g++) {
    snprintf(path, sizeof path, "%s/corpus/%s", DIR_, g ? "spam" : "ham");
    mkdir(path, 0700);
    for (int i = 0; i < 30; i++) {
      snprintf(path, sizeof path, "%s/corpus/%s/%05d.eml", DIR_, g ? "spam" : "ham", i);
      FILE *f = fopen(path, "w");
      if (!f) continue;
      const char *const *w = words[g];
      fprintf(f, "From: %s@example.org\nSubject: %s %s %d\n\n", g ? "deals" : "alice", w[i % 8],
              w[(i + 3) % 8], i);
      for (int k = 0; k < 10; k++) fprintf(f, "%s the %s ", w[(i * 7 + k) % 8], k % 3 ? "and" : "of");
      fprintf(f, "\n");
      fclose(f);
    }
  }
}

/* sh -c CMD with output to DIR_/LOG; the exit status; *log its text. */
static int sh(const char *cmd, const char *log, char **text) {
  char full[3072], path[256];
  snprintf(path, sizeof path, "%s/%s", DIR_, log);
  snprintf(full, sizeof full, "%s > %s 2>&1", cmd, path);
  int rc = system(full);
  if (text) *text = read_whole_file(path, NULL);
  return rc;
}

/* The parameters (every tensor but the metadata) of two checkpoints are the same bytes. */
static int same_tensors(const char *a, const char *b) {
  attn_st *x = NULL, *y = NULL;
  int same = !attn_st_load(a, &x) && !attn_st_load(b, &y) && attn_st_count(x) == attn_st_count(y);
  for (int i = 0; same && i < attn_st_count(x); i++) {
    const attn_tensor *tx = attn_st_get(x, attn_st_name(x, i));
    const attn_tensor *ty = attn_st_get(y, attn_st_name(x, i));
    size_t nb = (size_t)attn_tensor_numel(tx) * attn_dtype_size(tx->dtype);
    same = ty && ty->dtype == tx->dtype && attn_tensor_numel(ty) == attn_tensor_numel(tx) &&
           !memcmp(tx->data, ty->data, nb);
  }
  attn_st_free(x);
  attn_st_free(y);
  return same;
}

/* The "Epoch ..." lines up to their accuracy (not the times), concatenated. */
static void epoch_figures(const char *log, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (const char *p = log ? strstr(log, "Epoch ") : NULL; p; p = strstr(p + 1, "Epoch ")) {
    const char *e = strchr(p, '%');
    if (!e || n + (size_t)(e - p) + 2 >= cap) break;
    memcpy(out + n, p, (size_t)(e - p + 1));
    n += (size_t)(e - p + 1);
    out[n++] = '\n';
    out[n] = 0;
  }
}

/* mpirun with what a test on a shared, root-run machine needs; a minute at most. */
#define MPIRUN "timeout 120 mpirun --allow-run-as-root --oversubscribe -x ATTN_DIST_BUCKET_FLOATS "

static void test_mpirun_equals_shards(void) {
  const char *bin = getenv("ATTN_BIN");
#ifndef ATTN_HAVE_GMIME
  bin = NULL;
#endif
  if (!bin) {
    SKIP(getenv("ATTN_BIN") ? "built without GMime: attn train cannot read mail" : "ATTN_BIN not set");
    return;
  }
  if (!attn_dist_mpi_built()) {
    SKIP("built without MPI (no pkg-config ompi-c: apt-get install libopenmpi-dev openmpi-bin)");
    return;
  }
  if (system("command -v mpirun > /dev/null 2>&1") != 0) {
    SKIP("no mpirun (apt-get install openmpi-bin)");
    return;
  }
  if (getenv("RUNNER") && *getenv("RUNNER")) {
    SKIP("under a RUNNER (emulation): mpirun would not start the emulated tool");
    return;
  }
  write_corpus();
  setenv("ATTN_DIST_BUCKET_FLOATS", "700", 1);  // many buckets, most sent during the backward
  // leak checks off in the MPI runs: Open MPI keeps some memory to the end
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  char model[512], cmd[2048], a[256], b[256];
  snprintf(model, sizeof model,
           "train --data %s/corpus --split %s/split.tsv --dim 16 --heads 2 --ff 32 --layers 2 "
           "--max-len 40 --vocab 280 --batch 7 --lr 0.01 --epochs 2 --dropout 0.1 "
           "--token-dropout 0.2 --threads 1 --progress plain --members 1 --precision f32",
           DIR_, DIR_);
  char *t1 = NULL, *t2 = NULL;
  for (int P = 2; P <= 3; P++) {
    snprintf(cmd, sizeof cmd, "%s %s --shards %d --out %s/s%d", bin, model, P, DIR_, P);
    CHECK(sh(cmd, "s.log", &t1) == 0);
    snprintf(cmd, sizeof cmd, MPIRUN "-np %d %s %s --out %s/m%d", P, bin, model, DIR_, P);
    int rc = sh(cmd, "m.log", &t2);
    CHECK(rc == 0);
    if (rc) printf("  %s\n%s\n", cmd, t2 ? t2 : "");
    snprintf(a, sizeof a, "%s/s%d/last.safetensors", DIR_, P);
    snprintf(b, sizeof b, "%s/m%d/last.safetensors", DIR_, P);
    CHECK(same_tensors(a, b));
    // rank 0 alone reports: one test report, the same epoch lines but for the times
    CHECK(t1 && t2 && strstr(t2, "Epoch 2/2 | Train Loss: "));
    char said[96];
    snprintf(said, sizeof said, "data parallel: each batch as %d shards (mpi, %d processes", P, P);
    CHECK(t2 && strstr(t2, said));
    snprintf(said, sizeof said, "data parallel: each batch as %d shards (local, 1 process;", P);
    CHECK(t1 && strstr(t1, said));
    const char *r = t2 ? strstr(t2, "transformer (attn), test:") : NULL;
    CHECK(r && !strstr(r + 1, "transformer (attn), test:"));
    char e1[1024], e2[1024];
    epoch_figures(t1, e1, sizeof e1);
    epoch_figures(t2, e2, sizeof e2);
    CHECK(strstr(e1, "Epoch 2/2") && !strcmp(e1, e2));
    free(t1);
    free(t2);
    t1 = t2 = NULL;
  }
  // stopped with 2 shards, resumed on 3 processes: said, and it finishes
  snprintf(cmd, sizeof cmd, "%s %s --shards 2 --stop-after 5 --out %s/r", bin, model, DIR_);
  CHECK(sh(cmd, "r1.log", NULL) == 0);
  snprintf(cmd, sizeof cmd, MPIRUN "-np 3 %s train --data %s/corpus --split %s/split.tsv --resume --out %s/r",
           bin, DIR_, DIR_, DIR_);
  CHECK(sh(cmd, "r2.log", &t2) == 0);
  CHECK(t2 && strstr(t2, "trained with 2 shards (processes) per batch, this run has 3"));
  CHECK(t2 && strstr(t2, "Epoch 2/2 | "));
  free(t2);
  // a batch smaller than the processes: refused on every rank, the job ends (no hang)
  snprintf(cmd, sizeof cmd, MPIRUN "-np 3 %s %s --batch 2 --out %s/x", bin, model, DIR_);
  CHECK(sh(cmd, "x.log", &t2) != 0);
  CHECK(t2 && strstr(t2, "--batch 2 over 3 shards/processes"));
  CHECK(t2 && strstr(t2, "failed (above): ending every rank"));
  snprintf(a, sizeof a, "%s/x/last.safetensors", DIR_);
  CHECK(access(a, F_OK) != 0);  // no checkpoint
  free(t2);
  // a rank that cannot read the data (rank 1 of an MPMD launch): every rank ends, said
  snprintf(cmd, sizeof cmd, MPIRUN "-np 1 %s %s --out %s/z : -np 1 %s %s --data %s/none --out %s/z",
           bin, model, DIR_, bin, model, DIR_, DIR_);
  CHECK(sh(cmd, "z.log", &t2) != 0);
  CHECK(t2 && strstr(t2, "no corpus at") && strstr(t2, "rank 1 of 2 failed (above): ending every rank"));
  snprintf(a, sizeof a, "%s/z/last.safetensors", DIR_);
  CHECK(access(a, F_OK) != 0);
  free(t2);
  // --shards that is not the process count
  snprintf(cmd, sizeof cmd, MPIRUN "-np 2 %s %s --shards 3 --out %s/y", bin, model, DIR_);
  CHECK(sh(cmd, "y.log", &t2) != 0);
  CHECK(t2 && strstr(t2, "--shards 3 under mpirun -np 2"));
  free(t2);
}

int main(void) {
  RUN(test_shard_rows);
  RUN(test_local_sum_in_shard_order);
  RUN(test_cross_entropy_norm);
  RUN(test_shard_dropout_masks);
  RUN(test_train_shards_in_one_process);
  RUN(test_refusals);
  if (!mkdtemp(DIR_)) return 1;
  RUN(test_mpirun_equals_shards);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", DIR_);
  if (!getenv("ATTN_KEEP") && system(cmd) != 0) printf("  could not remove %s\n", DIR_);
  HARNESS_END();
}
