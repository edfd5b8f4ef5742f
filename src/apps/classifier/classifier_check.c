/* A classifier file's config against its tensors: before the model is
 * created (a config claiming vocab or max_len = 2^31 would allocate hundreds
 * of GB first) and after it is loaded (no tensor left unread). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier/classifier.h"
#include "apps/classifier/classifier_ensemble.h"

/* Tensor `name` of f has shape [a, b] (any dtype: int8 files hold I8 Linears). */
static attn_status expect2(const attn_st *f, const char *name, int64_t a, int64_t b,
                           const char *what) {
  const attn_tensor *t = attn_st_get(f, name);
  if (!t)
    return attn_set_error(ATTN_EFORMAT, "tensor '%s' is missing (config: %s)", name, what);
  if (t->ndim != 2 || t->shape[0] != a || t->shape[1] != b)
    return attn_set_error(ATTN_EFORMAT,
                          "tensor '%s' has shape [%lld%s%lld], the config says [%lld, %lld] (%s)",
                          name, (long long)t->shape[0], t->ndim == 2 ? ", " : ", ... rank ",
                          (long long)(t->ndim == 2 ? t->shape[1] : t->ndim), (long long)a,
                          (long long)b, what);
  return ATTN_OK;
}

attn_status attn_clf_check_file(const attn_clf_config *c, const attn_st *f) {
  char what[96];
  const int64_t E = c->d_model;
  snprintf(what, sizeof what, "vocab %lld, d_model %lld", (long long)c->vocab, (long long)E);
  attn_status st = expect2(f, "embedding.weight", c->vocab, E, what);
  if (!st && !c->sinusoidal) {
    snprintf(what, sizeof what, "max_len %lld, d_model %lld", (long long)c->max_len, (long long)E);
    st = expect2(f, "positions.weight", c->max_len, E, what);
  }
  if (!st) {
    snprintf(what, sizeof what, "classes %lld, d_model %lld%s", (long long)c->classes,
             (long long)E, c->pool == ATTN_CLF_POOL_MEANMAX ? " pooled mean+max" : "");
    st = expect2(f, "fc.weight", c->classes, c->pool == ATTN_CLF_POOL_MEANMAX ? 2 * E : E, what);
  }
  if (!st && c->layers > 0) { /* the last layer is there, with the config's widths */
    char name[96];
    snprintf(name, sizeof name, "layers.%lld.linear1.weight", (long long)(c->layers - 1));
    snprintf(what, sizeof what, "layers %lld, ff %lld, d_model %lld", (long long)c->layers,
             (long long)c->ff, (long long)E);
    st = expect2(f, name, c->ff, E, what);
  }
  return st;
}

/* name without its first `prefix` bytes is a parameter of p */
static int param_after(const attn_params *p, const char *name, size_t prefix) {
  return strlen(name) > prefix && attn_params_find(p, name + prefix) >= 0;
}

attn_status attn_clf_check_leftovers(const attn_clf *m, const attn_st *f) {
  for (int i = 0; i < attn_st_count(f); i++) {
    const char *name = attn_st_name(f, i);
    if (attn_params_find(&m->p, name) >= 0) continue;
    if (!strncmp(name, "optim.m.", 8) || !strncmp(name, "optim.v.", 8)) { /* AdamW moments */
      if (param_after(&m->p, name, 8)) continue;
    } else if (!strncmp(name, "ema.", 4)) { /* the weight average */
      if (param_after(&m->p, name, 4)) continue;
    } else if (!strncmp(name, "member", 6)) { /* ensemble members 2..ATTN_CLF_ENS_MAX */
      char *end;
      long k = strtol(name + 6, &end, 10);
      if (end != name + 6 && *end == '.' && k >= 2 && k <= ATTN_CLF_ENS_MAX &&
          param_after(&m->p, name, (size_t)(end + 1 - name)))
        continue;
    }
    size_t n = strlen(name); /* an int8 Linear's per-row scales */
    if (n > 6 && !strcmp(name + n - 6, ".scale")) {
      char base[ATTN_PARAM_NAME_MAX + 8];
      if (n - 6 < sizeof base) {
        memcpy(base, name, n - 6);
        base[n - 6] = '\0';
        if (attn_params_find(&m->p, base) >= 0) continue;
      }
    }
    return attn_set_error(ATTN_EFORMAT,
                          "tensor '%.200s' is not part of the model its config describes "
                          "(layers %lld, d_model %lld)",
                          name, (long long)m->c.layers, (long long)m->c.d_model);
  }
  return ATTN_OK;
}
