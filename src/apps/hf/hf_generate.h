/* Generation with a Hugging Face GPT-2 checkpoint (apps/hf/hf.h): an
 * incremental decoder over the language model's KV cache seam
 * (apps/gen/gen_kvcache.h: f32, f16, bf16 or int8, contiguous or paged) and
 * the LM's sampling and generation loop (apps/lm/lm_generate.h).
 * docs/HF.md "Generation". */
#ifndef ATTN_APPS_HF_GENERATE_H
#define ATTN_APPS_HF_GENERATE_H

#include "apps/gen/gen.h"
#include "apps/hf/hf.h"
#include "attn/quant.h"

typedef struct {
  const attn_hf *h;
  attn_lm_decoder_work work; /* cache, scratch, int8 weights (apps/gen/gen.h) */
} attn_hf_decoder;

/* The weights the decoder's Linears and LM head read: the checkpoint's f32,
 * or int8 per output channel with each row of activations quantized to u8
 * at run time (attn_qlinear: VNNI where the CPU has it), a quarter of the
 * bytes a token reads. */
typedef enum { ATTN_HF_WEIGHTS_F32 = 0, ATTN_HF_WEIGHTS_INT8 = 1 } attn_hf_weights;

/* GPT-2 only (ATTN_EUNSUPPORTED for BERT). kv: the cache's storage (NULL:
 * f32 contiguous); weights: above (int8 quantizes them here); cap: the most
 * tokens (<= 0 or above n_positions: n_positions). */
attn_status attn_hf_decoder_init(attn_hf_decoder *d, const attn_hf *h, const attn_lm_kv_spec *kv,
                                 attn_hf_weights weights, int64_t cap);
void attn_hf_decoder_free(attn_hf_decoder *d);
int64_t attn_hf_decoder_len(const attn_hf_decoder *d);
/* The n tokens ids at positions len..len+n-1: logits [n, V] of each (may
 * be NULL), last [V] the last one's (may be NULL), probs [layers, heads, n,
 * len + n] the new positions' attention (may be NULL; 0 after each).
 * Equals attn_hf_model_forward over the whole sequence within float
 * rounding (tests/test_hf_generate.c). */
attn_status attn_hf_decoder_step(attn_hf_decoder *d, const int32_t *ids, int64_t n, float *logits,
                                 float *last, float *probs);

/* prompt [np] then up to n_new tokens (np + n_new <= n_positions, else
 * ATTN_EINVAL saying so); eos >= 0 ends it once drawn. want_probs: each new
 * token's attention in out->probs [layers, heads, n, context]
 * (attn_lm_generate's; attn_lm_save_attention writes it for attn viz). */
attn_status attn_hf_generate(const attn_hf *h, const int32_t *prompt, int64_t np, int64_t n_new,
                             const attn_lm_sampling *s, const attn_lm_kv_spec *kv,
                             attn_hf_weights weights, int32_t eos, int want_probs,
                             attn_lm_token_fn cb, void *user, attn_lm_generation *out);

#endif
