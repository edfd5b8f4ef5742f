/* The `attn layer` file normalised before a kind runs, and its outputs put
 * back in the caller's layout afterwards:
 * - F16 / BF16 tensors (parameters, inputs, float masks, dout) are widened to
 *   F32, which is exact: the modules then run in f32 on the very values of
 *   the file. Outputs are F32 whatever the input dtype.
 * - batch_first = false (PyTorch's default for MultiheadAttention and the
 *   Transformer layers): the sequence inputs query, key, value, src, tgt,
 *   memory and dout are [L, B, E] and are transposed to [B, L, E]; "out" and
 *   their "grad.<name>" are transposed back to [L, B, E]. Masks keep
 *   torch's shapes ([B, Lk] key padding, [Lq, Lk] or [B*H, Lq, Lk]) and
 *   attn_weights stays [B, ...] (as torch returns it). */
#include <stdlib.h>
#include <string.h>

#include "attn/lowp.h"
#include "nn/nn_internal.h"

static const char *const seq_names[] = {"query", "key", "value", "src", "tgt", "memory", "dout"};

static int is_seq(const char *name) {
  for (size_t i = 0; i < sizeof seq_names / sizeof seq_names[0]; i++)
    if (!strcmp(name, seq_names[i])) return 1;
  return 0;
}

/* dst [d1, d0, rest] = src [d0, d1, rest] (elements of es bytes) */
static void swap01(const attn_tensor *t, size_t es, char *dst, int64_t shape[ATTN_MAX_DIMS]) {
  int64_t d0 = t->shape[0], d1 = t->shape[1];
  size_t row = (size_t)(attn_tensor_numel(t) / (d0 * d1)) * es;
  for (int64_t i = 0; i < d0; i++)
    for (int64_t j = 0; j < d1; j++)
      memcpy(dst + (size_t)(j * d0 + i) * row, (const char *)t->data + (size_t)(i * d1 + j) * row,
             row);
  memcpy(shape, t->shape, sizeof(int64_t) * ATTN_MAX_DIMS);
  shape[0] = d1;
  shape[1] = d0;
}

int attn_nn_layer_needs_prep(const attn_st *in, int batch_first) {
  if (!batch_first) return 1;
  for (int i = 0; i < attn_st_count(in); i++) {
    attn_dtype d = attn_st_get(in, attn_st_name(in, i))->dtype;
    if (d == ATTN_F16 || d == ATTN_BF16) return 1;
  }
  return 0;
}

attn_status attn_nn_layer_prep_in(const attn_st *in, int batch_first, attn_st **out) {
  attn_status st = attn_st_new(out);
  for (int i = 0; !st && i < attn_st_count(in); i++) {
    const char *name = attn_st_name(in, i);
    const attn_tensor *t = attn_st_get(in, name);
    int wide = t->dtype == ATTN_F16 || t->dtype == ATTN_BF16;
    int swap = !batch_first && is_seq(name);
    if (swap && t->ndim != 3)
      st = attn_set_error(ATTN_EINVAL, "tensor '%s' has %d dimensions: batch_first=false "
                          "expects [L, B, E]", name, t->ndim);
    if (st || (!wide && !swap)) {
      if (!st) st = attn_st_add(*out, name, t->dtype, t->ndim, t->shape, t->data);
      continue;
    }
    int64_t n = attn_tensor_numel(t);
    float *f = wide ? malloc(sizeof(float) * (size_t)(n ? n : 1)) : NULL;
    size_t es = wide ? sizeof(float) : attn_dtype_size(t->dtype);
    char *sw = swap ? malloc(es * (size_t)(n ? n : 1)) : NULL;
    if ((wide && !f) || (swap && !sw)) {
      st = attn_set_error(ATTN_ENOMEM, "layer: out of memory widening '%s'", name);
    } else {
      if (t->dtype == ATTN_F16) attn_f16_to_f32_n(t->data, f, n);
      if (t->dtype == ATTN_BF16) attn_bf16_to_f32_n(t->data, f, n);
      attn_tensor w = *t;
      if (wide) w.dtype = ATTN_F32, w.data = f;
      int64_t shape[ATTN_MAX_DIMS];
      memcpy(shape, t->shape, sizeof shape);
      if (swap) swap01(&w, es, sw, shape);
      st = attn_st_add(*out, name, w.dtype, t->ndim, shape, swap ? sw : w.data);
    }
    free(f);
    free(sw);
  }
  for (int i = 0; !st && i < attn_st_meta_count(in); i++)
    st = attn_st_set_meta(*out, attn_st_meta_key(in, i), attn_st_meta(in, attn_st_meta_key(in, i)));
  if (st) {
    attn_st_free(*out);
    *out = NULL;
  }
  return st;
}

attn_status attn_nn_layer_prep_out(attn_st *out) {
  for (int i = 0; i < attn_st_count(out); i++) {
    const char *name = attn_st_name(out, i);
    if (strcmp(name, "out") && !(!strncmp(name, "grad.", 5) && is_seq(name + 5))) continue;
    const attn_tensor *t = attn_st_get(out, name);
    size_t es = attn_dtype_size(t->dtype);
    int64_t n = attn_tensor_numel(t), shape[ATTN_MAX_DIMS];
    char *sw = malloc(es * (size_t)(n ? n : 1));
    if (!sw) return attn_set_error(ATTN_ENOMEM, "layer: out of memory transposing '%s'", name);
    swap01(t, es, sw, shape);
    attn_status st = attn_st_add(out, name, t->dtype, t->ndim, shape, sw);
    free(sw);
    if (st) return st;
  }
  return ATTN_OK;
}
