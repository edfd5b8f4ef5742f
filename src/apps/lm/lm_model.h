/* The language model: a decoder-only Transformer on the nn layers (docs/LM.md).
 *   x_0   = tok_embeddings[ids]                                  [B, T, E]
 *   x_l+1 = h + ffn(ln2(h)),  h = x_l + attn(ln1(x_l))           (pre-LN blocks)
 *   attn  = causal multi-head self-attention, RoPE (half-split, theta 10000)
 *           on q and k, no projection biases (attn_vattn, LLaMA names)
 *   ffn   = fc2(gelu(fc1(.))) with biases (exact-erf GELU)
 *   logits = ln_f(x_L) Wᵀ, W = lm_head.weight or (tied) tok_embeddings.weight
 * Parameter names (tools/golden_lm.py builds the same model in PyTorch):
 *   tok_embeddings.weight [V, E]; blocks.<i>.ln1.{weight,bias},
 *   blocks.<i>.attn.{q_proj,k_proj,v_proj,o_proj}.weight,
 *   blocks.<i>.ln2.{weight,bias}, blocks.<i>.ffn.{fc1,fc2}.{weight,bias},
 *   ln_f.{weight,bias}, lm_head.weight (untied only).
 * No dropout: the corpus is read about once in a demo run. */
#ifndef ATTN_APPS_LM_MODEL_H
#define ATTN_APPS_LM_MODEL_H

#include <stdint.h>

#include "attn/nn.h"
#include "attn/nn_variants.h"
#include "attn/safetensors.h"
#include "attn/train.h"

typedef struct {
  int64_t vocab, d_model, heads, ff, layers;
  int64_t max_len; /* longest context generate / eval accept (RoPE has no table) */
  int tied;
} attn_lm_config;

/* vocab 4096, d_model 128, 4 heads, ff 512, 4 layers, max_len 2048, tied */
void attn_lm_config_default(attn_lm_config *c);
/* ATTN_EINVAL naming the bad field */
attn_status attn_lm_config_check(const attn_lm_config *c);

typedef struct {
  attn_lm_config c;
  attn_params p;
  int wte, head_w; /* head_w = wte when tied */
  attn_layernorm *ln1, *ln2, lnf;
  attn_vattn *att;
  attn_ffn *ffn;
} attn_lm_model;

/* Declares and allocates (zeroed); attn_lm_init draws the weights. */
attn_status attn_lm_create(attn_lm_model *m, const attn_lm_config *c);
/* GPT-2's init: weights N(0, 0.02), the residual outputs (o_proj, fc2)
 * N(0, 0.02 / sqrt(2 layers)), biases 0, LayerNorms 1 / 0; each tensor from
 * its own stream of seed and its name. */
attn_status attn_lm_init(attn_lm_model *m, uint64_t seed);
void attn_lm_free(attn_lm_model *m);
/* AdamW rule: no decay for embeddings, biases and norms. */
int attn_lm_decay_rule(const char *name, void *user);

/* What a forward keeps for the backward (reallocated as shapes grow). */
typedef struct {
  int64_t B, T, cap; /* cap: B*T rows reserved */
  int32_t *ids;      /* [B*T] */
  float *x;          /* [layers + 1][rows, E]: each block's input, then the last output */
  float *h;          /* [layers][rows, E]: after the attention residual */
  float *a1, *a2;    /* [layers][rows, E]: ln1(x), ln2(h) */
  float *st;         /* [layers][4][rows]: mean1, rstd1, mean2, rstd2 */
  float *xf, *stf;   /* ln_f(x_L) [rows, E], its mean/rstd [2][rows] */
  float *logits;     /* [rows, V], then the backward's dlogits [cap, V] */
  float *work;       /* backward: [4][rows, E] */
  attn_vattn_saved *as;
  attn_ffn_saved *fs;
  int nlayers;
} attn_lm_saved;
void attn_lm_saved_free(attn_lm_saved *s);

/* ids [B, T] (0 <= id < vocab, 1 <= T <= max_len): s->logits [B*T, V]. */
attn_status attn_lm_forward(const attn_lm_model *m, const attn_nn_ctx *ctx, attn_lm_saved *s,
                            const int32_t *ids, int64_t B, int64_t T);
/* Mean cross-entropy of the last forward over targets [B*T] (-1 = ignore)
 * into *loss (may be NULL); with backward_too != 0 the gradients of that
 * mean are ACCUMULATED into m->p.grad. */
attn_status attn_lm_loss(attn_lm_model *m, const attn_nn_ctx *ctx, attn_lm_saved *s,
                         const int32_t *targets, int backward_too, float *loss);
/* The sum of -log p(target) over the last forward's rows (double), for
 * perplexities; count = targets not ignored. */
attn_status attn_lm_nll_sum(const attn_lm_model *m, const attn_lm_saved *s, const int32_t *targets,
                            double *sum, int64_t *count);

/* ---- model files -------------------------------------------------------------
 * attn_checkpoint_save's file with metadata "lm.<field>" for the config and
 * "tokenizer" (the BPE's text form, apps/text/bpe.h). */
attn_status attn_lm_save(const char *path, const attn_lm_model *m, const attn_adam *opt,
                         const char *tokenizer, const char *const *kv);
/* Creates m from path; *file_out (may be NULL) receives the file (metadata,
 * tokenizer). ATTN_EINVAL for a file that is not an LM. */
attn_status attn_lm_load(const char *path, attn_lm_model *m, attn_st **file_out);

#endif
