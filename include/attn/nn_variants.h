/* attn — attention modules for the variants (docs/VARIANTS.md), with the nn
 * conventions of include/attn/nn.h (declare/init/forward/backward, saved
 * structs, backward ACCUMULATES parameter and input gradients).
 *
 * One projected-attention module covers the seed 004 SparseAttention
 * (windowed), CrossModalAttention (keys/values from another sequence of
 * another width) and LLaMA-style grouped-query / multi-query attention
 * (fewer K/V heads, RoPE, causal), each with its state_dict names; and the
 * seed's RelativePositionEmbedding (Shaw table). */
#ifndef ATTN_NN_VARIANTS_H
#define ATTN_NN_VARIANTS_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/nn.h"
#include "attn/variants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- projected attention --------------------------------------------------------
 * q = x Wqᵀ (+bq) [B, Lq, Hq*hd], k = y Wkᵀ, v = y Wvᵀ [B, Lk, Hkv*hd] with
 * y = x for self-attention; RoPE on q and k (positions 0..); per head the
 * SDPA (head h reads K/V head h / (Hq/Hkv)); out = ctx Woᵀ (+bo) [B, Lq, E].
 * Names: "<prefix><q_name>.weight" [Hq*hd, E], ".bias"; k/v [Hkv*hd, kv_dim];
 * o [E, Hq*hd]. */
typedef struct {
  int64_t embed_dim;               /* E: query input and output width */
  int64_t kv_dim;                  /* key/value input width; 0 = E */
  int64_t num_heads, num_kv_heads; /* num_kv_heads 0 = num_heads; fewer = GQA, 1 = MQA */
  int64_t head_dim;                /* 0 = E / num_heads */
  int bias;                        /* biases on the four projections */
  int causal;
  int64_t window_left, window_right; /* -1 = unbounded */
  int rope;                          /* rotate q and k */
  attn_rope_layout rope_layout;
  float rope_theta;                              /* 0 = 10000 */
  const char *q_name, *k_name, *v_name, *o_name; /* NULL: query, key, value, fc_out */
  /* partial rotary: RoPE on the first rope_dim dims of each head
   * (attn_rope_partial_f32; GPT-NeoX rotary_pct, HF partial_rotary_factor =
   * rope_dim / head_dim); 0 = head_dim. Even, 2..head_dim. */
  int64_t rope_dim;
} attn_vattn_config;

/* Plain: E, H, biases, no mask, seed names (query/key/value/fc_out). */
ATTN_API void attn_vattn_config_default(attn_vattn_config *c, int64_t embed_dim, int64_t num_heads);
/* Seed 004 SparseAttention(embed, heads, window_size): keys i - w/2 <= j <= i + w/2. */
ATTN_API void attn_sparse_attention_config(attn_vattn_config *c, int64_t embed_dim,
                                           int64_t num_heads, int64_t window_size);
/* Seed 004 CrossModalAttention(embed, heads) with keys/values of width kv_dim. */
ATTN_API void attn_cross_attention_config(attn_vattn_config *c, int64_t embed_dim, int64_t kv_dim,
                                          int64_t num_heads);
/* LLaMA-style: q_proj/k_proj/v_proj/o_proj without biases, num_kv_heads K/V
 * heads, RoPE (half-split, theta), causal. */
ATTN_API void attn_gqa_attention_config(attn_vattn_config *c, int64_t embed_dim, int64_t num_heads,
                                        int64_t num_kv_heads, float rope_theta);

typedef struct {
  attn_vattn_config c;
  int64_t hd, Hq, Hkv, kvd;
  attn_linear q, k, v, o;
} attn_vattn;

typedef struct {
  int64_t B, Lq, Lk;
  float *q, *k, *v; /* projected (rotated) [B, L, H*hd] */
  float *ctx;       /* [B, Lq, Hq*hd] */
  float *lse;       /* [B, Hq, Lq] */
  void *arena;
} attn_vattn_saved;
ATTN_API void attn_vattn_saved_free(attn_vattn_saved *s);

ATTN_API attn_status attn_vattn_declare(attn_vattn *m, attn_params *p, const char *prefix,
                                        const attn_vattn_config *c);
/* TORCH: nn.Linear defaults; XAVIER: Xavier weights, zero biases. */
ATTN_API attn_status attn_vattn_init(const attn_vattn *m, attn_params *p, attn_init kind,
                                     uint64_t seed);
/* x [B, Lq, E]; kv [B, Lk, kv_dim] or NULL (self-attention: kv = x, Lk = Lq).
 * extra (may be NULL): its position-scheme and block-sparse fields (alibi,
 * rel_bias, shaw_k/v, block_mask and their sizes) are applied too. out [B, Lq, E]. */
ATTN_API attn_status attn_vattn_forward(const attn_vattn *m, const attn_params *p,
                                        const attn_nn_ctx *ctx, attn_vattn_saved *s, const float *x,
                                        const float *kv, int64_t B, int64_t Lq, int64_t Lk,
                                        const attn_sdpa_desc *extra, float *out);
/* dx [B, Lq, E] += ..., dkv [B, Lk, kv_dim] += ... (NULL: not wanted; self:
 * all goes to dx); with extra, its rel_bias_grad / shaw_k_grad / shaw_v_grad
 * (where set) are ACCUMULATED too. */
ATTN_API attn_status attn_vattn_backward(const attn_vattn *m, attn_params *p,
                                         const attn_nn_ctx *ctx, const attn_vattn_saved *s,
                                         const float *x, const float *kv, const float *dout,
                                         const attn_sdpa_desc *extra, float *dx, float *dkv);
/* One decoding step of self-attention: the n new tokens x_new [B, n, E] at
 * positions cache->len.. are projected (RoPE at their positions), their K/V
 * appended to cache (B, Hkv, hd, hd), and they attend to every cached
 * position (causal, window, extra's schemes at absolute positions).
 * out [B, n, E]. O(cache length) per token. */
ATTN_API attn_status attn_vattn_decode(const attn_vattn *m, const attn_params *p,
                                       const attn_nn_ctx *ctx, attn_kv_cache *cache,
                                       const float *x_new, int64_t B, int64_t n,
                                       const attn_sdpa_desc *extra, float *out);

/* ---- seed 004 RelativePositionEmbedding(max_len, embed_size) ----------------------
 * "<prefix>embedding.weight" [2*max_len-1, E]. forward(L) = table[i - j + L - 1]
 * [L, L, E] as the seed; the table is also the Shaw table of attn_sdpa_desc
 * (shaw_k = attn_relpos_table, shaw_max = max_len), indexed there by the
 * clipped i - j + max_len - 1. */
typedef struct {
  int64_t max_len, embed;
  int weight;
} attn_relpos;
ATTN_API attn_status attn_relpos_declare(attn_relpos *m, attn_params *p, const char *prefix,
                                         int64_t max_len, int64_t embed);
/* N(0, 1) as nn.Embedding */
ATTN_API attn_status attn_relpos_init(const attn_relpos *m, attn_params *p, uint64_t seed);
/* out [L, L, E]; 1 <= L <= max_len */
ATTN_API attn_status attn_relpos_forward(const attn_relpos *m, const attn_params *p, int64_t L,
                                         float *out);
/* table gradient += from dout [L, L, E] */
ATTN_API attn_status attn_relpos_backward(const attn_relpos *m, attn_params *p, int64_t L,
                                          const float *dout);
static inline float *attn_relpos_table(const attn_relpos *m, const attn_params *p) {
  return attn_params_data(p, m->weight);
}

#ifdef __cplusplus
}
#endif
#endif
