/* Attention weights + token labels into a safetensors file, the format
 * attn_viz_input_load reads (see viz.h). */
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz.h"
#include "io/json.h"

/* labels [n] as a JSON array of strings into b (with the NUL); 1 when out of memory */
static int labels_json(json_buf *b, const char *const *labels, int64_t n) {
  int bad = attn_json_buf_puts(b, "[");
  for (int64_t i = 0; !bad && i < n; i++)
    bad = (i && attn_json_buf_puts(b, ",")) || attn_json_buf_put_string(b, labels[i] ? labels[i] : "");
  return bad || attn_json_buf_put(b, "]", 2);
}

attn_status attn_viz_save_f32(const char *path, const float *probs, int64_t layers, int64_t heads,
                              int64_t lq, int64_t lk, const char *const *q_labels,
                              const char *const *k_labels, const char *const *kv) {
  if (!path || !probs || layers < 1 || heads < 1 || lq < 1 || lk < 1)
    return attn_set_error(ATTN_EINVAL, "save attention: NULL argument or an empty shape");
  const int same = q_labels == k_labels && lq == lk; /* one "tokens" for both axes */
  json_buf q = {0}, k = {0};
  int bad = (q_labels && labels_json(&q, q_labels, lq)) || (!same && k_labels && labels_json(&k, k_labels, lk));
  attn_st *st = NULL;
  attn_status s = bad ? attn_set_error(ATTN_ENOMEM, "save attention: out of memory") : attn_st_new(&st);
  int64_t shape[4] = {layers, heads, lq, lk};
  if (!s) s = attn_st_add_f32(st, "attn", 4, shape, probs);
  if (!s && q_labels) s = attn_st_set_meta(st, same ? "tokens" : "query_tokens", q.data);
  if (!s && !same && k_labels) s = attn_st_set_meta(st, "key_tokens", k.data);
  for (int i = 0; !s && kv && kv[i]; i += 2) s = attn_st_set_meta(st, kv[i], kv[i + 1] ? kv[i + 1] : "");
  if (!s) s = attn_st_save(st, path);
  attn_st_free(st);
  attn_json_buf_free(&q);
  attn_json_buf_free(&k);
  return s;
}
