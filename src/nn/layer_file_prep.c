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

/* the [L, B, ...] tensor `name` of st replaced by its [B, L, ...] transpose
 * (or back) */
static attn_status swap_in_place(attn_st *st, const char *name) {
  const attn_tensor *t = attn_st_get(st, name);
  if (t->ndim != 3)
    return attn_set_error(ATTN_EINVAL, "tensor '%s' has %d dimensions: batch_first=false "
                          "expects [L, B, E]", name, t->ndim);
  size_t es = attn_dtype_size(t->dtype);
  int64_t n = attn_tensor_numel(t), shape[ATTN_MAX_DIMS];
  char *sw = malloc(es * (size_t)(n ? n : 1));
  if (!sw) return attn_set_error(ATTN_ENOMEM, "layer: out of memory transposing '%s'", name);
  swap01(t, es, sw, shape);
  attn_status s = attn_st_add(st, name, t->dtype, t->ndim, shape, sw);
  free(sw);
  return s;
}

attn_status attn_nn_layer_prep_in(const attn_st *in, int batch_first, attn_st **out) {
  attn_status st = attn_st_widen(in, NULL, out);
  for (int i = 0; !st && !batch_first && i < attn_st_count(*out); i++)
    if (is_seq(attn_st_name(*out, i))) st = swap_in_place(*out, attn_st_name(*out, i));
  if (st) {
    attn_st_free(*out);
    *out = NULL;
  }
  return st;
}

attn_status attn_nn_layer_prep_out(attn_st *out) {
  attn_status st = ATTN_OK;
  for (int i = 0; !st && i < attn_st_count(out); i++) {
    const char *name = attn_st_name(out, i);
    if (!strcmp(name, "out") || (!strncmp(name, "grad.", 5) && is_seq(name + 5)))
      st = swap_in_place(out, name);
  }
  return st;
}
