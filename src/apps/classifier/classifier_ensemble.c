/* Classifier ensembles: one file, the mean of the members' probabilities. */
#include "apps/classifier/classifier_ensemble.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 320

int attn_clf_ens_count(const attn_st *file) {
  const char *v = file ? attn_st_meta(file, "ensemble.members") : NULL;
  if (!v) return 1;
  char *end = NULL;
  long k = strtol(v, &end, 10);
  if (end == v || *end || k < 1 || k > ATTN_CLF_ENS_MAX) {
    attn_set_error(ATTN_EFORMAT, "\"ensemble.members\" is '%.30s', not a count in 1..%d", v,
                   ATTN_CLF_ENS_MAX);
    return -1;
  }
  return (int)k;
}

void attn_clf_ens_free(attn_clf_ens *e) {
  if (!e) return;
  for (int k = 0; e->m && k < e->n; k++) attn_clf_free(&e->m[k]);
  free(e->m);
  e->m = NULL;
  e->n = 0;
}

/* Member k >= 1 (0-based) of file into m (created from config c). */
static attn_status load_member(const attn_st *file, int k, const attn_clf_config *c, attn_clf *m) {
  attn_status st = attn_clf_create(m, c);
  char name[NAME_MAX_LEN];
  const attn_tensor *t = NULL;
  for (int i = 0; !st && i < m->p.count; i++) {
    const attn_param_view *v = &m->p.views[i];
    snprintf(name, sizeof name, "member%d.%s", k + 1, v->name);
    st = attn_st_expect(file, name, ATTN_F32, v->ndim, v->shape, 1, &t);  // name, dtype, shape
    if (!st) memcpy(m->p.data + v->offset, t->data, (size_t)v->numel * sizeof(float));
  }
  return st;
}

attn_status attn_clf_ens_load(const char *path, attn_clf_ens *e, attn_st **file) {
  if (file) *file = NULL;
  if (!path || !e) return attn_set_error(ATTN_EINVAL, "clf_ens_load: NULL argument");
  memset(e, 0, sizeof *e);
  attn_st *f = NULL;
  attn_clf first;
  attn_status st = attn_clf_load(path, &first, &f);
  if (st) return st;
  int n = attn_clf_ens_count(f);
  e->m = n > 0 ? calloc((size_t)n, sizeof *e->m) : NULL;
  if (n < 0) st = ATTN_EFORMAT;
  else if (!e->m) st = attn_set_error(ATTN_ENOMEM, "clf_ens_load: out of memory");
  else if (n > 1 && first.qlinears)
    st = attn_set_error(ATTN_EFORMAT, "an int8 ensemble file (not something attn writes)");
  if (st) {
    attn_clf_free(&first);
  } else {
    e->m[0] = first;
    e->n = 1;
    for (int k = 1; !st && k < n; k++) {
      st = load_member(f, k, &first.c, &e->m[k]);
      e->n++;  // freed with the others, even when incomplete
    }
  }
  if (st) {
    attn_prefix_error(st, path);
    attn_clf_ens_free(e);
    attn_st_free(f);
    return st;
  }
  if (file) *file = f;
  else attn_st_free(f);
  return ATTN_OK;
}

static int same_config(const attn_clf_config *a, const attn_clf_config *b) {
  char *ja = NULL, *jb = NULL;
  int same = !attn_clf_config_to_json(a, &ja) && !attn_clf_config_to_json(b, &jb) && !strcmp(ja, jb);
  free(ja);
  free(jb);
  return same;
}

attn_status attn_clf_ens_save(const char *path, const attn_clf *members, int n, const attn_st *meta) {
  if (!path || !members || n < 1 || n > ATTN_CLF_ENS_MAX)
    return attn_set_error(ATTN_EINVAL, "clf_ens_save: NULL argument or %d members (1..%d)", n,
                          ATTN_CLF_ENS_MAX);
  for (int k = 0; k < n; k++)
    if (members[k].qlinears || !same_config(&members[0].c, &members[k].c))
      return attn_set_error(ATTN_EINVAL, "clf_ens_save: member %d is int8 or of another config", k + 1);
  attn_st *extra;
  attn_status st = attn_st_new(&extra);
  if (st) return st;
  for (int i = 0; meta && !st && i < attn_st_meta_count(meta); i++) {
    const char *k = attn_st_meta_key(meta, i);
    if (strcmp(k, "ensemble.members") && strcmp(k, "config") && strcmp(k, "trainer.state"))
      st = attn_st_set_meta(extra, k, attn_st_meta(meta, k));
  }
  char name[NAME_MAX_LEN];
  for (int k = 1; !st && k < n; k++)
    for (int i = 0; !st && i < members[k].p.count; i++) {
      const attn_param_view *v = &members[k].p.views[i];
      snprintf(name, sizeof name, "member%d.%s", k + 1, v->name);
      st = attn_st_add_f32(extra, name, v->ndim, v->shape, members[k].p.data + v->offset);
    }
  snprintf(name, sizeof name, "%d", n);
  if (!st && n > 1) st = attn_st_set_meta(extra, "ensemble.members", name);
  char *cfg = NULL;
  if (!st) st = attn_clf_config_to_json(&members[0].c, &cfg);
  if (!st) st = attn_st_set_meta(extra, "config", cfg);
  if (!st) st = attn_checkpoint_save(path, &members[0].p, NULL, extra);
  free(cfg);
  attn_st_free(extra);
  return st;
}

attn_status attn_clf_ens_predict(const attn_clf_ens *e, const int32_t *ids, const int32_t *lens,
                                 int64_t B, int64_t L, float *probs) {
  return attn_clf_ens_predict_ctx(e, NULL, ids, lens, B, L, probs);
}

attn_status attn_clf_ens_predict_ctx(const attn_clf_ens *e, const attn_nn_ctx *ctx,
                                     const int32_t *ids, const int32_t *lens, int64_t B, int64_t L,
                                     float *probs) {
  if (!e || e->n < 1 || !e->m || !probs)
    return attn_set_error(ATTN_EINVAL, "clf_ens_predict: empty ensemble or NULL output");
  if (e->n == 1) return attn_clf_predict_ctx(&e->m[0], ctx, ids, lens, B, L, probs);
  int64_t C = e->m[0].c.classes, n = B * C;
  float *one = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  double *sum = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  attn_status st = one && sum ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "clf_ens_predict: out of memory");
  for (int k = 0; !st && k < e->n; k++) {
    st = attn_clf_predict_ctx(&e->m[k], ctx, ids, lens, B, L, one);
    for (int64_t i = 0; !st && i < n; i++) sum[i] += one[i];
  }
  for (int64_t i = 0; !st && i < n; i++) probs[i] = (float)(sum[i] / e->n);
  free(one);
  free(sum);
  return st;
}
