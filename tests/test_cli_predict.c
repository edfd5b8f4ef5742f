/* `attn predict` on awkward inputs (found by fuzzing): a directory,
 * /dev/zero, a /proc file, a missing file or an oversized message among good
 * ones (each reported as "attn predict: FILE: reason", the others still
 * classified, exit 1 at the end); a mail given where the model belongs; model
 * files whose config disagrees with their tensors (refused before allocating
 * what the config claims); labels that are not one name per class. The model
 * is a tiny random one written here. The tool is $ATTN_BIN (make test), else
 * <dir of this program>/../attn. */
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/bpe.h"
#include "apps/classifier.h"
#include "apps/mail.h"
#include "apps/trainer.h"
#include "harness.h"

static char bin[512], dir[64], err[8192], out[8192];

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

/* A tiny random 2-class model with its tokenizer at path; `labels` and a
 * replacement `config` JSON as metadata when not NULL (config: the model's). */
static void write_model(const char *path, const char *labels, const char *config, int layers) {
  const char *texts[2] = {mail_a, mail_b};
  size_t lens[2] = {sizeof mail_a - 1, sizeof mail_b - 1};
  attn_bpe *bpe = NULL;
  CHECK_OK(attn_bpe_train(texts, lens, 2, NULL, &bpe));
  if (!bpe) return;
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = attn_bpe_vocab_size(bpe);
  c.d_model = 8, c.heads = 2, c.ff = 16, c.layers = layers, c.max_len = 16;
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 7));
  attn_st *meta = NULL;
  char *tok = NULL;
  CHECK_OK(attn_st_new(&meta));
  CHECK_OK(attn_bpe_save(bpe, &tok));
  CHECK_OK(attn_st_set_meta(meta, "tokenizer", tok));
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

/* dir/<tag>model.safetensors (a 1-layer model) and the two mails
 * dir/<tag>a.eml, dir/<tag>b.eml; the paths into model, a, b [128]. */
static void write_model_and_mails(const char *tag, char *model, char *a, char *b) {
  snprintf(model, 128, "%s/%smodel.safetensors", dir, tag);
  snprintf(a, 128, "%s/%sa.eml", dir, tag);
  snprintf(b, 128, "%s/%sb.eml", dir, tag);
  write_model(model, NULL, NULL, 1);
  write_text(a, mail_a);
  write_text(b, mail_b);
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
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return;
  }
  char model[128], a[128], b[128], big[128], args[2048];
  write_model_and_mails("", model, a, b);
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
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return;
  }
  char model[128], a[128], b[128], args[1024];
  write_model_and_mails("p", model, a, b);
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
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
