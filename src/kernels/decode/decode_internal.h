/* Decode attention's loop (decode.c), checks (decode_check.c) and the
 * addressing of a view's rows, shared with the cache (kvc.c). Internal. */
#ifndef ATTN_DECODE_INTERNAL_H
#define ATTN_DECODE_INTERNAL_H

#include <stdint.h>

#include "attn/decode.h"
#include "core/checked.h"

/* The descriptor and the view, every field and page checked (attn/decode.h). */
attn_status attn_decode_check(const attn_decode_desc *d, const attn_kv_view *kv, const float *q,
                              const float *out);

/* Index (in rows of its tensor) of token t of sequence b, KV head g: the row
 * k + index * D, v + index * Dv, k_scale + index. The view must have passed
 * attn_decode_check and t < seq_lens[b]. */
static inline int64_t attn_kv_row(const attn_kv_view *kv, int64_t b, int64_t g, int64_t t) {
  if (kv->page_size == 0) return (b * kv->Hkv + g) * kv->capacity + t;
  const int64_t page = kv->block_table[b * kv->block_table_stride + t / kv->page_size];
  return (page * kv->Hkv + g) * kv->page_size + t % kv->page_size;
}

#endif
