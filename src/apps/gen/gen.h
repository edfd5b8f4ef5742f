/* The generation kit shared by the applications that generate text (the
 * language model's `attn lm generate`, GPT-2's `attn hf generate`): the
 * KV cache seam (gen_kvcache.h), sampling, the generation loop for any
 * incremental decoder, the decoders' scratch and LM head, and a
 * generation's attention as a file for attn viz (docs/LM.md "Generation").
 * The names keep the attn_lm_ prefix of the LM, where they started. */
#ifndef ATTN_APPS_GEN_H
#define ATTN_APPS_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "apps/gen/gen_kvcache.h"
#include "attn/nn.h"
#include "attn/quant.h"

/* ---- for incremental decoders (gen_loop.c) ---------------------------------
 * What an incremental decoder (the LM's, GPT-2's) holds besides its model:
 * the cache, the step's scratch, the FFN's saved rows, the int8 Linears. */
typedef struct {
  attn_lm_kv kv;
  int64_t cap;    /* rows of the scratch */
  float *scratch; /* x, a, q, k, v, ctx, o [cap, E], stats [2, cap] */
  attn_ffn_saved fs;
  attn_qlinear_set *ql; /* int8 weights: every Linear and the LM head; NULL: f32 */
} attn_lm_decoder_work;
/* Frees what w holds and zeroes it. */
void attn_lm_decoder_work_free(attn_lm_decoder_work *w);

/* Shared by the LM's decoder and apps/hf's GPT-2 one: the
 * scratch x, a, q, k, v, ctx, o [n, E] and stats [2, n] grown to n rows; and
 * the head: logits [n, V] = a · Wᵀ (NULL: only the last row, into last [V]
 * when not NULL; with logits, last gets a copy of its last row). */
attn_status attn_lm_scratch_reserve(float **scratch, int64_t *cap, int64_t n, int64_t E);
/* A step's arguments: 1 <= n, pos + n <= cap (ATTN_EINVAL "WHO: n new
 * positions after pos exceed the CAP_NAME of cap tokens"), every id in [0,
 * V) ("WHO: token id outside the vocabulary of V"). */
attn_status attn_lm_step_check(const char *who, const int32_t *ids, int64_t n, int64_t pos,
                               int64_t cap, const char *cap_name, int64_t V);
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

/* The loop for any incremental decoder (the LM's in apps/lm/lm_generate.h,
 * GPT-2's in apps/hf/hf_generate.h): step feeds n tokens at the next positions and
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

/* ---- the attention of a generation as a file (gen_attention.c) ------------- */
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
