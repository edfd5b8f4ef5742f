/* attn_encoder_ext: a TransformerEncoderLayer over caller-owned parameter
 * memory (include/attn/nn_encoder_ext.h). The layer's attn_params holds the
 * views only; each call runs on a shallow copy whose data/grad point at the
 * caller's buffers, so concurrent calls never write shared state. */
#include <stdlib.h>
#include <string.h>

#include "attn/nn_encoder_ext.h"
#include "nn/nn_internal.h"

struct attn_encoder_ext {
  attn_encoder_layer layer;
  attn_params views; /* data = grad = NULL */
};

struct attn_encoder_ext_saved {
  attn_nn_ctx ctx;
  attn_encoder_saved s;
};

attn_status attn_encoder_ext_new(const attn_layer_config *c, attn_encoder_ext **out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "encoder_ext_new: out is NULL");
  *out = NULL;
  attn_encoder_ext *e = calloc(1, sizeof *e);
  if (!e) return attn_set_error(ATTN_ENOMEM, "encoder_ext_new: out of memory");
  attn_params_init(&e->views);
  attn_status st = attn_encoder_declare(&e->layer, &e->views, "", c);
  if (st) {
    attn_encoder_ext_free(e);
    return st;
  }
  *out = e;
  return ATTN_OK;
}

void attn_encoder_ext_free(attn_encoder_ext *e) {
  if (!e) return;
  attn_params_free(&e->views);
  free(e);
}

int64_t attn_encoder_ext_numel(const attn_encoder_ext *e) { return e ? e->views.numel : 0; }

int attn_encoder_ext_count(const attn_encoder_ext *e) { return e ? e->views.count : 0; }

attn_status attn_encoder_ext_param(const attn_encoder_ext *e, int i, const char **name, int *ndim,
                                   int64_t *shape, int64_t *offset) {
  if (!e || !name || !ndim || !shape || !offset)
    return attn_set_error(ATTN_EINVAL, "encoder_ext_param: NULL argument");
  if (i < 0 || i >= e->views.count)
    return attn_set_error(ATTN_EINVAL, "encoder_ext_param: index %d outside 0..%d", i,
                          e->views.count - 1);
  const attn_param_view *v = &e->views.views[i];
  *name = v->name;
  *ndim = v->ndim;
  for (int k = 0; k < 4; k++) shape[k] = k < v->ndim ? v->shape[k] : 1;
  *offset = v->offset;
  return ATTN_OK;
}

/* the layer's views over the caller's buffers */
static attn_status bind(const attn_encoder_ext *e, const float *params, float *grad,
                        attn_params *p) {
  if (!params || ((uintptr_t)params % 64) || (grad && ((uintptr_t)grad % 64)))
    return attn_set_error(ATTN_EINVAL,
                          "encoder_ext: the params and grad buffers must be non-NULL and "
                          "64-byte aligned");
  *p = e->views;
  p->data = (float *)params; /* read only in forward; backward writes grad only */
  p->grad = grad;
  return ATTN_OK;
}

static attn_mha_masks to_mha_masks(const attn_encoder_ext_masks *m) {
  attn_mha_masks r;
  memset(&r, 0, sizeof r);
  if (!m) return r;
  if (m->key_padding_float)
    r.key_padding_float = m->key_padding;
  else
    r.key_padding_bool = m->key_padding;
  if (m->attn_mask_float)
    r.attn_float = m->attn_mask;
  else
    r.attn_bool = m->attn_mask;
  r.attn_per_head = m->attn_mask_per_head;
  r.causal = m->causal;
  return r;
}

attn_status attn_encoder_ext_forward(const attn_encoder_ext *e, const float *params, int training,
                                     uint64_t seed, attn_precision precision,
                                     const attn_encoder_ext_masks *masks, const float *src,
                                     int64_t B, int64_t L, float *out,
                                     attn_encoder_ext_saved **saved) {
  if (!saved) return attn_set_error(ATTN_EINVAL, "encoder_ext_forward: saved is NULL");
  *saved = NULL;
  if (!e) return attn_set_error(ATTN_EINVAL, "encoder_ext_forward: layer is NULL");
  attn_params p;
  attn_status st = bind(e, params, NULL, &p);
  if (st) return st;
  attn_encoder_ext_saved *s = calloc(1, sizeof *s);
  if (!s) return attn_set_error(ATTN_ENOMEM, "encoder_ext_forward: out of memory");
  s->ctx.backend = ATTN_BACKEND_AUTO;
  s->ctx.training = training != 0;
  s->ctx.seed = seed;
  s->ctx.precision = precision;
  attn_mha_masks mm = to_mha_masks(masks);
  st = attn_encoder_forward(&e->layer, &p, &s->ctx, &s->s, src, B, L, &mm, out);
  if (st) {
    attn_encoder_ext_saved_free(s);
    return st;
  }
  *saved = s;
  return ATTN_OK;
}

attn_status attn_encoder_ext_backward(const attn_encoder_ext *e, const float *params, float *grad,
                                      const attn_encoder_ext_saved *saved, const float *src,
                                      const float *dout, float *dsrc) {
  if (!e || !saved || !grad)
    return attn_set_error(ATTN_EINVAL, "encoder_ext_backward: NULL layer, saved or grad");
  attn_params p;
  attn_status st = bind(e, params, grad, &p);
  return st ? st : attn_encoder_backward(&e->layer, &p, &saved->ctx, &saved->s, src, dout, dsrc);
}

void attn_encoder_ext_saved_free(attn_encoder_ext_saved *s) {
  if (!s) return;
  attn_encoder_saved_free(&s->s);
  free(s);
}
