/* attn CLI: one function per subcommand, each in cli_<name>.c.
 * Each returns the process exit status: CLI_OK (0), CLI_FAILED (1: the
 * work failed), CLI_USAGE (2: the command line is wrong). Each answers
 * -h/--help with its own help on stdout (exit 0), parses its options with
 * cli_args_next and says what went wrong with cli_msg.h's helpers. */
#ifndef ATTN_CLI_COMMANDS_H
#define ATTN_CLI_COMMANDS_H

#include "attn.h"
#include "cli/cli_args.h"
#include "cli/cli_msg.h"

typedef int (*attn_cmd_fn)(int argc, char **argv);

typedef struct {
  const char *name;
  attn_cmd_fn fn;
  const char *summary;
} attn_cmd;

/* glibc heap settings for training (cli_train.c): freed activation buffers
 * stay in the heap instead of going back as fresh, zeroed mmaps each step.
 * attn train and attn bench train both set them, so both time the same. */
void cli_keep_freed_memory(void);

/* attn sdpa's work without its arguments (cli_sdpa.c): reads IN, writes OUT
 * atomically (no OUT on failure), or returns the error with its message set
 * and prints nothing. The sdpa fuzz target calls it in-process. */
attn_status cli_sdpa_run(const char *in_path, const char *out_path, attn_backend backend);

/* "benchmarks: peak, gemm, ..." naming every bench of attn_bench_table
 * (cli_bench.c), for attn --help. */
const char *cli_bench_summary(void);

int attn_cmd_version(int argc, char **argv);
int attn_cmd_sdpa(int argc, char **argv);
int attn_cmd_layer(int argc, char **argv);
int attn_cmd_gradcheck(int argc, char **argv);
int attn_cmd_data(int argc, char **argv);
int attn_cmd_nb(int argc, char **argv);
int attn_cmd_bench(int argc, char **argv);
int attn_cmd_viz(int argc, char **argv);
int attn_cmd_diagnose(int argc, char **argv);
int attn_cmd_train(int argc, char **argv);
int attn_cmd_eval(int argc, char **argv);
int attn_cmd_predict(int argc, char **argv);
int attn_cmd_ensemble(int argc, char **argv);
int attn_cmd_quantize(int argc, char **argv);
int attn_cmd_hf(int argc, char **argv);
int attn_cmd_hf_generate(int argc, char **argv); /* attn hf generate (cli_hf_generate.c) */
int attn_cmd_g2p(int argc, char **argv);
int attn_cmd_lm(int argc, char **argv);

#endif
