/* Runs the Python package's tests (python/tests/run.py: the numpy API, the
 * PyTorch op, layer files, viz/diagnose) against this build's libattn.so and
 * attn tool, with the interpreter that has Debian's numpy and torch
 * ($ATTN_PYTHON, else /usr/bin/python3, else python3 on PATH). Its
 * "# N passed, N failed[, N skipped]" line is this program's, so tests/run.sh
 * counts every Python case at every ISA level (ATTN_CPU reaches the library).
 * Without numpy, in a sanitizer build (libattn.so then needs the ASan runtime
 * loaded first) or for a cross build's library, the cases are one counted skip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int skip_all(const char *why) {
  printf("skip python_tests: %s\n# 0 passed, 0 failed, 1 skipped\n", why);
  return 0;
}

int main(int argc, char **argv) {
  (void)argc;
#if defined(__SANITIZE_ADDRESS__)
  return skip_all("sanitizer build: libattn.so needs the ASan runtime loaded before python3");
#endif
  /* argv[0] = BUILD/tests/test_python; the library is BUILD/libattn.so */
  char build[4096], lib[4200], tool[4200];
  snprintf(build, sizeof build, "%s", argv[0]);
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(build, '/');
    if (slash)
      *slash = '\0';
    else
      snprintf(build, sizeof build, ".");
  }
  snprintf(lib, sizeof lib, "%s/libattn.so", build);
  if (access(lib, R_OK) != 0) {
    printf("FAIL python_tests: %s not built\n# 0 passed, 1 failed\n", lib);
    return 1;
  }
  setenv("ATTN_LIB", lib, 1);
  if (!getenv("ATTN_BIN")) {
    snprintf(tool, sizeof tool, "%s/attn", build);
    setenv("ATTN_BIN", tool, 1);
  }
  const char *py = getenv("ATTN_PYTHON");
  if (!py || !*py) py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  fflush(stdout);
  char *args[] = {(char *)py, "-B", "python/tests/run.py", NULL};
  execvp(py, args);
  return skip_all("no python3 to run python/tests/run.py");
}
