/* `attn bench NAME ...`: runs one of the benches listed in attn_bench_table
 * (src/apps/bench.h). */
#include <stdio.h>
#include <string.h>

#include "apps/tools/bench.h"
#include "cli/commands.h"

static void bench_usage(FILE *out) {
  fprintf(out, "usage: attn bench NAME [ARGS...]\n\nbenches:\n");
  for (size_t i = 0; i < sizeof attn_bench_table / sizeof attn_bench_table[0]; i++)
    fprintf(out, "  %-8s %s\n", attn_bench_table[i].name, attn_bench_table[i].summary);
  fprintf(out, "\n'attn bench NAME --help' describes each.\n");
}

const char *cli_bench_summary(void) {
  static char buf[256];
  if (buf[0]) return buf;
  size_t len = (size_t)snprintf(buf, sizeof buf, "benchmarks:");
  for (size_t i = 0; i < sizeof attn_bench_table / sizeof attn_bench_table[0] && len < sizeof buf;
       i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s %s", i ? "," : "",
                            attn_bench_table[i].name);
  return buf;
}

int attn_cmd_bench(int argc, char **argv) {
  if (argc < 2) {
    bench_usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    bench_usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof attn_bench_table / sizeof attn_bench_table[0]; i++)
    if (!strcmp(argv[1], attn_bench_table[i].name)) {
      if (!strcmp(argv[1], "train")) cli_keep_freed_memory(); /* as attn train */
      return attn_bench_table[i].main(argc - 1, argv + 1);
    }
  const size_t n = sizeof attn_bench_table / sizeof attn_bench_table[0];
  const char *names[n];
  for (size_t i = 0; i < n; i++) names[i] = attn_bench_table[i].name;
  const char *near = cli_nearest(argv[1], names, n);
  if (near) return cli_usage("unknown bench '%s'; did you mean '%s'?", argv[1], near);
  cli_usage("unknown bench '%s'", argv[1]);
  bench_usage(stderr);
  return CLI_USAGE;
}
