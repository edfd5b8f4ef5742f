/* The language model's KV cache and the one seam where a new token attends
 * over it (docs/LM.md, "The KV cache seam"). Everything the generator does
 * with cached keys and values goes through the four functions below, so a
 * decode kernel with other storage (issue 36: f16 / int8 / paged caches,
 * split-KV) replaces this file's body and nothing else.
 *
 * Today the storage is the library's f32 attn_kv_cache (include/attn/
 * variants.h), one per layer, and the attention attn_kv_cache_attend. */
#ifndef ATTN_APPS_LM_KVCACHE_H
#define ATTN_APPS_LM_KVCACHE_H

#include <stdint.h>

#include "attn/variants.h"

typedef enum {
  ATTN_LM_KV_F32 = 0,
  ATTN_LM_KV_F16,
  ATTN_LM_KV_INT8,
  ATTN_LM_KV_PAGED
} attn_lm_kv_kind;

/* "f32" | "f16" | "int8" | "paged": ATTN_EINVAL for another name (listing
 * them); ATTN_EUNSUPPORTED for the storages this build does not have yet
 * (all but f32), saying so. */
attn_status attn_lm_kv_kind_from_name(const char *name, attn_lm_kv_kind *out);
const char *attn_lm_kv_kind_name(attn_lm_kv_kind k);

typedef struct {
  attn_lm_kv_kind kind;
  int layers;
  int64_t Hq, Hkv, hd;
  attn_kv_cache *kv; /* [layers] */
} attn_lm_kv;

/* One sequence, cap positions reserved (grows past it). */
attn_status attn_lm_kv_init(attn_lm_kv *c, attn_lm_kv_kind kind, int layers, int64_t Hq,
                            int64_t Hkv, int64_t hd, int64_t cap);
void attn_lm_kv_free(attn_lm_kv *c);
int64_t attn_lm_kv_len(const attn_lm_kv *c, int layer);
/* k, v [n, Hkv, hd] (token-major, as projected and rotated) appended to layer's cache. */
attn_status attn_lm_kv_append(attn_lm_kv *c, int layer, const float *k, const float *v, int64_t n);
/* THE SEAM: the n newest positions' queries q [n, Hq, hd] (token-major,
 * rotated) attend causally over layer's cache (the n appended last):
 * out [n, Hq, hd]; lse [Hq, n] (natural log-sum-exp of the scaled scores). */
attn_status attn_lm_kv_attend(const attn_lm_kv *c, int layer, const float *q, int64_t n, float *out,
                              float *lse);
/* The probabilities of that attention (for --save-attention): probs
 * [Hq, n, len] from q, the cache and lse; 0 at keys after each query. */
attn_status attn_lm_kv_probs(const attn_lm_kv *c, int layer, const float *q, int64_t n,
                             const float *lse, float *probs);

#endif
