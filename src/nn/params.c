/* Parameters: one flat f32 buffer (and a gradient buffer of the same layout)
 * carved into named, 64-byte aligned views. */
#include "attn/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARAM_ALIGN_FLOATS 16 /* 64 bytes */

static const char *shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

void attn_params_init(attn_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

void attn_params_free(attn_params *p) {
  if (!p) return;
  free(p->views);
  free(p->data);
  free(p->grad);
  memset(p, 0, sizeof *p);
}

int attn_params_find(const attn_params *p, const char *name) {
  if (!p || !name) return -1;
  for (int i = 0; i < p->count; i++)
    if (strcmp(p->views[i].name, name) == 0) return i;
  return -1;
}

attn_status attn_params_declare(attn_params *p, const char *name, int ndim, const int64_t *shape,
                                int *index) {
  if (!p || !name) return attn_set_error(ATTN_EINVAL, "attn_params_declare: p or name is NULL");
  if (p->data)
    return attn_set_error(ATTN_EINVAL, "parameter '%.200s' declared after attn_params_alloc",
                          name);
  size_t len = strlen(name);
  if (len == 0 || len >= ATTN_PARAM_NAME_MAX)
    return attn_set_error(ATTN_EINVAL, "parameter name '%.200s' is empty or longer than %d", name,
                          ATTN_PARAM_NAME_MAX - 1);
  if (ndim < 0 || ndim > 4 || (ndim > 0 && !shape))
    return attn_set_error(ATTN_EINVAL, "parameter '%s': rank %d (0..4, shape required)", name,
                          ndim);
  if (attn_params_find(p, name) >= 0)
    return attn_set_error(ATTN_EINVAL, "parameter '%s' declared twice", name);
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || __builtin_mul_overflow(numel, shape[i], &numel) ||
        numel > ((int64_t)1 << 40))
      return attn_set_error(ATTN_EINVAL, "parameter '%s': negative or too large shape", name);
  }
  if (p->count == p->cap) {
    int nc = p->cap ? p->cap * 2 : 32;
    attn_param_view *v = realloc(p->views, (size_t)nc * sizeof *v);
    if (!v) return attn_set_error(ATTN_ENOMEM, "parameter '%s': out of memory", name);
    p->views = v;
    p->cap = nc;
  }
  attn_param_view *v = &p->views[p->count];
  memset(v, 0, sizeof *v);
  memcpy(v->name, name, len + 1);
  v->ndim = ndim;
  for (int i = 0; i < ndim; i++) v->shape[i] = shape[i];
  v->numel = numel;
  v->offset = p->numel; /* p->numel is kept a multiple of 16 */
  p->numel += (numel + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS * PARAM_ALIGN_FLOATS;
  if (index) *index = p->count;
  p->count++;
  return ATTN_OK;
}

attn_status attn_params_alloc(attn_params *p) {
  if (!p) return attn_set_error(ATTN_EINVAL, "attn_params_alloc: p is NULL");
  if (p->data) return attn_set_error(ATTN_EINVAL, "attn_params_alloc: already allocated");
  size_t bytes = (size_t)(p->numel ? p->numel : PARAM_ALIGN_FLOATS) * sizeof(float);
  p->data = aligned_alloc(64, bytes);
  p->grad = aligned_alloc(64, bytes);
  if (!p->data || !p->grad) {
    free(p->data);
    free(p->grad);
    p->data = p->grad = NULL;
    return attn_set_error(ATTN_ENOMEM, "attn_params_alloc: out of memory (%zu bytes x 2)", bytes);
  }
  memset(p->data, 0, bytes);
  memset(p->grad, 0, bytes);
  return ATTN_OK;
}

void attn_params_zero_grad(attn_params *p) {
  if (p && p->grad) memset(p->grad, 0, (size_t)p->numel * sizeof(float));
}

/* Finds prefix+name in st and checks dtype and shape; *t = NULL if absent. */
static attn_status lookup(const attn_params *p, int i, const attn_st *st, const char *prefix,
                          const attn_tensor **t) {
  const attn_param_view *v = &p->views[i];
  char full[ATTN_PARAM_NAME_MAX + 256];
  int n = snprintf(full, sizeof full, "%s%s", prefix, v->name);
  if (n < 0 || (size_t)n >= sizeof full)
    return attn_set_error(ATTN_EINVAL, "parameter '%s': prefix too long", v->name);
  *t = attn_st_get(st, full);
  if (!*t) return ATTN_OK;
  const attn_tensor *x = *t;
  if (x->dtype != ATTN_F32 && x->dtype != ATTN_F16 && x->dtype != ATTN_BF16)
    return attn_set_error(ATTN_EINVAL, "parameter '%s': tensor '%s' has dtype %s (F32/F16/BF16)",
                          v->name, full, attn_dtype_name(x->dtype));
  int same = x->ndim == v->ndim;
  for (int d = 0; same && d < v->ndim; d++) same = x->shape[d] == v->shape[d];
  if (!same) {
    char a[128], b[128];
    return attn_set_error(ATTN_EINVAL, "parameter '%s': tensor '%s' has shape %s, expected %s",
                          v->name, full, shape_str(a, sizeof a, x->ndim, x->shape),
                          shape_str(b, sizeof b, v->ndim, v->shape));
  }
  return ATTN_OK;
}

attn_status attn_params_load_st(attn_params *p, const attn_st *st, const char *prefix,
                                 int allow_missing) {
  if (!p || !st) return attn_set_error(ATTN_EINVAL, "attn_params_load_st: p or st is NULL");
  if (!p->data) return attn_set_error(ATTN_EINVAL, "attn_params_load_st: call attn_params_alloc first");
  if (!prefix) prefix = "";
  /* validate everything first so a bad file leaves the parameters untouched */
  for (int i = 0; i < p->count; i++) {
    const attn_tensor *t;
    attn_status s = lookup(p, i, st, prefix, &t);
    if (s) return s;
    if (!t && !allow_missing)
      return attn_set_error(ATTN_EINVAL, "parameter '%s' is missing (looked for '%s%s')",
                            p->views[i].name, prefix, p->views[i].name);
  }
  for (int i = 0; i < p->count; i++) {
    const attn_tensor *t;
    lookup(p, i, st, prefix, &t);
    if (!t) continue;
    float *dst = attn_params_data(p, i);
    int64_t n = p->views[i].numel;
    const uint16_t *h = t->data;
    if (t->dtype == ATTN_F32) memcpy(dst, t->data, (size_t)n * sizeof(float));
    else if (t->dtype == ATTN_F16)
      for (int64_t k = 0; k < n; k++) dst[k] = attn_f16_to_f32(h[k]);
    else
      for (int64_t k = 0; k < n; k++) dst[k] = attn_bf16_to_f32(h[k]);
  }
  return ATTN_OK;
}

attn_status attn_params_store_st(const attn_params *p, attn_st *st, int grads,
                                 const char *gprefix) {
  if (!p || !st) return attn_set_error(ATTN_EINVAL, "attn_params_store_st: p or st is NULL");
  if (!p->data) return attn_set_error(ATTN_EINVAL, "attn_params_store_st: parameters not allocated");
  if (!gprefix) gprefix = "";
  for (int i = 0; i < p->count; i++) {
    const attn_param_view *v = &p->views[i];
    char full[ATTN_PARAM_NAME_MAX + 256];
    int n = snprintf(full, sizeof full, "%s%s", grads ? gprefix : "", v->name);
    if (n < 0 || (size_t)n >= sizeof full)
      return attn_set_error(ATTN_EINVAL, "parameter '%s': gradient prefix too long", v->name);
    attn_status s = attn_st_add_f32(st, full, v->ndim, v->shape,
                                    grads ? attn_params_grad(p, i) : attn_params_data(p, i));
    if (s) return s;
  }
  return ATTN_OK;
}
