/* Output folders and file names checked and made (cli_outpath.h). */
#include "cli/cli_outpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_msg.h"

/* Why files cannot be written into dir; NULL when they can. */
static const char *unusable_dir(const char *dir) {
  struct stat sb;
  return stat(dir, &sb)               ? strerror(errno)
         : !S_ISDIR(sb.st_mode)       ? "not a directory"
         : access(dir, W_OK | X_OK)   ? strerror(errno)
                                      : NULL;
}

int cli_out_dir_ready(const char *opt, const char *dir) {
  char buf[4096];
  const char *why = NULL;
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) why = "name too long";
  for (char *p = buf + 1; !why && *p; p++)
    if (*p == '/' && p[-1] != '/') {
      *p = '\0';
      if (mkdir(buf, 0777) && errno != EEXIST) why = strerror(errno);
      *p = '/';
    }
  if (!why && mkdir(buf, 0777) && errno != EEXIST) why = strerror(errno);
  if (!why) why = unusable_dir(buf);
  if (why) cli_error(NULL, "%s %s: %s", opt, dir, why);
  return why != NULL;
}

int cli_out_file_ready(const char *opt, const char *out) {
  char dir[4096];
  const char *slash = strrchr(out, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) + (slash == out) : 1, slash ? out : ".");
  if (!out[0] || (slash && !slash[1])) {
    cli_error(NULL, "%s '%s': a file name is needed", opt, out);
    return 1;
  }
  const char *why = unusable_dir(dir);
  if (why) cli_error(NULL, "%s %s: %s: %s", opt, out, dir, why);
  return why != NULL;
}

void cli_stems_free(cli_stems *s) {
  for (int i = 0; i < s->n; i++) free(s->stems[i]);
  free(s->stems);
  s->stems = NULL, s->n = 0;
}

const char *cli_stem(cli_stems *o, const char *path, int strip) {
  const char *base = strip ? strrchr(path, '/') : NULL;
  base = strip && !strcmp(path, "-") ? "stdin" : base ? base + 1 : path;
  size_t n = strlen(base);
  const char *dot = strip ? strrchr(base, '.') : NULL;
  if (dot && dot != base) n = (size_t)(dot - base);
  if (n == 0) base = "message", n = 7;
  if (n > 100) n = 100;
  char *s = malloc(n + 16);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++) {
    char c = base[i];
    s[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                   c == '-' || c == '_' ? c : '_';
  }
  s[n] = '\0';
  for (int k = 2, clash = 1; clash; k++) {
    clash = 0;
    for (int i = 0; i < o->n; i++) clash |= !strcmp(o->stems[i], s);
    if (clash) snprintf(s + n, 16, "-%d", k);
  }
  o->stems[o->n++] = s;
  return s;
}

int cli_out_name(char *buf, size_t n, const char *out, int many, const char *stem) {
  size_t len = strlen(out);
  int ext = len > 12 && !strcmp(out + len - 12, ".safetensors");
  int w = many ? snprintf(buf, n, "%.*s_%s.safetensors", (int)(ext ? len - 12 : len), out, stem)
               : snprintf(buf, n, "%s", out);
  return w < 0 || (size_t)w >= n;
}
