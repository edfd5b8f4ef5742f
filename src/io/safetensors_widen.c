/* A copy of a tensor set with its F16 / BF16 tensors widened to F32. Every
 * f16 and bf16 value is exactly an f32 value, so nothing is rounded: code
 * that computes in f32 then runs on the very values of the file. */
#include <stdlib.h>
#include <string.h>

#include "attn/lowp.h"
#include "attn/safetensors.h"

static int listed(const char *name, const char *const *keep) {
  for (int i = 0; keep && keep[i]; i++)
    if (!strcmp(name, keep[i])) return 1;
  return 0;
}

attn_status attn_st_widen(const attn_st *in, const char *const *keep, attn_st **out) {
  if (!in || !out) return attn_set_error(ATTN_EINVAL, "st_widen: NULL argument");
  attn_status st = attn_st_new(out);
  for (int i = 0; !st && i < attn_st_count(in); i++) {
    const char *name = attn_st_name(in, i);
    const attn_tensor *t = attn_st_get(in, name);
    if ((t->dtype != ATTN_F16 && t->dtype != ATTN_BF16) || listed(name, keep)) {
      st = attn_st_add(*out, name, t->dtype, t->ndim, t->shape, t->data);
      continue;
    }
    int64_t n = attn_tensor_numel(t);
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!f) {
      st = attn_set_error(ATTN_ENOMEM, "tensor '%.200s': out of memory widening to F32", name);
      break;
    }
    if (t->dtype == ATTN_F16)
      attn_f16_to_f32_n(t->data, f, n);
    else
      attn_bf16_to_f32_n(t->data, f, n);
    st = attn_st_add_f32(*out, name, t->ndim, t->shape, f);
    free(f);
  }
  for (int i = 0; !st && i < attn_st_meta_count(in); i++)
    st = attn_st_set_meta(*out, attn_st_meta_key(in, i), attn_st_meta(in, attn_st_meta_key(in, i)));
  if (st) {
    attn_st_free(*out);
    *out = NULL;
  }
  return st;
}
