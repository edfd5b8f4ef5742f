/* attn — parameters: one flat f32 buffer (and one gradient buffer of the same
 * layout) carved into named views with PyTorch state_dict names. The optimizer,
 * checkpoint I/O and gradient reduction each see one buffer.
 *
 * Use: attn_params_init; attn_params_declare (once per tensor, while
 * building modules; returns the view index); attn_params_alloc (allocates
 * data and grad, zeroed); then attn_params_data/grad(p, idx). */
#ifndef ATTN_PARAMS_H
#define ATTN_PARAMS_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_PARAM_NAME_MAX 128

typedef struct {
  char name[ATTN_PARAM_NAME_MAX];
  int ndim;
  int64_t shape[4];
  int64_t numel;
  int64_t offset; /* into data/grad, in floats; 16-float (64-byte) aligned */
} attn_param_view;

typedef struct {
  attn_param_view *views;
  int count, cap;
  int64_t numel; /* total floats including alignment padding */
  float *data;   /* NULL until attn_params_alloc */
  float *grad;
} attn_params;

ATTN_API void attn_params_init(attn_params *p);
ATTN_API void attn_params_free(attn_params *p);
/* Declare a tensor; *index receives its view index. Names must be unique. */
ATTN_API attn_status attn_params_declare(attn_params *p, const char *name, int ndim,
                                         const int64_t *shape, int *index);
ATTN_API attn_status attn_params_alloc(attn_params *p);
static inline float *attn_params_data(const attn_params *p, int index) {
  return p->data + p->views[index].offset;
}
static inline float *attn_params_grad(const attn_params *p, int index) {
  return p->grad + p->views[index].offset;
}
/* -1 if absent */
ATTN_API int attn_params_find(const attn_params *p, const char *name);
ATTN_API void attn_params_zero_grad(attn_params *p);

/* Copy every parameter from st (F32, or F16/BF16 converted) by name, prefixed
 * by `prefix` (may be ""). Missing or mis-shaped tensors: ATTN_EINVAL naming
 * them (unless allow_missing). */
ATTN_API attn_status attn_params_load_st(attn_params *p, const attn_st *st, const char *prefix,
                                         int allow_missing);
/* Add every parameter (or, with grads=1, every gradient as "<gprefix><name>") to st. */
ATTN_API attn_status attn_params_store_st(const attn_params *p, attn_st *st, int grads,
                                          const char *gprefix);

#ifdef __cplusplus
}
#endif
#endif
