/* Exponential moving average of the parameters (Polyak averaging, as
 * timm's ModelEmaV2 / torch.optim.swa_utils.AveragedModel with an EMA
 * avg_fn), with the usual warm-up of the decay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/train.h"

double attn_ema_decay(double decay, int64_t updates) {
  double warm = (1.0 + (double)updates) / (10.0 + (double)updates);
  return warm < decay ? warm : decay;
}

attn_status attn_ema_init(attn_ema *e, const attn_params *p, double decay) {
  if (!e) return attn_set_error(ATTN_EINVAL, "ema_init: e is NULL");
  memset(e, 0, sizeof *e);
  if (!p || !p->data) return attn_set_error(ATTN_EINVAL, "ema_init: parameters not allocated");
  if (!(decay > 0.0 && decay < 1.0))
    return attn_set_error(ATTN_EINVAL, "ema_init: decay %g is not in (0, 1)", decay);
  size_t bytes = (size_t)p->numel * sizeof(float);
  e->avg = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!e->avg) return attn_set_error(ATTN_ENOMEM, "ema_init: out of memory (%zu bytes)", bytes);
  memcpy(e->avg, p->data, bytes);
  e->decay = decay;
  e->numel = p->numel;
  return ATTN_OK;
}

void attn_ema_free(attn_ema *e) {
  if (!e) return;
  free(e->avg);
  memset(e, 0, sizeof *e);
}

static attn_status check_bound(const attn_ema *e, const attn_params *p, const char *fn) {
  if (!e || !e->avg || !p || !p->data || e->numel != p->numel)
    return attn_set_error(ATTN_EINVAL, "%s: average not initialised for these parameters", fn);
  return ATTN_OK;
}

attn_status attn_ema_update(attn_ema *e, const attn_params *p) {
  attn_status st = check_bound(e, p, "ema_update");
  if (st) return st;
  const float w = (float)(1.0 - attn_ema_decay(e->decay, e->updates));
  float *a = e->avg;
  const float *x = p->data;
  for (int64_t i = 0; i < e->numel; i++) a[i] += w * (x[i] - a[i]);
  e->updates++;
  return ATTN_OK;
}

attn_status attn_ema_swap(attn_ema *e, attn_params *p) {
  attn_status st = check_bound(e, p, "ema_swap");
  if (st) return st;
  float *a = e->avg, *x = p->data;
  for (int64_t i = 0; i < e->numel; i++) {
    float t = a[i];
    a[i] = x[i];
    x[i] = t;
  }
  return ATTN_OK;
}

#define EMA_NAME_MAX (ATTN_PARAM_NAME_MAX + 8)

attn_status attn_ema_store_st(const attn_ema *e, const attn_params *p, attn_st *st) {
  attn_status s = check_bound(e, p, "ema_store_st");
  if (s) return s;
  char name[EMA_NAME_MAX], val[64];
  for (int i = 0; i < p->count; i++) {
    const attn_param_view *v = &p->views[i];
    snprintf(name, sizeof name, "ema.%s", v->name);
    if ((s = attn_st_add_f32(st, name, v->ndim, v->shape, e->avg + v->offset))) return s;
  }
  snprintf(val, sizeof val, "%.17g", e->decay);
  if ((s = attn_st_set_meta(st, "ema.decay", val))) return s;
  snprintf(val, sizeof val, "%lld", (long long)e->updates);
  return attn_st_set_meta(st, "ema.updates", val);
}

attn_status attn_ema_load_st(attn_ema *e, const attn_params *p, const attn_st *st, int *found) {
  if (found) *found = 0;
  if (!e || !p || !p->data || !st) return attn_set_error(ATTN_EINVAL, "ema_load_st: NULL argument");
  const char *dv = attn_st_meta(st, "ema.decay"), *uv = attn_st_meta(st, "ema.updates");
  if (!dv && !uv) return ATTN_OK;  // a file without an average
  char *end1 = NULL, *end2 = NULL;
  double decay = dv ? strtod(dv, &end1) : 0;
  long long updates = uv ? strtoll(uv, &end2, 10) : -1;
  if (!dv || !uv || *end1 || *end2 || end1 == dv || end2 == uv || !(decay > 0 && decay < 1) ||
      updates < 0)
    return attn_set_error(ATTN_EFORMAT, "ema: bad or incomplete metadata (ema.decay '%.30s', "
                          "ema.updates '%.30s')", dv ? dv : "(none)", uv ? uv : "(none)");
  char name[EMA_NAME_MAX];
  const attn_tensor *t;
  for (int i = 0; i < p->count; i++) {  // validate all before changing anything
    const attn_param_view *v = &p->views[i];
    snprintf(name, sizeof name, "ema.%s", v->name);
    attn_status s = attn_st_expect(st, name, ATTN_F32, v->ndim, v->shape, 1, &t);
    if (s) return s;
  }
  attn_ema n;
  attn_status s = attn_ema_init(&n, p, decay);
  if (s) return s;
  for (int i = 0; i < p->count; i++) {
    const attn_param_view *v = &p->views[i];
    snprintf(name, sizeof name, "ema.%s", v->name);
    memcpy(n.avg + v->offset, attn_st_get(st, name)->data, (size_t)v->numel * sizeof(float));
  }
  n.updates = updates;
  attn_ema_free(e);
  *e = n;
  if (found) *found = 1;
  return ATTN_OK;
}
