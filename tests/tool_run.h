/* Running the built attn tool from a test: where it is, and one run with its
 * exit status, stdout and stderr. The tool is $ATTN_BIN (set by `make test`),
 * else <dir of this program>/../attn. */
#ifndef ATTN_TEST_TOOL_RUN_H
#define ATTN_TEST_TOOL_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The tool's path into bin (argv0: this test program's argv[0]). */
static inline void tool_path(const char *argv0, char *bin, size_t n) {
  const char *env = getenv("ATTN_BIN");
  if (env && env[0]) {
    snprintf(bin, n, "%s", env);
    return;
  }
  snprintf(bin, n, "%s", argv0 ? argv0 : ""); /* BUILD/tests/test_x -> BUILD/attn */
  char *slash = strrchr(bin, '/');
  if (slash) *slash = '\0', slash = strrchr(bin, '/');
  if (slash && (size_t)(slash + 1 - bin) + 5 <= n)
    strcpy(slash + 1, "attn");
  else
    snprintf(bin, n, "build/attn");
}

/* Reads up to n-1 bytes of path into buf (NUL-terminated; "" if absent). */
static inline void tool_slurp(const char *path, char *buf, size_t n) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t got = fread(buf, 1, n - 1, f);
  buf[got] = '\0';
  fclose(f);
}

/* `prefix bin args` (prefix: e.g. environment assignments, may be "") with
 * stdout and stderr into files in dir, then into out / err (either may be
 * NULL). Returns the exit status, 128 if the tool did not exit. */
static inline int tool_run(const char *prefix, const char *bin, const char *dir, const char *args,
                           char *out, size_t nout, char *err, size_t nerr) {
  /* files named for this process: suites run side by side (CI's two
   * emulated ones) would otherwise read each other's output */
  char cmd[4096], op[512], ep[512];
  snprintf(op, sizeof op, "%s/tool_stdout.%ld.txt", dir, (long)getpid());
  snprintf(ep, sizeof ep, "%s/tool_stderr.%ld.txt", dir, (long)getpid());
  snprintf(cmd, sizeof cmd, "%s '%s' %s >'%s' 2>'%s' </dev/null", prefix, bin, args, op, ep);
  int rc = system(cmd);
  if (out) tool_slurp(op, out, nout);
  if (err) tool_slurp(ep, err, nerr);
  remove(op);
  remove(ep);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

#endif
