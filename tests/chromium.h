/* Headless Chromium for the HTML pages' browser tests (test_viz,
 * test_viz_chars): Debian's 'chromium' (ATTN_CHROMIUM names another binary,
 * or "none" to skip). A case without it is a counted skip. */
#ifndef ATTN_TESTS_CHROMIUM_H
#define ATTN_TESTS_CHROMIUM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define CHROMIUM_MISSING "no chromium: install Debian's 'chromium' to run the browser test"

/* The browser's path, or NULL when there is none. */
static inline const char *chromium_find(void) {
  const char *env = getenv("ATTN_CHROMIUM"); /* a path, or "none" to skip the test */
  if (env && !strcmp(env, "none")) return NULL;
  if (env && *env) return env;
  static const char *const cands[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                                      "/usr/bin/google-chrome"};
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
    if (access(cands[i], X_OK) == 0) return cands[i];
  return NULL;
}

/* Runs `bin --headless ... args url` with its profile and output in dir;
 * its standard output (the DOM with --dump-dom), malloc'd, or NULL. */
static inline char *chromium_dump(const char *bin, const char *dir, const char *args,
                                  const char *url) {
  char cmd[2048], out[512];
  snprintf(cmd, sizeof cmd,
           "timeout 60 '%s' --headless --no-sandbox --disable-gpu --user-data-dir='%s/chrome' "
           "--virtual-time-budget=3000 %s '%s' > '%s/dom.txt' 2>/dev/null",
           bin, dir, args, url, dir);
  if (system(cmd) != 0) return NULL;
  snprintf(out, sizeof out, "%s/dom.txt", dir);
  long n;
  return read_whole_file(out, &n);
}

#endif
