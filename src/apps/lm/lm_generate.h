/* Generation with the language model: the incremental decoder over the KV
 * cache (lm_kvcache.h), sampling, and the generation loop (docs/LM.md). */
#ifndef ATTN_APPS_LM_GENERATE_H
#define ATTN_APPS_LM_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "apps/lm/lm_kvcache.h"
#include "apps/lm/lm_model.h"
#include "attn/quant.h"

/* ---- the incremental decoder ------------------------------------------------ */
typedef struct {
  const attn_lm_model *m;
  attn_lm_kv kv;
  int64_t cap;    /* rows of the scratch below */
  float *scratch; /* x, a, q, k, v, ctx, o [cap, E], stats [2, cap] */
  attn_ffn_saved fs;
  attn_qlinear_set *ql; /* int8 weights (attn_lm_decoder_set_int8); NULL: f32 */
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

/* Shared by the incremental decoders (this one, apps/hf's GPT-2): the
 * scratch x, a, q, k, v, ctx, o [n, E] and stats [2, n] grown to n rows; and
 * the head: logits [n, V] = a · Wᵀ (NULL: only the last row, into last [V]
 * when not NULL; with logits, last gets a copy of its last row). */
attn_status attn_lm_scratch_reserve(float **scratch, int64_t *cap, int64_t n, int64_t E);
attn_status attn_lm_head_logits(const attn_nn_ctx *ctx, const float *a, const float *W, int64_t n,
                                int64_t E, int64_t V, float *logits, float *last);

/* ---- sampling ----------------------------------------------------------------
 * temperature 0: the argmax (greedy). Else softmax(logits / temperature)
 * restricted to the top_k most likely ids (0: all), then to the smallest
 * set of those, most likely first, whose mass reaches top_p (1: all),
 * renormalised, and one id drawn with attn_rng_uniform(seed, step): the same
 * seed and step give the same id on any machine and thread count. Ids below
 * min_id (the BPE's specials) are never drawn. */
typedef struct {
  float temperature; /* >= 0 */
  int top_k;         /* >= 0 */
  float top_p;       /* (0, 1] */
  uint64_t seed;
  int32_t min_id;
} attn_lm_sampling;

void attn_lm_sampling_default(attn_lm_sampling *s); /* T 0.8, top-k 40, top-p 0.95, seed 1 */
attn_status attn_lm_sampling_check(const attn_lm_sampling *s);
/* logits [V] -> *out. */
attn_status attn_lm_sample(const attn_lm_sampling *s, const float *logits, int64_t V, uint64_t step,
                           int32_t *out);

/* ---- generation ------------------------------------------------------------------ */
/* Called with each new token's bytes as it is drawn (streaming). */
typedef void (*attn_lm_token_fn)(int32_t id, void *user);

typedef struct {
  int32_t *ids; /* [n] the new tokens (free()) */
  int64_t n;
  double prefill_s, decode_s; /* the prompt's step, then the new tokens' */
  int64_t context;            /* prompt + new tokens */
  float *probs;               /* with want_probs: [layers, H, n, context] (free()) */
} attn_lm_generation;
void attn_lm_generation_free(attn_lm_generation *g);

/* The loop for any incremental decoder (the LM's above, GPT-2's in
 * apps/hf/hf_generate.h): step feeds n tokens at the next positions and
 * writes the last one's logits [vocab] into last (NULL: not wanted) and,
 * with probs, the attention rows [probs_rows, n, len + n]. */
typedef attn_status (*attn_lm_step_fn)(void *decoder, const int32_t *ids, int64_t n, float *last,
                                       float *probs);
typedef struct {
  attn_lm_step_fn step;
  void *decoder;
  int64_t vocab;
  int64_t probs_rows; /* layers * heads of the attention probabilities */
  int32_t eos;        /* >= 0: generation ends once this id is drawn (it is in ids); -1: none */
} attn_lm_stepper;
/* prompt [np] (np >= 1), then up to n_new tokens drawn (fewer when eos is
 * drawn); the caller checks np + n_new against the model's context. */
attn_status attn_lm_generate_steps(const attn_lm_stepper *sp, const int32_t *prompt, int64_t np,
                                   int64_t n_new, const attn_lm_sampling *s, int want_probs,
                                   attn_lm_token_fn cb, void *user, attn_lm_generation *out);

/* prompt [np] (np >= 1), n_new tokens drawn; np + n_new <= the model's
 * max_len (else ATTN_EINVAL saying so). int8_weights: attn_lm_decoder_set_int8. want_probs: each
 * new token's attention over the prompt and the tokens before it, every layer and head (one more
 * step feeds the last token). kv: the cache's storage (NULL: f32 contiguous; the f32 caches,
 * contiguous or paged, give the same bits). */
attn_status attn_lm_generate(const attn_lm_model *m, const int32_t *prompt, int64_t np,
                             int64_t n_new, const attn_lm_sampling *s, const attn_lm_kv_spec *kv,
                             int int8_weights, int want_probs, attn_lm_token_fn cb, void *user,
                             attn_lm_generation *out);

/* ---- the attention of a generation as a file (lm_attention_file.c) ------------- */
/* A token's bytes (*len) for the labels; NULL: none. */
typedef const char *(*attn_lm_token_bytes_fn)(const void *tok, int32_t id, size_t *len);
/* g (generated with want_probs; layers x heads attention rows) into path for
 * attn viz: tensor "attn" [layers, heads, new tokens, prompt + new tokens],
 * the tokens' labels (attn_lm_token_label), metadata model.kind "decoder"
 * and prompt_tokens. */
attn_status attn_lm_save_attention(const char *path, const attn_lm_generation *g, int64_t layers,
                                   int64_t heads, const int32_t *prompt, int64_t np,
                                   attn_lm_token_bytes_fn bytes, const void *tok);
/* A token's bytes as a label (malloc'd): \n and \t written out, other
 * control bytes and bytes of no complete UTF-8 character (a token may end
 * inside one) as '?'. NULL when out of memory. */
char *attn_lm_token_label(const char *bytes, size_t n);

#endif
