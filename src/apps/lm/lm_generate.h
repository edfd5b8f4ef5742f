/* Generation with the language model: its incremental decoder over the KV
 * cache seam and attn_lm_generate, on the generation kit (apps/gen/gen.h:
 * sampling, the loop, the cache; docs/LM.md). */
#ifndef ATTN_APPS_LM_GENERATE_H
#define ATTN_APPS_LM_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "apps/gen/gen.h"
#include "apps/lm/lm_model.h"
#include "attn/quant.h"

/* ---- the incremental decoder ------------------------------------------------ */
typedef struct {
  const attn_lm_model *m;
  attn_lm_decoder_work work; /* cache, scratch, int8 weights (apps/gen/gen.h) */
} attn_lm_decoder;

/* kv: the cache's storage (NULL: f32 contiguous); cap: the most tokens it
 * holds (<= 0 or above the model's max_len: max_len). */
attn_status attn_lm_decoder_init(attn_lm_decoder *d, const attn_lm_model *m,
                                 const attn_lm_kv_spec *kv, int64_t cap);
void attn_lm_decoder_free(attn_lm_decoder *d);
int64_t attn_lm_decoder_len(const attn_lm_decoder *d);
/* From now on every Linear and the LM head read int8 weights, quantized
 * here per output channel, each row of activations per row at run time
 * (attn_qlinear, as attn hf generate --weights int8). */
attn_status attn_lm_decoder_set_int8(attn_lm_decoder *d);
/* The n tokens ids at positions len..len+n-1 (len + n <= cap): logits
 * [n, V] of each (NULL: only the last row, into last [V] when not NULL);
 * probs (may be NULL): [layers, H, n, len + n] the attention of the new
 * positions over every cached one (0 after each). Equals attn_lm_forward
 * over the whole sequence within float rounding (tests/test_lm.c). */
attn_status attn_lm_decoder_step(attn_lm_decoder *d, const int32_t *ids, int64_t n, float *logits,
                                 float *last, float *probs);

/* ---- generation ------------------------------------------------------------------ */
/* prompt [np] (np >= 1), n_new tokens drawn; np + n_new <= the model's
 * max_len (else ATTN_EINVAL saying so). int8_weights: attn_lm_decoder_set_int8. want_probs: each
 * new token's attention over the prompt and the tokens before it, every layer and head (one more
 * step feeds the last token). kv: the cache's storage (NULL: f32 contiguous; the f32 caches,
 * contiguous or paged, give the same bits). */
attn_status attn_lm_generate(const attn_lm_model *m, const int32_t *prompt, int64_t np,
                             int64_t n_new, const attn_lm_sampling *s, const attn_lm_kv_spec *kv,
                             int int8_weights, int want_probs, attn_lm_token_fn cb, void *user,
                             attn_lm_generation *out);

#endif
