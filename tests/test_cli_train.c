/* attn train / eval / predict end to end on a small generated corpus (the
 * tool of ATTN_BIN, set by make test): the corpus is read, split, tokenised,
 * a tiny model trained, the test split reported next to Naive Bayes; a run
 * stopped mid-way and resumed with no options (its own train.options) ends
 * with the same epoch lines and test figures as the uninterrupted run; the
 * misclassified-message list names real files; predict reads the model. */
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char DIR_[64] = "/tmp/attn_test_cli_train.XXXXXX";


/* 40 ham and 40 spam messages, each group with its own words, a few shared. */
static void write_corpus(void) {
  static const char *const ham_words[] = {"meeting", "build", "patch", "review", "kernel",
                                          "release", "notes", "lunch"};
  static const char *const spam_words[] = {"cheap", "pills", "winner", "click", "offer",
                                           "money", "free", "viagra"};
  char path[256];
  for (int g = 0; g < 2; g++) {
    snprintf(path, sizeof path, "%s/corpus", DIR_);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/corpus/%s", DIR_, g ? "spam" : "ham");
    mkdir(path, 0700);
    for (int i = 0; i < 40; i++) {
      snprintf(path, sizeof path, "%s/corpus/%s/%05d.eml", DIR_, g ? "spam" : "ham", i);
      FILE *f = fopen(path, "w");
      CHECK(f != NULL);
      if (!f) return;
      const char *const *w = g ? spam_words : ham_words;
      fprintf(f, "From: %s@%s\nTo: list@example.org\nSubject: %s %s %d\n\n", g ? "deals" : "alice",
              g ? "offers.biz" : "example.org", w[i % 8], w[(i + 3) % 8], i);
      for (int k = 0; k < 12; k++) fprintf(f, "%s the %s ", w[(i * 7 + k) % 8], k % 3 ? "and" : "of");
      fprintf(f, "\n");
      fclose(f);
    }
  }
}

/* Runs `attn ARGS` with stdout+stderr to OUT (under DIR_); the exit status. */
static int run_attn(const char *bin, const char *args, const char *out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s > %s/%s 2>&1", bin, args, DIR_, out);
  int rc = system(cmd);
  if (rc != 0) printf("  '%s' -> %d\n", cmd, rc);
  return rc;
}

/* run_attn, then its output (caller frees; NULL if unreadable) in *log. */
static int run_attn_log(const char *bin, const char *args, const char *out, char **log) {
  int rc = run_attn(bin, args, out);
  char path[256];
  snprintf(path, sizeof path, "%s/%s", DIR_, out);
  *log = read_whole_file(path, NULL);
  return rc;
}

/* The lines of text starting with prefix, concatenated (caller frees). */
static char *lines_with(const char *text, const char *prefix) {
  size_t cap = strlen(text) + 1, n = 0;
  char *out = calloc(cap, 1);
  for (const char *p = text; out && p && *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p + 1) : strlen(p);
    if (!strncmp(p, prefix, strlen(prefix))) {
      memcpy(out + n, p, len);
      n += len;
    }
    p = e ? e + 1 : NULL;
  }
  return out;
}

/* "Epoch ..." lines with their wall-time field ("| 12 s (total 85 s) |")
 * replaced by "|#|": the times, and so their widths, differ between runs. */
static char *epoch_lines(const char *log) {
  char *s = lines_with(log, "Epoch ");
  size_t w = 0;
  for (size_t r = 0; s && s[r];) {
    if (s[r] == '|') {  // a field up to the next '|' or the line's end
      const char *bar = strchr(s + r + 1, '|'), *nl = strchr(s + r, '\n');
      const char *end = bar && (!nl || bar < nl) ? bar : nl ? nl : s + strlen(s);
      const char *t = strstr(s + r, " s");
      if (t && t < end) {  // the time field
        s[w++] = '|';
        s[w++] = '#';
        r = (size_t)(end - s);
        continue;
      }
    }
    s[w++] = s[r++];
  }
  if (s) s[w] = 0;
  return s;
}

/* The attn tool ($ATTN_BIN), or NULL after a SKIP saying why not (not set,
 * or built without GMime: the corpus is mail). */
static const char *tool_or_skip(void) {
  const char *bin = getenv("ATTN_BIN");
#ifndef ATTN_HAVE_GMIME
  bin = NULL;
#endif
  if (!bin) SKIP(getenv("ATTN_BIN") ? "built without GMime" : "ATTN_BIN not set");
  return bin;
}

static void test_train_resume_eval_predict(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin) {
    SKIP("ATTN_BIN not set: the attn tool is not exercised");
    return;
  }
#ifndef ATTN_HAVE_GMIME
  SKIP("built without GMime: attn train cannot read mail");
  return;
#endif
  write_corpus();
  char args[1024];
  const char *model = "--dim 16 --heads 2 --ff 32 --layers 1 --max-len 48 --vocab 300 --batch 8 "
                      "--lr 0.01 --epochs 6 --token-dropout 0.2 --ema 0.9 --threads 1 --progress plain "
                      "--members 1 --precision f32"; /* as test_ensemble's, which compares with it */
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --out %s/a", DIR_, DIR_, model,
           DIR_);
  CHECK(run_attn(bin, args, "a.log") == 0);
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --out %s/b --stop-after 10",
           DIR_, DIR_, model, DIR_);
  CHECK(run_attn(bin, args, "b1.log") == 0);
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv --threads 2 --progress plain "
           "--resume --out %s/b", DIR_, DIR_, DIR_);
  CHECK(run_attn(bin, args, "b2.log") == 0);
  char path[256];
  snprintf(path, sizeof path, "%s/a.log", DIR_);
  char *a = read_whole_file(path, NULL);
  snprintf(path, sizeof path, "%s/b2.log", DIR_);
  char *b = read_whole_file(path, NULL);
  CHECK(a && b);
  if (a && b) {
    CHECK(strstr(a, "corpus: 80 messages (40 spam) in 2 groups") != NULL);
    CHECK(strstr(a, "weight EMA 0.9") && strstr(b, "weight EMA 0.9"));
    CHECK(strstr(b, "resuming with the run's own training options") != NULL);
    CHECK(strstr(b, "resuming at epoch 2, batch 2 (step 10)") != NULL);
    char *ea = epoch_lines(a), *eb = epoch_lines(b);
    CHECK(ea && eb && strstr(ea, "Epoch 6/6 | Train Loss: ") && strstr(ea, "raw weights: "));
    const char *a2 = ea ? strstr(ea, "Epoch 2/6") : NULL, *b2 = eb ? strstr(eb, "Epoch 2/6") : NULL;
    CHECK(a2 && b2 && !strcmp(a2, b2));
    if (a2 && b2 && strcmp(a2, b2)) printf("  uninterrupted:\n%s  resumed:\n%s", a2, b2);
    free(ea);
    free(eb);
    // the same test report, line for line (the first line holds a time)
    char *ta = lines_with(a, "  transformer (attn)"), *tb = lines_with(b, "  transformer (attn)");
    CHECK(ta && tb && ta[0] && !strcmp(ta, tb));
    printf("  %s", ta ? ta : "(none)\n");
    free(ta);
    free(tb);
    CHECK(strstr(a, "  naive bayes (BPE)") != NULL);
    // every misclassified message listed is a file of the corpus
    const char *m = strstr(a, "misclassified by either model: ");
    if (m) {
      int listed = 0;
      for (const char *q = strstr(m, ".eml"); q; q = strstr(q + 1, ".eml")) {
        const char *st = q;
        while (st > m && st[-1] != ' ') st--;
        char f[512];
        snprintf(f, sizeof f, "%s/corpus/%.*s.eml", DIR_, (int)(q - st), st);
        CHECK(access(f, R_OK) == 0);
        listed++;
      }
      CHECK(listed == atoi(m + strlen("misclassified by either model: ")));
    }
  }
  free(a);
  free(b);
  // eval and predict read the best checkpoint: a label and its probability per file
  snprintf(args, sizeof args, "eval %s/a/best.safetensors --data %s/corpus --split %s/split.tsv", DIR_,
           DIR_, DIR_);
  CHECK(run_attn(bin, args, "eval.log") == 0);
  snprintf(args, sizeof args, "predict %s/a/best.safetensors %s/corpus/spam/00001.eml %s/corpus/ham/00001.eml",
           DIR_, DIR_, DIR_);
  CHECK(run_attn(bin, args, "predict.log") == 0);
  snprintf(path, sizeof path, "%s/predict.log", DIR_);
  char *p = read_whole_file(path, NULL);
  CHECK(p && (strstr(p, "spam/00001.eml\tspam\t0.") || strstr(p, "spam/00001.eml\tham\t0.")));
  CHECK(p && (strstr(p, "ham/00001.eml\tham\t") || strstr(p, "ham/00001.eml\tspam\t")));
  free(p);
}

/* P(spam) that `attn predict` printed for file (its line in log); -1 if absent. */
static double p_spam(const char *log, const char *file) {
  const char *l = log ? strstr(log, file) : NULL;
  if (!l) return -1;
  l += strlen(file);
  int spam = !strncmp(l, "\tspam\t", 6);
  if (!spam && strncmp(l, "\tham\t", 5)) return -1;
  double p = atof(l + (spam ? 6 : 5));
  return spam ? p : 1.0 - p;
}

/* --members 2: two models (seeds 1 and 1001) whose mean is the model; the
 * first is the single-model run's model; stopped and resumed it ends the
 * same; eval and predict read the one ensemble file; predict's P(spam) is
 * the mean of the members'; quantize refuses it. */
static void test_ensemble(void) {
  const char *bin = tool_or_skip();
  if (!bin) return;
  char args[1024], path[256];
  const char *model = "--dim 16 --heads 2 --ff 32 --layers 1 --max-len 48 --vocab 300 --batch 8 "
                      "--lr 0.01 --epochs 6 --token-dropout 0.2 --ema 0.9 --threads 1 --progress plain "
                      /* not auto: its timing probe may choose bf16 in one run and f32 in the
                         other on a busy machine with a bf16 unit (seen on a Zen 5) */
                      "--precision f32";
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --out %s/e --members 2",
           DIR_, DIR_, model, DIR_);
  CHECK(run_attn(bin, args, "e.log") == 0);
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --out %s/f --members 2 "
           "--stop-after 10", DIR_, DIR_, model, DIR_);
  CHECK(run_attn(bin, args, "f1.log") == 0);
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv --threads 2 --progress plain "
           "--resume --out %s/f", DIR_, DIR_, DIR_);
  CHECK(run_attn(bin, args, "f2.log") == 0);
  // resumed once more, with both members done: nothing trained, the same report
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv --progress plain --resume "
           "--out %s/f", DIR_, DIR_, DIR_);
  char *f3 = NULL;
  CHECK(run_attn_log(bin, args, "f3.log", &f3) == 0);
  CHECK(f3 && strstr(f3, "already trained (6 epochs)") && strstr(f3, "member 2 of 2") &&
        !strstr(f3, "Epoch "));
  snprintf(path, sizeof path, "%s/a.log", DIR_);
  char *a = read_whole_file(path, NULL);
  snprintf(path, sizeof path, "%s/e.log", DIR_);
  char *e = read_whole_file(path, NULL);
  snprintf(path, sizeof path, "%s/f2.log", DIR_);
  char *f = read_whole_file(path, NULL);
  CHECK(a && e && f);
  if (a && e && f) {
    CHECK(strstr(e, "member 2 of 2: seed 1001, ") != NULL);
    CHECK(strstr(e, "Ensemble of 2 | Val Loss: ") != NULL);
    CHECK(strstr(e, "(the ensemble of the members' best)") != NULL);
    CHECK(strstr(f, "resuming at epoch 2, batch 2 (step 10)") != NULL);
    snprintf(path, sizeof path, "%s/f1.log", DIR_);
    char *f1 = read_whole_file(path, NULL), hint[128];
    snprintf(hint, sizeof hint, "continue with: attn train --resume --out %s/f", DIR_);
    CHECK(f1 && strstr(f1, hint));
    free(f1);
    // member 1 is the single-model run: the same figures
    const char *sa = strstr(a, "  transformer (attn)"), *s1 = strstr(e, "  member 1 of 2");
    CHECK(sa && s1 && !strncmp(sa + 24, s1 + 22, 60));  // both from column 24
    // the resumed ensemble ends as the uninterrupted one
    char *te = lines_with(e, "  transformer ensemble"), *tf = lines_with(f, "  transformer ensemble");
    char *t3 = f3 ? lines_with(f3, "  transformer ensemble") : NULL;
    CHECK(te && t3 && te[0] && !strcmp(te, t3));
    free(t3);
    char *me = lines_with(e, "    member "), *mf = lines_with(f, "    member ");
    char *ee = epoch_lines(e), *ef = epoch_lines(f);
    CHECK(te && tf && te[0] && !strcmp(te, tf));
    CHECK(me && mf && strstr(me, "member 2 of 2") && !strcmp(me, mf));
    const char *e2 = ee ? strstr(ee, "Epoch 2/6") : NULL, *f2 = ef ? strstr(ef, "Epoch 2/6") : NULL;
    CHECK(e2 && f2 && !strcmp(e2, f2));  // member 1 from epoch 2 on, and all of member 2
    if (e2 && f2 && strcmp(e2, f2)) printf("  uninterrupted:\n%s  resumed:\n%s", e2, f2);
    printf("  %s%s", te ? te : "(none)\n", me ? me : "");
    free(te);
    free(tf);
    free(me);
    free(mf);
    free(ee);
    free(ef);
  }
  // eval reads the ensemble: the report of training
  snprintf(args, sizeof args, "eval %s/e/best.safetensors --data %s/corpus --split %s/split.tsv", DIR_,
           DIR_, DIR_);
  CHECK(run_attn(bin, args, "e_eval.log") == 0);
  snprintf(path, sizeof path, "%s/e_eval.log", DIR_);
  char *v = read_whole_file(path, NULL);
  CHECK(v && strstr(v, "an ensemble of 2"));
  char *tv = v ? lines_with(v, "  transformer ensemble") : NULL, *te = e ? lines_with(e, "  transformer ensemble") : NULL;
  CHECK(tv && te && tv[0] && !strcmp(tv, te));
  free(tv);
  free(v);
  // attn ensemble: the members trained apart, combined again, evaluate the same
  snprintf(args, sizeof args, "ensemble -o %s/c.safetensors %s/e/member1/best.safetensors "
           "%s/e/member2/best.safetensors", DIR_, DIR_, DIR_);
  CHECK(run_attn(bin, args, "c.log") == 0);
  snprintf(args, sizeof args, "eval %s/c.safetensors --data %s/corpus --split %s/split.tsv", DIR_, DIR_,
           DIR_);
  CHECK(run_attn(bin, args, "c_eval.log") == 0);
  snprintf(path, sizeof path, "%s/c_eval.log", DIR_);
  v = read_whole_file(path, NULL);
  tv = v ? lines_with(v, "  transformer ensemble") : NULL;
  CHECK(tv && te && tv[0] && !strcmp(tv, te));
  free(tv);
  free(te);
  free(v);
  // ... but not with a model of another tokenizer
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --vocab 280 --epochs 1 --members 1 "
           "--out %s/v", DIR_, DIR_, model, DIR_);
  CHECK(run_attn(bin, args, "v.log") == 0);
  snprintf(args, sizeof args, "ensemble -o %s/d.safetensors %s/e/best.safetensors %s/v/best.safetensors "
           "2> %s/d.err", DIR_, DIR_, DIR_, DIR_);
  char cmd0[2048];
  snprintf(cmd0, sizeof cmd0, "%s %s", bin, args);
  CHECK(system(cmd0) != 0);
  snprintf(path, sizeof path, "%s/d.err", DIR_);
  v = read_whole_file(path, NULL);
  CHECK(v && strstr(v, "another tokenizer than the first model's"));
  free(v);
  snprintf(path, sizeof path, "%s/d.safetensors", DIR_);
  CHECK(access(path, F_OK) != 0);
  // predict: the mean of the members' probabilities
  const char *msgs[] = {"spam/00003.eml", "ham/00005.eml", "spam/00017.eml"};
  char *logs[3] = {NULL, NULL, NULL};
  const char *models[3] = {"e/best.safetensors", "e/member1/best.safetensors", "e/member2/best.safetensors"};
  for (int k = 0; k < 3; k++) {
    snprintf(args, sizeof args, "predict %s/%s %s/corpus/%s %s/corpus/%s %s/corpus/%s", DIR_, models[k],
             DIR_, msgs[0], DIR_, msgs[1], DIR_, msgs[2]);
    char out[32];
    snprintf(out, sizeof out, "p%d.log", k);
    CHECK(run_attn(bin, args, out) == 0);
    snprintf(path, sizeof path, "%s/%s", DIR_, out);
    logs[k] = read_whole_file(path, NULL);
  }
  for (int i = 0; i < 3; i++) {
    double pe = p_spam(logs[0], msgs[i]), p1 = p_spam(logs[1], msgs[i]), p2 = p_spam(logs[2], msgs[i]);
    CHECK(pe >= 0 && p1 >= 0 && p2 >= 0 && fabs(pe - 0.5 * (p1 + p2)) < 1.5e-4);
    printf("  %s: P(spam) %.4f = mean of %.4f and %.4f\n", msgs[i], pe, p1, p2);
  }
  for (int k = 0; k < 3; k++) free(logs[k]);
  snprintf(args, sizeof args, "quantize %s/e/best.safetensors -o %s/e.int8.safetensors", DIR_, DIR_);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s > %s/q.log 2>&1", bin, args, DIR_);
  int rc = system(cmd);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1); /* the file's fault, not the command line's */
  snprintf(path, sizeof path, "%s/q.log", DIR_);
  char *q = read_whole_file(path, NULL);
  CHECK(q && strstr(q, "attn quantize: ") && strstr(q, "best.safetensors: an ensemble of 2 models"));
  free(q);
  free(a);
  free(e);
  free(f);
  free(f3);
}

/* A checkpoint from before ensembles (train.options without "members")
 * resumes as the one model it was, though attn train now defaults to two. */
static void test_resume_before_members(void) {
  const char *bin = tool_or_skip();
  if (!bin) return;
  char args[1024], path[256];
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv --dim 16 --heads 2 --ff 32 "
           "--layers 1 --max-len 48 --vocab 300 --batch 8 --epochs 2 --threads 1 --progress plain "
           "--members 1 --stop-after 5 --out %s/g", DIR_, DIR_, DIR_);
  CHECK(run_attn(bin, args, "g1.log") == 0);
  snprintf(path, sizeof path, "%s/g/last.safetensors", DIR_);
  attn_st *f = NULL;
  CHECK_OK(attn_st_load(path, &f));
  const char *o = f ? attn_st_meta(f, "train.options") : NULL;
  const char *k = o ? strstr(o, ",\"members\":1") : NULL;
  CHECK(k != NULL);
  if (k) {
    char old[1024];
    snprintf(old, sizeof old, "%.*s%s", (int)(k - o), o, k + strlen(",\"members\":1"));
    CHECK_OK(attn_st_set_meta(f, "train.options", old));
    CHECK_OK(attn_st_save(f, path));
  }
  attn_st_free(f);
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv --progress plain --resume "
           "--out %s/g", DIR_, DIR_, DIR_);
  char *g = NULL;
  CHECK(run_attn_log(bin, args, "g2.log", &g) == 0);
  CHECK(g && strstr(g, "resuming at epoch 1, batch 5 (step 5)") && strstr(g, "Epoch 2/2") &&
        strstr(g, "  transformer (attn)") && !strstr(g, "member"));
  free(g);
}

/* --precision auto says what it chose and why; an explicit precision without
 * a bf16 unit (the generic level) runs with a warning naming its measured
 * cost; the expected duration; --time-budget shrinks the plan before
 * training and says so, or says that it fits; epoch lines carry their own
 * time and the total. */
static void test_precision_and_budget(void) {
  const char *bin = tool_or_skip();
  if (!bin) return;
  write_corpus();
  char args[1024], generic[512];
  const char *model = "--dim 16 --heads 2 --ff 32 --layers 1 --max-len 48 --vocab 300 --batch 8 "
                      "--threads 1 --progress plain";
  char *g = NULL;
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --epochs 2 --members 1 "
           "--out %s/p1", DIR_, DIR_, model, DIR_);
  CHECK(run_attn_log(bin, args, "p1.log", &g) == 0);
  CHECK(g && (strstr(g, "\nprecision: f32 (auto: ") || strstr(g, "\nprecision: bf16 (auto: ")));
  CHECK(g && strstr(g, "\nprobe: ") && strstr(g, " tokens/s") && strstr(g, "\nexpected duration: ~"));
  CHECK(g && strstr(g, "Epoch 2/2 | ") && strstr(g, " s (total "));
  free(g);
  // attn eval: f32 unless --precision; bf16 really runs the bf16 forward (its
  // test loss is not f32's), auto says what it chose
  char *ef = NULL, *eb = NULL;
  snprintf(args, sizeof args, "eval %s/p1/best.safetensors --data %s/corpus --split %s/split.tsv",
           DIR_, DIR_, DIR_);
  CHECK(run_attn_log(bin, args, "pe1.log", &ef) == 0);
  CHECK(ef && strstr(ef, "\nprecision: f32 (--precision)"));
  snprintf(args, sizeof args, "eval %s/p1/best.safetensors --data %s/corpus --split %s/split.tsv "
           "--precision bf16", DIR_, DIR_, DIR_);
  CHECK(run_attn_log(bin, args, "pe2.log", &eb) == 0);
  CHECK(eb && strstr(eb, "\nprecision: bf16 (--precision)"));
  const char *lf = ef ? strstr(ef, "transformer loss ") : NULL, *lb = eb ? strstr(eb, "transformer loss ") : NULL;
  CHECK(lf && lb && strtod(lf + 17, NULL) != strtod(lb + 17, NULL));
  free(ef);
  free(eb);
  snprintf(args, sizeof args, "eval %s/p1/best.safetensors --data %s/corpus --split %s/split.tsv "
           "--precision auto", DIR_, DIR_, DIR_);
  CHECK(run_attn_log(bin, args, "pe3.log", &g) == 0);
  CHECK(g && (strstr(g, "\nprecision: f32 (auto: ") || strstr(g, "\nprecision: bf16 (auto: ")) &&
        strstr(g, "Test split: "));
  free(g);
  // the generic level has no bf16 unit: auto stays f32, an explicit bf16 runs with a warning
  snprintf(generic, sizeof generic, "ATTN_CPU=generic %s", bin);
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --epochs 1 --members 1 "
           "--out %s/p2", DIR_, DIR_, model, DIR_);
  CHECK(run_attn_log(generic, args, "p2.log", &g) == 0);
  CHECK(g && strstr(g, "precision: f32 (auto: no candidate but f32 at the generic level"));
  free(g);
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --epochs 1 --members 1 "
           "--precision bf16 --out %s/p3", DIR_, DIR_, model, DIR_);
  CHECK(run_attn_log(generic, args, "p3.log", &g) == 0);
  const char *w = g ? strstr(g, "attn train: warning: --precision bf16 runs at ") : NULL;
  CHECK(w && strstr(w, "f32's tokens/s on this CPU (probe; generic level") &&
        strstr(w, "no bf16 unit") && strstr(w, "this training takes ~"));
  CHECK(g && strstr(g, "precision: bf16 (--precision bf16; probe ") && strstr(g, "Epoch 1/1 | "));
  free(g);
  // a budget nothing fits: 1 member x the epoch floor (ceil(0.7 * 3) = 3),
  // said in the log and on stderr
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --epochs 3 --members 2 "
           "--time-budget 0.01 --out %s/p4", DIR_, DIR_, model, DIR_);
  CHECK(run_attn_log(bin, args, "p4.log", &g) == 0);
  CHECK(g && strstr(g, "time budget 0m00s: 2 members x 3 epochs would take ~") &&
        strstr(g, "even 1 member x 3 epochs (~") && strstr(g, "does not fit: running it anyway"));
  CHECK(g && strstr(g, "Epoch 3/3 | ") && !strstr(g, "member 2 of"));
  CHECK(g && strstr(g, "\naccuracy: the budget holds 1 member, not the ensemble of 2 that beats "
                       "the Naive Bayes baseline: the result may fall below it"));
  free(g);
  // a budget the plan fits: unchanged, and said
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --epochs 2 --members 2 "
           "--time-budget 100000 --out %s/p5", DIR_, DIR_, model, DIR_);
  CHECK(run_attn_log(bin, args, "p5.log", &g) == 0);
  CHECK(g && strstr(g, "the plan fits") && strstr(g, "member 2 of 2") && strstr(g, "Epoch 2/2"));
  CHECK(g && strstr(g, "expected duration: ~") && strstr(g, ": 2 members x 2 epochs of "));
  CHECK(g && strstr(g, "(ETA of the training: "));
  free(g);
  snprintf(args, sizeof args, "train --data %s/corpus --time-budget 0", DIR_);
  CHECK(run_attn(bin, args, "p6.log") != 0);  // refused: seconds > 0
}

/* --time-budget re-plans at every epoch end: a probe that measured the
 * machine far slower than its epochs then run (ATTN_TRAIN_PROBE_SCALE, as a
 * busy machine during the probe would) planned 1 member at the epoch floor;
 * after epoch 1 the plan grows back to the ensemble the command asked for,
 * said in the log with the measured and the probed speed, and the second
 * member trains; the members' folders and the ensemble's checkpoint are
 * those of an ensemble planned up front. */
static void test_budget_replan_grows(void) {
  const char *bin = tool_or_skip();
  if (!bin) return;
  write_corpus();
  char args[1024];
  char *g = NULL;
  setenv("ATTN_TRAIN_PROBE_SCALE", "0.000001", 1);
  snprintf(args, sizeof args,
           "train --data %s/corpus --split %s/split.tsv --dim 16 --heads 2 "
           "--ff 32 --layers 1 --max-len 48 --vocab 300 --batch 8 --threads 1 --progress plain "
           "--epochs 3 --members 2 --time-budget 600 --out %s/r1",
           DIR_, DIR_, DIR_);
  CHECK(run_attn_log(bin, args, "r1.log", &g) == 0);
  unsetenv("ATTN_TRAIN_PROBE_SCALE");
  CHECK(g && strstr(g, "even 1 member x 3 epochs") && strstr(g, "\naccuracy: the budget holds 1"));
  CHECK(g && strstr(g, "\nre-planning: at every epoch end"));
  const char *rp = g ? strstr(g, "\nplan: 1 x 3 -> 2 x 3: measured ") : NULL;
  if (rp) printf("  %.*s\n", (int)strcspn(rp + 1, "\n"), rp + 1);
  CHECK(rp && strstr(rp, "tokens/s over epoch 1, probe said "));
  CHECK(rp && strstr(rp, "member 2 of 2") && strstr(rp, "Ensemble of 2 | "));
  char path[512];
  snprintf(path, sizeof path, "%s/r1/member2/best.safetensors", DIR_);
  CHECK(access(path, F_OK) == 0);
  snprintf(path, sizeof path, "%s/r1/best.safetensors", DIR_);
  CHECK(access(path, F_OK) == 0);
  free(g);
}

/* The numbers after each "key" in the epoch lines of log, up to n. */
static int epoch_figures(const char *log, const char *key, double *v, int n) {
  int k = 0;
  for (const char *q = log ? strstr(log, key) : NULL; q && k < n; q = strstr(q + 1, key))
    v[k++] = atof(q + strlen(key));
  return k;
}

/* --varlen on and off train to the same figures (packed batches: float
 * rounding apart, the same numbers; dropout draws the same per real token);
 * --bench-varlen times the run's batches both ways, attn bench train --varlen random ones;
 * attn eval prints the same report both ways; a bad mode is refused. */
static void test_varlen(void) {
  const char *bin = tool_or_skip();
  if (!bin) return;
  write_corpus();
  char args[1024];
  const char *model = "--dim 16 --heads 2 --ff 32 --layers 2 --max-len 512 --vocab 300 --batch 8 "
                      "--lr 0.01 --epochs 2 --token-dropout 0.2 --dropout 0.1 --threads 1 "
                      "--progress plain --members 1 --precision f32";
  char *log[2] = {NULL, NULL};
  for (int on = 0; on < 2; on++) {
    snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --out %s/v%d "
             "--varlen %s", DIR_, DIR_, model, DIR_, on, on ? "on" : "off");
    CHECK(run_attn_log(bin, args, on ? "v1.log" : "v0.log", &log[on]) == 0);
  }
  CHECK(log[0] && log[1] && !strstr(log[0], ", packed: ") && strstr(log[1], ", packed: "));
  static const char *const keys[3] = {"Train Loss: ", "Val Loss: ", "Val Acc: "};
  for (int i = 0; i < 3; i++) {
    double a[2], b[2];
    CHECK(epoch_figures(log[0], keys[i], a, 2) == 2 && epoch_figures(log[1], keys[i], b, 2) == 2);
    for (int e = 0; e < 2; e++) CHECK(fabs(a[e] - b[e]) <= 2e-4 * (i == 2 ? 100 : 1));
  }
  free(log[0]);
  free(log[1]);
  char *out = NULL;
  snprintf(args, sizeof args, "train --data %s/corpus --split %s/split.tsv %s --bench-varlen 2",
           DIR_, DIR_, model);
  CHECK(run_attn_log(bin, args, "vb.log", &out) == 0);
  CHECK(out && strstr(out, "varlen bench: 2 training batches") && strstr(out, "; 2 batches packed") &&
        strstr(out, "ratio packed / padded: "));
  free(out);
  // attn bench train --varlen: its random batches padded, then packed (no timing checked)
  CHECK(run_attn_log(bin, "bench train --vocab 50 --dim 16 --heads 2 --ff 32 --layers 1 --seq 32 "
                     "--batch 4 --steps 1 --threads 1 --varlen", "vbt.log", &out) == 0);
  CHECK(out && strstr(out, "attn-f32-varlen tokens/s ") &&
        strstr(out, "ratio attn-f32-varlen / attn-f32: "));
  free(out);
  char *ev[2] = {NULL, NULL};  // attn eval both ways: the same report
  for (int on = 0; on < 2; on++) {
    snprintf(args, sizeof args, "eval %s/v1/best.safetensors --data %s/corpus --split %s/split.tsv "
             "--threads 1 --varlen %s", DIR_, DIR_, DIR_, on ? "on" : "off");
    CHECK(run_attn_log(bin, args, on ? "ve1.log" : "ve0.log", &out) == 0);
    ev[on] = out ? lines_with(out, "  transformer (attn)") : NULL;
    free(out);
  }
  CHECK(ev[0] && ev[1] && ev[0][0] && !strcmp(ev[0], ev[1]));
  free(ev[0]);
  free(ev[1]);
  snprintf(args, sizeof args, "train --data %s/corpus --varlen maybe", DIR_);
  CHECK(run_attn(bin, args, "vbad.log") != 0);
}

int main(void) {
  if (!mkdtemp(DIR_)) return 1;
  RUN(test_train_resume_eval_predict);
  RUN(test_ensemble);
  RUN(test_resume_before_members);
  RUN(test_precision_and_budget);
  RUN(test_budget_replan_grows);
  RUN(test_varlen);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", DIR_);
  if (!getenv("ATTN_KEEP") && system(cmd) != 0) printf("  could not remove %s\n", DIR_);
  HARNESS_END();
}
