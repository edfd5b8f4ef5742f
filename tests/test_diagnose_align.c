/* Monotonic alignment of cross attention (src/apps/diagnose_align.h):
 * exact statistics on one-hot paths (straight, reversed, padded), a blurred
 * diagonal called diagonal and the same rows shuffled not, the table and the
 * path text, bad input refused. */
#include <sys/wait.h>
#include <unistd.h>

#include "apps/viz/diagnose_align.h"
#include "apps/viz/viz.h"
#include "harness.h"

/* row i: weight mostly on round(i * slope), a little on its neighbours */
static void blurred_diagonal(float *p, int lo, int ls, double slope) {
  for (int i = 0; i < lo; i++) {
    int t = (int)lround(i * slope);
    for (int j = 0; j < ls; j++)
      p[i * ls + j] = j == t ? 0.8f : abs(j - t) == 1 ? 0.1f : 0.0f;
    if (t == 0) p[i * ls] += 0.1f;
    if (t == ls - 1) p[i * ls + t] += 0.1f;
  }
}

static void test_identity_is_exactly_diagonal(void) {
  enum { N = 6 };
  float p[N * N] = {0};
  for (int i = 0; i < N; i++)
    p[i * N + i] = 1;
  attn_align_diag d;
  CHECK_OK(attn_diagnose_alignment_f32(p, N, N, &d));
  CHECK(d.rows == N && d.src_len == N && d.monotonic == 1 && d.coverage == 1);
  CHECK(fabs(d.slope - 1) < 1e-12 && fabs(d.intercept) < 1e-12 && fabs(d.diag_dist) < 1e-12);
  CHECK(d.diagonal);
}

static void test_reversed_path_is_not_monotonic(void) {
  enum { N = 6 };
  float p[N * N] = {0};
  for (int i = 0; i < N; i++)
    p[i * N + N - 1 - i] = 1;
  attn_align_diag d;
  CHECK_OK(attn_diagnose_alignment_f32(p, N, N, &d));
  CHECK(d.monotonic == 0 && fabs(d.slope + 1) < 1e-12 && fabs(d.diag_dist) < 1e-12);
  CHECK(!d.diagonal);
}

/* padded output steps (zero rows) and source positions (zero columns) are left out */
static void test_padding_is_left_out(void) {
  enum { LO = 7, LS = 9, N = 5 };
  float p[LO * LS] = {0};
  for (int i = 0; i < N; i++)
    p[i * LS + i] = 1;
  attn_align_diag d;
  CHECK_OK(attn_diagnose_alignment_f32(p, LO, LS, &d));
  CHECK(d.rows == N && d.src_len == N && d.coverage == 1 && d.diagonal);
}

/* letters -> phonemes: a blurred diagonal of slope 0.7 is diagonal; the same
 * rows in a shuffled order are not */
static void test_blurred_diagonal_vs_shuffled(void) {
  enum { LO = 10, LS = 8 };
  float p[LO * LS], q[LO * LS];
  blurred_diagonal(p, LO, LS, 0.7);
  attn_align_diag d, s;
  CHECK_OK(attn_diagnose_alignment_f32(p, LO, LS, &d));
  CHECK(d.diagonal && d.monotonic == 1 && fabs(d.slope - 0.7) < 0.05 && d.diag_dist < 0.05);
  const int perm[LO] = {3, 8, 0, 6, 1, 9, 4, 2, 7, 5};
  for (int i = 0; i < LO; i++)
    memcpy(q + i * LS, p + perm[i] * LS, LS * sizeof(float));
  CHECK_OK(attn_diagnose_alignment_f32(q, LO, LS, &s));
  CHECK(!s.diagonal && s.monotonic < 0.7 && s.diag_dist > 0.15);
  CHECK(s.coverage == d.coverage); /* the same positions, in another order */
}

static void test_table_and_path_text(void) {
  enum { LO = 3, LS = 3 };
  float p[2 * LO * LS] = {0};
  for (int i = 0; i < LO; i++)
    p[i * LS + i] = 1, p[LO * LS + i * LS + LS - 1 - i] = 1;
  attn_align_diag d[2];
  CHECK_OK(attn_diagnose_alignments_f32(p, 2, LO, LS, d));
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  attn_diagnose_alignment_print(f, d, 1, 2, 1);
  const char *out[LO] = {"K", "AE1", "T"}, *src[LS] = {"c", "a", "t"};
  attn_alignment_path_print(f, p, LO, LS, out, src);
  attn_alignment_path_print(f, p + LO * LS, LO, LS, NULL, NULL);
  fclose(f);
  CHECK(buf && strstr(buf, "layer 0 head 0") && strstr(buf, "layer 0 mean"));
  CHECK(buf && strstr(buf, "diagonal (monotonic)") && strstr(buf, "not monotonic"));
  CHECK(buf && strstr(buf, "K->c 1.00  AE1->a 1.00  T->t 1.00\n"));
  CHECK(buf && strstr(buf, "0->2 1.00  1->1 1.00  2->0 1.00\n"));
  free(buf);
}


/* a last </s> row (wherever the decoder looks to stop) is left out of the
 * measures by its label, and still shown in the path */
static void test_eos_row_left_out(void) {
  enum { LO = 5, LS = 4 };
  float p[LO * LS] = {0};
  for (int i = 0; i < LS; i++) p[i * LS + i] = 1;
  p[4 * LS + 0] = 1; /* </s> back to the first letter */
  const char *out[LO] = {"K", "AE1", "T", "S", "</s>"}, *other[LO] = {"K", "AE1", "T", "S", "Z"};
  const char *src[LS] = {"c", "a", "t", "s"};
  for (int k = 0; k < 2; k++) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    CHECK_OK(attn_diagnose_cross_report(f, p, 1, 1, LO, LS, k ? other : out, src));
    fclose(f);
    if (k == 0)
      CHECK(buf && strstr(buf, "leave out the last row, </s>") &&
            strstr(buf, "layer 0 head 0      1.00    1.00     0.000     1.00  diagonal (monotonic)") &&
            strstr(buf, "S->s 1.00  </s>->c 1.00\n"));
    else
      CHECK(buf && !strstr(buf, "leave out") && strstr(buf, "0.75") && strstr(buf, "not monotonic"));
    if (buf && !strstr(buf, k ? "not monotonic" : "1.00  diagonal")) printf("%s", buf);
    free(buf);
  }
}

static void test_bad_inputs(void) {
  float p[4] = {0.5f, 0.5f, 1, 0};
  attn_align_diag d;
  CHECK_ERR(attn_diagnose_alignment_f32(NULL, 2, 2, &d), ATTN_EINVAL);
  CHECK_ERR(attn_diagnose_alignment_f32(p, 0, 2, &d), ATTN_EINVAL);
  p[1] = NAN;
  CHECK_ERR(attn_diagnose_alignment_f32(p, 2, 2, &d), ATTN_ENUMERIC);
  CHECK(strstr(attn_last_error(), "probs[0, 1]") != NULL);
  p[1] = -0.5f;
  CHECK_ERR(attn_diagnose_alignment_f32(p, 2, 2, &d), ATTN_EINVAL);
  memset(p, 0, sizeof p);
  CHECK_ERR(attn_diagnose_alignment_f32(p, 2, 2, &d), ATTN_EINVAL);
  p[0] = 1; /* one row: no steps to call monotonic */
  CHECK_OK(attn_diagnose_alignment_f32(p, 2, 2, &d));
  CHECK(isnan(d.monotonic) && !d.diagonal);
}

/* `attn diagnose --cross` and `attn viz --cross --model` on a saved map
 * [2 layers, 2 heads, 3, 3]: head 0 diagonal, head 1 reversed */
static void test_in_the_tool(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin) {
    SKIP("ATTN_BIN not set: the attn tool is not exercised");
    return;
  }
  char dir[] = "/tmp/attn_test_align_XXXXXX", path[128], cmd[1024], outp[160];
  if (!mkdtemp(dir)) return;
  snprintf(path, sizeof path, "%s/x.safetensors", dir);
  snprintf(outp, sizeof outp, "%s/out.txt", dir);
  float p[2 * 2 * 9] = {0};
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < 3; i++)
      p[(l * 2) * 9 + i * 3 + i] = 1, p[(l * 2 + 1) * 9 + i * 3 + 2 - i] = 1;
  attn_st *st = NULL;
  int64_t shape[4] = {2, 2, 3, 3};
  CHECK_OK(attn_st_new(&st));
  CHECK_OK(attn_st_add_f32(st, "attn", 4, shape, p));
  CHECK_OK(attn_st_set_meta(st, "query_tokens", "[\"K\", \"AE1\", \"T\"]"));
  CHECK_OK(attn_st_set_meta(st, "key_tokens", "[\"c\", \"a\", \"t\"]"));
  CHECK_OK(attn_st_save(st, path));
  attn_st_free(st);
  const struct {
    const char *args, *want;
    int rc;
  } cases[] = {{"diagnose '%s' --cross", "layer 1 head 1", 0},
               {"diagnose '%s' --cross", "layer 1 mean", 0},
               {"diagnose '%s' --cross", "K->c 0.50  AE1->a 1.00  T->c 0.50", 0},
               {"diagnose '%s' --cross --chart x.png", "not with --cross", 2},
#ifdef ATTN_HAVE_CAIRO
               {"viz '%s' %s.png --cross --model", "wrote", 0},
               {"viz '%s' %s.svg --cross --all-heads --layer 1", "wrote", 0},
#endif
               {"diagnose '%s' --help", "--cross", 0}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char args[512];
    snprintf(args, sizeof args, cases[k].args, path, path);
    snprintf(cmd, sizeof cmd, "%s %s > '%s' 2>&1", bin, args, outp);
    int rc = system(cmd);
    rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    char *s = read_whole_file(outp, NULL);
    if (!s || rc != cases[k].rc || !strstr(s, cases[k].want)) {
      printf("  '%s' -> %d, want %d and '%s':\n%s\n", args, rc, cases[k].rc, cases[k].want,
             s ? s : "");
      h_case_failed = 1;
    }
    free(s);
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
}

int main(void) {
  RUN(test_identity_is_exactly_diagonal);
  RUN(test_reversed_path_is_not_monotonic);
  RUN(test_padding_is_left_out);
  RUN(test_blurred_diagonal_vs_shuffled);
  RUN(test_table_and_path_text);
  RUN(test_eos_row_left_out);
  RUN(test_bad_inputs);
  RUN(test_in_the_tool);
#ifdef ATTN_HAVE_CAIRO
  attn_viz_release_fonts(); /* font caches, so LeakSanitizer sees no leaks */
#endif
  HARNESS_END();
}
