/* The shared option matcher (cli_args.h) and "did you mean". */
#include "cli/cli_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "cli/cli_msg.h"

#define NAME_MAX_LEN 64

/* Optimal string alignment distance: insertions, deletions, substitutions
 * and swaps of two neighbours each cost 1 ("trian" -> "train": 1). Names
 * longer than NAME_MAX_LEN are far from everything. */
static size_t distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > NAME_MAX_LEN || m > NAME_MAX_LEN) return (size_t)-1;
  size_t d[NAME_MAX_LEN + 1][NAME_MAX_LEN + 1];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

const char *cli_nearest(const char *s, const char *const *names, size_t n) {
  const char *best = NULL;
  size_t bd = (size_t)-1, len = strlen(s);
  for (size_t i = 0; i < n; i++) {
    size_t d = distance(s, names[i]);
    if (d < bd) bd = d, best = names[i];
  }
  /* near: at most 1 edit in 4 characters (2 for "--ephocs"), never all of it */
  size_t limit = 1 + len / 4;
  return best && bd <= limit && bd < len ? best : NULL;
}

/* "unknown option 'X'; did you mean 'Y'?" over the table and --help. */
static int unknown(const cli_args *a, const char *arg, size_t len) {
  const char *names[256];
  size_t n = 0;
  for (const cli_opt *o = a->opts; o && o->name && n < 255; o++)
    names[n++] = o->name;
  names[n++] = "--help";
  char given[NAME_MAX_LEN + 1];
  snprintf(given, sizeof given, "%.*s", (int)(len < NAME_MAX_LEN ? len : NAME_MAX_LEN), arg);
  const char *near = cli_nearest(given, names, n);
  if (near)
    cli_usage("unknown option '%s'; did you mean '%s'?", arg, near);
  else
    cli_usage("unknown option '%s' (attn %s --help lists the options)", arg,
              cli_command() ? cli_command() : "");
  return CLI_BAD;
}

void cli_args_init(cli_args *a, int argc, char **argv, int first, const cli_opt *opts) {
  memset(a, 0, sizeof *a);
  a->argc = argc;
  a->argv = argv;
  a->i = first;
  a->opts = opts;
}

int cli_args_next(cli_args *a) {
  a->opt = a->val = NULL;
  if (a->i >= a->argc) return CLI_END;
  const char *s = a->argv[a->i++];
  if (a->dashdash || s[0] != '-' || s[1] == '\0') { /* "-" is an argument: stdin */
    a->val = s;
    return CLI_ARG;
  }
  if (!strcmp(s, "--")) {
    a->dashdash = 1;
    return cli_args_next(a);
  }
  if (!strcmp(s, "-h") || !strcmp(s, "--help")) return CLI_HELP;
  const char *eq = s[1] == '-' ? strchr(s, '=') : NULL; /* --name=value */
  size_t len = eq ? (size_t)(eq - s) : strlen(s);
  for (const cli_opt *o = a->opts; o && o->name; o++) {
    if (strlen(o->name) != len || strncmp(o->name, s, len)) continue;
    a->opt = o->name;
    if (o->value == CLI_FLAG) {
      if (eq) return cli_usage("%s takes no value", o->name), CLI_BAD;
    } else if (eq) {
      a->val = eq + 1;
    } else if (a->i < a->argc && (o->value == CLI_VALUE || a->argv[a->i][0] != '-')) {
      a->val = a->argv[a->i++];
    } else if (o->value == CLI_VALUE) {
      return cli_usage("%s needs a value", o->name), CLI_BAD;
    }
    return CLI_OPT;
  }
  return unknown(a, s, len);
}

int cli_args_exit(int r) { return r == CLI_HELP ? CLI_OK : CLI_USAGE; }

int cli_parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end) return 0;
  *out = x;
  return 1;
}

int cli_parse_num(const char *opt, const char *v, double lo, double hi, double *out) {
  char *end = NULL;
  errno = 0;
  double d = strtod(v, &end);
  if (!*v || *end || errno || !(d >= lo && d <= hi))
    return cli_usage("%s: '%s' is not a number in [%g, %g]", opt, v, lo, hi);
  *out = d;
  return CLI_OK;
}

int cli_set_threads(const char *opt, const char *val) {
  int64_t n;
  if (!val || !cli_parse_i64(val, &n) || n < 1 || n > 4096)
    return cli_usage("%s '%s': expected an integer in [1, 4096]", opt, val ? val : "");
  attn_set_num_threads((int)n);
  return CLI_OK;
}

int cli_check_threads_env(void) {
  const char *e = getenv("ATTN_NUM_THREADS");
  int64_t n;
  if (!e || !*e || (cli_parse_i64(e, &n) && n >= 1 && n <= 4096)) return CLI_OK;
  return cli_usage("ATTN_NUM_THREADS '%s': expected an integer in [1, 4096]", e);
}

int cli_parse_window_size(const char *s, int64_t *left, int64_t *right) {
  char buf[64];
  size_t n = 0;
  for (; *s; s++) /* drop spaces and one pair of brackets */
    if (*s != ' ' && *s != '\t') {
      if (n + 1 >= sizeof buf) return 1;
      buf[n++] = *s;
    }
  buf[n] = 0;
  char *p = buf;
  if (n >= 2 && ((buf[0] == '(' && buf[n - 1] == ')') || (buf[0] == '[' && buf[n - 1] == ']'))) {
    buf[n - 1] = 0;
    p++;
  }
  char *comma = strchr(p, ',');
  if (!comma) return 1;
  *comma = 0;
  int64_t l, r;
  if (!cli_parse_i64(p, &l) || !cli_parse_i64(comma + 1, &r) || l < -1 || r < -1) return 1;
  *left = l;
  *right = r;
  return 0;
}
