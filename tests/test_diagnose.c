/* Diagnosis of attention heads: synthetic matrices with known patterns are
 * classified as such; statistics have their exact values; bad input fails. */
#include <unistd.h>

#include "apps/diagnose.h"
#include "apps/viz.h"
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

static void test_uniform_is_flagged_with_causes(void) {
  float p[L * L];
  for (int i = 0; i < L * L; i++)
    p[i] = 1.0f / L;
  attn_head_diag d = diagnose(p, L, NULL);
  CHECK(d.pattern == ATTN_PATTERN_UNIFORM && d.uniform_flag);
  CHECK(fabs(d.entropy - 1) < 1e-6);
  CHECK(strstr(d.detail, "init") && strstr(d.detail, "d_k") && strstr(d.detail, "Q~K"));
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
  RUN(test_uniform_is_flagged_with_causes);
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
