/* Diagnosis of attention heads: synthetic matrices with known patterns are
 * classified as such; statistics have their exact values; bad input fails. */
#include <sys/wait.h>
#include <unistd.h>

#include "apps/viz/diagnose.h"
#include "apps/viz/viz.h"
#include "harness.h"

#ifdef ATTN_HAVE_CAIRO
#include <cairo.h>
#endif

/* fontconfig (under cairo's text) keeps a few process-wide allocations */
__attribute__((used)) const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }

enum { L = 12 };

/* rows normalised to 1 */
static void normalise(float *p, int lq, int lk) {
  for (int i = 0; i < lq; i++) {
    double s = 0;
    for (int j = 0; j < lk; j++)
      s += p[i * lk + j];
    for (int j = 0; j < lk; j++)
      p[i * lk + j] = (float)(p[i * lk + j] / s);
  }
}

/* weight w on key target(i), the rest spread evenly over the other keys */
static void peaked(float *p, int lk, int shift, float w) {
  for (int i = 0; i < L; i++) {
    int t = i + shift < 0 ? 0 : i + shift >= lk ? lk - 1 : i + shift;
    for (int j = 0; j < lk; j++)
      p[i * lk + j] = j == t ? w : (1 - w) / (lk - 1);
  }
}

static attn_head_diag diagnose(const float *p, int lk, const attn_diag_opts *o) {
  attn_head_diag d;
  memset(&d, 0, sizeof d);
  CHECK_OK(attn_diagnose_head_f32(p, L, lk, o, &d));
  return d;
}

static void test_identity_is_diagonal(void) {
  float p[L * L] = {0};
  for (int i = 0; i < L; i++)
    p[i * L + i] = 1;
  attn_head_diag d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_DIAGONAL);
  CHECK(d.diag_mass == 1 && d.prev_mass == 0 && d.entropy == 0 && d.mean_distance == 0);
  CHECK(d.dist_profile[0] == 1 && !d.uniform_flag);
  CHECK(d.causal);       /* lower-triangular: detected as causal */
  peaked(p, L, 0, 0.7f); /* dense, non-causal, 70% on self */
  d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_DIAGONAL && !d.causal);
  CHECK(fabs(d.diag_mass - 0.7) < 1e-6);
}

static void test_previous_and_next_token(void) {
  float p[L * L];
  peaked(p, L, -1, 0.8f);
  attn_head_diag d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_PREVIOUS);
  /* row 0 has no previous token: its 0.8 lands on key 0 */
  CHECK(fabs(d.prev_mass - 0.8) < 1e-6);
  /* strictly causal previous-token head */
  memset(p, 0, sizeof p);
  p[0] = 1;
  for (int i = 1; i < L; i++)
    p[i * L + i - 1] = 0.9f, p[i * L + i] = 0.1f;
  d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_PREVIOUS && d.causal);
  CHECK(fabs(d.prev_mass - 0.9) < 1e-6);
  CHECK(fabs(d.mean_distance - 0.9 * (L - 1) / L) < 1e-6);
  CHECK(fabs(d.dist_profile[1] - 0.9 * (L - 1) / L) < 1e-6);
  peaked(p, L, +1, 0.75f);
  d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_NEXT);
  CHECK(fabs(d.next_mass - 0.75) < 1e-6);
}

static void test_uniform_is_flagged(void) {
  float p[L * L];
  for (int i = 0; i < L * L; i++)
    p[i] = 1.0f / L;
  attn_head_diag d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_UNIFORM && d.uniform_flag);
  CHECK(fabs(d.entropy - 1) < 1e-6);
  /* the detail says what it is; whether it is a fault is attn_diagnose_advise's */
  CHECK(strstr(d.detail, "spread evenly: entropy 1.00") && !strstr(d.detail, "init"));
  /* causal uniform: row i spreads over i+1 keys: still entropy 1 */
  memset(p, 0, sizeof p);
  for (int i = 0; i < L; i++)
    for (int j = 0; j <= i; j++)
      p[i * L + j] = 1.0f / (float)(i + 1);
  d = diagnose(p, L, NULL);
  CHECK(d.causal && d.pattern == ATTN_PATTERN_UNIFORM);
  CHECK(fabs(d.entropy - 1) < 1e-6);
  CHECK(fabs(d.received_cv) < 1e-6); /* every key gets exactly its uniform share */
  /* told it is not causal, the same rows are not uniform over all keys */
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  o.causal = 0;
  d = diagnose(p, L, &o);
  CHECK(d.entropy < 0.9);
}

/* attn_diagnose_advise's words into a malloc'd string; *count its result. */
static char *advise(const attn_head_diag *d, const float *p, int heads, int lk,
                    const attn_diag_context *c, int *count) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return NULL;
  *count = attn_diagnose_advise(f, d, p, 1, heads, L, lk, c);
  fclose(f);
  return buf;
}

/* The same evenly spread attention (two heads over 12 keys) is legitimate in
 * a mean-pooled classifier, suspicious in a decoder, and depends on what the
 * model is when that is not said; the evidence (accuracy, entropy against
 * log N, whether the heads differ) is spelt out. */
static void test_uniform_advice_depends_on_the_model(void) {
  float p[2 * L * L];
  for (int i = 0; i < 2 * L * L; i++) p[i] = 1.0f / L;
  attn_head_diag d[2];
  CHECK_OK(attn_diagnose_f32(p, 2, L, L, NULL, d));
  CHECK(d[0].pattern == ATTN_PATTERN_UNIFORM && d[1].pattern == ATTN_PATTERN_UNIFORM);
  CHECK(attn_diagnose_head_spread(p, 0, 2, L, L) == 0);
  attn_diag_context c;
  attn_diag_context_default(&c);
  CHECK(c.kind == ATTN_DIAG_MODEL_UNKNOWN && isnan(c.accuracy) && isnan(c.loss));
  int count = -1;
  c.kind = ATTN_DIAG_MODEL_POOLED;
  c.accuracy = 0.99;
  char *s = advise(d, p, 2, L, &c, &count);
  CHECK(count == 2 && s);
  if (s) {
    CHECK(strstr(s, "2 of 2 head(s) spread their attention nearly evenly (layer 0 heads 0,1)"));
    CHECK(strstr(s, "entropy 1.00 of the maximum log(12) = 2.48 nats"));
    CHECK(strstr(s, "about 12 of the 12 tokens"));
    CHECK(strstr(s, "mean-pooled classifier") && strstr(s, "legitimate"));
    CHECK(strstr(s, "held-out accuracy of 99.0 % says the model works: nothing to fix"));
    CHECK(strstr(s, "nearly alike (mean difference 0.00 of 1)"));
    CHECK(!strstr(s, "xavier") && !strstr(s, "init)"));
    if (strstr(s, "xavier")) printf("%s", s);
  }
  free(s);
  c.accuracy = 0.55; /* a poor classifier: look at the training first */
  s = advise(d, p, 2, L, &c, &count);
  CHECK(s && strstr(s, "accuracy of 55.0 % is poor") && strstr(s, "check\n  the training"));
  free(s);
  c.accuracy = NAN; /* nothing known: the accuracy decides */
  s = advise(d, p, 2, L, &c, &count);
  CHECK(s && strstr(s, "Its accuracy decides") && !strstr(s, "xavier"));
  free(s);
  c.kind = ATTN_DIAG_MODEL_DECODER;
  s = advise(d, p, 2, L, &c, &count);
  CHECK(s && strstr(s, "decoder") && strstr(s, "suspicious") && strstr(s, "xavier_uniform_") &&
        strstr(s, "1/sqrt(d_k)") && !strstr(s, "legitimate solution"));
  free(s);
  c.kind = ATTN_DIAG_MODEL_UNKNOWN;
  s = advise(d, p, 2, L, NULL, &count); /* NULL: unknown */
  CHECK(s && strstr(s, "depends on what the model is") && strstr(s, "untrained layer") &&
        strstr(s, "xavier_uniform_") && !strstr(s, "causal"));
  free(s);
  float cz[L * L]; /* causal and uniform over the keys each query sees */
  memset(cz, 0, sizeof cz);
  for (int i = 0; i < L; i++)
    for (int j = 0; j <= i; j++) cz[i * L + j] = 1.0f / (float)(i + 1);
  CHECK_OK(attn_diagnose_f32(cz, 1, L, L, NULL, d));
  s = advise(d, cz, 1, L, NULL, &count);
  CHECK(count == 1 && s && strstr(s, "the weights are causal, as a decoder's are") &&
        strstr(s, "(causal: log of the keys each query sees)"));
  free(s);
  /* heads that differ, both still near-uniform: half the keys 1.5/L, half 0.5/L */
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++) p[L * L + i * L + j] = (j < L / 2 ? 1.5f : 0.5f) / L;
  CHECK_OK(attn_diagnose_f32(p, 2, L, L, NULL, d));
  CHECK(d[1].pattern == ATTN_PATTERN_UNIFORM);
  CHECK(fabs(attn_diagnose_head_spread(p, 0, 2, L, L) - 0.25) < 1e-6);
  s = advise(d, p, 2, L, NULL, &count);
  CHECK(s && strstr(s, "heads differ from one another (mean difference 0.25 of 1)"));
  free(s);
  /* a few keys: the flag says little */
  float q[4 * 4];
  for (int i = 0; i < 16; i++) q[i] = 0.25f;
  CHECK_OK(attn_diagnose_f32(q, 1, 4, 4, NULL, d));
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  CHECK(attn_diagnose_advise(f, d, q, 1, 1, 4, 4, NULL) == 1);
  fclose(f);
  CHECK(buf && strstr(buf, "With only 4 keys") && strstr(buf, "0.50 of the\n  maximum"));
  free(buf);
  /* no near-uniform head: nothing said */
  peaked(p, L, 0, 0.9f);
  CHECK_OK(attn_diagnose_f32(p, 1, L, L, NULL, d));
  s = advise(d, p, 1, L, NULL, &count);
  CHECK(count == 0 && s && s[0] == '\0');
  free(s);
  attn_diag_model m;
  CHECK_OK(attn_diag_model_from_name("classifier", &m));
  CHECK(m == ATTN_DIAG_MODEL_POOLED && !strcmp(attn_diag_model_name(m), "classifier"));
  CHECK_OK(attn_diag_model_from_name("decoder", &m));
  CHECK(m == ATTN_DIAG_MODEL_DECODER);
  CHECK_ERR(attn_diag_model_from_name("encoder", &m), ATTN_EINVAL);
}

/* `attn diagnose` (ATTN_BIN) on a uniform file: --model and --accuracy, or the
 * file's metadata model.kind / model.accuracy, choose the advice; bad values
 * are usage errors (2) on the command line, the file's fault (1) in it. */
static void test_advice_in_the_tool(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin) {
    SKIP("ATTN_BIN not set: the attn tool is not exercised");
    return;
  }
  char dir[] = "/tmp/attn_test_diag_XXXXXX", path[128], cmd[1024], outp[160];
  if (!mkdtemp(dir)) return;
  snprintf(path, sizeof path, "%s/u.safetensors", dir);
  snprintf(outp, sizeof outp, "%s/out.txt", dir);
  float p[2 * L * L];
  for (int i = 0; i < 2 * L * L; i++) p[i] = 1.0f / L;
  const char *meta[][2] = {{NULL, NULL}, {"classifier", "0.995"}, {"decoder", NULL}, {"robot", NULL}};
  const struct {
    int meta;
    const char *args, *want, *unwanted;
    int rc;
  } cases[] = {{0, "", "depends on what the model is", NULL, 0},
               {0, "--model classifier --accuracy 99.5", "nothing to fix", "xavier", 0},
               {0, "--model decoder", "suspicious", "legitimate solution", 0},
               {1, "", "accuracy of 99.5 % says the model works", "xavier", 0},
               {1, "--model decoder", "is good, though", "legitimate solution", 0},
               {2, "", "xavier_uniform_", "legitimate solution", 0},
               {0, "--model robot", "--model: model kind 'robot'", NULL, 2},
               {0, "--accuracy 1.5x", "--accuracy: '1.5x' is not an accuracy", NULL, 2},
               {3, "", "model kind 'robot'", NULL, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    attn_st *st = NULL;
    int64_t shape[3] = {2, L, L};
    CHECK_OK(attn_st_new(&st));
    CHECK_OK(attn_st_add_f32(st, "attn", 3, shape, p));
    if (meta[cases[k].meta][0]) CHECK_OK(attn_st_set_meta(st, "model.kind", meta[cases[k].meta][0]));
    if (meta[cases[k].meta][1]) CHECK_OK(attn_st_set_meta(st, "model.accuracy", meta[cases[k].meta][1]));
    CHECK_OK(attn_st_save(st, path));
    attn_st_free(st);
    snprintf(cmd, sizeof cmd, "%s diagnose '%s' %s > '%s' 2>&1", bin, path, cases[k].args, outp);
    int rc = system(cmd);
    rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    char *s = read_whole_file(outp, NULL);
    int ok = s && rc == cases[k].rc && strstr(s, cases[k].want) &&
             (!cases[k].unwanted || !strstr(s, cases[k].unwanted));
    if (!ok) {
      printf("  case %zu (%s): exit %d\n%s", k, cases[k].args, rc, s ? s : "");
      h_case_failed = 1;
    }
    free(s);
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
}

static void test_first_token_and_punctuation_focus(void) {
  float p[L * L];
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = j == 0 ? 0.7f : 0.3f / (L - 1);
  attn_head_diag d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_FOCUSED && d.max_col == 0);
  CHECK(fabs(d.max_col_mass - 0.7) < 1e-6);
  CHECK(strstr(d.detail, "first token") != NULL);
  const char *tok[L] = {"[CLS]", "the", "cat",  "sat", ".", "it",
                        "was",   "a",   "nice", "day", "!", "[SEP]"};
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = j == 4 ? 0.6f : 0.4f / (L - 1);
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  o.tokens = tok;
  d = diagnose(p, L, &o);
  CHECK(d.pattern == ATTN_PATTERN_FOCUSED && d.max_col == 4);
  CHECK(strstr(d.detail, "'.'") && strstr(d.detail, "punctuation"));
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = j == 11 ? 0.6f : 0.4f / (L - 1);
  d = diagnose(p, L, &o);
  CHECK(d.max_col == 11 && strstr(d.detail, "special token"));
}

static void test_rare_token_focus_needs_frequencies(void) {
  /* attention received grows with -log frequency */
  float freq[L] = {5000, 3000, 20, 4000, 2500, 3, 6000, 150, 3500, 2800, 8, 4200};
  float p[L * L];
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = expf(0.4f * -logf(freq[j] / 30000.0f));
  normalise(p, L, L);
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  o.freq = freq;
  attn_head_diag d = diagnose(p, L, &o);
  CHECK(d.pattern == ATTN_PATTERN_RARE);
  CHECK(d.rare_corr > 0.9 && d.received_cv >= ATTN_DIAG_RARE_CV_MIN);
  attn_head_diag without = diagnose(p, L, NULL);
  CHECK(without.pattern != ATTN_PATTERN_RARE && isnan(without.rare_corr));
  /* the same head attending to frequent tokens instead is not rare-focused */
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = expf(0.4f * logf(freq[j] / 30000.0f));
  normalise(p, L, L);
  d = diagnose(p, L, &o);
  CHECK(d.pattern != ATTN_PATTERN_RARE && d.rare_corr < -0.5);
}

static void test_local_band_and_mixed(void) {
  float p[L * L];
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = expf(-0.6f * fabsf((float)(i - j)));
  normalise(p, L, L);
  attn_head_diag d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_LOCAL);
  CHECK(d.diag_mass < 0.5 && d.local_mass >= 0.6);
  double s = 0;
  for (int b = 0; b < ATTN_DIAG_DIST_BINS; b++)
    s += d.dist_profile[b];
  CHECK(fabs(s - 1) < 1e-6);
  /* two far-apart spikes per row: none of the patterns */
  memset(p, 0, sizeof p);
  for (int i = 0; i < L; i++)
    p[i * L + (i + 4) % L] = 0.45f, p[i * L + (i + 8) % L] = 0.55f;
  d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_MIXED && !d.uniform_flag);
}

static void test_sentence_level_attention(void) {
  /* two sentences; each token spreads over its own sentence */
  const char *tok[L] = {"the", "cat",  "sat",  "on",    "it",  ".",
                        "a",   "nice", "warm", "sunny", "day", "[SEP]"};
  float p[L * L];
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = i / 6 == j / 6 ? 0.95f / 6 : 0.05f / 6;
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  o.tokens = tok;
  attn_head_diag d = diagnose(p, L, &o);
  CHECK(d.pattern == ATTN_PATTERN_SENTENCE);
  CHECK(fabs(d.sentence_mass - 0.95) < 1e-6 && fabs(d.sentence_base - 0.5) < 1e-6);
  attn_head_diag none = diagnose(p, L, NULL); /* no tokens: sentences unknown */
  CHECK(none.pattern != ATTN_PATTERN_SENTENCE && isnan(none.sentence_mass));
  int32_t one[L] = {0}; /* one sentence: staying inside it means nothing */
  o.sentence = one;
  d = diagnose(p, L, &o);
  CHECK(d.pattern != ATTN_PATTERN_SENTENCE && d.sentence_mass > 0.99);
}

static void test_several_heads_and_the_table(void) {
  float p[3 * L * L];
  peaked(p, L, 0, 0.9f);
  peaked(p + L * L, L, -1, 0.9f);
  for (int i = 0; i < L * L; i++)
    p[2 * L * L + i] = 1.0f / L;
  attn_head_diag d[3];
  CHECK_OK(attn_diagnose_f32(p, 3, L, L, NULL, d));
  CHECK(d[0].pattern == ATTN_PATTERN_DIAGONAL && d[1].pattern == ATTN_PATTERN_PREVIOUS &&
        d[2].pattern == ATTN_PATTERN_UNIFORM);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  attn_diagnose_print(f, d, 1, 3);
  fclose(f);
  CHECK(buf && strstr(buf, "previous-token") && strstr(buf, "uniform") && strstr(buf, "entropy"));
  int lines = 0;
  for (size_t i = 0; i < n; i++)
    lines += buf[i] == '\n';
  CHECK(lines == 4);
  free(buf);
  CHECK(!strcmp(attn_pattern_name(ATTN_PATTERN_RARE), "rare-token"));
#ifdef ATTN_HAVE_CAIRO
  char path[] = "/tmp/attn_test_diag_XXXXXX.png";
  int fd = mkstemps(path, 4);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  CHECK_OK(attn_diagnose_chart(path, d, 1, 3));
  cairo_surface_t *s = cairo_image_surface_create_from_png(path);
  CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS);
  CHECK(cairo_image_surface_get_width(s) > 500 && cairo_image_surface_get_height(s) > 3 * 20);
  cairo_surface_destroy(s);
  unlink(path);
#else
  CHECK_ERR(attn_diagnose_chart("x.png", d, 1, 3), ATTN_EUNSUPPORTED);
#endif
  CHECK_ERR(attn_diagnose_chart("x.gif", d, 1, 3), ATTN_EINVAL);
}

static void test_bad_inputs(void) {
  float p[L * L];
  peaked(p, L, 0, 0.9f);
  attn_head_diag d;
  CHECK_ERR(attn_diagnose_head_f32(NULL, L, L, NULL, &d), ATTN_EINVAL);
  CHECK_ERR(attn_diagnose_head_f32(p, 0, L, NULL, &d), ATTN_EINVAL);
  p[13] = NAN;
  CHECK_ERR(attn_diagnose_head_f32(p, L, L, NULL, &d), ATTN_ENUMERIC);
  CHECK(strstr(attn_last_error(), "probs[1, 1]") != NULL);
  peaked(p, L, 0, 0.9f);
  p[3 * L] += 1; /* row 3 sums to 2 */
  CHECK_ERR(attn_diagnose_head_f32(p, L, L, NULL, &d), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "row 3") != NULL);
  peaked(p, L, 0, 0.9f);
  p[5] = -0.01f;
  CHECK_ERR(attn_diagnose_head_f32(p, L, L, NULL, &d), ATTN_EINVAL);
  peaked(p, L, 0, 0.9f);
  float freq[L];
  for (int j = 0; j < L; j++)
    freq[j] = 1;
  freq[2] = 0;
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  o.freq = freq;
  CHECK_ERR(attn_diagnose_head_f32(p, L, L, &o, &d), ATTN_EINVAL);
  attn_diag_opts_default(&o);
  o.causal = 1; /* but the rows attend to later keys */
  CHECK_ERR(attn_diagnose_head_f32(p, L, L, &o, &d), ATTN_EINVAL);
  memset(p, 0, sizeof p);
  CHECK_ERR(attn_diagnose_head_f32(p, L, L, NULL, &d), ATTN_EINVAL);
  /* fully masked rows are skipped, not an error */
  for (int j = 0; j < L; j++)
    p[5 * L + j] = 1.0f / L;
  CHECK_OK(attn_diagnose_head_f32(p, L, L, NULL, &d));
  CHECK(d.pattern == ATTN_PATTERN_UNIFORM);
}

int main(void) {
  RUN(test_identity_is_diagonal);
  RUN(test_previous_and_next_token);
  RUN(test_uniform_is_flagged);
  RUN(test_uniform_advice_depends_on_the_model);
  RUN(test_advice_in_the_tool);
  RUN(test_first_token_and_punctuation_focus);
  RUN(test_rare_token_focus_needs_frequencies);
  RUN(test_local_band_and_mixed);
  RUN(test_sentence_level_attention);
  RUN(test_several_heads_and_the_table);
  RUN(test_bad_inputs);
#ifdef ATTN_HAVE_CAIRO
  attn_viz_release_fonts(); /* font caches, so LeakSanitizer sees no leaks */
#endif
  HARNESS_END();
}
