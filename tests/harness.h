/* Minimal test harness: RUN(fn) runs one test case; CHECK* record failures
 * with file:line; SKIP(why) marks a case that cannot run here; main ends
 * with HARNESS_END() which prints "# N passed, N failed" (", N skipped" when
 * some were; read by tests/run.sh) and sets the exit status.
 * Tolerances for f32 results are written next to each comparison. */
#ifndef ATTN_TEST_HARNESS_H
#define ATTN_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

static int h_passed, h_failed, h_case_failed, h_skipped, h_case_skipped;
static char h_skip_why[256];

/* Inside a case: it cannot run in this build or on this machine (no
 * chromium, built without GMime or cairo, no AVX-512...). The case counts as
 * skipped, not passed (a failed CHECK still makes it fail); the reason is
 * printed on its "skip" line, which tests/run.sh repeats. printf-style. */
#define SKIP(...)                                                                      \
  do {                                                                                 \
    snprintf(h_skip_why, sizeof h_skip_why, __VA_ARGS__);                              \
    h_case_skipped = 1;                                                                \
  } while (0)

/* A case that this build does not compile in at all, counted as skipped. */
#define RUN_SKIPPED(fn, why)                                                           \
  do {                                                                                 \
    h_skipped++;                                                                       \
    printf("skip %s: %s\n", #fn, why);                                                \
    fflush(stdout);                                                                    \
  } while (0)

/* ATTN_TEST_SAMPLE=k (CI's emulated-Haswell suite, where qemu runs the
 * AVX2 kernels ~300x slower than the CPU): the sweeps that ask h_sample()
 * before each case run about one case in k, picked by a hash of the case's
 * number in the program (the same cases on every run; the first always).
 * Unset, empty or 1 (every native run): every case. What the sample leaves
 * out is run natively at every level; the emulator's own job, an
 * instruction this CPU lacks on its path, is also checked over every
 * function by tests/test_isa_objects.sh. */
static inline int h_sample_every(void) {
  static int k = 0;
  if (k == 0) {
    const char *e = getenv("ATTN_TEST_SAMPLE");
    k = e && atoi(e) > 1 ? atoi(e) : 1;
  }
  return k;
}
static inline int h_sample(void) {
  static unsigned n = 0;
  const int k = h_sample_every();
  unsigned h = n++ * 2654435761u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return k == 1 || n == 1 || h % (unsigned)k == 0;
}

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                \
      h_case_failed = 1;                                                               \
    }                                                                                  \
  } while (0)

#define CHECK_OK(expr)                                                                 \
  do {                                                                                 \
    attn_status s_ = (expr);                                                           \
    if (s_ != ATTN_OK) {                                                               \
      printf("  %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr, attn_status_str(s_), \
             attn_last_error());                                                       \
      h_case_failed = 1;                                                               \
    }                                                                                  \
  } while (0)

/* expr must fail with status st and leave a non-empty message */
#define CHECK_ERR(expr, st)                                                            \
  do {                                                                                 \
    attn_clear_error();                                                                \
    attn_status s_ = (expr);                                                           \
    if (s_ != (st) || attn_last_error()[0] == '\0') {                                  \
      printf("  %s:%d: %s -> %s (\"%s\"), expected %s\n", __FILE__, __LINE__, #expr,   \
             attn_status_str(s_), attn_last_error(), attn_status_str(st));             \
      h_case_failed = 1;                                                               \
    }                                                                                  \
  } while (0)

#define RUN(fn)                                                                        \
  do {                                                                                 \
    h_case_failed = h_case_skipped = 0;                                                \
    fn();                                                                              \
    if (h_case_failed) {                                                               \
      h_failed++;                                                                      \
      printf("FAIL %s\n", #fn);                                                        \
    } else if (h_case_skipped) {                                                       \
      h_skipped++;                                                                     \
      printf("skip %s: %s\n", #fn, h_skip_why);                                        \
    } else {                                                                           \
      h_passed++;                                                                      \
      printf("ok   %s\n", #fn);                                                        \
    }                                                                                  \
    fflush(stdout);                                                                    \
  } while (0)

#define HARNESS_END()                                                                  \
  do {                                                                                 \
    if (h_skipped)                                                                     \
      printf("# %d passed, %d failed, %d skipped\n", h_passed, h_failed, h_skipped);   \
    else                                                                               \
      printf("# %d passed, %d failed\n", h_passed, h_failed);                          \
    return h_failed ? 1 : 0;                                                           \
  } while (0)

/* Compare n floats: |got-want| <= atol + rtol*|want| elementwise; NaN/Inf must
 * match exactly (e.g. lse = -inf on a masked row). Returns max abs error and
 * marks the case failed (printing the first bad index) if out of tolerance. */
static inline double check_close_at(const char *file, int line, const char *what,
                                    const float *got, const float *want, long n, double atol,
                                    double rtol) {
  double maxerr = 0;
  long bad = -1;
  for (long i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    if (!isfinite(w) || !isfinite(g)) {
      if (!(isnan(w) && isnan(g)) && g != w && bad < 0) bad = i;
      continue;
    }
    double e = fabs(g - w);
    if (e > maxerr) maxerr = e;
    if (e > atol + rtol * fabs(w) && bad < 0) bad = i;
  }
  if (bad >= 0) {
    printf("  %s:%d: %s[%ld] = %.8g, want %.8g (atol %g rtol %g, max err %.3g)\n", file, line,
           what, bad, (double)got[bad], (double)want[bad], atol, rtol, maxerr);
    h_case_failed = 1;
  }
  return maxerr;
}
#define CHECK_CLOSE(what, got, want, n, atol, rtol)                                    \
  check_close_at(__FILE__, __LINE__, what, got, want, (long)(n), atol, rtol)

/* A whole file, NUL-terminated (NULL if it cannot be read); *len (may be
 * NULL) receives its size. The caller frees. */
static inline char *read_whole_file(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  if (b) b[n] = '\0';
  if (len) *len = b ? n : 0;
  return b;
}

/* Deterministic test data: uniform in [lo, hi). */
static inline void fill_uniform(float *x, long n, unsigned seed, float lo, float hi) {
  unsigned s = seed * 2654435761u + 12345u;
  for (long i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = lo + (hi - lo) * (float)((s >> 8) & 0xffffff) / 16777216.0f;
  }
}

#endif
