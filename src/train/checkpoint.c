/* Checkpoints: parameters, Adam state and caller metadata/tensors in one
 * safetensors file (written atomically by attn_st_save). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/train.h"

#define CK_NAME_MAX (ATTN_PARAM_NAME_MAX + 16)

static const char *kind_name(attn_adam_kind k) { return k == ATTN_ADAMW ? "adamw" : "adam"; }

static attn_status check_opt(const attn_params *p, const attn_adam *opt, const char *path) {
  if (!opt) return ATTN_OK;
  if (!opt->m || opt->numel != p->numel || opt->nviews != p->count)
    return attn_set_error(ATTN_EINVAL, "%s: optimizer is not initialised for these parameters",
                          path);
  return ATTN_OK;
}

static attn_status add_state(attn_st *st, const attn_params *p, const attn_adam *opt) {
  char name[CK_NAME_MAX];
  for (int which = 0; which < 2; which++) {
    const float *buf = which ? opt->v : opt->m;
    for (int i = 0; i < p->count; i++) {
      const attn_param_view *v = &p->views[i];
      snprintf(name, sizeof name, "optim.%c.%s", which ? 'v' : 'm', v->name);
      attn_status s = attn_st_add_f32(st, name, v->ndim, v->shape, buf + v->offset);
      if (s) return s;
    }
  }
  char val[64];
  const char *keys[] = {"optim.step", "optim.beta1", "optim.beta2", "optim.eps",
                        "optim.weight_decay"};
  double vals[] = {0, opt->cfg.beta1, opt->cfg.beta2, opt->cfg.eps, opt->cfg.weight_decay};
  for (int k = 0; k < 5; k++) {
    if (k == 0) snprintf(val, sizeof val, "%lld", (long long)opt->step);
    else snprintf(val, sizeof val, "%.17g", vals[k]);
    attn_status s = attn_st_set_meta(st, keys[k], val);
    if (s) return s;
  }
  return attn_st_set_meta(st, "optim.kind", kind_name(opt->cfg.kind));
}

static attn_status add_extra(attn_st *st, const attn_st *extra, const char *path) {
  for (int i = 0; i < attn_st_count(extra); i++) {
    const char *name = attn_st_name(extra, i);
    if (attn_st_get(st, name))
      return attn_set_error(ATTN_EINVAL, "%s: extra tensor '%s' collides with a parameter or "
                            "optimizer tensor", path, name);
    const attn_tensor *t = attn_st_get(extra, name);
    attn_status s = attn_st_add(st, name, t->dtype, t->ndim, t->shape, t->data);
    if (s) return s;
  }
  for (int i = 0; i < attn_st_meta_count(extra); i++) {
    const char *key = attn_st_meta_key(extra, i);
    if (attn_st_meta(st, key))
      return attn_set_error(ATTN_EINVAL, "%s: extra metadata '%s' collides with optimizer metadata",
                            path, key);
    attn_status s = attn_st_set_meta(st, key, attn_st_meta(extra, key));
    if (s) return s;
  }
  return ATTN_OK;
}

attn_status attn_checkpoint_save(const char *path, const attn_params *p, const attn_adam *opt,
                                 const attn_st *extra) {
  if (!path || !p) return attn_set_error(ATTN_EINVAL, "attn_checkpoint_save: path or p is NULL");
  if (!p->data) return attn_set_error(ATTN_EINVAL, "%s: parameters not allocated", path);
  attn_status s = check_opt(p, opt, path);
  if (s) return s;
  attn_st *st;
  if ((s = attn_st_new(&st))) return s;
  s = attn_params_store_st(p, st, 0, NULL);
  if (!s && opt) s = add_state(st, p, opt);
  if (!s && extra) s = add_extra(st, extra, path);
  if (!s) s = attn_st_save(st, path);
  attn_st_free(st);
  return s;
}


/* Checks the optimizer tensors and metadata; *step receives the step. */
static attn_status check_state(const attn_st *st, const attn_params *p, const attn_adam *opt,
                               const char *path, int64_t *step) {
  const char *sv = attn_st_meta(st, "optim.step");
  if (!sv)
    return attn_set_error(ATTN_EINVAL, "%s: checkpoint holds no optimizer state (optim.step)",
                          path);
  char *end;
  errno = 0;
  long long v = strtoll(sv, &end, 10);
  if (errno || end == sv || *end || v < 0)
    return attn_set_error(ATTN_EFORMAT, "%s: optim.step '%.40s' is not a step count", path, sv);
  const char *kind = attn_st_meta(st, "optim.kind");
  if (kind && strcmp(kind, kind_name(opt->cfg.kind)) != 0)
    return attn_set_error(ATTN_EINVAL, "%s: checkpoint holds %.20s state, the optimizer is %s",
                          path, kind, kind_name(opt->cfg.kind));
  char name[CK_NAME_MAX];
  for (int which = 0; which < 2; which++) {
    for (int i = 0; i < p->count; i++) {
      const attn_param_view *pv = &p->views[i];
      snprintf(name, sizeof name, "optim.%c.%s", which ? 'v' : 'm', pv->name);
      const attn_tensor *t;
      attn_status s = attn_st_expect(st, name, ATTN_F32, pv->ndim, pv->shape, 1, &t);
      if (s) return attn_prefix_error(s, path);
    }
  }
  *step = v;
  return ATTN_OK;
}

attn_status attn_checkpoint_load(const char *path, attn_params *p, attn_adam *opt,
                                 attn_st **file_out) {
  if (file_out) *file_out = NULL;
  if (!path || !p) return attn_set_error(ATTN_EINVAL, "attn_checkpoint_load: path or p is NULL");
  if (!p->data) return attn_set_error(ATTN_EINVAL, "%s: parameters not allocated", path);
  attn_status s = check_opt(p, opt, path);
  if (s) return s;
  attn_st *st;
  if ((s = attn_st_load(path, &st))) return s;
  int64_t step = 0;
  if (opt && (s = check_state(st, p, opt, path, &step))) goto done;
  /* validates every parameter before copying any */
  if ((s = attn_params_load_st(p, st, "", 0))) {
    s = attn_prefix_error(s, path);
    goto done;
  }
  if (opt) {
    char name[CK_NAME_MAX];
    for (int i = 0; i < p->count; i++) {
      const attn_param_view *pv = &p->views[i];
      size_t bytes = (size_t)pv->numel * sizeof(float);
      snprintf(name, sizeof name, "optim.m.%s", pv->name);
      memcpy(opt->m + pv->offset, attn_st_get(st, name)->data, bytes);
      snprintf(name, sizeof name, "optim.v.%s", pv->name);
      memcpy(opt->v + pv->offset, attn_st_get(st, name)->data, bytes);
    }
    opt->step = step;
  }
done:
  if (!s && file_out) *file_out = st;
  else attn_st_free(st);
  return s;
}
