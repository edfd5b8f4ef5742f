/* The attention probabilities of the LM's cached attention, for
 * --save-attention (gen_kvcache.h): computed apart from the kernel, in
 * double, from the keys it read. */
#ifndef ATTN_APPS_GEN_KVPROBS_H
#define ATTN_APPS_GEN_KVPROBS_H

#include <stdint.h>

#include "attn/decode.h"

/* The n newest positions' queries q [n, Hq, D] (token-major, rotated) over
 * sequence 0 of kv (len tokens, the n new ones last): probs [Hq, n, len],
 * softmax(q·k / sqrt(D)) over keys 0..len-n+i for query i, 0 after. The keys
 * are the cache's rows widened to f32 (attn_kvc_read), or, when k_own is not
 * NULL, k_own [len, Hkv, D] (a prefill that attended the step's f32 keys). */
attn_status attn_lm_kv_probs(const attn_kvc *kv, const float *k_own, const float *q, int64_t Hq,
                             int64_t n, float *probs);

#endif
