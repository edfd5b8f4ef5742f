/* Grapheme-to-phoneme (src/apps/seq2seq/g2p_*): dictionary parsing and
 * grouping of alternates, the stable word-level split, vocabularies, WER/PER
 * on hand-made cases, a finite-difference gradient check of the whole model,
 * greedy decoding against the teacher-forced forward, bit-identical resume
 * and thread-count independence on the tiny corpus in tests/data/g2p, and
 * the CLI's answers to bad input. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/seq2seq/g2p_budget.h"
#include "apps/seq2seq/g2p_data.h"
#include "apps/seq2seq/g2p_decode.h"
#include "apps/seq2seq/g2p_metrics.h"
#include "apps/seq2seq/g2p_precision.h"
#include "apps/seq2seq/g2p_set.h"
#include "apps/seq2seq/g2p_train.h"
#include "attn/kernels.h"
#include "g2p_tiny.h"
#include "harness.h"
#include "tool_run.h"


static void test_dict_parse(void) {
  const char *txt = ";;; comment\n# another\nB  B IY1\nA  AH0\n\nA(1)  EY1\nB(2)  B IY0\r\nA'S  EY1 Z\nD\xef\xbf\xbdJ  D EY2\n";
  attn_g2p_dict d;
  CHECK_OK(attn_g2p_dict_parse(txt, strlen(txt), &d));
  CHECK(d.nwords == 3 && d.nprons == 5 && d.skipped == 1 && d.skipped_line == 9);
  if (d.nwords == 3) {
    CHECK(!strcmp(d.words[0], "A") && !strcmp(d.words[1], "A'S") && !strcmp(d.words[2], "B"));
    CHECK(d.pron_start[1] - d.pron_start[0] == 2 && !strcmp(d.prons[0], "AH0") &&
          !strcmp(d.prons[1], "EY1"));
    CHECK(d.pron_start[3] - d.pron_start[2] == 2 && !strcmp(d.prons[4], "B IY0"));
  }
  attn_g2p_dict_free(&d);
  CHECK_ERR(attn_g2p_dict_parse("A  XX1\n", 7, &d), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "line 1") != NULL);
  CHECK_ERR(attn_g2p_dict_parse("A  AH\n", 6, &d), ATTN_EINVAL);  // a vowel needs its stress
  CHECK_ERR(attn_g2p_dict_parse(";;; only\n", 9, &d), ATTN_EINVAL);
  CHECK_ERR(attn_g2p_dict_parse("A\n", 2, &d), ATTN_EINVAL);
  CHECK_ERR(attn_g2p_dict_load("tests/data/g2p/no-such-file", &d), ATTN_EIO);
}

static void test_split_stable(void) {
  // pinned: a change of the hash would move words between sides
  CHECK(attn_g2p_split_of("A") == ATTN_G2P_TRAIN);
  int sides[3] = {0, 0, 0};
  char w[16];
  for (int i = 0; i < 10000; i++) {
    snprintf(w, sizeof w, "W%d", i);
    sides[attn_g2p_split_of(w)]++;
  }
  CHECK(sides[0] > 8800 && sides[0] < 9200 && sides[1] > 400 && sides[1] < 600 && sides[2] > 400 &&
        sides[2] < 600);
  attn_g2p_dict d;
  CHECK_OK(attn_g2p_dict_load(TINY, &d));
  CHECK(d.nwords == 70 && d.nprons == 71);
  for (int i = 0; i < d.nwords; i++) CHECK(d.split[i] == attn_g2p_split_of(d.words[i]));
  const char *path = "build-g2p-test-split.tsv";  // no folder: tmpname.c's "./" case
  CHECK_OK(attn_g2p_split_write(&d, path));
  long len = 0;
  char *txt = read_whole_file(path, &len);
  CHECK(txt && !strncmp(txt, "A\ttrain\nA'S\t", 12));
  free(txt);
  remove(path);
  attn_g2p_dict_free(&d);
}

static void test_vocab(void) {
  CHECK(attn_g2p_phone_count() == 4 + 24 + 45);
  for (int i = 0; i < attn_g2p_phone_count(); i++) {
    const char *n = attn_g2p_phone_name(i);
    if (i >= ATTN_G2P_SPECIAL) CHECK(attn_g2p_phone_id(n, (int)strlen(n)) == i);
  }
  CHECK(attn_g2p_phone_id("AH", 2) < 0 && attn_g2p_phone_id("AH3", 3) < 0 &&
        attn_g2p_phone_id("K1", 2) < 0);
  int ah0 = attn_g2p_phone_id("AH0", 3), ah1 = attn_g2p_phone_id("AH1", 3);
  int k = attn_g2p_phone_id("K", 1);
  CHECK(attn_g2p_phone_unstressed(ah0) == ah1 && attn_g2p_phone_unstressed(k) == k);
  int32_t ids[8];
  int n = 0;
  CHECK_OK(attn_g2p_phones_encode("K AH0  T", ids, 8, &n));
  CHECK(n == 3 && ids[0] == k && ids[1] == ah0);
  CHECK_ERR(attn_g2p_phones_encode("K AH0 T", ids, 2, &n), ATTN_EINVAL);
  attn_g2p_graphemes g;
  attn_g2p_graphemes_make(&g, "BA'A", 4);
  CHECK(g.n == 3 && g.chars[0] == '\'' && g.chars[1] == 'A' && g.chars[2] == 'B');
  CHECK(attn_g2p_graphemes_encode(&g, "ab'z", 4, ids) == 1);
  CHECK(ids[0] == ATTN_G2P_SPECIAL + 1 && ids[1] == ATTN_G2P_SPECIAL + 2 &&
        ids[2] == ATTN_G2P_SPECIAL && ids[3] == ATTN_G2P_UNK);
}

static void test_metrics(void) {
  int32_t a[] = {1, 2, 3, 4}, b[] = {1, 3, 4, 5};
  CHECK(attn_g2p_edit_distance(a, 4, b, 4) == 2);
  CHECK(attn_g2p_edit_distance(a, 0, b, 3) == 3 && attn_g2p_edit_distance(a, 4, a, 4) == 0);
  int k = attn_g2p_phone_id("K", 1), ae1 = attn_g2p_phone_id("AE1", 3);
  int ae0 = attn_g2p_phone_id("AE0", 3), t = attn_g2p_phone_id("T", 1);
  int s = attn_g2p_phone_id("S", 1);
  int32_t cat1[] = {k, ae1, t}, cat0[] = {k, ae0, t}, cats[] = {k, ae1, t, s};
  const int32_t *refs[2] = {cats, cat1};
  int lens[2] = {4, 3};
  attn_g2p_score sc = {0}, su = {0};
  // right when equal to any reference
  CHECK(attn_g2p_score_word(&sc, cat1, 3, refs, lens, 2, 1) == 0);
  // stress: one substitution with, none without
  CHECK(attn_g2p_score_word(&sc, cat0, 3, refs + 1, lens + 1, 1, 1) == 1);
  CHECK(attn_g2p_score_word(&su, cat0, 3, refs + 1, lens + 1, 1, 0) == 0);
  CHECK(sc.words == 2 && sc.word_errors == 1 && sc.phones == 6 && sc.phone_errors == 1);
  CHECK(fabs(attn_g2p_wer(&sc) - 0.5) < 1e-12 && fabs(attn_g2p_per(&sc) - 1.0 / 6) < 1e-12);
  CHECK(attn_g2p_wer(&su) == 0 && su.phones == 3);
  // the best reference: {K AE1 T S} is one deletion away from {K AE1 T S S}
  int32_t hyp[] = {k, ae1, t, s, s};
  attn_g2p_score sb = {0};
  CHECK(attn_g2p_score_word(&sb, hyp, 5, refs, lens, 2, 1) == 1 && sb.phones == 4);
}

/* the tiny model every model test uses */
static void tiny_model(attn_g2p_model *m, float dropout, int tied) {
  attn_g2p_config c;
  attn_g2p_config_default(&c);
  c.d_model = 8;
  c.heads = 2;
  c.ff = 12;
  c.enc_layers = 1;
  c.dec_layers = 2;
  c.max_src = 40;
  c.max_tgt = 40;
  c.dropout = dropout;
  c.tied = tied;
  attn_g2p_graphemes g;
  attn_g2p_graphemes_make(&g, "ABCDE'", 6);
  CHECK_OK(attn_g2p_create(m, &c, &g));
  CHECK_OK(attn_g2p_init(m, 3));
}

static double model_loss(attn_g2p_model *m, attn_g2p_saved *sv, const int32_t *src,
                         const int32_t *sl, const int32_t *tin, const int32_t *tout) {
  attn_nn_ctx ctx = {0};
  float loss = 0;
  CHECK_OK(attn_g2p_encode(m, &ctx, sv, src, sl, 2, 4));
  CHECK_OK(attn_g2p_decode(m, &ctx, sv, tin, 3));
  CHECK_OK(attn_cross_entropy_f32(sv->logits, tout, 6, m->vocab_tgt, -1, 0.1f, &loss, NULL));
  return loss;
}

static void gradcheck(int tied) {
  attn_g2p_model m;
  tiny_model(&m, 0.0f, tied);
  // two words (the second padded), targets with one ignored position
  int32_t src[8] = {4, 5, 6, 9, 7, 8, 0, 0}, sl[2] = {4, 2};
  int32_t tin[6] = {ATTN_G2P_BOS, 10, 20, ATTN_G2P_BOS, 30, 0};
  int32_t tout[6] = {10, 20, ATTN_G2P_EOS, 30, ATTN_G2P_EOS, -1};
  attn_g2p_saved sv = {0};
  attn_nn_ctx ctx = {0};
  float loss = 0;
  CHECK_OK(attn_g2p_encode(&m, &ctx, &sv, src, sl, 2, 4));
  CHECK_OK(attn_g2p_decode(&m, &ctx, &sv, tin, 3));
  attn_params_zero_grad(&m.p);
  CHECK_OK(attn_g2p_loss_backward(&m, &ctx, &sv, tout, 0.1f, 0, &loss));
  CHECK(fabs(loss - model_loss(&m, &sv, src, sl, tin, tout)) < 1e-6);
  // every tensor: a few elements by central differences
  int bad = 0, checked = 0;
  for (int v = 0; v < m.p.count; v++) {
    attn_param_view *pv = &m.p.views[v];
    for (int64_t j = 0; j < pv->numel; j += 1 + pv->numel / 5) {
      float *w = m.p.data + pv->offset + j;
      float g = m.p.grad[pv->offset + j], w0 = *w, h = 1e-3f;
      *w = w0 + h;
      double lp = model_loss(&m, &sv, src, sl, tin, tout);
      *w = w0 - h;
      double lm = model_loss(&m, &sv, src, sl, tin, tout);
      *w = w0;
      double num = (lp - lm) / (2.0 * h);
      checked++;
      if (fabs(num - g) > 2e-3 + 2e-2 * fabs(num)) {
        if (bad++ < 5) printf("  %s[%lld]: analytic %.6g numeric %.6g\n", pv->name, (long long)j, g, num);
      }
    }
  }
  CHECK(bad == 0 && checked > 50);
  attn_g2p_saved_free(&sv);
  attn_g2p_free(&m);
}
static void test_gradcheck_tied(void) { gradcheck(1); }
static void test_gradcheck_untied(void) { gradcheck(0); }

static char dir[64], bin[1024];


/* a fresh model of d_model d, 2 heads, ff, 1 + 1 layers on graphemes g */
static void small_model(attn_g2p_model *m, const attn_g2p_graphemes *g, int d, int ff,
                        uint64_t seed) {
  attn_g2p_config c;
  attn_g2p_config_default(&c);
  c.d_model = d;
  c.heads = 2;
  c.ff = ff;
  c.enc_layers = c.dec_layers = 1;
  c.dropout = 0.1f; /* the runs below check dropout's masks too */
  CHECK_OK(attn_g2p_create(m, &c, g));
  CHECK_OK(attn_g2p_init(m, seed));
}

#define EPOCHS 3
#define MAXSTEPS 64
static attn_precision run_prec; /* the runs' precision (f32 unless a test says) */

/* a run of EPOCHS epochs from a fresh model (or, resume, from out/last) */
static void run(const tiny_data *t, const char *out, int64_t stop_after, int resume, float *losses,
                attn_g2p_model *m) {
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  o.epochs = EPOCHS;
  o.batch = 8;
  o.progress = 2;
  o.out_dir = out;
  o.stop_after = stop_after;
  o.log = fopen("/dev/null", "w");
  o.precision = run_prec;
  attn_adam opt;
  attn_g2p_train_state s = {0};
  if (resume) {
    char path[256];
    snprintf(path, sizeof path, "%s/last.safetensors", out);
    CHECK_OK(attn_g2p_train_resume(path, &o, m, &opt, &s));
    CHECK(s.step == stop_after);
    o.stop_after = 0;
  } else {
    small_model(m, &t->g, 16, 24, 5);
    CHECK_OK(attn_g2p_adam_init(&opt, m, &o));
  }
  CHECK_OK(attn_g2p_train_run(m, &opt, &s, &t->tr, &t->va, &o, losses, MAXSTEPS));
  attn_adam_free(&opt);
  if (o.log) fclose(o.log);
}

static void test_resume_identical_and_threads(void) {
  tiny_data t;
  tiny_load(&t);
  char a[128], b[128];
  snprintf(a, sizeof a, "%s/a", dir);
  snprintf(b, sizeof b, "%s/b", dir);
  mkdir(a, 0777);
  mkdir(b, 0777);
  float la[MAXSTEPS], lb[MAXSTEPS], lc[MAXSTEPS];
  for (int i = 0; i < MAXSTEPS; i++) la[i] = lb[i] = lc[i] = -1;
  attn_g2p_model ma, mb, mc;
  int threads = attn_get_num_threads();
  attn_set_num_threads(1);
  run(&t, a, 0, 0, la, &ma);
  attn_set_num_threads(2);
  run(&t, NULL, 0, 0, lc, &mc);
  attn_set_num_threads(threads);
  int steps = EPOCHS * ((t.tr.n + 7) / 8);
  CHECK(steps > 20 && steps < MAXSTEPS && la[steps - 1] != -1 && la[steps] == -1);
  CHECK(la[steps - 1] < la[0]);  // it learns
  CHECK(!memcmp(la, lc, sizeof la));
  CHECK(ma.p.numel == mc.p.numel && !memcmp(ma.p.data, mc.p.data, (size_t)ma.p.numel * 4));
  // stopped mid-epoch 2, then resumed from its checkpoint
  int64_t stop = steps / EPOCHS + 4;
  run(&t, b, stop, 0, lb, &mb);
  attn_g2p_free(&mb);
  run(&t, b, stop, 1, lb, &mb);
  CHECK(!memcmp(la, lb, sizeof la));
  CHECK(ma.p.numel == mb.p.numel && !memcmp(ma.p.data, mb.p.data, (size_t)ma.p.numel * 4));
  // the best checkpoint is a model; it has no state to resume from
  char path[256];
  snprintf(path, sizeof path, "%s/best.safetensors", a);
  attn_g2p_model m2;
  attn_adam opt;
  attn_g2p_train_state s;
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  CHECK_ERR(attn_g2p_train_resume(path, &o, &m2, &opt, &s), ATTN_EINVAL);
  CHECK_OK(attn_g2p_load(path, &m2, NULL));
  attn_g2p_free(&m2);
  attn_g2p_free(&ma);
  attn_g2p_free(&mb);
  attn_g2p_free(&mc);
  tiny_free(&t);
}

/* --precision bf16 reaches every step: other losses than f32's, close to them */
static void test_bf16_training_differs_from_f32_and_stays_close(void) {
  tiny_data t;
  tiny_load(&t);
  float lf[MAXSTEPS], lb[MAXSTEPS];
  attn_g2p_model mf, mb;
  run(&t, NULL, 0, 0, lf, &mf);
  run_prec = ATTN_PREC_BF16;
  run(&t, NULL, 0, 0, lb, &mb);
  run_prec = ATTN_PREC_F32;
  const int steps = EPOCHS * ((t.tr.n + 7) / 8);
  int differ = 0, close = 1;
  for (int i = 0; i < steps; i++) {
    differ |= lf[i] != lb[i];
    close &= fabsf(lf[i] - lb[i]) < 0.05f * fabsf(lf[i]);
  }
  CHECK(differ && close);
  // auto without a bf16 unit: f32, saying why (with one: whatever the probe found)
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  attn_precision p = ATTN_PREC_BF16;
  char why[512];
  CHECK_OK(attn_g2p_prec_train(&mf, &t.tr, 8, 0, 1, 1, &p, why, sizeof why));
  CHECK(strstr(why, "auto") != NULL);
  if (!bf.candidate) CHECK(p == ATTN_PREC_F32 && strstr(why, "no candidate"));
  attn_g2p_free(&mf);
  attn_g2p_free(&mb);
  tiny_free(&t);
}

/* greedy decoding picks, step by step, the argmax of the teacher-forced
 * forward on its own output */
static void test_greedy_is_argmax(void) {
  attn_g2p_model m;
  tiny_model(&m, 0.1f, 1);
  int32_t w0[3] = {4, 5, 6}, w1[1] = {9};
  const int32_t *src[2] = {w0, w1};
  int32_t sl[2] = {3, 1}, out[2 * 40];
  int ol[2];
  attn_nn_ctx ctx = {0};
  CHECK_OK(attn_g2p_greedy(&m, &ctx, src, sl, 2, 2, out, ol));
  for (int b = 0; b < 2; b++) {
    CHECK(ol[b] >= 0 && ol[b] <= 39);
    int32_t tin[40] = {ATTN_G2P_BOS};
    for (int i = 0; i < ol[b]; i++) tin[i + 1] = out[b * 40 + i];
    attn_g2p_saved sv = {0};
    CHECK_OK(attn_g2p_encode(&m, &ctx, &sv, src[b], sl + b, 1, sl[b]));
    CHECK_OK(attn_g2p_decode(&m, &ctx, &sv, tin, ol[b] + 1));
    for (int t = 0; t <= ol[b] && t < 39; t++) {
      const float *x = sv.logits + t * m.vocab_tgt;
      int best = ATTN_G2P_EOS;
      for (int v = ATTN_G2P_SPECIAL; v < m.vocab_tgt; v++)
        if (x[v] > x[best]) best = v;
      CHECK(best == (t < ol[b] ? out[b * 40 + t] : ATTN_G2P_EOS));
    }
    attn_g2p_saved_free(&sv);
  }
  // batched: the same words one at a time give the same phonemes
  int32_t out1[40];
  int ol1;
  CHECK_OK(attn_g2p_greedy(&m, &ctx, src + 1, sl + 1, 1, 1, out1, &ol1));
  CHECK(ol1 == ol[1] && !memcmp(out1, out + 40, (size_t)ol1 * 4));
  attn_g2p_free(&m);
}

static int tool(const char *args, char *out, size_t nout, char *err, size_t nerr) {
  return tool_run("", bin, dir, args, out, nout, err, nerr);
}

static void test_cli_bad_input(void) {
  char model[128], args[1024], out[4096], err[4096];
  snprintf(model, sizeof model, "%s/a/best.safetensors", dir);  // from the resume test
  if (access(model, R_OK)) SKIP("no model (test_resume_identical_and_threads failed)");
  // a good word answers
  snprintf(args, sizeof args, "g2p predict %s abase \"a'b.c\"", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  CHECK(!strncmp(out, "abase\t", 6) && strstr(out, "\na'b.c\t") != NULL);
  // empty word, unseen characters, a 10,000-character word: no output at all
  const char *bad[3][2] = {{"abase \"\"", "word 2 is empty"},
                           {"abase caf\xc3\xa9", "never seen in training"},
                           {"abase $(head -c 10000 /dev/zero | tr '\\0' A)", "10000 characters"}};
  for (int i = 0; i < 6; i++) { /* greedy, then a beam with an n-best list */
    snprintf(args, sizeof args, "g2p predict %s %s%s", model, bad[i % 3][0],
             i < 3 ? "" : " --beam 3 --n-best 2");
    CHECK(tool(args, out, sizeof out, err, sizeof err) == 1);
    CHECK(out[0] == 0 && strstr(err, bad[i % 3][1]) != NULL);
    if (!strstr(err, bad[i % 3][1])) printf("  stderr: %s\n", err);
  }
  // --n-best: N lines per word, rank and score before the phonemes, best first
  snprintf(args, sizeof args, "g2p predict %s abase --beam 3 --n-best 2", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  double s1 = 0, s2 = 0;
  char *l2 = strchr(out, '\n');
  CHECK(sscanf(out, "abase\t1\t%lf\t", &s1) == 1 && l2 && sscanf(l2 + 1, "abase\t2\t%lf\t", &s2) == 1);
  CHECK(s1 >= s2 && s1 < 0);
  snprintf(args, sizeof args, "g2p predict %s abase --precision fp16", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && out[0] == 0 && strstr(err, "auto, f32 or bf16"));
  snprintf(args, sizeof args, "g2p predict %s abase --beam 2 --n-best 3", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "--n-best 3"));
  // eval reports its decoding speed
  snprintf(args, sizeof args, "g2p eval %s --data tests/data/g2p --beam 2 --split val", model);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "words/s (beam 2"));
  // a classifier's file (attn train writes "config" metadata and its tensors)
  char clf[128];
  snprintf(clf, sizeof clf, "%s/clf.safetensors", dir);
  attn_st *st = NULL;
  CHECK_OK(attn_st_new(&st));
  float w[4] = {0};
  int64_t shape[1] = {4};
  CHECK_OK(attn_st_set_meta(st, "config", "{\"vocab\":4}"));
  CHECK_OK(attn_st_add_f32(st, "fc.weight", 1, shape, w));
  CHECK_OK(attn_st_save(st, clf));
  attn_st_free(st);
  const char *cmds[2] = {"predict %s abase", "eval %s --data tests/data/g2p"};
  for (int i = 0; i < 2; i++) {
    char c[256];
    snprintf(c, sizeof c, cmds[i], clf);
    snprintf(args, sizeof args, "g2p %s", c);
    CHECK(tool(args, out, sizeof out, err, sizeof err) == 1);
    CHECK(out[0] == 0 && strstr(err, "not a G2P model") && strstr(err, "classifier"));
  }
  // --bench: the timing line, the batches for the torch script, no model
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/bench --dim 8 --heads 2 "
           "--ff 8 --layers 1 --batch 4 --bench 2 --precision f32", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "bench: attn 2 steps"));
  snprintf(args, sizeof args, "%s/bench/bench_batches.bin", dir);
  FILE *bf = fopen(args, "rb");
  int32_t head[5] = {0};
  CHECK(bf && fread(head, 4, 5, bf) == 5 && head[0] == 0x42503247 && head[1] == 3 && head[2] <= 4);
  if (bf) fclose(bf);
  snprintf(args, sizeof args, "%s/bench/best.safetensors", dir);
  CHECK(access(args, F_OK) != 0);
  // no dictionary: no output folder either
  snprintf(args, sizeof args, "g2p train --data %s/none --out %s/never", dir, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 1);
  snprintf(args, sizeof args, "%s/never", dir);
  CHECK(access(args, F_OK) != 0 && strstr(err, "no dictionary"));
  // usage errors
  CHECK(tool("g2p predict", out, sizeof out, err, sizeof err) == 2);
  CHECK(tool("g2p frobnicate", out, sizeof out, err, sizeof err) == 2);
  snprintf(args, sizeof args, "g2p train --out %s/x --dim 0", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2);
}


/* --save-attention: one file for one word, OUT_<word> for several (unique),
 * read by attn diagnose (cross attention without --cross) and attn viz; the
 * saved prediction is the printed one (best of a beam); bad input leaves no
 * file at all */
static void test_cli_save_attention(void) {
  char model[128], args[1024], out[8192], err[4096], path[256];
  snprintf(model, sizeof model, "%s/a/best.safetensors", dir);  // from the resume test
  if (access(model, R_OK)) SKIP("no model (test_resume_identical_and_threads failed)");
  snprintf(args, sizeof args, "g2p predict %s abase --beam 3 --save-attention %s/one.safetensors", model, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  CHECK(!strncmp(out, "abase\t", 6) && strstr(err, "one.safetensors"));
  char printed[256] = "";
  sscanf(out, "abase\t%255[^\n]", printed);
  snprintf(path, sizeof path, "%s/one.safetensors", dir);
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(path, &st));
  const attn_tensor *t = attn_st_get(st, "attn");
  CHECK(t && t->ndim == 4 && t->shape[0] == 1 && t->shape[1] == 2 && t->shape[3] == 5);
  CHECK(attn_st_meta(st, "prediction") && !strcmp(attn_st_meta(st, "prediction"), printed));
  CHECK(attn_st_meta(st, "decoding") && strstr(attn_st_meta(st, "decoding"), "beam 3"));
  CHECK(attn_st_meta(st, "key_tokens") && !strcmp(attn_st_meta(st, "key_tokens"), "[\"A\",\"B\",\"A\",\"S\",\"E\"]"));
  attn_st_free(st);
  // attn diagnose knows it is cross attention; attn viz draws it
  snprintf(args, sizeof args, "diagnose %s", path);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  CHECK(strstr(out, "cross attention, 1 layer(s) x 2 head(s)") && strstr(out, "layer 0 head 1") &&
        strstr(out, "layer 0 mean") && strstr(out, "monotonic") && strstr(out, "path (layer 0"));
  if (!strstr(out, "layer 0 mean")) printf("  diagnose: %s%s\n", out, err);
  snprintf(args, sizeof args, "viz %s %s/one.html", path, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  snprintf(path, sizeof path, "%s/one.html", dir);
  FILE *f = fopen(path, "r");
  size_t got = f ? fread(out, 1, sizeof out - 1, f) : 0;
  out[got] = '\0';
  if (f) fclose(f);
  CHECK(strstr(out, "\"qn\":\"output\",\"kn\":\"source\"") != NULL);
  // several words: a file each, the same word twice made unique
  snprintf(args, sizeof args, "g2p predict %s abase \"a'b.c\" abase --save-attention %s/w.safetensors", model, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  const char *files[3] = {"w_abase", "w_a_b.c", "w_abase-2"};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, files[i]);
    CHECK(access(path, R_OK) == 0);
  }
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  CHECK(access(path, F_OK) != 0);
  // bad input: no file
  const char *bad[4][2] = {{"abase \"\" --save-attention %s/bad.safetensors", "word 2 is empty"},
                           {"abase caf\xc3\xa9 --save-attention %s/bad.safetensors", "never seen in training"},
                           {"abase --save-attention %s/none/bad.safetensors", "none"},
                           {"abase --save-attention %s/", "a file name is needed"}};
  for (int i = 0; i < 4; i++) {
    char c[512];
    snprintf(c, sizeof c, bad[i][0], dir);
    snprintf(args, sizeof args, "g2p predict %s %s", model, c);
    CHECK(tool(args, out, sizeof out, err, sizeof err) == 1);
    CHECK(out[0] == 0 && strstr(err, bad[i][1]) != NULL);
  }
  snprintf(path, sizeof path, "%s/bad.safetensors", dir);
  CHECK(access(path, F_OK) != 0);
  snprintf(args, sizeof args, "g2p predict %s/clf.safetensors abase --save-attention %s/bad.safetensors", dir, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 1 && strstr(err, "not a G2P model"));
  CHECK(access(path, F_OK) != 0);
  snprintf(args, sizeof args, "g2p eval %s --save-attention %s/bad.safetensors", model, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "option of predict"));
}

/* --keep-epochs writes each epoch's model; average is their element-wise mean
 * (and a model eval reads); models of other shapes, or no --out, are refused
 * with no file written; --ensemble decodes with several models */
static void test_cli_keep_epochs_and_average(void) {
  char args[1024], out[4096], err[4096], path[3][256];
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/ke --dim 8 --heads 2 "
           "--ff 8 --layers 1 --batch 8 --epochs 2 --keep-epochs --progress quiet --precision f32", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  for (int i = 0; i < 2; i++) snprintf(path[i], sizeof path[i], "%s/ke/epoch_%03d.safetensors", dir, i + 1);
  snprintf(path[2], sizeof path[2], "%s/ke/mean.safetensors", dir);
  snprintf(args, sizeof args, "g2p average --out %s %s %s", path[2], path[0], path[1]);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "mean of 2 model(s)"));
  attn_g2p_model m[3];
  int loaded = 0;
  for (int i = 0; i < 3; i++) loaded += attn_g2p_load(path[i], &m[i], NULL) == ATTN_OK;
  CHECK(loaded == 3);
  if (loaded == 3) {
    CHECK(m[0].p.numel == m[2].p.numel && memcmp(m[0].p.data, m[1].p.data, (size_t)m[0].p.numel * 4));
    int64_t bad = 0;
    for (int64_t j = 0; j < m[0].p.numel; j++) {
      const float want = (float)(((double)m[0].p.data[j] + (double)m[1].p.data[j]) / 2);
      bad += m[2].p.data[j] != want;
    }
    CHECK(bad == 0);
  }
  for (int i = 0; i < loaded; i++) attn_g2p_free(&m[i]);
  snprintf(args, sizeof args, "g2p eval %s --data tests/data/g2p --split val --worst 0", path[2]);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "WER"));
  // another architecture (the resume test's model is 16 wide): refused, nothing written
  char other[256];
  snprintf(other, sizeof other, "%s/a/best.safetensors", dir);
  snprintf(args, sizeof args, "g2p average --out %s/ke/mix.safetensors %s %s", dir, path[0], other);
  if (!access(other, R_OK)) {
    CHECK(tool(args, out, sizeof out, err, sizeof err) == 1 && strstr(err, "not the architecture"));
    snprintf(args, sizeof args, "%s/ke/mix.safetensors", dir);
    CHECK(access(args, F_OK) != 0);
  }
  snprintf(args, sizeof args, "g2p average %s", path[0]);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "--out"));
  // a checkpoint holding a NaN: refused naming the tensor, nothing written
  attn_g2p_model bad;
  char nan_path[256];
  snprintf(nan_path, sizeof nan_path, "%s/ke/nan.safetensors", dir);
  CHECK_OK(attn_g2p_load(path[1], &bad, NULL));
  bad.p.data[bad.p.views[1].offset] = NAN;
  CHECK_OK(attn_g2p_save(nan_path, &bad, NULL, NULL));
  attn_g2p_free(&bad);
  snprintf(args, sizeof args, "g2p average --out %s/ke/nanmean.safetensors %s %s", dir, path[0], nan_path);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 1 && strstr(err, "nan.safetensors") &&
        strstr(err, "[0] is nan"));
  snprintf(args, sizeof args, "%s/ke/nanmean.safetensors", dir);
  CHECK(access(args, F_OK) != 0);
  // --ensemble: eval and predict decode with several models (of any size)
  snprintf(args, sizeof args, "g2p eval %s --ensemble %s,%s --data tests/data/g2p --split val "
           "--worst 0 --beam 2", path[0], path[1], other);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "ensemble of 3 models") &&
        strstr(out, "WER"));
  snprintf(args, sizeof args, "g2p predict %s abase --ensemble %s", path[0], path[1]);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && !strncmp(out, "abase\t", 6));
  snprintf(args, sizeof args, "g2p predict %s abase --ensemble %s,,%s", path[0], path[1], path[1]);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && out[0] == 0 && strstr(err, "commas"));
  snprintf(args, sizeof args, "g2p predict %s abase --ensemble %s --save-attention %s/ke/x.safetensors",
           path[0], path[1], dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "not with --ensemble"));
  snprintf(args, sizeof args, "g2p predict %s abase --ensemble %s/clf.safetensors", path[0], dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 1 && out[0] == 0 && strstr(err, "not a G2P model"));
  snprintf(args, sizeof args, "g2p average --out %s/ke/none.safetensors %s/ke/missing.safetensors", dir, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 1 && strstr(err, "missing.safetensors"));
}


/* --time-budget: the probe's cost leaves the run's model alone; the epochs
 * that fit are floor(budget / epoch seconds) within [1, --epochs]; the CLI
 * runs exactly the epochs it says fit, shows the whole run's ETA, and does
 * not re-plan a resumed run */
static void test_time_budget(void) {
  tiny_data t;
  tiny_load(&t);
  attn_g2p_model m;
  small_model(&m, &t.g, 8, 12, 3);
  float *before = malloc((size_t)m.p.numel * sizeof *before);
  CHECK(before != NULL);
  if (!before) return;
  memcpy(before, m.p.data, (size_t)m.p.numel * sizeof *before);
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  o.batch = 8;
  attn_g2p_cost c;
  CHECK_OK(attn_g2p_cost_probe(&m, &t.tr, &t.va, &o, &c));
  CHECK(!memcmp(before, m.p.data, (size_t)m.p.numel * sizeof *before));
  double tokens = 0, vtokens = 0;
  for (int i = 0; i < t.tr.n; i++) tokens += t.tr.tgt_len[i] + 1;
  for (int i = 0; i < t.va.n; i++) vtokens += t.va.tgt_len[i] + 1;
  CHECK(c.steps == (t.tr.n + 7) / 8 && c.train_tokens == tokens && c.val_tokens == vtokens);
  CHECK(c.train_tokens_per_s > 0 && c.val_tokens_per_s > 0 && c.probe_seconds > 0);
  free(before);
  attn_g2p_free(&m);
  tiny_free(&t);
  attn_g2p_cost k = {100, 1000, 100, 100, 100, 0}; /* 10 s of training + 1 of validation */
  CHECK(fabs(attn_g2p_cost_epoch_seconds(&k) - 11) < 1e-12);
  CHECK(attn_g2p_cost_fit(&k, 35, 10) == 3 && attn_g2p_cost_fit(&k, 5, 10) == 1 &&
        attn_g2p_cost_fit(&k, 1000, 10) == 10 && attn_g2p_cost_fit(&k, 33, 10) == 3);
  static char out[1 << 18], err[1 << 18]; /* up to 400 epoch lines */
  char args[1024];
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/tb --dim 8 --heads 2 "
           "--ff 8 --layers 1 --batch 8 --epochs 400 --time-budget 2 --progress plain "
           "--precision f32 --threads 1", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  const char *fit = strstr(out, "g2p: time budget 2 s, ");
  int n = 0, want = 0;
  CHECK(fit && sscanf(strstr(fit, "left: ") ? strstr(fit, "left: ") : "", "left: %d of %d", &n, &want) == 2);
  CHECK(want == 400 && n >= 1 && n <= 400 && strstr(out, "g2p: expected duration ~"));
  char line[64];
  snprintf(line, sizeof line, "\nEpoch %d/%d |", n, n);
  CHECK(strstr(out, line) != NULL && strstr(out, "\nEpoch 1/") != NULL);
  snprintf(line, sizeof line, "\nEpoch %d/", n + 1);
  CHECK(strstr(out, line) == NULL && strstr(err, ", all ") != NULL);
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/tb --dim 8 --heads 2 "
           "--ff 8 --layers 1 --batch 8 --epochs %d --time-budget 2 --progress quiet "
           "--precision f32 --threads 1 --resume", dir, n);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "not applied to a resumed run"));
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/tb --time-budget 0", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "--time-budget"));
}

int main(int argc, char **argv) {
  tool_path(argc > 0 ? argv[0] : NULL, bin, sizeof bin);
  snprintf(dir, sizeof dir, "/tmp/attn_g2p_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  RUN(test_dict_parse);
  RUN(test_split_stable);
  RUN(test_vocab);
  RUN(test_metrics);
  RUN(test_gradcheck_tied);
  RUN(test_gradcheck_untied);
  RUN(test_greedy_is_argmax);
  RUN(test_resume_identical_and_threads);
  RUN(test_bf16_training_differs_from_f32_and_stays_close);
  RUN(test_cli_bad_input);
  RUN(test_cli_save_attention);
  RUN(test_cli_keep_epochs_and_average);
  RUN(test_time_budget);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
