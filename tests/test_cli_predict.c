/* `attn predict` on awkward inputs (found by fuzzing): a directory,
 * /dev/zero, a /proc file, a missing file or an oversized message among good
 * ones (each reported as "attn predict: FILE: reason", the others still
 * classified, exit 1 at the end); a mail given where the model belongs; model
 * files whose config disagrees with their tensors (refused before allocating
 * what the config claims); labels that are not one name per class; the
 * attention of one's own message (--picture, --save-attention, --member) and
 * its round trip through attn viz / attn diagnose. The model is a tiny random
 * one written here. The tool is $ATTN_BIN (make test), else
 * <dir of this program>/../attn. */
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/text/bpe.h"
#include "apps/classifier/classifier.h"
#include "apps/classifier/classifier_data.h"
#include "apps/classifier/classifier_ensemble.h"
#include "apps/classifier/classifier_train.h"
#include "apps/classifier/classifier_viz.h"
#include "apps/classifier/mail.h"
#include "apps/viz/viz.h"
#include "harness.h"

/* fontconfig (under the pictures' text, drawn in this process by
 * attn_clf_picture) keeps a few process-wide allocations */
__attribute__((used)) const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }

static char bin[512], dir[64], err[8192], out[8192], want_line[256];

/* `bin args`: exit status; stderr in err, stdout in out */
static int run_tool(const char *args) {
  char cmd[4096], ep[128], op[128];
  snprintf(ep, sizeof ep, "%s/stderr.txt", dir);
  snprintf(op, sizeof op, "%s/stdout.txt", dir);
  snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s' </dev/null", bin, args, op, ep);
  int rc = system(cmd);
  const char *paths[2] = {ep, op};
  char *bufs[2] = {err, out};
  for (int i = 0; i < 2; i++) {
    bufs[i][0] = '\0';
    FILE *f = fopen(paths[i], "r");
    if (!f) continue;
    size_t n = fread(bufs[i], 1, sizeof err - 1, f);
    bufs[i][n] = '\0';
    fclose(f);
  }
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) fputs(text, f), fclose(f);
}

static const char mail_a[] = "From: alice@example.org\nSubject: lunch\n\nmeeting about the build\n";
static const char mail_b[] = "From: deals@offers.biz\nSubject: cheap pills\n\nclick for money\n";

/* write_model_seeded's model: without its tokenizer (a model predict cannot
 * read); its max_len (0: 16) and tail */
static int model_without_tokenizer, model_max_len, model_tail;

/* A tiny random 2-class model (parameters drawn from seed; seed 0: all 0) with
 * its tokenizer at path; `labels` and a replacement `config` JSON as metadata
 * when not NULL (config: the model's). */
static void write_model_seeded(const char *path, const char *labels, const char *config, int layers,
                               uint64_t seed) {
  const char *texts[2] = {mail_a, mail_b};
  size_t lens[2] = {sizeof mail_a - 1, sizeof mail_b - 1};
  attn_bpe *bpe = NULL;
  CHECK_OK(attn_bpe_train(texts, lens, 2, NULL, &bpe));
  if (!bpe) return;
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = attn_bpe_vocab_size(bpe);
  c.d_model = 8, c.heads = 2, c.ff = 16, c.layers = layers;
  c.max_len = model_max_len ? model_max_len : 16, c.tail = model_tail;
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  if (seed) CHECK_OK(attn_clf_init(&m, seed));
  attn_st *meta = NULL;
  char *tok = NULL;
  CHECK_OK(attn_st_new(&meta));
  CHECK_OK(attn_bpe_save(bpe, &tok));
  if (!model_without_tokenizer) CHECK_OK(attn_st_set_meta(meta, "tokenizer", tok));
  if (labels) CHECK_OK(attn_st_set_meta(meta, "labels", labels));
  CHECK_OK(attn_clf_save(path, &m, NULL, NULL, meta));
  if (config) { /* the same tensors under another config */
    attn_st *f = NULL;
    CHECK_OK(attn_st_load(path, &f));
    CHECK_OK(attn_st_set_meta(f, "config", config));
    CHECK_OK(attn_st_save(f, path));
    attn_st_free(f);
  }
  free(tok);
  attn_st_free(meta);
  attn_clf_free(&m);
  attn_bpe_free(bpe);
}

static void write_model(const char *path, const char *labels, const char *config, int layers) {
  write_model_seeded(path, labels, config, layers, 7);
}

/* dir/<tag>model.safetensors (a model of `layers` layers) and the two mails
 * dir/<tag>a.eml, dir/<tag>b.eml; the paths into model, a, b [128]. */
static void write_model_and_mails(const char *tag, int layers, char *model, char *a, char *b) {
  snprintf(model, 128, "%s/%smodel.safetensors", dir, tag);
  snprintf(a, 128, "%s/%sa.eml", dir, tag);
  snprintf(b, 128, "%s/%sb.eml", dir, tag);
  write_model(model, NULL, NULL, layers);
  write_text(a, mail_a);
  write_text(b, mail_b);
}

/* The start of a case that needs GMime: 0 (the case skipped) without it,
 * else 1 with write_model_and_mails's model and mails. */
static int model_and_mails_case(const char *tag, int layers, char *model, char *a, char *b) {
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return 0;
  }
  write_model_and_mails(tag, layers, model, a, b);
  return 1;
}

/* The model's config JSON with key's value replaced by value. */
static void config_with(const char *model, const char *key, const char *value, char *buf,
                        size_t n) {
  attn_st *f = NULL;
  CHECK_OK(attn_st_load(model, &f));
  const char *c = f ? attn_st_meta(f, "config") : NULL;
  buf[0] = '\0';
  if (!c) {
    attn_st_free(f);
    return;
  }
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *at = strstr(c, pat), *end = at ? at + strlen(pat) : NULL;
  while (end && *end && *end != ',' && *end != '}') end++;
  if (at) snprintf(buf, n, "%.*s%s%s%s", (int)(at - c), c, pat, value, end);
  attn_st_free(f);
}

static void test_bad_files_are_reported_and_skipped(void) {
  char model[128], a[128], b[128], big[128], args[2048];
  if (!model_and_mails_case("", 1, model, a, b)) return;
  snprintf(big, sizeof big, "%s/big.eml", dir);
  FILE *f = fopen(big, "w"); /* one byte over the limit */
  if (f) {
    fputs(mail_a, f);
    for (size_t i = sizeof mail_a - 1; i <= ATTN_MAIL_MAX_BYTES; i++) fputc('x', f);
    fclose(f);
  }
  snprintf(args, sizeof args, "predict '%s' '%s' '%s' /dev/zero '%s/missing.eml' '%s' '%s' /proc/self/status", model,
           a, dir, dir, big, b);
  int rc = run_tool(args);
  CHECK(rc == 1);
  char want[256];
  snprintf(want, sizeof want, "attn predict: %s: Is a directory\n", dir);
  CHECK(strstr(err, want) != NULL);
  CHECK(strstr(err, "attn predict: /dev/zero: larger than 8 MiB") != NULL);
  snprintf(want, sizeof want, "attn predict: %s/missing.eml: No such file or directory\n", dir);
  CHECK(strstr(err, want) != NULL);
  snprintf(want, sizeof want, "attn predict: %s: larger than 8 MiB", big);
  CHECK(strstr(err, want) != NULL);
  snprintf(want, sizeof want, "%s\t", a); /* the good files, before and after the bad ones */
  CHECK(strstr(out, want) != NULL);
  snprintf(want, sizeof want, "%s\t", b);
  CHECK(strstr(out, want) != NULL);
  CHECK(strstr(out, "/proc/self/status\t") != NULL); /* size 0 on stat, read to its end */
  if (rc != 1 || !strstr(out, "/proc/self/status\t")) printf("  exit %d\n%s%s", rc, out, err);
  snprintf(args, sizeof args, "predict '%s' '%s' '%s'", model, a, b); /* all good: exit 0 */
  CHECK(run_tool(args) == 0 && err[0] == '\0');
}

static void test_mail_given_as_model(void) {
  char a[128], b[128], args[512];
  snprintf(a, sizeof a, "%s/a.eml", dir);
  snprintf(b, sizeof b, "%s/b.eml", dir);
  write_text(a, mail_a);
  write_text(b, mail_b);
  snprintf(args, sizeof args, "predict '%s' '%s'", a, b);
  CHECK(run_tool(args) == 1);
  CHECK(strstr(err, "a.eml: not a safetensors file") != NULL);
  if (!strstr(err, "not a safetensors file")) printf("  %s", err);
}

/* A config whose sizes the tensors do not back is refused before the model is
 * allocated (max_len or vocab 2^31 allocated 137 GB first); layers 0 with a
 * layer's tensors in the file is refused, not ignored. */
static void test_config_checked_against_tensors(void) {
  char model[128], bad[128], cfg[1024], args[512], a[128];
  snprintf(model, sizeof model, "%s/model.safetensors", dir);
  snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
  snprintf(a, sizeof a, "%s/a.eml", dir);
  write_text(a, mail_a);
  write_model(model, NULL, NULL, 1);
  const struct {
    const char *key, *value, *expect;
  } cases[] = {{"max_len", "2147483648", "positions.weight"},
               {"vocab", "2147483648", "embedding.weight"},
               {"layers", "2147483648", "layers.2147483647.linear1.weight"},
               {"ff", "1073741824", "linear1.weight"},
               {"classes", "3", "fc.weight"},
               {"layers", "0", "'layers.0."}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    config_with(model, cases[i].key, cases[i].value, cfg, sizeof cfg);
    CHECK(cfg[0] != '\0');
    write_model(bad, NULL, cfg, 1);
    snprintf(args, sizeof args, "predict '%s' '%s'", bad, a);
    int rc = run_tool(args);
    if (rc != 1 || !strstr(err, cases[i].expect)) {
      printf("  %s = %s: exit %d: %s", cases[i].key, cases[i].value, rc, err);
      h_case_failed = 1;
    }
  }
}

static void test_labels_one_name_per_class(void) {
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return;
  }
  char model[128], args[512], a[128];
  snprintf(model, sizeof model, "%s/labels.safetensors", dir);
  snprintf(a, sizeof a, "%s/a.eml", dir);
  write_text(a, mail_a);
  const char *bad[] = {"a,b,c", "spam", ",b", "a,"};
  for (int i = 0; i < 4; i++) {
    write_model(model, bad[i], NULL, 1);
    snprintf(args, sizeof args, "predict '%s' '%s'", model, a);
    CHECK(run_tool(args) == 1 && strstr(err, "labels") && !strstr(out, "\t"));
  }
  write_model(model, "good,bad", NULL, 1);
  CHECK(run_tool(args) == 0 && (strstr(out, "\tgood\t") || strstr(out, "\tbad\t")));
}

/* P(class 1) of path in a predict output ("path<TAB>label<TAB>p"); -1 if absent. */
static double p_second(const char *text, const char *path, const char *second) {
  char want[256];
  snprintf(want, sizeof want, "%s\t", path);
  const char *at = strstr(text, want);
  if (!at) return -1;
  at += strlen(want);
  const char *tab = strchr(at, '\t');
  if (!tab) return -1;
  double p = atof(tab + 1);
  return strncmp(at, second, strlen(second)) == 0 ? p : 1.0 - p;
}

/* --precision: bf16 and auto classify as f32 does (probabilities within
 * bf16's rounding), auto says its choice on stderr, a bad value or a missing
 * FILE is a usage error (exit 2). */
static void test_precision_option(void) {
  char model[128], a[128], b[128], args[1024];
  if (!model_and_mails_case("p", 1, model, a, b)) return;
  snprintf(args, sizeof args, "predict '%s' '%s' '%s'", model, a, b);
  CHECK(run_tool(args) == 0);
  double f[2] = {p_second(out, a, "spam"), p_second(out, b, "spam")};
  CHECK(f[0] >= 0 && f[1] >= 0);
  static const char *precs[2] = {"bf16", "auto"};
  for (int i = 0; i < 2; i++) {
    snprintf(args, sizeof args, "predict '%s' --precision %s '%s' '%s'", model, precs[i], a, b);
    CHECK(run_tool(args) == 0);
    double g[2] = {p_second(out, a, "spam"), p_second(out, b, "spam")};
    CHECK(fabs(g[0] - f[0]) < 0.02 && fabs(g[1] - f[1]) < 0.02);
    if (i == 1) CHECK(strstr(err, "attn predict: precision ") != NULL && strstr(err, "(auto: ") != NULL);
    if (h_case_failed) printf("  %s: %.4f %.4f against f32 %.4f %.4f\n%s", precs[i], g[0], g[1], f[0], f[1], err);
  }
  snprintf(args, sizeof args, "predict '%s' --precision fp64 '%s'", model, a);
  CHECK(run_tool(args) == 2 && strstr(err, "--precision: 'fp64' is not") != NULL);
  snprintf(args, sizeof args, "predict '%s' --precision bf16", model);
  CHECK(run_tool(args) == 2);
}


/* dir/name exists as a non-empty file */
static int exists(const char *name) {
  char path[512];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

/* The attention of member `member` of the model at `model` on the mail text
 * `mail`, computed here as predict reads a message: probs [layers, heads, n,
 * n] malloc'd (NULL on failure), *n the tokens. */
static float *attention_here(const char *model, int member, const char *mail, int64_t *n) {
  attn_clf_ens e;
  attn_st *f = NULL;
  attn_bpe *bpe = NULL;
  float *probs = NULL;
  char *text = NULL;
  size_t tlen = 0, nids = 0;
  CHECK_OK(attn_clf_ens_load(model, &e, &f));
  if (h_case_failed) return NULL;
  const attn_clf *m = &e.m[member];
  int32_t *ids = malloc((size_t)m->c.max_len * sizeof *ids);
  CHECK_OK(attn_bpe_load(attn_st_meta(f, "tokenizer"), &bpe));
  CHECK_OK(attn_mail_to_text_flags(mail, strlen(mail), attn_clf_mail_flags(&m->c), &text, &tlen, NULL));
  if (!h_case_failed) CHECK_OK(attn_clf_encode(bpe, text, tlen, m->c.max_len, m->c.tail, ids, &nids));
  *n = (int64_t)nids;
  if (!h_case_failed) probs = malloc((size_t)(m->c.layers * m->c.heads * *n * *n) * sizeof(float));
  if (probs) CHECK_OK(attn_clf_attention(m, ids, *n, probs));
  free(ids);
  free(text);
  attn_bpe_free(bpe);
  attn_st_free(f);
  attn_clf_ens_free(&e);
  return probs;
}

/* --save-attention holds exactly the model's attention [layers, heads, n, n]
 * on the message, one token label per position, and what the model was. */
static void check_saved(const char *path, const char *model, int member, const char *mail,
                        const char *member_meta) {
  attn_viz_input in;
  int64_t n = 0;
  float *want = attention_here(model, member, mail, &n);
  CHECK_OK(attn_viz_input_load(path, NULL, &in));
  if (h_case_failed || !want) {
    free(want);
    return;
  }
  CHECK(in.rank == 4 && in.layers == 2 && in.heads == 2 && in.lq == n && in.lk == n);
  CHECK(in.q_labels && in.k_labels && !strcmp(in.q_labels[0], "Subject"));
  if (in.lq == n) CHECK_CLOSE("saved attention", in.probs, want, 2 * 2 * n * n, 0, 0);
  attn_viz_input_free(&in);
  free(want);
  attn_st *f = NULL;
  CHECK_OK(attn_st_load(path, &f));
  const char *kind = attn_st_meta(f, "model.kind"), *mm = attn_st_meta(f, "model.member");
  CHECK(kind && !strcmp(kind, "classifier") && mm && !strcmp(mm, member_meta));
  CHECK(attn_st_meta(f, "prediction") && attn_st_meta(f, "model.file") &&
        !strcmp(attn_st_meta(f, "model.file"), model));
  attn_st_free(f);
}

/* Each message's pictures (per layer, per head, the page, the diagnosis)
 * under its file's stem, its attention saved for attn viz and attn diagnose
 * (the round trip), labels printed as without the options, no temporary
 * files left. */
static void test_picture_and_saved_attention(void) {
  char model[128], a[128], b[128], args[2048], path[256];
  if (!model_and_mails_case("v", 2, model, a, b)) return;
  snprintf(args, sizeof args, "predict '%s' '%s' '%s' '%s' --picture '%s/pics/new' --save-attention '%s/att.safetensors'",
           model, a, b, a, dir, dir);
  int rc = run_tool(args);
#ifdef ATTN_HAVE_CAIRO
  CHECK(rc == 0);
  const char *files[] = {"va_layer0.png", "va_layer1.png", "va_layer0_heads.png", "va_layer1_heads.png",
                         "va_layer0_head0.png", "va_layer0_head1.png", "va_layer1_head0.png",
                         "va_layer1_head1.png", "va.html", "va_diagnosis.txt", "vb_layer1_head1.png",
                         "vb.html", "vb_diagnosis.txt", "va-2_layer0.png" /* a again: its own stem */};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "pics/new/%s", files[i]);
    if (!exists(path)) printf("  no %s\n", path), h_case_failed = 1;
  }
  snprintf(args, sizeof args, "ls -a '%s/pics/new' | grep -c tmp > '%s/tmp.txt'", dir, dir);
  CHECK(system(args) != -1);
  snprintf(path, sizeof path, "%s/tmp.txt", dir);
  char *t = read_whole_file(path, NULL);
  CHECK(t && atoi(t) == 0); /* no temporary file left */
  free(t);
  snprintf(path, sizeof path, "%s/pics/new/va_diagnosis.txt", dir);
  t = read_whole_file(path, NULL);
  CHECK(t && strstr(t, "layer head  pattern") && strstr(t, "va.eml"));
  free(t);
  snprintf(path, sizeof path, "%s/pics/new/va.html", dir);
  t = read_whole_file(path, NULL);
  CHECK(t && strstr(t, "\"layers\":2,\"heads\":2") && strstr(t, "\"Subject\""));
  free(t);
  CHECK(strstr(err, "va.eml: pictures ") != NULL);
#else
  CHECK(rc == 1 && strstr(err, "cairo"));
#endif
  snprintf(want_line, sizeof want_line, "%s\t", a);
  CHECK(strstr(out, want_line) != NULL);
  snprintf(want_line, sizeof want_line, "%s\t", b);
  CHECK(strstr(out, want_line) != NULL);
  CHECK(exists("att_va.safetensors") && exists("att_vb.safetensors") && exists("att_va-2.safetensors"));
  snprintf(path, sizeof path, "%s/att_va.safetensors", dir);
  check_saved(path, model, 0, mail_a, "1 of 1");
  snprintf(path, sizeof path, "%s/att_vb.safetensors", dir);
  check_saved(path, model, 0, mail_b, "1 of 1");
  /* one FILE: OUT is the name itself; attn viz and attn diagnose read it */
  snprintf(args, sizeof args, "predict '%s' '%s' --save-attention '%s/one.safetensors'", model, a, dir);
  CHECK(run_tool(args) == 0 && exists("one.safetensors"));
  snprintf(args, sizeof args, "viz '%s/one.safetensors' '%s/one.html' --layer 1", dir, dir);
  CHECK(run_tool(args) == 0 && exists("one.html"));
#ifdef ATTN_HAVE_CAIRO
  snprintf(args, sizeof args, "viz '%s/one.safetensors' '%s/one.png' --layer 1 --head 1", dir, dir);
  CHECK(run_tool(args) == 0 && exists("one.png"));
#endif
  snprintf(args, sizeof args, "diagnose '%s/one.safetensors'", dir);
  CHECK(run_tool(args) == 0 && strstr(out, "2 layer(s) x 2 head(s)") && strstr(out, "layer head"));
}

/* An ensemble: member 1 by default (said on stderr), --member K another;
 * --member beyond the ensemble is refused. */
static void test_picture_of_an_ensemble_member(void) {
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return;
  }
  char one[128], ens[128], a[128], args[2048], path[256];
  snprintf(one, sizeof one, "%s/e1model.safetensors", dir);
  snprintf(ens, sizeof ens, "%s/ensemble.safetensors", dir);
  snprintf(a, sizeof a, "%s/ea.eml", dir);
  write_model(one, NULL, NULL, 2);
  write_text(a, mail_a);
  attn_clf m[2];
  attn_st *f = NULL;
  memset(m, 0, sizeof m);
  CHECK_OK(attn_clf_load(one, &m[0], &f));
  CHECK_OK(attn_clf_load(one, &m[1], NULL));
  CHECK_OK(attn_clf_init(&m[1], 99)); /* another member: other weights */
  CHECK_OK(attn_clf_ens_save(ens, m, 2, f));
  attn_st_free(f);
  attn_clf_free(&m[0]);
  attn_clf_free(&m[1]);
  if (h_case_failed) return;
  snprintf(args, sizeof args, "predict '%s' '%s' --save-attention '%s/m1.safetensors'", ens, a, dir);
  CHECK(run_tool(args) == 0 && strstr(err, "ensemble of 2: the attention shown is member 1's"));
  snprintf(path, sizeof path, "%s/m1.safetensors", dir);
  check_saved(path, ens, 0, mail_a, "1 of 2");
  snprintf(args, sizeof args, "predict '%s' '%s' --member 2 --save-attention '%s/m2.safetensors'", ens, a, dir);
  CHECK(run_tool(args) == 0 && !strstr(err, "member 1's"));
  snprintf(path, sizeof path, "%s/m2.safetensors", dir);
  check_saved(path, ens, 1, mail_a, "2 of 2");
  snprintf(args, sizeof args, "predict '%s' '%s' --member 3 --save-attention '%s/m3.safetensors'", ens, a, dir);
  CHECK(run_tool(args) == 1 && strstr(err, "--member 3: ") && strstr(err, "holds 2 member(s)") &&
        !exists("m3.safetensors"));
}

/* Where the pictures cannot go: said before any work (exit 1, no label);
 * a bad FILE among good ones: the others still get labels and pictures;
 * option mistakes are usage errors (exit 2). */
static void test_picture_bad_input(void) {
  char model[128], a[128], b[128], args[2048];
  if (!model_and_mails_case("w", 1, model, a, b)) return;
  const struct {
    const char *opts, *why;
    int rc;
  } cases[] = {{"--picture '%s/wa.eml/sub'", "wa.eml/sub: Not a directory", 1},
               {"--picture '%s/wa.eml'", "wa.eml: not a directory", 1},
               {"--save-attention '%s/none/x.safetensors'", "/none: No such file or directory", 1},
               {"--save-attention '%s/'", "a file name is needed", 1},
               {"--picture", "--picture needs a value", 2},
               {"--member 0 --picture '%s/p'", "--member: '0' is not a member number", 2},
               {"--bogus '%s'", "unknown option '--bogus'", 2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char opts[512];
    snprintf(opts, sizeof opts, cases[i].opts, dir);
    snprintf(args, sizeof args, "predict '%s' '%s' %s", model, a, opts);
    if (!strcmp(cases[i].opts, "--picture")) snprintf(args, sizeof args, "predict '%s' '%s' --picture", model, a);
    int rc = run_tool(args);
    if (rc != cases[i].rc || !strstr(err, cases[i].why) || strchr(out, '\t')) {
      printf("  %s: exit %d: %s", opts, rc, err);
      h_case_failed = 1;
    }
  }
  snprintf(args, sizeof args, "predict '%s' '%s' '%s/nothere.eml' '%s' --picture '%s/wp'", model, a, dir, b, dir);
  int rc = run_tool(args);
  CHECK(rc == 1 && strstr(err, "nothere.eml: No such file or directory"));
  snprintf(want_line, sizeof want_line, "%s\t", b);
  CHECK(strstr(out, want_line) != NULL);
#ifdef ATTN_HAVE_CAIRO
  CHECK(exists("wp/wa_layer0.png") && exists("wp/wb_layer0.png") && !exists("wp/nothere_layer0.png"));
#endif
  CHECK(run_tool("predict --help") == 0 && strstr(out, "--picture DIR") && strstr(out, "--save-attention"));
}

/* A model whose W_q, W_k (all weights) are 0 attends exactly evenly. Its
 * pictures' diagnosis calls that legitimate for this mean-pooled classifier
 * (it advised "poor init, try xavier_uniform_" for a 99 % classifier), and
 * says the model works when its accuracy is known to be good (eval's
 * pictures) -- both from predict --picture and from attn_clf_picture. */
static void test_uniform_attention_of_a_classifier_is_legitimate(void) {
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return;
  }
  char model[128], a[128], args[1024];
  snprintf(model, sizeof model, "%s/zero.safetensors", dir);
  snprintf(a, sizeof a, "%s/za.eml", dir);
  write_text(a, mail_a);
  write_model_seeded(model, NULL, NULL, 1, 0); /* every parameter 0 */
  attn_clf m;
  attn_st *f = NULL;
  attn_bpe *bpe = NULL;
  memset(&m, 0, sizeof m);
  CHECK_OK(attn_clf_load(model, &m, &f));
  if (f) CHECK_OK(attn_bpe_load(attn_st_meta(f, "tokenizer"), &bpe));
  attn_st_free(f);
  if (h_case_failed) {
    attn_clf_free(&m);
    attn_bpe_free(bpe);
    return;
  }
  snprintf(args, sizeof args, "predict '%s' '%s' --picture '%s/zp'", model, a, dir);
  int rc = run_tool(args);
#ifdef ATTN_HAVE_CAIRO
  char path[256];
  CHECK(rc == 0);
  snprintf(path, sizeof path, "%s/zp/za_diagnosis.txt", dir);
  char *t = read_whole_file(path, NULL);
  CHECK(t && strstr(t, "2 of 2 head(s) spread their attention nearly evenly") &&
        strstr(t, "mean-pooled classifier") && strstr(t, "legitimate") &&
        strstr(t, "Its accuracy decides") && !strstr(t, "xavier"));
  if (t && strstr(t, "xavier")) printf("%s", t);
  free(t);
  int32_t ids[16];
  size_t n = 0;
  CHECK_OK(attn_clf_encode(bpe, mail_b, sizeof mail_b - 1, 16, 0, ids, &n));
  snprintf(path, sizeof path, "%s/zp", dir);
  CHECK_OK(attn_clf_picture(&m, bpe, ids, (int64_t)n, 8, path, "zero", 0.99, NULL));
  snprintf(path, sizeof path, "%s/zp/diagnosis.txt", dir);
  t = read_whole_file(path, NULL);
  CHECK(t && strstr(t, "mean-pooled classifier") &&
        strstr(t, "held-out accuracy of 99.0 % says the model works: nothing to fix") &&
        !strstr(t, "xavier"));
  free(t);
#else
  CHECK(rc == 1);
#endif
  attn_clf_free(&m);
  attn_bpe_free(bpe);
}

/* A token label is at most 16 characters: a long token (a mail's rule of
 * underscores) ends in an ellipsis instead of running over the picture;
 * short ones are whole. */
static void test_long_token_labels_are_cut(void) {
  const char *rule = "________________________________________";
  char text[4096] = "";
  for (int i = 0; i < 60; i++) strcat(text, i % 2 ? "\nword\n" : rule);
  const char *texts[] = {text};
  size_t lens[] = {strlen(text)};
  attn_bpe *bpe = NULL;
  CHECK_OK(attn_bpe_train(texts, lens, 1, NULL, &bpe));
  int32_t ids[256];
  size_t n = 0;
  CHECK_OK(attn_bpe_encode(bpe, rule, strlen(rule), ids, 256, &n));
  char **lab = NULL;
  CHECK_OK(attn_clf_token_labels(bpe, ids, (int64_t)n, 0, &lab));
  int cut = 0;
  for (size_t i = 0; lab && i < n; i++) {
    size_t chars = 0;
    for (size_t j = 0; lab[i][j]; j++)
      chars += ((unsigned char)lab[i][j] & 0xC0) != 0x80;
    CHECK(chars <= 16);
    cut += strstr(lab[i], "\xE2\x80\xA6") != NULL;
  }
  attn_viz_labels_free(lab, (int64_t)n);
  CHECK(n >= 1 && cut >= 1);  // the rule is one long token or a few: cut
  int32_t w[8];
  CHECK_OK(attn_bpe_encode(bpe, "word", 4, w, 8, &n));
  lab = NULL;
  if (n) CHECK_OK(attn_clf_token_labels(bpe, w, (int64_t)n, 0, &lab));
  CHECK(lab && !strstr(lab[0], "\xE2\x80\xA6"));
  attn_viz_labels_free(lab, (int64_t)n);
  attn_bpe_free(bpe);
}

/* The user's note: a Chinese subject line and body, an emoji. */
static const char mail_zh[] =
    "From: me@example.org\nSubject: =?UTF-8?B?TWVldGluZyBub3RlcyDkvJrorq7orrDlvZUg8J+OiQ==?=\n"
    "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n"
    "Hi team:\n\xE6\x88\x91\xE4\xBB\xAC\xE5\x9C\xA8\xE4\xBC\x9A\xE8\xAE\xAE\xE4\xB8\x8A "
    "\xF0\x9F\x8E\x89\n";

/* The metadata value key of a safetensors file (malloc'd) or NULL. */
static char *meta_of(const char *path, const char *key) {
  attn_st *f = NULL;
  if (attn_st_load(path, &f)) return NULL;
  const char *v = attn_st_meta(f, key);
  char *copy = v ? strdup(v) : NULL;
  attn_st_free(f);
  return copy;
}

/* --merge chars|words: the pictures of the note's characters / words (the
 * titles say so; stderr too), the saved attention keeps the tokens and
 * their bytes, so attn viz --merge draws the same units later; the labels
 * saved are by character (会 cut over tokens: 会·, ·会). */
static void test_picture_merged_into_words(void) {
  char model[128], a[128], b[128], zh[128], args[2048], path[256];
  model_max_len = 128;
  int ok = model_and_mails_case("m", 1, model, a, b);
  model_max_len = 0;
  if (!ok) return;
  snprintf(zh, sizeof zh, "%s/note.eml", dir);
  write_text(zh, mail_zh);
  snprintf(
      args, sizeof args,
      "predict '%s' '%s' --picture '%s/mw' --merge words --save-attention '%s/note.safetensors'",
      model, zh, dir, dir);
  int rc = run_tool(args);
  char *t = NULL;
#ifdef ATTN_HAVE_CAIRO
  CHECK(rc == 0 && strstr(err, ", merged into ") && strstr(err, " words)") &&
        exists("mw/note_layer0.png") && exists("mw/note.html"));
  snprintf(path, sizeof path, "%s/mw/note.html", dir);
  t = read_whole_file(path, NULL);
  /* the page's title names the units; 会 and the emoji are words of their own */
  CHECK(t && strstr(t, "1 layer(s) x 2 head(s), words (from ") && strstr(t, "\"\xE4\xBC\x9A\"") &&
        strstr(t, "\"\xF0\x9F\x8E\x89\"") && strstr(t, "\"Meeting\""));
  free(t);
#else
  CHECK(rc == 1 && strstr(err, "cairo"));
#endif
  snprintf(path, sizeof path, "%s/note.safetensors", dir);
  char *tok = meta_of(path, "tokens"), *bytes = meta_of(path, "token_bytes");
  CHECK(tok && strstr(tok, "\"\xE4\xBC\x9A\xC2\xB7\"") && strstr(tok, "\"\xC2\xB7\xE4\xBC\x9A\"") &&
        !strstr(tok, "\\\\x"));
  CHECK(bytes && strstr(bytes, "\"e4\"")); /* a byte-level token of 会 */
  if (h_case_failed) printf("  tokens %.300s\n", tok ? tok : "(none)");
  free(tok), free(bytes);
  snprintf(args, sizeof args, "viz '%s' '%s/chars.html' --merge chars", path, dir);
  CHECK(run_tool(args) == 0 && exists("chars.html"));
  snprintf(path, sizeof path, "%s/chars.html", dir);
  t = read_whole_file(path, NULL);
  CHECK(t && strstr(t, "characters (from ") && strstr(t, "\"\xE4\xBC\x9A\""));
  free(t);
}

/* Bad --merge values and where there is no picture to merge (usage, exit
 * 2), a model without a tokenizer (exit 1): clear messages, and no folder
 * or file made; attn viz --merge of a file without the tokens' bytes. */
static void test_merge_and_tokenizer_bad_input(void) {
  char model[128], a[128], b[128], notok[128], args[2048];
  if (!model_and_mails_case("n", 1, model, a, b)) return;
  const struct {
    const char *opts, *why;
  } usage[] = {
      {"--picture '%s/never1' --merge sentences", "--merge: 'sentences' is not chars or words"},
      {"--picture '%s/never1' --merge", "--merge needs a value"},
      {"--merge words --save-attention '%s/never1.safetensors'", "--merge needs --picture DIR"}};
  for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
    char opts[512];
    snprintf(opts, sizeof opts, usage[i].opts, dir);
    snprintf(args, sizeof args, "predict '%s' '%s' %s", model, a, opts);
    int rc = run_tool(args);
    if (rc != 2 || !strstr(err, usage[i].why) || strchr(out, '\t')) {
      printf("  %s: exit %d: %s", opts, rc, err);
      h_case_failed = 1;
    }
  }
  CHECK(!exists("never1") && !exists("never1.safetensors"));
  /* the same model without its tokenizer */
  snprintf(notok, sizeof notok, "%s/notok.safetensors", dir);
  model_without_tokenizer = 1;
  write_model(notok, NULL, NULL, 1);
  model_without_tokenizer = 0;
  snprintf(args, sizeof args,
           "predict '%s' '%s' --picture '%s/never2' --save-attention '%s/never2.safetensors'",
           notok, a, dir, dir);
  int rc = run_tool(args);
  CHECK(rc == 1 && strstr(err, "notok.safetensors: no \"tokenizer\" metadata") &&
        strstr(err, "nothing was written"));
  if (rc != 1 || !strstr(err, "no \"tokenizer\"")) printf("  exit %d: %s", rc, err);
  struct stat sb;
  char never[256];
  snprintf(never, sizeof never, "%s/never2", dir);
  CHECK(stat(never, &sb) != 0); /* not even the folder */
  CHECK(!exists("never2.safetensors"));
  /* attn viz --merge needs the tokens' bytes: a file saved without them */
  float p[4] = {0.5f, 0.5f, 0.25f, 0.75f};
  const char *lab[2] = {"a", "b"};
  char file[256];
  snprintf(file, sizeof file, "%s/nobytes.safetensors", dir);
  CHECK_OK(attn_viz_save_f32(file, p, 1, 1, 2, 2, lab, lab, NULL));
  snprintf(args, sizeof args, "viz '%s' '%s/never3.png' --merge words", file, dir);
  rc = run_tool(args);
  CHECK(rc == 1 && strstr(err, "needs the tokens' bytes, metadata 'token_bytes'") &&
        !exists("never3.png"));
  snprintf(args, sizeof args, "viz '%s' '%s/never3.png' --merge token", file, dir);
  CHECK(run_tool(args) == 2 && strstr(err, "--merge: 'token' is not chars or words") &&
        !exists("never3.png"));
}

/* A message longer than max_len keeps its first max_len - tail tokens and
 * its last tail: the saved file marks the cut (token_breaks), so nothing is
 * read across it. */
static void test_cut_message_marks_the_break(void) {
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return;
  }
  char model[128], zh[128], args[1024], path[256];
  snprintf(model, sizeof model, "%s/tail.safetensors", dir);
  model_tail = 4;
  write_model(model, NULL, NULL, 1); /* max_len 16, tail 4 */
  model_tail = 0;
  snprintf(zh, sizeof zh, "%s/long.eml", dir);
  write_text(zh, mail_zh);
  snprintf(args, sizeof args, "predict '%s' '%s' --save-attention '%s/long.safetensors'", model, zh,
           dir);
  CHECK(run_tool(args) == 0);
  snprintf(path, sizeof path, "%s/long.safetensors", dir);
  char *brk = meta_of(path, "token_breaks");
  CHECK(brk && !strcmp(brk, "12"));
  if (!brk || strcmp(brk, "12")) printf("  token_breaks %s: %s", brk ? brk : "(none)", err);
  free(brk);
}

int main(int argc, char **argv) {
  const char *env = getenv("ATTN_BIN");
  if (env && env[0]) {
    snprintf(bin, sizeof bin, "%s", env);
  } else { /* BUILD/tests/test_cli_predict -> BUILD/attn */
    snprintf(bin, sizeof bin, "%s", argc > 0 ? argv[0] : "");
    char *slash = strrchr(bin, '/');
    if (slash) *slash = '\0', slash = strrchr(bin, '/');
    if (slash) strcpy(slash + 1, "attn");
    else snprintf(bin, sizeof bin, "build/attn");
  }
  snprintf(dir, sizeof dir, "/tmp/attn_cli_predict_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  RUN(test_bad_files_are_reported_and_skipped);
  RUN(test_mail_given_as_model);
  RUN(test_config_checked_against_tensors);
  RUN(test_labels_one_name_per_class);
  RUN(test_precision_option);
  RUN(test_picture_and_saved_attention);
  RUN(test_picture_of_an_ensemble_member);
  RUN(test_picture_bad_input);
  RUN(test_uniform_attention_of_a_classifier_is_legitimate);
  RUN(test_long_token_labels_are_cut);
  RUN(test_picture_merged_into_words);
  RUN(test_merge_and_tokenizer_bad_input);
  RUN(test_cut_message_marks_the_break);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  attn_viz_release_fonts(); /* font caches, so LeakSanitizer sees no leaks */
  HARNESS_END();
}
