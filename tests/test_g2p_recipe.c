/* G2P training recipes (issue 35): the stress-free inventory (--no-stress)
 * and its round trip to the stressed one, the targets a stress-free or
 * right-to-left model learns, a both-directions model's examples and
 * batches (--both-directions), the model file's flags (and an older file
 * without them), batches by a token budget (--batch-tokens), the inverse
 * square root schedule (--schedule inv-sqrt), a training run with both at
 * 1 and 2 threads, and the command line of a stress-free model. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/seq2seq/g2p_set.h"
#include "apps/seq2seq/g2p_train.h"
#include "attn/kernels.h"
#include "g2p_tiny.h"
#include "harness.h"
#include "tool_run.h"


static char dir[64], bin[1024];

static int tool(const char *args, char *out, size_t nout, char *err, size_t nerr) {
  return tool_run("", bin, dir, args, out, nout, err, nerr);
}

/* every stressed id: strip then restore = attn_g2p_phone_unstressed; names
 * lose their digit; consonants and specials are the same ids in both */
static void test_stress_free_inventory(void) {
  const int n1 = attn_g2p_phone_count(), n0 = attn_g2p_phone_count_for(0);
  CHECK(attn_g2p_phone_count_for(1) == n1 && n0 == ATTN_G2P_SPECIAL + 24 + 15);
  int seen[64] = {0};
  for (int id = 0; id < n1; id++) {
    const int s = attn_g2p_phone_strip(id);
    CHECK(s >= 0 && s < n0);
    if (s >= 0 && s < 64) seen[s] = 1;
    CHECK(attn_g2p_phone_restore(s) == attn_g2p_phone_unstressed(id));
    const char *a = attn_g2p_phone_name(id), *b = attn_g2p_phone_name_for(s, 0);
    const size_t la = strlen(a);
    if (id < ATTN_G2P_SPECIAL + 24) {
      CHECK(s == id && !strcmp(a, b));
    } else {
      CHECK(la == strlen(b) + 1 && !strncmp(a, b, strlen(b)) && a[la - 1] >= '0' &&
            a[la - 1] <= '2');
      CHECK(attn_g2p_is_vowel(b, (int)strlen(b)));
    }
  }
  for (int s = 0; s < n0; s++)
    CHECK(seen[s]); /* every stress-free id is reached */
  CHECK(!strcmp(attn_g2p_phone_name_for(n0, 0), "?") &&
        !strcmp(attn_g2p_phone_name_for(-1, 0), "?"));
}

/* the dictionary txt, every word on the training side, as two equal sets */
static void two_sets(const char *txt, attn_g2p_dict *d, attn_g2p_set *s, attn_g2p_set *ref) {
  CHECK_OK(attn_g2p_dict_parse(txt, strlen(txt), d));
  attn_g2p_graphemes g;
  attn_g2p_graphemes_make(&g, "AB", 2);
  for (int w = 0; w < d->nwords; w++)
    d->split[w] = ATTN_G2P_TRAIN;
  CHECK_OK(attn_g2p_set_make(d, ATTN_G2P_TRAIN, &g, 40, 40, s));
  CHECK_OK(attn_g2p_set_make(d, ATTN_G2P_TRAIN, &g, 40, 40, ref));
}

/* the targets: stripped (a word's pronunciations then equal merged), reversed */
static void test_set_targets(void) {
  attn_g2p_dict d;
  attn_g2p_set s, ref;
  int merged = -1;
  two_sets("AB  AH0 B\nAB(1)  AH1 B\nAB(2)  EY1 B IY0\nBA  B AA1\n", &d, &s, &ref);
  CHECK(s.n == 4);
  attn_g2p_set_targets(&s, 1, 0, &merged); /* the stressed, left-to-right: unchanged */
  CHECK(merged == 0 && s.n == 4);
  for (int i = 0; i < s.n; i++)
    CHECK(s.tgt_len[i] == ref.tgt_len[i] &&
          !memcmp(s.tgt[i], ref.tgt[i], (size_t)s.tgt_len[i] * 4));
  attn_g2p_set_targets(&s, 0, 1, &merged);
  CHECK(merged == 1 && s.n == 3); /* AH0 B and AH1 B: one */
  const int keep[3] = {0, 2, 3};  /* ref's examples kept */
  for (int i = 0; i < 3 && s.n == 3; i++) {
    const int j = keep[i], L = ref.tgt_len[j];
    CHECK(s.word[i] == ref.word[j] && s.tgt_len[i] == L && s.src_len[i] == ref.src_len[j]);
    for (int t = 0; t < L; t++)
      CHECK(s.tgt[i][t] == attn_g2p_phone_strip(ref.tgt[j][L - 1 - t]));
  }
  attn_g2p_set_free(&s);
  attn_g2p_set_free(&ref);
  attn_g2p_dict_free(&d);
}

/* --both-directions: every example, then every example reversed and marked
 * right to left; a batch of both starts the marked rows from UNK, the others
 * from BOS, and its outputs are the (reversed) phonemes then EOS */
static void test_set_both(void) {
  attn_g2p_dict d;
  attn_g2p_set s, ref;
  two_sets("AB  AH0 B\nAB(1)  EY1 B IY0\nBA  B AA1\nA  EY1\n", &d, &s, &ref);
  attn_g2p_set_targets(&s, 0, 0, NULL);
  attn_g2p_set_targets(&ref, 0, 0, NULL);
  const int n = ref.n;
  CHECK(n == 4 && s.r2l == NULL);
  CHECK_OK(attn_g2p_set_both(&s));
  CHECK(s.n == 2 * n && s.r2l != NULL);
  CHECK_ERR(attn_g2p_set_both(&s), ATTN_EINVAL); /* once only, s unchanged */
  CHECK(s.n == 2 * n && strstr(attn_last_error(), "already") != NULL);
  for (int j = 0; j < s.n && s.r2l; j++) {
    const int i = j % n, r = j >= n, L = ref.tgt_len[i];
    CHECK(s.r2l[j] == r && s.word[j] == ref.word[i] && s.src_len[j] == ref.src_len[i] &&
          s.tgt_len[j] == L && !memcmp(s.src[j], ref.src[i], (size_t)ref.src_len[i] * 4));
    for (int t = 0; t < L; t++)
      CHECK(s.tgt[j][t] == ref.tgt[i][r ? L - 1 - t : t]);
  }
  /* a batch of AB's EY B IY left to right and right to left, and A's EY right
   * to left (the dictionary's words in byte order: A, AB, AB(1), BA) */
  const int idx[3] = {2, n + 2, n};
  attn_g2p_batch bt = {0};
  CHECK_OK(attn_g2p_batch_gather(&s, idx, 3, &bt));
  CHECK(bt.B == 3 && bt.Lt == 4 && bt.tokens == 4 + 4 + 2);
  const int32_t ey = attn_g2p_phone_strip(attn_g2p_phone_id("EY1", 3)),
                b = attn_g2p_phone_id("B", 1),
                iy = attn_g2p_phone_strip(attn_g2p_phone_id("IY0", 3));
  const int32_t tin[3][4] = {{ATTN_G2P_BOS, ey, b, iy},
                             {ATTN_G2P_BOS_R2L, iy, b, ey},
                             {ATTN_G2P_BOS_R2L, ey, ATTN_G2P_PAD, ATTN_G2P_PAD}};
  const int32_t tout[3][4] = {
      {ey, b, iy, ATTN_G2P_EOS}, {iy, b, ey, ATTN_G2P_EOS}, {ey, ATTN_G2P_EOS, -1, -1}};
  CHECK(!memcmp(bt.tin, tin, sizeof tin) && !memcmp(bt.tout, tout, sizeof tout));
  CHECK(ATTN_G2P_BOS_R2L != ATTN_G2P_BOS && ATTN_G2P_BOS_R2L != ATTN_G2P_EOS &&
        ATTN_G2P_BOS_R2L != ATTN_G2P_PAD);
  attn_g2p_batch_free(&bt);
  attn_g2p_set_free(&s);
  attn_g2p_set_free(&ref);
  attn_g2p_dict_free(&d);
}

static void tiny_model(attn_g2p_model *m, int stress, int reverse) {
  attn_g2p_config c;
  attn_g2p_config_default(&c);
  c.d_model = 8;
  c.heads = 2;
  c.ff = 12;
  c.enc_layers = c.dec_layers = 1;
  c.stress = stress;
  c.reverse = reverse;
  attn_g2p_graphemes g;
  attn_g2p_graphemes_make(&g, "ABCDE'", 6);
  CHECK_OK(attn_g2p_create(m, &c, &g));
  CHECK_OK(attn_g2p_init(m, 3));
}

/* the flags survive a file; a file written before them is a stressed,
 * left-to-right model; bad flags are refused */
static void test_model_file_flags(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/flags.safetensors", dir);
  attn_g2p_model m, l;
  tiny_model(&m, 0, 1);
  CHECK(m.vocab_tgt == attn_g2p_phone_count_for(0));
  CHECK_OK(attn_g2p_save(path, &m, NULL, NULL));
  CHECK_OK(attn_g2p_load(path, &l, NULL));
  CHECK(l.c.stress == 0 && l.c.reverse == 1 && l.c.both == 0 && l.vocab_tgt == m.vocab_tgt);
  CHECK(l.p.numel == m.p.numel && !memcmp(l.p.data, m.p.data, (size_t)m.p.numel * 4));
  CHECK(attn_g2p_start(&l.c, 1) == ATTN_G2P_BOS && attn_g2p_scores_r2l(&l.c));
  attn_g2p_free(&l);
  attn_g2p_free(&m);
  /* a both-directions model: its flag, its starts; not with --reverse */
  attn_g2p_config cb;
  attn_g2p_config_default(&cb);
  cb.d_model = 8, cb.heads = 2, cb.ff = 12, cb.enc_layers = cb.dec_layers = 1, cb.both = 1;
  attn_g2p_graphemes gb;
  attn_g2p_graphemes_make(&gb, "ABCDE'", 6);
  CHECK_OK(attn_g2p_create(&m, &cb, &gb));
  CHECK_OK(attn_g2p_init(&m, 4));
  CHECK_OK(attn_g2p_save(path, &m, NULL, NULL));
  CHECK_OK(attn_g2p_load(path, &l, NULL));
  CHECK(l.c.both == 1 && l.c.reverse == 0 && l.c.stress == 1);
  CHECK(attn_g2p_start(&l.c, 0) == ATTN_G2P_BOS && attn_g2p_start(&l.c, 1) == ATTN_G2P_BOS_R2L &&
        attn_g2p_scores_r2l(&l.c));
  attn_g2p_free(&l);
  attn_g2p_free(&m);
  cb.reverse = 1;
  CHECK_ERR(attn_g2p_create(&m, &cb, &gb), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "--both-directions") != NULL);
  /* the metadata of a model file before issue 35 */
  tiny_model(&m, 1, 0);
  attn_st *extra = NULL;
  CHECK_OK(attn_st_new(&extra));
  const char *kv[][2] = {{"g2p.d_model", "8"},       {"g2p.heads", "2"},      {"g2p.ff", "12"},
                         {"g2p.enc_layers", "1"},    {"g2p.dec_layers", "1"}, {"g2p.max_src", "40"},
                         {"g2p.max_tgt", "40"},      {"g2p.dropout", "0.1"},  {"g2p.tied", "1"},
                         {"g2p.graphemes", "'ABCDE"}};
  for (int i = 0; i < 10; i++)
    CHECK_OK(attn_st_set_meta(extra, kv[i][0], kv[i][1]));
  snprintf(path, sizeof path, "%s/old.safetensors", dir);
  CHECK_OK(attn_checkpoint_save(path, &m.p, NULL, extra));
  attn_st_free(extra);
  CHECK_OK(attn_g2p_load(path, &l, NULL));
  CHECK(l.c.stress == 1 && l.c.reverse == 0 && l.c.both == 0 &&
        l.vocab_tgt == attn_g2p_phone_count());
  CHECK(attn_g2p_start(&l.c, 0) == ATTN_G2P_BOS && !attn_g2p_scores_r2l(&l.c));
  CHECK(l.p.numel == m.p.numel && !memcmp(l.p.data, m.p.data, (size_t)m.p.numel * 4));
  attn_g2p_free(&l);
  /* a stressed file read as stress-free would not fit: its shapes say so */
  attn_g2p_config c = m.c;
  c.stress = 2;
  CHECK_ERR(attn_g2p_create(&l, &c, &m.g), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "stress") != NULL);
  attn_g2p_free(&m);
}


static int64_t cost_of(const attn_g2p_set *s, int i) {
  return s->src_len[i] > s->tgt_len[i] + 1 ? s->src_len[i] : s->tgt_len[i] + 1;
}

/* padded tokens of a plan: per batch, count x its longest cost */
static int64_t padded(const attn_batch_plan *p, const attn_g2p_set *s) {
  int64_t sum = 0;
  for (int b = 0; b < p->nb; b++) {
    int64_t mx = 0;
    for (int i = p->start[b]; i < p->start[b + 1]; i++)
      mx = cost_of(s, p->order[i]) > mx ? cost_of(s, p->order[i]) : mx;
    sum += mx * (p->start[b + 1] - p->start[b]);
  }
  return sum;
}

/* every example once; every batch within the budget (or alone); the same
 * plan for the same (seed, epoch), another order for another epoch with the
 * same number of batches; less padding than batches of as many words */
static void test_batch_tokens_plan(void) {
  tiny_data t;
  tiny_load(&t);
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  o.batch_tokens = 40;
  o.seed = 7;
  attn_batch_plan p, q, r;
  CHECK_OK(attn_g2p_plan(&t.tr, &o, 1, 0, &p));
  CHECK_OK(attn_g2p_plan(&t.tr, &o, 1, 0, &q));
  CHECK_OK(attn_g2p_plan(&t.tr, &o, 1, 1, &r));
  CHECK(p.n == t.tr.n && p.nb > 1 && p.start[p.nb] == t.tr.n);
  int *seen = calloc((size_t)t.tr.n, sizeof *seen);
  for (int i = 0; seen && i < p.n; i++)
    seen[p.order[i]]++;
  for (int i = 0; seen && i < p.n; i++)
    CHECK(seen[i] == 1);
  free(seen);
  for (int b = 0; b < p.nb; b++) {
    const int B = p.start[b + 1] - p.start[b];
    int64_t mx = 0;
    for (int i = p.start[b]; i < p.start[b + 1]; i++)
      mx = cost_of(&t.tr, p.order[i]) > mx ? cost_of(&t.tr, p.order[i]) : mx;
    CHECK(B >= 1 && (B == 1 || B * mx <= o.batch_tokens));
  }
  CHECK(q.nb == p.nb && !memcmp(q.order, p.order, (size_t)p.n * sizeof(int)) &&
        !memcmp(q.start, p.start, (size_t)(p.nb + 1) * sizeof(int)));
  CHECK(r.nb == p.nb && memcmp(r.order, p.order, (size_t)p.n * sizeof(int)));
  attn_g2p_train_opts w = o;
  w.batch_tokens = 0;
  w.batch = (t.tr.n + p.nb - 1) / p.nb; /* as many batches of words */
  attn_batch_plan pw;
  CHECK_OK(attn_g2p_plan(&t.tr, &w, 1, 0, &pw));
  CHECK(padded(&p, &t.tr) < padded(&pw, &t.tr));
  /* a budget below two of the shortest: every example alone */
  o.batch_tokens = 3;
  attn_batch_plan one;
  CHECK_OK(attn_g2p_plan(&t.tr, &o, 1, 0, &one));
  CHECK(one.nb == t.tr.n);
  attn_batch_plan_free(&one);
  CHECK_ERR(attn_batch_plan_tokens(t.tr.src_len, t.tr.n, 0, 1, 1, 0, &one), ATTN_EINVAL);
  attn_batch_plan_free(&p);
  attn_batch_plan_free(&q);
  attn_batch_plan_free(&r);
  attn_batch_plan_free(&pw);
  tiny_free(&t);
}

/* base * (step + 1) / W during the warm-up, then base * sqrt(W / (step + 1)) */
static void test_schedule_inv_sqrt(void) {
  const double base = 2e-3;
  const int64_t W = 16;
  attn_schedule s = {ATTN_SCHED_WARMUP_INV_SQRT, base, 0, W, 0};
  CHECK_OK(attn_schedule_check(&s));
  CHECK(attn_schedule_lr(&s, 0) == base / W && attn_schedule_lr(&s, W - 1) == base);
  CHECK(attn_schedule_lr(&s, 4 * W - 1) == base / 2 &&
        attn_schedule_lr(&s, 16 * W - 1) == base / 4);
  for (int64_t k = W; k < 40 * W; k++)
    CHECK(attn_schedule_lr(&s, k) < attn_schedule_lr(&s, k - 1));
  attn_schedule bad = {ATTN_SCHED_WARMUP_INV_SQRT, base, 0, 0, 0};
  CHECK_ERR(attn_schedule_check(&bad), ATTN_EINVAL);
  /* the run's: 4 % of the steps warm up unless --warmup says */
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  o.schedule = ATTN_SCHED_WARMUP_INV_SQRT;
  o.epochs = 10;
  attn_schedule r;
  CHECK_OK(attn_g2p_schedule(&o, 100, &r));
  CHECK(r.kind == ATTN_SCHED_WARMUP_INV_SQRT && r.warmup_steps == 40 && r.base_lr == o.lr);
  o.warmup = 7;
  CHECK_OK(attn_g2p_schedule(&o, 100, &r));
  CHECK(r.warmup_steps == 7);
}

#define MAXSTEPS 128

/* a model of d_model 16, 2 heads, ff 24, `layers` + `layers` layers, dropout 0.1 */
static void small_config(attn_g2p_config *c, int layers) {
  attn_g2p_config_default(c);
  c->d_model = 16;
  c->heads = 2;
  c->ff = 24;
  c->enc_layers = c->dec_layers = layers;
  c->dropout = 0.1f;
}

/* a run of 2 epochs with token batches and the inverse square root */
static void run(const tiny_data *t, float *losses, attn_g2p_model *m) {
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  o.epochs = 2;
  o.batch_tokens = 60;
  o.schedule = ATTN_SCHED_WARMUP_INV_SQRT;
  o.warmup = 4;
  o.lr = 3e-3;
  o.progress = 2;
  o.log = fopen("/dev/null", "w");
  attn_g2p_config c;
  small_config(&c, 1); /* dropout: the masks, too, the same at 1 and 2 threads */
  CHECK_OK(attn_g2p_create(m, &c, &t->g));
  CHECK_OK(attn_g2p_init(m, 5));
  attn_adam opt;
  attn_g2p_train_state s = {0};
  CHECK_OK(attn_g2p_adam_init(&opt, m, &o));
  CHECK_OK(attn_g2p_train_run(m, &opt, &s, &t->tr, &t->va, &o, losses, MAXSTEPS));
  attn_adam_free(&opt);
  if (o.log) fclose(o.log);
}

static void test_token_batches_same_bits_at_1_and_2_threads(void) {
  tiny_data t;
  tiny_load(&t);
  float l1[MAXSTEPS], l2[MAXSTEPS];
  for (int i = 0; i < MAXSTEPS; i++)
    l1[i] = l2[i] = -1;
  attn_g2p_model m1, m2;
  const int threads = attn_get_num_threads();
  attn_set_num_threads(1);
  run(&t, l1, &m1);
  attn_set_num_threads(2);
  run(&t, l2, &m2);
  attn_set_num_threads(threads);
  int steps = 0;
  while (steps < MAXSTEPS && l1[steps] != -1)
    steps++;
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  o.batch_tokens = 60;
  attn_batch_plan p;
  CHECK_OK(attn_g2p_plan(&t.tr, &o, 1, 0, &p));
  CHECK(steps == 2 * p.nb && steps < MAXSTEPS);
  attn_batch_plan_free(&p);
  CHECK(!memcmp(l1, l2, sizeof l1));
  CHECK(m1.p.numel == m2.p.numel && !memcmp(m1.p.data, m2.p.data, (size_t)m1.p.numel * 4));
  attn_g2p_free(&m1);
  attn_g2p_free(&m2);
  tiny_free(&t);
}

/* The gradient of one batch (dropout on) in shards: the same bits at 1 and
 * 2 threads; the unsharded gradient up to the order of the sums (the loss
 * normalised by the whole batch's tokens, the same dropout masks); more
 * shards than words: one per word; more than 64 refused. */
static void test_shards_gradient(void) {
  tiny_data t;
  tiny_load(&t);
  attn_g2p_config c;
  small_config(&c, 2);
  attn_g2p_model m;
  CHECK_OK(attn_g2p_create(&m, &c, &t.g));
  CHECK_OK(attn_g2p_init(&m, 3));
  const int B = t.tr.n < 11 ? t.tr.n : 11;
  int idx[11];
  for (int i = 0; i < B; i++)
    idx[i] = B - 1 - i; /* lengths mixed */
  attn_g2p_batch bt = {0};
  CHECK_OK(attn_g2p_batch_gather(&t.tr, idx, B, &bt));
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  o.seed = 9;
  const int64_t n = m.p.numel;
  float *g[5];
  float loss[5];
  const int shards[5] = {1, 3, 3, 64, 2}, threads[5] = {1, 1, 2, 2, 2};
  const int nt0 = attn_get_num_threads();
  for (int r = 0; r < 5; r++) {
    attn_g2p_saved sv = {0};
    g[r] = malloc((size_t)n * sizeof(float));
    attn_set_num_threads(threads[r]);
    o.shards = shards[r];
    attn_params_zero_grad(&m.p);
    CHECK_OK(attn_g2p_batch_grad(&m, &sv, &bt, &o, 5, &loss[r]));
    if (r == 4) /* accumulated: a second batch's gradient adds to the first's */
      CHECK_OK(attn_g2p_batch_grad(&m, &sv, &bt, &o, 5, &loss[r]));
    memcpy(g[r], m.p.grad, (size_t)n * sizeof(float));
    attn_g2p_saved_free(&sv);
  }
  attn_set_num_threads(nt0);
  CHECK(loss[1] == loss[2] && !memcmp(g[1], g[2], (size_t)n * sizeof(float)));
  double gmax = 0, d3 = 0, d64 = 0, d2 = 0;
  for (int64_t i = 0; i < n; i++) {
    gmax = fmax(gmax, fabs(g[0][i]));
    d3 = fmax(d3, fabs(g[1][i] - g[0][i]));
    d64 = fmax(d64, fabs(g[3][i] - g[0][i]));
    d2 = fmax(d2, fabs(g[4][i] - 2 * g[0][i]));
  }
  CHECK(gmax > 1e-3);
  CHECK(d3 <= 1e-5 * gmax && d64 <= 1e-5 * gmax && d2 <= 2e-5 * gmax);
  CHECK(fabsf(loss[1] - loss[0]) <= 1e-5f * loss[0] && fabsf(loss[3] - loss[0]) <= 1e-5f * loss[0]);
  CHECK(memcmp(g[1], g[0], (size_t)n * sizeof(float))); /* the sums' order does differ */
  attn_g2p_saved sv = {0};
  o.shards = 65;
  CHECK_ERR(attn_g2p_batch_grad(&m, &sv, &bt, &o, 5, &loss[0]), ATTN_EINVAL);
  attn_g2p_saved_free(&sv);
  for (int r = 0; r < 5; r++)
    free(g[r]);
  attn_g2p_batch_free(&bt);
  attn_g2p_free(&m);
  tiny_free(&t);
}

/* attn g2p train --no-stress: the file says so; eval scores it without
 * stress (the with-stress figures "--"); predict writes no stress digit;
 * train's options are refused elsewhere */
static void test_cli_no_stress(void) {
  char args[1024], out[8192], err[4096], model[128];
  snprintf(args, sizeof args,
           "g2p train --data tests/data/g2p --out %s/ns --dim 8 --heads 2 "
           "--ff 8 --layers 1 --batch-tokens 50 --schedule inv-sqrt --epochs 2 --no-stress "
           "--progress quiet --precision f32",
           dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  CHECK(strstr(out, "targets without stress, left to right") && strstr(out, "up to 50 tokens") &&
        strstr(out, "inverse square root"));
  snprintf(model, sizeof model, "%s/ns/best.safetensors", dir);
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(model, &st));
  CHECK(st && attn_st_meta(st, "g2p.stress") && !strcmp(attn_st_meta(st, "g2p.stress"), "0"));
  attn_st_free(st);
  snprintf(args, sizeof args, "g2p eval %s --data tests/data/g2p --split val --worst 3", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  CHECK(strstr(out, "stress-free model") && strstr(out, "WER    -- %  PER    -- %") &&
        strstr(out, "stress removed: WER"));
  snprintf(args, sizeof args, "g2p predict %s abase \"a'b.c\" --beam 3 --n-best 3", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && !strncmp(out, "abase\t1\t", 8));
  int lines = 0, digits = 0;
  for (const char *c = out; *c; c++)
    lines += *c == '\n';
  for (const char *line = out; *line;) { /* the phonemes: after the third tab */
    const char *tab = line;
    for (int k = 0; k < 3 && tab; k++)
      tab = strchr(tab, '\t') ? strchr(tab, '\t') + 1 : NULL;
    const char *end = strchr(line, '\n');
    for (const char *c = tab; c && c < end; c++)
      digits += *c >= '0' && *c <= '9';
    line = end ? end + 1 : line + strlen(line);
  }
  CHECK(lines == 6 && digits == 0);
  /* the options of train, elsewhere; a resumed run keeps what it was */
  snprintf(args, sizeof args, "g2p eval %s --data tests/data/g2p --no-stress", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "options of train"));
  snprintf(args, sizeof args,
           "g2p train --data tests/data/g2p --out %s/ns --dim 8 --heads 2 "
           "--ff 8 --layers 1 --epochs 3 --reverse --resume --progress quiet",
           dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 1 && strstr(err, "stress-free") &&
        strstr(err, "--resume"));
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/x --schedule linear", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "inv-sqrt"));
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/x --batch-tokens 0", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "--batch-tokens"));
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/x --shards 65", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "--shards"));
  snprintf(args, sizeof args,
           "g2p train --data tests/data/g2p --out %s/sh --dim 8 --heads 2 --ff 8 --layers 1 "
           "--epochs 1 --batch 4 --shards 3 --no-stress --progress quiet",
           dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "3 shards"));
}

int main(int argc, char **argv) {
  tool_path(argc > 0 ? argv[0] : NULL, bin, sizeof bin);
  snprintf(dir, sizeof dir, "/tmp/attn_g2p_recipe_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  RUN(test_stress_free_inventory);
  RUN(test_set_targets);
  RUN(test_set_both);
  RUN(test_model_file_flags);
  RUN(test_batch_tokens_plan);
  RUN(test_schedule_inv_sqrt);
  RUN(test_token_batches_same_bits_at_1_and_2_threads);
  RUN(test_shards_gradient);
  RUN(test_cli_no_stress);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
