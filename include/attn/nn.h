/* attn — nn modules, forward and backward, PyTorch semantics and state_dict
 * names (llm.c style: <module>_forward / <module>_backward pairs with the same
 * argument order).
 *
 * Conventions:
 * - A module is declared into an attn_params with a name prefix (e.g.
 *   "self_attn.") and declares its tensors under PyTorch's state_dict names;
 *   then attn_params_alloc, then <module>_init (or load weights by name).
 * - Activations are batch first and row-major: x [B, L, E] = [rows, E].
 * - forward saves what backward needs: either in caller buffers named in the
 *   signature or in a "<module>_saved" struct the forward (re)allocates; free
 *   it with <module>_saved_free. A zeroed struct is a valid empty one.
 * - backward ACCUMULATES parameter gradients into p->grad AND input
 *   gradients into the dx buffers (dx += ...): the caller zeroes them. This
 *   makes residuals and shared inputs (self-attention) plain sums.
 * - Masks use PyTorch's module convention: a BOOL (uint8) mask is nonzero
 *   where attention is NOT allowed; a float mask is added to the logits.
 *   A query row with no allowed key gives output 0 and zero gradient (PyTorch
 *   gives NaN; we give zeros).
 * - Dropout (training only, p > 0) uses the seeded counter-based dropout
 *   kernel: the mask depends only on ctx->seed, ctx->step and the module's
 *   name, never on the thread count. */
#ifndef ATTN_NN_H
#define ATTN_NN_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/params.h"
#include "attn/sdpa.h"
#include "attn/variants.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ATTN_INIT_TORCH = 0, ATTN_INIT_XAVIER = 1 } attn_init;
/* GELU is the exact-erf one; GELU_TANH its tanh approximation (GPT-2);
 * SILU = x sigmoid(x). The gated FFNs (Shazeer 2020, GLU variants) multiply
 * by a third Linear: SWIGLU a = silu(x W1ᵀ) * (x W3ᵀ) (Llama), GEGLU
 * a = gelu(x W1ᵀ) * (x W3ᵀ) (exact-erf GELU), then y = a W2ᵀ (attn_ffn). */
typedef enum {
  ATTN_ACT_RELU = 0,
  ATTN_ACT_GELU = 1,
  ATTN_ACT_GELU_TANH = 2,
  ATTN_ACT_TANH = 3,
  ATTN_ACT_SILU = 4,
  ATTN_ACT_SWIGLU = 5,
  ATTN_ACT_GEGLU = 6
} attn_activation;
/* 1 for the gated ones (SWIGLU, GEGLU): the FFN has a third Linear */
ATTN_API int attn_activation_gated(attn_activation a);
/* "relu" | "gelu" | "gelu_tanh" | "tanh" | "silu" (also "swish") | "swiglu" | "geglu" */
ATTN_API attn_status attn_activation_from_name(const char *name, attn_activation *out);
/* The name attn_activation_from_name reads ("?" for an invalid value). */
ATTN_API const char *attn_activation_name(attn_activation a);

/* Precision of the Linear GEMMs (every projection of MHA / FFN, Linear):
 * F32 = plain f32 GEMM (the default, bit for bit as before); BF16 / F16 =
 * inputs rounded to bf16 / fp16, products accumulated in f32 (lowp.h), f32
 * master weights and gradients. Softmax, LayerNorm, SDPA, loss and
 * reductions stay f32 whatever the precision. */
typedef enum { ATTN_PREC_F32 = 0, ATTN_PREC_BF16 = 1, ATTN_PREC_F16 = 2 } attn_precision;
/* "f32" | "bf16" | "fp16" (also "f16") */
ATTN_API attn_status attn_precision_from_name(const char *name, attn_precision *out);
ATTN_API const char *attn_precision_name(attn_precision p);

/* Quantization state (include/attn/quant.h): per-Linear QAT observers, and
 * a table of int8 Linears keyed by the f32 weight they replace. */
typedef struct attn_qat attn_qat;
typedef struct attn_qlinear_set attn_qlinear_set;

/* How a forward/backward pair runs. A zeroed struct = inference-style run on
 * the auto backend with dropout off, f32 Linears. */
typedef struct {
  attn_backend backend; /* SDPA backend for attention */
  int training;         /* dropout active iff training and p > 0 */
  uint64_t seed;        /* dropout seed */
  uint64_t step;        /* folded into the dropout stream (a new mask per step) */
  attn_precision precision; /* Linear GEMMs (above) */
  /* non-NULL: fake quantization in every Linear (per-channel weights,
   * per-tensor activations with an EMA min/max observer updated while
   * training) and straight-through backward */
  attn_qat *qat;
  /* non-NULL: a Linear whose weight has an entry runs in int8
   * (attn_qlinear_forward); forward only */
  const attn_qlinear_set *qlinears;
  /* data parallelism (a shard of a batch): this batch is rows [shard_row0,
   * shard_row0 + shard_rows) of a larger one padded to the same length, and
   * dropout draws for each element what it would draw in the larger batch
   * (the element's offset there). 0, 0: the batch is whole. */
  int64_t shard_row0, shard_rows;
  /* packed rows (attn_mha_masks.cu_seqlens; 0 / NULL: the rows are a batch
   * of their own): row t of sequence s (rows pack_cu[s] .. pack_cu[s+1]-1)
   * draws in every row-wise dropout (residuals, feed-forward) what row t of
   * batch row s draws in the padded batch [pack_seqs, pack_len], so a packed
   * run drops exactly the real tokens' elements of the padded one */
  const int32_t *pack_cu;
  int64_t pack_seqs, pack_len;
} attn_nn_ctx;

/* ---- parameter initialisation (seeded, attn_rng_uniform) ------------------
 * Each tensor draws from its own stream derived from seed and its name, so
 * the result does not depend on declaration order. */
ATTN_API attn_status attn_init_uniform(attn_params *p, int index, float bound, uint64_t seed);
ATTN_API attn_status attn_init_const(attn_params *p, int index, float value);
/* Xavier-uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)), fan from [out, in]. */
ATTN_API attn_status attn_init_xavier(attn_params *p, int index, uint64_t seed);

/* ---- dense (the Linear maths on raw pointers) ------------------------------
 * y [rows, out] = x [rows, in] · W[out, in]ᵀ + b[out] (b may be NULL) */
ATTN_API attn_status attn_dense_forward_f32(const float *x, const float *W, const float *b,
                                            float *y, int64_t rows, int64_t in, int64_t out);
/* dx [rows, in] += dy · W (dx may be NULL); dW [out, in] += dyᵀ · x;
 * db [out] += Σ_rows dy (db may be NULL). */
ATTN_API attn_status attn_dense_backward_f32(const float *x, const float *W, const float *dy,
                                             float *dx, float *dW, float *db, int64_t rows,
                                             int64_t in, int64_t out);

/* The same under ctx (NULL = f32): precision, QAT, int8 Linears (see
 * attn_nn_ctx). W identifies the Linear for the QAT observer and the int8
 * table, so pass the parameter's own storage. */
ATTN_API attn_status attn_dense_forward_ctx(const attn_nn_ctx *ctx, const float *x, const float *W,
                                            const float *b, float *y, int64_t rows, int64_t in,
                                            int64_t out);
ATTN_API attn_status attn_dense_backward_ctx(const attn_nn_ctx *ctx, const float *x, const float *W,
                                             const float *dy, float *dx, float *dW, float *db,
                                             int64_t rows, int64_t in, int64_t out);

/* ---- Linear: "<prefix>weight" [out, in], "<prefix>bias" [out] -------------- */
typedef struct {
  int64_t in, out;
  int weight, bias; /* param indices; bias = -1 without bias */
} attn_linear;
ATTN_API attn_status attn_linear_declare(attn_linear *m, attn_params *p, const char *prefix,
                                         int64_t in, int64_t out, int bias);
/* TORCH: kaiming_uniform(a=sqrt(5)) = U(±1/sqrt(in)) for weight and bias;
 * XAVIER: Xavier-uniform weight, zero bias. */
ATTN_API attn_status attn_linear_init(const attn_linear *m, attn_params *p, attn_init kind,
                                      uint64_t seed);
/* y [rows, out] = x [rows, in] Wᵀ + b */
ATTN_API attn_status attn_linear_forward(const attn_linear *m, const attn_params *p, const float *x,
                                         float *y, int64_t rows);
/* dx [rows, in] += dy W (dx may be NULL); grads accumulated */
ATTN_API attn_status attn_linear_backward(const attn_linear *m, attn_params *p, const float *x,
                                          const float *dy, float *dx, int64_t rows);
/* The same under ctx (attn_dense_*_ctx). */
ATTN_API attn_status attn_linear_forward_ctx(const attn_linear *m, const attn_params *p,
                                             const attn_nn_ctx *ctx, const float *x, float *y,
                                             int64_t rows);
ATTN_API attn_status attn_linear_backward_ctx(const attn_linear *m, attn_params *p,
                                              const attn_nn_ctx *ctx, const float *x,
                                              const float *dy, float *dx, int64_t rows);

/* ---- LayerNorm: "<prefix>weight" [n], "<prefix>bias" [n] -------------------- */
typedef struct {
  int64_t n;
  float eps;
  int weight, bias;
} attn_layernorm;
ATTN_API attn_status attn_layernorm_declare(attn_layernorm *m, attn_params *p, const char *prefix,
                                            int64_t n, float eps);
/* bias = 0: no "<prefix>bias" (torch 2.1+ LayerNorm(bias=False)) */
ATTN_API attn_status attn_layernorm_declare_bias(attn_layernorm *m, attn_params *p,
                                                 const char *prefix, int64_t n, float eps,
                                                 int bias);
/* weight 1, bias 0 (as torch) */
ATTN_API attn_status attn_layernorm_init(const attn_layernorm *m, attn_params *p);
/* x, y [rows, n]; mean, rstd [rows] saved for backward */
ATTN_API attn_status attn_layernorm_forward(const attn_layernorm *m, const attn_params *p,
                                            const float *x, float *y, float *mean, float *rstd,
                                            int64_t rows);
/* dx [rows, n] += ∂L/∂x; weight/bias grads accumulated */
ATTN_API attn_status attn_layernorm_backward(const attn_layernorm *m, attn_params *p,
                                             const float *x, const float *mean, const float *rstd,
                                             const float *dy, float *dx, int64_t rows);

/* ---- multi-head attention ------------------------------------------------- */
typedef enum {
  /* nn.MultiheadAttention: packed "in_proj_weight" [3E, E] when kdim == vdim
   * == E, else "q_proj_weight" [E,E], "k_proj_weight" [E,kdim],
   * "v_proj_weight" [E,vdim]; "in_proj_bias" [3E]; "out_proj.weight/bias". */
  ATTN_MHA_TORCH = 0,
  /* the seeds' Linear projections E->E: "<q_name>.weight/.bias", ... and,
   * with out_proj, "fc_out.weight/bias" (seed 004 SelfAttention and
   * MultiHeadAttention, seed 000 SelfAttention). */
  ATTN_MHA_SEED_LINEAR = 1,
  /* seed 000 MultiHeadAttention: one head_dim×head_dim Linear per q/k/v,
   * shared by all heads, no bias; "fc_out" with bias; scale 1/sqrt(E). */
  ATTN_MHA_SEED_SHARED = 2
} attn_mha_style;

typedef struct {
  int64_t embed_dim, num_heads;
  int64_t kdim, vdim; /* 0 = embed_dim (TORCH style only) */
  int bias;           /* projection biases (TORCH: in_proj_bias and out_proj.bias) */
  int out_proj;       /* seed styles: 1 = "fc_out" Linear (with bias); TORCH: always */
  float dropout;      /* on the attention probabilities */
  float scale;        /* 0 = 1/sqrt(head_dim) */
  attn_mha_style style;
  const char *q_name, *k_name, *v_name; /* seed styles; NULL = "query", "key", "value" */
  /* Grouped-query / multi-query attention (TORCH style): 0 = num_heads. With
   * fewer key/value heads (num_heads a multiple of it) the projections are
   * separate: "q_proj_weight" [E, E], "k_proj_weight" [Ekv, kdim],
   * "v_proj_weight" [Ekv, vdim], Ekv = num_kv_heads * head_dim, and
   * "in_proj_bias" [E + 2 Ekv]; query head h reads key/value head
   * h / (num_heads / num_kv_heads), with no copies of K/V. */
  int64_t num_kv_heads;
  /* nn.MultiheadAttention's extra keys (TORCH style, num_kv_heads = num_heads;
   * torch 1.13 semantics): add_bias_kv declares "bias_k", "bias_v" [1, 1, E]
   * appended as one more key / value row of every batch; add_zero_attn appends
   * a zero key / value row after it. Masks are given for the keys without
   * these rows and padded with "allowed" for them, as torch pads them; the
   * attention weights cover all Lk + add_bias_kv + add_zero_attn keys. Not
   * with masks.causal. */
  int add_bias_kv, add_zero_attn;
} attn_mha_config;

typedef struct {
  attn_mha_config c;
  int64_t head_dim;
  int w[3];       /* weight param index for q, k, v (packed: all in_proj_weight) */
  int64_t wo[3];  /* float offset of each weight inside its tensor */
  int b[3];       /* bias param index or -1 */
  int64_t bo[3];  /* float offset of each bias */
  int64_t in[3];  /* input features of each projection (E, kdim, vdim; shared: hd) */
  int64_t out[3]; /* output features (E; shared: hd) */
  int has_out;
  attn_linear out_lin;
  uint64_t site; /* dropout stream id, from the prefix */
  int bias_kv[2]; /* "bias_k", "bias_v" param indices (add_bias_kv), else -1 */
} attn_mha;

/* PyTorch's mask arguments (see the convention above). At most one of the
 * bool/float pointers of each pair. */
typedef struct {
  const uint8_t *key_padding_bool; /* [B, Lk] nonzero = ignore this key */
  const float *key_padding_float;  /* [B, Lk] added */
  const uint8_t *attn_bool;        /* [Lq, Lk], or [B*H, Lq, Lk] with attn_per_head */
  const float *attn_float;
  int attn_per_head;
  int causal; /* also disallow j > i (like is_causal) */
  /* Packed variable-length self-attention (attn/sdpa_varlen.h): B = 1 and
   * the Lq = T rows are n_seqs sequences, sequence s the rows cu_seqlens[s]
   * .. cu_seqlens[s+1]-1 (cu_seqlens [n_seqs + 1], from 0 to T, longest
   * max_seqlen), each attending to its own rows only; no padding anywhere.
   * Borrowed: it must live until the backward. Any precision (bf16: the
   * bf16 varlen kernel). Not with the other masks, attention dropout,
   * weights out or extra keys (ATTN_EUNSUPPORTED). */
  const int32_t *cu_seqlens;
  int64_t n_seqs, max_seqlen;
} attn_mha_masks;

typedef struct {
  int64_t B, Lq, Lk;
  int self; /* key = value = query */
  float *q, *k, *v; /* projected [B, L, E] */
  float *ctx;       /* attention output before out_proj [B, Lq, E] */
  float *lse;       /* [B, H, Lq] */
  float *mask_add;      /* combined masks [B, Hm, Lq, Lk], Hm = 1 or H */
  uint8_t *mask_allow;  /* (1 = may attend) */
  int64_t mask_heads;
  int causal;
  void *arena;
  /* [B]: a bool key-padding mask that is right padding in every row (and no
   * other mask) goes to SDPA as key lengths instead of mask_allow */
  int32_t *key_lens;
  /* bf16 training path (self-attention, packed in-projection): the input
   * [B, L, E] and ctx in bf16 for the projection weight gradients */
  uint16_t *xh, *ctxh;
  /* ... and with bf16 flash attention (no dropout, auto / flash backend):
   * q | k | v [B, L, 3E] in bf16 only (q, k, v NULL) */
  uint16_t *qkvh;
  /* extra keys (add_bias_kv, add_zero_attn, static_k / static_v): Lk above
   * counts every key row; Lk_in = rows of the key/value inputs, Lk_base = the
   * keys before the appended rows (Lk_in, or the static length) */
  int64_t Lk_in, Lk_base;
  int static_k, static_v;
  /* packed variable-length self-attention (masks.cu_seqlens, borrowed) */
  const int32_t *cu_seqlens;
  int64_t n_seqs, max_seqlen;
  /* ---- attention dropout of the forward (training, dropout > 0): the
   * SDPA descriptor's dropout_p, dropout_seed and dropout_batch0 (the
   * ctx's stream for the module's site, a shard's first row); the flash
   * kernels regenerate the mask in the backward, nothing [Lq, Lk] is kept */
  float drop_p;
  uint64_t drop_seed;
  int64_t drop_batch0;
} attn_mha_saved;
ATTN_API void attn_mha_saved_free(attn_mha_saved *s);

ATTN_API attn_status attn_mha_declare(attn_mha *m, attn_params *p, const char *prefix,
                                      const attn_mha_config *c);
/* TORCH: xavier_uniform in-projections, zero in_proj_bias / out_proj.bias,
 * out_proj.weight as Linear. XAVIER: every weight Xavier, biases zero. Seed
 * styles with TORCH: Linear defaults. */
ATTN_API attn_status attn_mha_init(const attn_mha *m, attn_params *p, attn_init kind,
                                   uint64_t seed);
/* query [B, Lq, E], key [B, Lk, kdim], value [B, Lk, vdim]; key == value ==
 * NULL means self-attention (key = value = query, Lk = Lq).
 * out [B, Lq, E]. attn_weights (may be NULL): [B, Lq, Lk] averaged over heads
 * when average_weights, else [B, H, Lq, Lk] (the probabilities, after dropout
 * when dropout ran, from the SDPA math path). masks may be NULL. */
ATTN_API attn_status attn_mha_forward(const attn_mha *m, const attn_params *p,
                                      const attn_nn_ctx *ctx, attn_mha_saved *s, const float *query,
                                      const float *key, const float *value, int64_t B, int64_t Lq,
                                      int64_t Lk, const attn_mha_masks *masks, float *out,
                                      float *attn_weights, int average_weights);
/* static_k / static_v (may be NULL; torch's F.multi_head_attention_forward
 * arguments): [B*H, Ls, head_dim] keys / values used instead of the
 * projected key / value (key/value inputs then get no gradient through
 * them); with one of them only, Ls = Lk. Not with add_bias_kv (as torch).
 * attn_weights (if any) is [B, (H,) Lq, Ls + add_zero_attn]. */
ATTN_API attn_status attn_mha_forward_static(const attn_mha *m, const attn_params *p,
                                             const attn_nn_ctx *ctx, attn_mha_saved *s,
                                             const float *query, const float *key,
                                             const float *value, const float *static_k,
                                             const float *static_v, int64_t Ls, int64_t B,
                                             int64_t Lq, int64_t Lk, const attn_mha_masks *masks,
                                             float *out, float *attn_weights, int average_weights);
/* dquery [B,Lq,E] += ..., dkey/dvalue likewise (may be NULL; for
 * self-attention everything goes to dquery). */
ATTN_API attn_status attn_mha_backward(const attn_mha *m, attn_params *p, const attn_nn_ctx *ctx,
                                       const attn_mha_saved *s, const float *query,
                                       const float *key, const float *value, const float *dout,
                                       float *dquery, float *dkey, float *dvalue);
/* ... and dstatic_k / dstatic_v [B*H, Ls, head_dim] += (may be NULL) */
ATTN_API attn_status attn_mha_backward_static(const attn_mha *m, attn_params *p,
                                              const attn_nn_ctx *ctx, const attn_mha_saved *s,
                                              const float *query, const float *key,
                                              const float *value, const float *dout,
                                              float *dquery, float *dkey, float *dvalue,
                                              float *dstatic_k, float *dstatic_v);

/* Probabilities of head h, query rows row0 .. row0+nrows-1 of batch b, of the
 * forward saved in s (any backend; recomputed from its q, k and lse, so a
 * flash run pays nothing until asked): probs [nrows, Lk], 0 where masked;
 * after a forward with attention dropout, the softmax before the dropout. */
ATTN_API attn_status attn_mha_probs(const attn_mha *m, const attn_mha_saved *s, int64_t b,
                                    int64_t h, int64_t row0, int64_t nrows, float *probs);

/* ---- feed-forward: "<prefix><n1>.*" [ff, d], "<prefix><n2>.*" [d, ff] -------
 * y = n2(dropout(act(n1(x)))) — torch's linear1/linear2 or the seed's fc1/fc2.
 * Gated activations (SWIGLU, GEGLU): y = n2(dropout(act(n1(x)) * n3(x))),
 * n3 [ff, d] named as n1 with its final '1' made '3' (linear1 -> linear3,
 * fc1 -> fc3, w1 -> w3): Llama's w1 / w3 / w2, i.e. Hugging Face's gate_proj
 * (n1), up_proj (n3), down_proj (n2). */
typedef struct {
  attn_linear l1, l2;
  attn_activation act;
  float dropout;
  uint64_t site;
  attn_linear l3; /* gated activations only (l3.weight = -1 otherwise) */
} attn_ffn;
typedef struct {
  int64_t rows;
  float *h;  /* n1(x) [rows, ff]; ReLU without a gate: the same buffer as a
              * (act in place: a > 0 exactly where h > 0, all the backward reads) */
  float *a;  /* act(h), after dropout [rows, ff] */
  uint8_t *drop_mask;
  void *arena;
  /* bf16 training path (ReLU, no dropout): x [rows, d_model] and act(h)
   * [rows, ff] in bf16 instead of h and a */
  uint16_t *xh, *ah;
  float *g; /* gated: n3(x) [rows, ff] */
} attn_ffn_saved;
ATTN_API void attn_ffn_saved_free(attn_ffn_saved *s);
ATTN_API attn_status attn_ffn_declare(attn_ffn *m, attn_params *p, const char *prefix,
                                      const char *n1, const char *n2, int64_t d_model, int64_t d_ff,
                                      attn_activation act, float dropout);
/* bias = 0: Linears without bias */
ATTN_API attn_status attn_ffn_declare_bias(attn_ffn *m, attn_params *p, const char *prefix,
                                           const char *n1, const char *n2, int64_t d_model,
                                           int64_t d_ff, attn_activation act, float dropout,
                                           int bias);
ATTN_API attn_status attn_ffn_init(const attn_ffn *m, attn_params *p, attn_init kind,
                                   uint64_t seed);
/* x, y [rows, d_model] */
ATTN_API attn_status attn_ffn_forward(const attn_ffn *m, const attn_params *p,
                                      const attn_nn_ctx *ctx, attn_ffn_saved *s, const float *x,
                                      float *y, int64_t rows);
ATTN_API attn_status attn_ffn_backward(const attn_ffn *m, attn_params *p, const attn_nn_ctx *ctx,
                                       const attn_ffn_saved *s, const float *x, const float *dy,
                                       float *dx);

/* ---- residual sublayer: pre-norm y = x + drop(f(LN(x))),
 *      post-norm y = LN(x + drop(f(x))) ---------------------------------------- */
typedef struct {
  int64_t rows, n;
  float *a;           /* f's input: LN(x) (pre-norm) */
  float *h;           /* post-norm: x + drop(f) (the LN input) */
  float *mean, *rstd; /* [rows] */
  uint8_t *drop_mask;
  void *arena;
} attn_sublayer_saved;
ATTN_API void attn_sublayer_saved_free(attn_sublayer_saved *s);

/* ---- TransformerEncoderLayer / TransformerDecoderLayer (batch_first) -------- */
typedef struct {
  int64_t d_model, nhead, dim_feedforward;
  float dropout;
  attn_activation activation;
  float layer_norm_eps;
  int norm_first;
  int bias; /* 1 as torch; 0 = no biases anywhere (torch 2.1+ bias=False) */
} attn_layer_config;

typedef struct {
  attn_layer_config c;
  attn_mha self_attn;
  attn_ffn ff; /* linear1, linear2 */
  attn_layernorm norm1, norm2;
  uint64_t site;
} attn_encoder_layer;
typedef struct {
  int64_t B, L;
  attn_mha_saved sa;
  attn_ffn_saved ff;
  attn_sublayer_saved s1, s2;
  float *x1;    /* output of the first sublayer [B, L, E] */
  float *f_out; /* attention / ff outputs before dropout */
  float *a_out;
  void *arena;
} attn_encoder_saved;
ATTN_API void attn_encoder_saved_free(attn_encoder_saved *s);
/* declares self_attn.*, linear1.*, linear2.* (gated activations: also
 * linear3.*), norm1.*, norm2.* under prefix */
ATTN_API attn_status attn_encoder_declare(attn_encoder_layer *m, attn_params *p, const char *prefix,
                                          const attn_layer_config *c);
ATTN_API attn_status attn_encoder_init(const attn_encoder_layer *m, attn_params *p, attn_init kind,
                                       uint64_t seed);
/* src, out [B, L, E]; masks (src_mask, src_key_padding_mask) may be NULL */
ATTN_API attn_status attn_encoder_forward(const attn_encoder_layer *m, const attn_params *p,
                                          const attn_nn_ctx *ctx, attn_encoder_saved *s,
                                          const float *src, int64_t B, int64_t L,
                                          const attn_mha_masks *masks, float *out);
/* dsrc [B, L, E] += ... */
ATTN_API attn_status attn_encoder_backward(const attn_encoder_layer *m, attn_params *p,
                                           const attn_nn_ctx *ctx, const attn_encoder_saved *s,
                                           const float *src, const float *dout, float *dsrc);

typedef struct {
  attn_layer_config c;
  attn_mha self_attn, multihead_attn;
  attn_ffn ff;
  attn_layernorm norm1, norm2, norm3;
  uint64_t site;
} attn_decoder_layer;
typedef struct {
  int64_t B, L, Lm;
  attn_mha_saved sa, ca;
  attn_ffn_saved ff;
  attn_sublayer_saved s1, s2, s3;
  float *x1, *x2, *f_out;
  void *arena;
} attn_decoder_saved;
ATTN_API void attn_decoder_saved_free(attn_decoder_saved *s);
/* self_attn.*, multihead_attn.*, linear1.*, linear2.*, norm1/2/3.* */
ATTN_API attn_status attn_decoder_declare(attn_decoder_layer *m, attn_params *p, const char *prefix,
                                          const attn_layer_config *c);
ATTN_API attn_status attn_decoder_init(const attn_decoder_layer *m, attn_params *p, attn_init kind,
                                       uint64_t seed);
/* tgt, out [B, L, E]; memory [B, Lm, E]; tgt_masks (tgt_mask,
 * tgt_key_padding_mask) and memory_masks (memory_mask,
 * memory_key_padding_mask) may be NULL. */
ATTN_API attn_status attn_decoder_forward(const attn_decoder_layer *m, const attn_params *p,
                                          const attn_nn_ctx *ctx, attn_decoder_saved *s,
                                          const float *tgt, const float *memory, int64_t B,
                                          int64_t L, int64_t Lm, const attn_mha_masks *tgt_masks,
                                          const attn_mha_masks *memory_masks, float *out);
/* dtgt [B, L, E] += ..., dmemory [B, Lm, E] += ... (may be NULL) */
ATTN_API attn_status attn_decoder_backward(const attn_decoder_layer *m, attn_params *p,
                                           const attn_nn_ctx *ctx, const attn_decoder_saved *s,
                                           const float *tgt, const float *memory, const float *dout,
                                           float *dtgt, float *dmemory);

/* ---- incremental decoding of a stack of decoder layers (inference) ----------
 * A cache for n_layers attn_decoder_layer of one model (same d_model and
 * heads), for B decoder rows (hypotheses). Per layer it holds:
 * - the self-attention K/V of every step so far (an attn_kv_cache per layer,
 *   [B, Hkv, cap, head_dim]; grows past cap as needed);
 * - the cross-attention K/V of the encoder memory, projected ONCE by
 *   attn_decoder_cache_set_memory: [B_mem, Lm, Ekv] for B_mem memory rows
 *   (source sentences), B a multiple of B_mem: decoder row b reads memory
 *   row b / (B / B_mem). A beam of K hypotheses per sentence keeps one copy
 *   of each sentence's cross K/V, not K (rows b = s*K .. s*K+K-1 belong to
 *   sentence s).
 * Running attn_decoder_step over the layers token by token gives the output
 * of attn_decoder_forward on the whole target with a causal tgt mask and the
 * memory key-padding mask given as mem_lens (equal within float rounding:
 * tests/test_decoder_step.c states the tolerance). Dropout never runs
 * (ctx->training is ignored); Linears follow ctx->precision; attention runs
 * in f32 on ctx->backend (AUTO with one new position: self- and cross-
 * attention (without cross_probs) by a direct pass per row and head,
 * src/nn/decode_attend.c, not the tiled SDPA). A zeroed struct is a valid empty cache. */
typedef struct {
  int n_layers;
  int64_t B;              /* decoder rows */
  int64_t E, H, Hkv, hd;  /* d_model, heads, key/value heads, head_dim */
  attn_kv_cache *self;    /* [n_layers] */
  /* set by attn_decoder_cache_set_memory (B_mem = 0 before) */
  int64_t B_mem, Lm, mem_cap; /* mem_cap: floats reserved per cross tensor */
  float *cross_k, *cross_v;   /* [n_layers][B_mem, Lm, Ekv] */
  int32_t *mem_lens;          /* [B_mem] valid memory positions, or NULL = all Lm */
  int32_t *mem_lens_buf;
  /* the self-attention storage as reserved by init / restart: rows_alloc rows
   * of cap_alloc steps (a cache grown past cap_alloc is reserved anew) */
  int64_t rows_alloc, cap_alloc;
} attn_decoder_cache;

/* Sizes from m (the first layer), B decoder rows, cap self-attention steps
 * reserved (0 = grow on demand). */
ATTN_API attn_status attn_decoder_cache_init(attn_decoder_cache *c, const attn_decoder_layer *m,
                                             int n_layers, int64_t B, int64_t cap);
ATTN_API void attn_decoder_cache_free(attn_decoder_cache *c);
/* Forgets the steps (length 0, memory kept: cross K/V stay valid). */
ATTN_API void attn_decoder_cache_reset(attn_decoder_cache *c);
/* Starts over for B decoder rows (a new batch of sources): no steps and no
 * memory (set it next). Keeps the storage reserved by init when it holds B
 * rows (no allocation, no first-touch of fresh pages per batch). */
ATTN_API attn_status attn_decoder_cache_restart(attn_decoder_cache *c, int64_t B);
/* Steps decoded so far. */
ATTN_API int64_t attn_decoder_cache_len(const attn_decoder_cache *c);
/* Cross K/V of every layer (layers [n_layers]) from memory [B_mem, Lm, E]
 * (the encoder output); mem_lens [B_mem] (may be NULL) = valid positions of
 * each memory row (right padding; 1 <= mem_lens[b] <= Lm). B_mem must divide
 * the cache's B. Replaces any memory set before. */
ATTN_API attn_status attn_decoder_cache_set_memory(attn_decoder_cache *c,
                                                   const attn_decoder_layer *layers,
                                                   const attn_params *p, const attn_nn_ctx *ctx,
                                                   const float *memory, int64_t B_mem, int64_t Lm,
                                                   const int32_t *mem_lens);
/* One layer (layer = its index in the stack) on n new positions of every
 * decoder row: x [B, n, E] -> out [B, n, E] (out may not alias x); appends
 * the positions' self-attention K/V to layer's cache, attending causally to
 * every cached step. Call it for layers 0 .. n_layers-1 in order, each on the
 * previous one's output. cross_probs (may be NULL): the cross-attention
 * probabilities of the new positions [B, H, n, Lm] (0 at padded memory). */
ATTN_API attn_status attn_decoder_step(const attn_decoder_layer *m, const attn_params *p,
                                       const attn_nn_ctx *ctx, attn_decoder_cache *c, int layer,
                                       const float *x, int64_t n, float *out, float *cross_probs);
/* Beam bookkeeping: new decoder row b takes the self-attention history of
 * old row src[b] (every layer). With memory set, src[b] must read the same
 * memory row as b (src[b] / (B / B_mem) == b / (B / B_mem)). src [B]. */
ATTN_API attn_status attn_decoder_cache_reorder(attn_decoder_cache *c, const int64_t *src);
/* Keeps memory rows keep[0..n) (strictly increasing, < B_mem; 1 <= n) and
 * their decoder rows, in that order: memory row i := old keep[i], decoder
 * rows i*G .. i*G+G-1 := old keep[i]*G .. (G = B / B_mem), their cross K/V,
 * mem_lens and self-attention histories; B_mem becomes n, B n*G (a beam
 * stops computing the sentences it has finished). Needs memory set. */
ATTN_API attn_status attn_decoder_cache_keep(attn_decoder_cache *c, const int64_t *keep,
                                             int64_t n);

/* ---- the seed 004 blocks -------------------------------------------------------
 * MultiHeadAttention: y = layer_norm(fc_out(attn(x)) + x), names query.*,
 * key.*, value.*, fc_out.*, layer_norm.*; with ffn: TransformerLayer, names
 * attention.<those>, ffn.fc1.*, ffn.fc2.*, ffn.layer_norm.* and
 * y = LN(fc2(relu(fc1(x))) + x) after the attention block. */
typedef struct {
  int has_ffn;
  attn_mha attn;
  attn_layernorm ln_attn;
  attn_ffn ffn;
  attn_layernorm ln_ffn;
} attn_seed_layer;
typedef struct {
  int64_t B, L;
  attn_mha_saved sa;
  attn_ffn_saved ff;
  attn_sublayer_saved s1, s2;
  float *x1, *f_out;
  void *arena;
} attn_seed_layer_saved;
ATTN_API void attn_seed_layer_saved_free(attn_seed_layer_saved *s);
ATTN_API attn_status attn_seed_layer_declare(attn_seed_layer *m, attn_params *p, const char *prefix,
                                             int64_t embed, int64_t heads, int64_t ff_dim,
                                             int has_ffn);
ATTN_API attn_status attn_seed_layer_init(const attn_seed_layer *m, attn_params *p, attn_init kind,
                                          uint64_t seed);
ATTN_API attn_status attn_seed_layer_forward(const attn_seed_layer *m, const attn_params *p,
                                             const attn_nn_ctx *ctx, attn_seed_layer_saved *s,
                                             const float *x, int64_t B, int64_t L, float *out);
ATTN_API attn_status attn_seed_layer_backward(const attn_seed_layer *m, attn_params *p,
                                              const attn_nn_ctx *ctx,
                                              const attn_seed_layer_saved *s, const float *x,
                                              const float *dout, float *dx);

/* ---- running a PyTorch-named layer from named tensors (`attn layer`) -------
 * in: __metadata__ kind = mha | encoder | decoder (or a seed kind:
 * seed000_self_attention, seed000_mha, seed004_self_attention, seed004_mha,
 * seed004_transformer, input "x"), num_heads, norm_first (boolean),
 * add_zero_attn (mha, boolean; with tensors bias_k/bias_v and inputs
 * static_k/static_v: attn_mha_config, attn_mha_forward_static), activation
 * (relu|gelu|gelu_tanh|tanh|silu|swiglu|geglu; the gated swiglu / geglu read
 * a third FFN Linear "linear3.*", see attn_ffn), layer_norm_eps, average_attn_weights (mha, boolean, default
 * true), batch_first (default true; false: query/key/value/src/tgt/memory,
 * dout, out and their grad.<name> are [L, B, E], as PyTorch's default; masks
 * and attn_weights keep their batch-first shapes); booleans are true/false, 1/0, yes/no or
 * on/off in any case (PyTorch's True/False); the parameters under exactly the state_dict
 * names; the inputs under PyTorch's argument names (BOOL masks true = NOT
 * allowed, float masks added); optional dout. Float tensors may be F32, F16
 * or BF16 (widened to F32 exactly; every output is F32). Tensors "out",
 * "attn_weights" and "grad.*" (a reference export) are ignored; any other
 * unknown name is an error naming it. *out receives "out", for mha
 * "attn_weights", and with dout "grad.<name>" for every float input and
 * parameter. On error *out is NULL. */
ATTN_API attn_status attn_layer_run_st(const attn_st *in, attn_backend backend, attn_st **out);

#ifdef __cplusplus
}
#endif
#endif
