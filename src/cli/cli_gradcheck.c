/* attn gradcheck [--filter NAME] [--verbose] [--seed N] [--list] [--threads N]
 * Runs every registered finite-difference check (src/apps/gradcheck*.c) and
 * prints a table: case, tensor, entries checked, max abs err, max rel err,
 * ok/FAIL. Exit 0 if all pass, 1 if any fails, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/tools/gradcheck.h"
#include "attn.h"
#include "cli/commands.h"

static void gradcheck_usage(FILE *f) {
  fprintf(f, "usage: attn gradcheck [--filter NAME] [--verbose] [--seed N] [--list] [--threads N]\n"
             "  Finite-difference check of every backward: for L = sum(w * f(x)), w random,\n"
             "  compares dL/dx from the backward with central differences (f32).\n"
             "  --filter NAME  only cases whose name contains NAME\n"
             "  --verbose      also print each tensor's worst entry and the tolerances\n"
             "  --seed N       seed of the inputs and of w (default 1)\n"
             "  --list         list the case names and exit\n"
             "  --threads N    threads (default: all cores this process may use, or\n"
             "                 $ATTN_NUM_THREADS; results do not depend on it)\n");
}

int attn_cmd_gradcheck(int argc, char **argv) {
  const char *filter = NULL;
  int verbose = 0, list = 0;
  uint64_t seed = 1;
  static const cli_opt opts[] = {{"--filter", CLI_VALUE},
                                 {"--seed", CLI_VALUE},
                                 {"--verbose", CLI_FLAG},
                                 {"-v", CLI_FLAG},
                                 {"--list", CLI_FLAG},
                                 {"--threads", CLI_VALUE},
                                 {NULL, 0}};
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  int got;
  while ((got = cli_args_next(&a)) > 0) {
    if (got == CLI_ARG) return cli_usage("unexpected argument '%s' (see attn gradcheck --help)", a.val);
    if (!strcmp(a.opt, "--filter")) {
      filter = a.val;
    } else if (!strcmp(a.opt, "--seed")) {
      char *end;
      seed = strtoull(a.val, &end, 0);
      if (*end || !*a.val) return cli_usage("--seed wants a number, got '%s'", a.val);
    } else if (!strcmp(a.opt, "--list")) {
      list = 1;
    } else if (!strcmp(a.opt, "--threads")) {
      if (cli_set_threads(a.opt, a.val)) return CLI_USAGE;
    } else { /* --verbose, -v */
      verbose = 1;
    }
  }
  if (got == CLI_HELP) gradcheck_usage(stdout);
  if (got < 0) return cli_args_exit(got);
  int n = attn_gradcheck_case_count(), ran = 0, failed = 0;
  if (!list)
    printf("%-24s %-10s %8s %12s %12s  %s\n", "case", "tensor", "entries", "max abs err",
           "max rel err", "result");
  for (int i = 0; i < n; i++) {
    const attn_gradcheck_case *c = attn_gradcheck_case_at(i);
    if (filter && !strstr(c->name, filter)) continue;
    if (list) {
      printf("%s\n", c->name);
      continue;
    }
    attn_gradcheck_result res[ATTN_GC_MAX_INPUTS];
    int nres = 0;
    ran++;
    attn_clear_error();
    attn_status st = attn_gradcheck_run(c, seed, res, &nres);
    if (st != ATTN_OK) {
      printf("%-24s %-10s %8s %12s %12s  FAIL (%s: %s)\n", c->name, "-", "-", "-", "-",
             attn_status_str(st), attn_last_error());
      failed++;
      continue;
    }
    int case_ok = 1;
    for (int k = 0; k < nres; k++) {
      const attn_gradcheck_result *r = &res[k];
      printf("%-24s %-10s %8lld %12.3g %12.3g  %s\n", c->name, r->tensor, (long long)r->checked,
             r->max_abs, r->max_rel, r->ok ? "ok" : "FAIL");
      if (verbose || !r->ok)
        printf("    worst [%lld]: analytic %.8g numeric %.8g (h %g, atol %g, rtol %g)\n",
               (long long)r->worst, r->worst_analytic, r->worst_numeric, (double)c->h, c->atol,
               c->rtol);
      case_ok &= r->ok;
    }
    failed += !case_ok;
  }
  if (list) return 0;
  if (ran == 0) return cli_error(NULL, "no case matches '%s' (attn gradcheck --list names them)", filter ? filter : "");
  printf("%d cases, %d failed\n", ran, failed);
  return failed ? 1 : 0;
}
