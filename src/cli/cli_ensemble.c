/* attn ensemble: classifiers trained apart (one tokenizer, one config) made
 * into one ensemble file, the mean of their probabilities. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier/classifier_ensemble.h"
#include "attn.h"
#include "cli/commands.h"

static void usage(FILE *f) {
  fprintf(f, "usage: attn ensemble -o OUT.safetensors MODEL MODEL...\n"
             "  one model whose P(class) is the mean of the models' (each a checkpoint of attn\n"
             "  train, or an ensemble: its members join); they must share the tokenizer and the\n"
             "  config (e.g. runs of attn train with different --seed). attn eval / predict read it.\n");
}

int attn_cmd_ensemble(int argc, char **argv) {
  static const cli_opt opts[] = {{"-o", CLI_VALUE}, {NULL, 0}};
  const char *out = NULL;
  int first = 0, count = 0, r;
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_OPT) {
      out = a.val;
    } else {
      if (!first) first = a.i - 1;
      else if (first + count != a.i - 1)  // models in one run of arguments
        return cli_usage("the MODELs go together, after or before -o OUT (see attn ensemble --help)");
      count++;
    }
  }
  if (r == CLI_HELP) usage(stdout);
  if (r < 0) return cli_args_exit(r);
  if (!out || count < 1) {
    cli_usage("%s", !out ? "-o OUT.safetensors is missing" : "no MODEL");
    usage(stderr);
    return CLI_USAGE;
  }
  attn_clf *all = NULL;
  int n = 0, rc = 0;
  attn_st *meta = NULL, *keep = NULL;
  for (int i = first; !rc && i < first + count; i++) {
    attn_clf_ens e;
    attn_st *f = NULL;
    if (attn_clf_ens_load(argv[i], &e, &f)) {
      rc = cli_fail(argv[i]);
      break;
    }
    const char *tok = attn_st_meta(f, "tokenizer"), *tok0 = keep ? attn_st_meta(keep, "tokenizer") : tok;
    attn_clf *grown = n + e.n <= ATTN_CLF_ENS_MAX ? realloc(all, (size_t)(n + e.n) * sizeof *all) : NULL;
    if (!tok || !tok0 || strcmp(tok, tok0)) {
      rc = cli_error(argv[i], "%s", tok ? "another tokenizer than the first model's" : "no tokenizer");
    } else if (!grown) {
      rc = cli_error(argv[i], "more than %d members, or out of memory", ATTN_CLF_ENS_MAX);
    } else {
      all = grown;
      memcpy(all + n, e.m, (size_t)e.n * sizeof *all);  // the members move to all
      n += e.n;
      free(e.m);
      e.m = NULL;
      e.n = 0;
    }
    attn_clf_ens_free(&e);
    if (!keep) keep = f;
    else attn_st_free(f);
  }
  if (!rc && (attn_st_new(&meta))) rc = cli_fail(out);
  static const char *const keys[] = {"tokenizer", "labels", "split.seed", "split.file"};
  for (size_t k = 0; !rc && k < sizeof keys / sizeof keys[0]; k++) {
    const char *v = attn_st_meta(keep, keys[k]);
    if (v && attn_st_set_meta(meta, keys[k], v)) rc = cli_fail(out);
  }
  if (!rc && attn_clf_ens_save(out, all, n, meta)) rc = cli_fail(out);
  if (!rc) printf("%s: an ensemble of %d models\n", out, n);
  for (int k = 0; k < n; k++) attn_clf_free(&all[k]);
  free(all);
  attn_st_free(meta);
  attn_st_free(keep);
  return rc;
}
