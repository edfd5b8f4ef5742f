/* attn — Hugging Face's BERT encoder (BertModel) and GPT-2 (GPT2Model /
 * GPT2LMHeadModel) built from attn's nn modules, forward only (inference).
 *
 * The parameters carry attn's own names (the nn.h modules' state_dict
 * names); docs/HF.md maps Hugging Face's names onto them (apps/hf.h loads a
 * checkpoint directory). E = hidden size, V = vocab, P = max positions,
 * T = token types, I = intermediate (feed-forward) size:
 *   BERT   word_embeddings [V, E], position_embeddings [P, E],
 *          token_type_embeddings [T, E], embeddings_norm.{weight,bias} [E],
 *          layers.<i>.*  post-norm TransformerEncoderLayer (attn_encoder_layer:
 *                        self_attn.in_proj_weight [3E, E] = q | k | v, ...),
 *          pooler.{weight [E, E], bias [E]}  (with config.pooler)
 *   GPT-2  word_embeddings [V, E], position_embeddings [P, E],
 *          layers.<i>.*  pre-norm layer, causal self-attention,
 *          final_norm.{weight,bias} [E],
 *          lm_head.weight [V, E]  (only when config.untied_lm_head; else
 *                                  the LM head is word_embeddings, tied)
 * Forward, per sequence of L ids (positions 0..L-1):
 *   BERT   x = LN(word[id] + position[pos] + token_type[tt]); x = layer_i(x);
 *          pooled = tanh(pooler(x[0]))
 *   GPT-2  x = word[id] + position[pos]; x = layer_i(x) (causal);
 *          h = LN_f(x); logits = h · lm_headᵀ
 * with HF's attention scale 1/sqrt(head_dim), no attention mask other than
 * GPT-2's causal one (every id is a real token), dropout off. */
#ifndef ATTN_NN_HF_H
#define ATTN_NN_HF_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ATTN_HF_BERT = 0, ATTN_HF_GPT2 = 1 } attn_hf_arch;

typedef struct {
  attn_hf_arch arch;
  int64_t vocab_size, hidden_size, num_layers, num_heads, intermediate_size;
  int64_t max_positions;
  int64_t type_vocab_size; /* BERT; 0 = no token_type_embeddings */
  float layer_norm_eps;
  attn_activation activation; /* BERT "gelu" = GELU (erf), GPT-2 "gelu_new" = GELU_TANH */
  int pooler;                 /* BERT: declare and run the pooler */
  int untied_lm_head;         /* GPT-2: a separate lm_head.weight */
} attn_hf_config;

typedef struct {
  attn_hf_config c;
  int word, position, token_type; /* param indices; token_type -1 without */
  attn_layernorm norm;            /* BERT: embeddings_norm; GPT-2: final_norm */
  attn_encoder_layer *layers;     /* [c.num_layers] */
  attn_linear pooler;             /* with c.pooler */
  int lm_head;                    /* param index; -1 = tied to word */
} attn_hf_model;

/* Declares every parameter into p (then attn_params_alloc and load). On
 * failure nothing stays allocated in m. */
ATTN_API attn_status attn_hf_model_declare(attn_hf_model *m, attn_params *p,
                                           const attn_hf_config *c);
ATTN_API void attn_hf_model_free(attn_hf_model *m);

/* ids [B, L] (each in [0, vocab)), token_types [B, L] (BERT, each in
 * [0, type_vocab); NULL = all 0), 1 <= L <= max_positions. Runs the first
 * n_layers layers (0..num_layers; < 0 = all); GPT-2's final LayerNorm and LM
 * head follow whatever the number. Outputs (any may be NULL):
 *   hidden [B, L, E]  last_hidden_state (GPT-2: after the final LayerNorm)
 *   pooled [B, E]     BERT with the pooler
 *   logits [B, L, V]  GPT-2
 * Bad ids or lengths: ATTN_EINVAL naming the position and the limit. */
ATTN_API attn_status attn_hf_model_forward(const attn_hf_model *m, const attn_params *p,
                                           const attn_nn_ctx *ctx, const int32_t *ids,
                                           const int32_t *token_types, int64_t B, int64_t L,
                                           int n_layers, float *hidden, float *pooled,
                                           float *logits);

#ifdef __cplusplus
}
#endif
#endif
