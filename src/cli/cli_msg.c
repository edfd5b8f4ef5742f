/* One error style for every command (cli_msg.h). */
#include "cli/cli_msg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "attn.h"

static const char *command;

void cli_set_command(const char *name) { command = name; }
const char *cli_command(void) { return command; }

static void prefix(const char *file) {
  fprintf(stderr, command ? "attn %s: " : "attn: ", command);
  if (file) fprintf(stderr, "%s: ", file);
}

/* msg without its mention of file: "cannot open 'F': x" -> "cannot open: x",
 * "'F' is not a regular file" -> "is not a regular file", "F: x" -> "x".
 * Only a first quoted name is dropped ("renaming 'T' to 'F'" keeps both).
 * 0 when msg does not name file that way (then it is printed whole). */
static int print_without_file(const char *msg, const char *file) {
  size_t n = strlen(file);
  if (!strncmp(msg, file, n) && msg[n] == ':') {
    fprintf(stderr, "%s\n", msg + n + (msg[n + 1] == ' ' ? 2 : 1));
    return 1;
  }
  const char *q = strchr(msg, '\'');
  if (!q || strncmp(q + 1, file, n) || q[n + 1] != '\'') return 0;
  const char *after = q + n + 2;
  if (q == msg && *after == ' ')
    fprintf(stderr, "%s\n", after + 1);
  else if (q > msg && q[-1] == ' ' && *after == ':')
    fprintf(stderr, "%.*s%s\n", (int)(q - 1 - msg), msg, after);
  else
    return 0;
  return 1;
}

int cli_fail(const char *file) {
  const char *msg = attn_last_error();
  prefix(file);
  if (!file || !print_without_file(msg, file)) fprintf(stderr, "%s\n", msg[0] ? msg : "failed");
  return CLI_FAILED;
}

/* prefix, then tag (may be NULL), then the message and a newline */
static void say(const char *file, const char *tag, const char *fmt, va_list ap) {
  prefix(file);
  if (tag) fputs(tag, stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int cli_error(const char *file, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(file, NULL, fmt, ap);
  va_end(ap);
  return CLI_FAILED;
}

int cli_syserr(const char *file, const char *what) {
  const char *why = strerror(errno);
  prefix(file);
  fprintf(stderr, "%s: %s\n", what, why);
  return CLI_FAILED;
}

int cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(NULL, NULL, fmt, ap);
  va_end(ap);
  return CLI_USAGE;
}

void cli_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(NULL, "warning: ", fmt, ap);
  va_end(ap);
}
