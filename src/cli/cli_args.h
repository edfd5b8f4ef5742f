/* Command-line arguments, one way for every command: a command lists its
 * options in a table and asks cli_args_next for each argument in turn. The
 * helper answers -h/--help, "--" (the rest are arguments), --name=value, a
 * missing value, and an unknown option (with the nearest known one:
 * "attn train: unknown option '--epoch'; did you mean '--epochs'?"). */
#ifndef ATTN_CLI_ARGS_H
#define ATTN_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

enum {
  CLI_FLAG = 0,
  CLI_VALUE = 1,
  CLI_MAYBE_VALUE = 2 /* the next argument unless it is an option */
};

typedef struct {
  const char *name; /* "--epochs", "-o" */
  int value;        /* CLI_FLAG, CLI_VALUE or CLI_MAYBE_VALUE */
} cli_opt;

/* What cli_args_next found. */
enum { CLI_END = 0, CLI_OPT = 1, CLI_ARG = 2, CLI_HELP = -1, CLI_BAD = -2 };

typedef struct {
  int argc, i, dashdash;
  char **argv;
  const cli_opt *opts; /* ends with {NULL, 0} */
  const char *opt;     /* CLI_OPT: the option, as spelt in opts */
  const char *val;     /* CLI_OPT: its value (NULL: a flag, or none given); CLI_ARG: the argument */
} cli_args;

/* Arguments argv[first..argc). */
void cli_args_init(cli_args *a, int argc, char **argv, int first, const cli_opt *opts);
/* The next argument: CLI_OPT, CLI_ARG, CLI_END, CLI_HELP (-h/--help), or
 * CLI_BAD after saying why on stderr (the command then exits CLI_USAGE). */
int cli_args_next(cli_args *a);
/* The exit status after the loop ended on r < 0: CLI_OK for --help (the
 * caller printed it), CLI_USAGE otherwise. */
int cli_args_exit(int r);

/* A whole-string decimal integer (no overflow): 1 with *out, or 0. */
int cli_parse_i64(const char *s, int64_t *out);
/* opt's value v, a whole-string number in [lo, hi]: CLI_OK with *out, else
 * a message naming opt and CLI_USAGE. */
int cli_parse_num(const char *opt, const char *v, double lo, double hi, double *out);
/* --threads N for every computing command: N an integer in [1, 4096] sets
 * attn_set_num_threads(N) and returns CLI_OK; otherwise says why, naming opt
 * ("--threads"), and returns CLI_USAGE. */
int cli_set_threads(const char *opt, const char *val);
/* ATTN_NUM_THREADS, when set, is such an integer: CLI_OK, else a message and
 * CLI_USAGE (main checks it before running a command; the library alone
 * would ignore a bad value). */
int cli_check_threads_env(void);
/* FlashAttention's window_size as text: "left,right", optionally in () or []
 * with spaces, each an integer >= -1: 0 with both, else 1
 * (no message: the caller names the key). */
int cli_parse_window_size(const char *s, int64_t *left, int64_t *right);

/* The name in names[0..n) nearest to s (edit distance, a swap of two
 * neighbours counting one), or NULL when none is near enough to suggest. */
const char *cli_nearest(const char *s, const char *const *names, size_t n);

#endif
