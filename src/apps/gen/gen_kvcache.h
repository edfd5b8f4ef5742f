/* The KV cache of the generating applications (the LM's, GPT-2's) and the
 * one seam where new tokens attend over it (docs/LM.md, "The KV cache"). One attn_kvc
 * (attn/decode.h) per layer, stored as f32, f16, bf16 or int8, contiguous or paged; the new
 * positions attend with attn_decode_forward (split-KV, the same bits for
 * any thread count and page size), except a prompt's first step (an empty
 * cache and more than one token), which runs the causal SDPA (flash) on the
 * step's own f32 keys and values and then stores them in the cache. */
#ifndef ATTN_APPS_GEN_KVCACHE_H
#define ATTN_APPS_GEN_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/decode.h"
#include "attn/status.h"

/* What the cache stores and how it lies. */
typedef struct {
  int dtype;         /* ATTN_F32, ATTN_F16, ATTN_BF16 or ATTN_I8 (attn_dtype) */
  int64_t page_size; /* 0: contiguous; else a paged pool, tokens a page */
} attn_lm_kv_spec;

#define ATTN_LM_KV_PAGE_DEFAULT 16
#define ATTN_LM_KV_PAGE_MAX 65536

/* name: "f32" | "f16" | "bf16" | "int8", each optionally followed by
 * "-paged"; "paged" is "f32-paged"; NULL is "f32". page_size: -1 = not
 * given (ATTN_LM_KV_PAGE_DEFAULT for a paged name), else 1..PAGE_MAX and
 * only with a paged name. ATTN_EINVAL naming --kv-cache or --kv-page-size. */
attn_status attn_lm_kv_spec_parse(const char *name, int64_t page_size, attn_lm_kv_spec *out);
/* "f32", "int8-paged (pages of 16)" into buf [n]; returns buf. */
const char *attn_lm_kv_spec_name(const attn_lm_kv_spec *s, char *buf, size_t n);

typedef struct {
  attn_lm_kv_spec spec;
  int layers;
  int64_t Hq, Hkv, hd, cap;
  attn_kvc **kv; /* [layers], one sequence each */
  float *work;   /* transposes, lse, widened keys (grown on demand) */
  int64_t work_n;
} attn_lm_kv;

/* spec NULL: f32 contiguous. cap: the most tokens each layer holds. */
attn_status attn_lm_kv_init(attn_lm_kv *c, const attn_lm_kv_spec *spec, int layers, int64_t Hq,
                            int64_t Hkv, int64_t hd, int64_t cap);
void attn_lm_kv_free(attn_lm_kv *c);
int64_t attn_lm_kv_len(const attn_lm_kv *c, int layer);

/* THE SEAM: layer's n new positions, q [n, Hq, hd], k, v [n, Hkv, hd]
 * (token-major, as projected and rotated): k and v are appended to the
 * cache (len -> len + n <= cap), then each query i (position len + i)
 * attends causally over the cache: out [n, Hq, hd]. probs (may be NULL):
 * [Hq, n, len + n] that attention (the softmax in double of the keys the
 * kernel read: the cache's rows widened, or the step's own f32 keys on the
 * prefill path), 0 at keys after each query. */
attn_status attn_lm_kv_step(attn_lm_kv *c, int layer, const float *q, const float *k,
                            const float *v, int64_t n, float *out, float *probs);

#endif
