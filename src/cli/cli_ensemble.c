/* attn ensemble: classifiers trained apart (one tokenizer, one config) made
 * into one ensemble file, the mean of their probabilities. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier_ensemble.h"
#include "attn.h"
#include "cli/commands.h"

static int usage(FILE *f) {
  fprintf(f, "usage: attn ensemble -o OUT.safetensors MODEL MODEL...\n"
             "  one model whose P(class) is the mean of the models' (each a checkpoint of attn\n"
             "  train, or an ensemble: its members join); they must share the tokenizer and the\n"
             "  config (e.g. runs of attn train with different --seed). attn eval / predict read it.\n");
  return f == stdout ? 0 : 2;
}

int attn_cmd_ensemble(int argc, char **argv) {
  const char *out = NULL;
  int first = 0, count = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout);
    if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (argv[i][0] == '-') {
      fprintf(stderr, "attn ensemble: unknown option '%s'\n", argv[i]);
      return usage(stderr);
    } else {
      if (!first) first = i;
      else if (first + count != i) return usage(stderr);  // models in one run of arguments
      count++;
    }
  }
  if (!out || count < 1) return usage(stderr);
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
      fprintf(stderr, "attn ensemble: %s: %s\n", argv[i],
              tok ? "another tokenizer than the first model's" : "no tokenizer");
      rc = 1;
    } else if (!grown) {
      fprintf(stderr, "attn ensemble: more than %d members, or out of memory\n", ATTN_CLF_ENS_MAX);
      rc = 1;
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
  if (!rc && (attn_st_new(&meta))) rc = cli_fail("metadata");
  static const char *const keys[] = {"tokenizer", "labels", "split.seed", "split.file"};
  for (size_t k = 0; !rc && k < sizeof keys / sizeof keys[0]; k++) {
    const char *v = attn_st_meta(keep, keys[k]);
    if (v && attn_st_set_meta(meta, keys[k], v)) rc = cli_fail("metadata");
  }
  if (!rc && attn_clf_ens_save(out, all, n, meta)) rc = cli_fail(out);
  if (!rc) printf("%s: an ensemble of %d models\n", out, n);
  for (int k = 0; k < n; k++) attn_clf_free(&all[k]);
  free(all);
  attn_st_free(meta);
  attn_st_free(keep);
  return rc;
}
