/* attn g2p's model lists (cli_g2p_models.h). */
#include "cli/cli_g2p_models.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli_msg.h"

void cli_g2p_models_free(cli_g2p_models *e) {
  for (int k = 0; e && k < e->n; k++)
    attn_g2p_free(&e->m[k]);
  free(e);
}

static int add(cli_g2p_models *e, const char *path, const char *opt) {
  if (e->n == ATTN_G2P_MAX_MODELS)
    return cli_usage("%s: at most %d models", opt, ATTN_G2P_MAX_MODELS);
  if (attn_g2p_load(path, &e->m[e->n], NULL)) return cli_fail(path);
  e->ms[e->n] = &e->m[e->n];
  e->n++;
  return CLI_OK;
}

cli_g2p_models *cli_g2p_models_load(const char *first, const char *list, const char *opt, int *r) {
  cli_g2p_models *e = calloc(1, sizeof *e);
  if (!e) {
    *r = cli_error(NULL, "out of memory");
    return NULL;
  }
  *r = first ? add(e, first, "MODEL") : CLI_OK;
  for (const char *p = list; !*r && p && *p;) {
    const char *c = strchr(p, ',');
    const size_t len = c ? (size_t)(c - p) : strlen(p);
    char path[4096];
    if (len == 0 || len >= sizeof path) {
      *r = cli_usage("%s: a list of model files separated by commas, not '%s'", opt, list);
    } else {
      memcpy(path, p, len);
      path[len] = 0;
      *r = add(e, path, opt);
    }
    p = c ? c + 1 : p + len;
  }
  /* a decoding ensemble (MODEL first) or a list of models scoring together */
  if (!*r && e->n > 1 &&
      (first ? attn_g2p_ensemble_check(e->ms, e->n) : attn_g2p_scoring_check(e->ms, e->n)))
    *r = cli_fail(list);
  if (*r) {
    cli_g2p_models_free(e);
    e = NULL;
  }
  return e;
}
