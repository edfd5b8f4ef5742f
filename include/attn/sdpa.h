/* attn — scaled dot-product attention, forward and backward.
 *
 *   q [B, Hq,  Lq, D ]   k [B, Hkv, Lk, D ]   v [B, Hkv, Lk, Dv]
 *   out [B, Hq, Lq, Dv]  lse [B, Hq, Lq] (contiguous)  probs [B, Hq, Lq, Lk]
 *
 * Hq must be a multiple of Hkv: query head h reads key/value head
 * h / (Hq/Hkv) (grouped-query attention, no copies). The last dim of every
 * tensor is contiguous; the b, h and l strides (in elements) are given per
 * tensor (all zero = contiguous [B,H,L,D] layout). dq/dk/dv use the strides of
 * q/k/v and dout the strides of out.
 *
 * Key j is allowed for query i iff all of:
 *   causal        -> j <= i
 *   window_left  >= 0 -> j >= i - window_left
 *   window_right >= 0 -> j <= i + window_right
 *   key_lens      -> j < key_lens[b]
 *   bool_mask     -> bool_mask[b,h,i,j] != 0 (1 = may attend)
 * and its logit is scale * q·k + add_mask[b,h,i,j] (an add_mask of -inf also
 * disallows). Masks broadcast through their strides (0 on broadcast dims).
 * A query row with no allowed key gives out = 0, lse = -inf (with sinks: the
 * sink), zero gradient. Softcap and sinks: the block at the end of the struct.
 * NaN/inf in the data is not an error and never silently dropped, in every
 * backend (math, flash; bf16/fp16/int8 flash: their headers): a NaN logit at
 * an allowed key (NaN in q or k, an +inf logit (inf - inf), a NaN additive
 * mask, NaN or +inf plus an additive -inf) makes the row's out and lse NaN,
 * and in the backward its dq row and the dk, dv rows of the keys it attends.
 * Keys excluded by causal, window, key_lens, bool mask or block layout never
 * enter the logits, whatever their data; NaN/inf in v, or in an excluded
 * key's k in the backward, can still reach rows through 0·NaN products.
 */
#ifndef ATTN_SDPA_H
#define ATTN_SDPA_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ATTN_BACKEND_AUTO = 0, ATTN_BACKEND_MATH = 1, ATTN_BACKEND_FLASH = 2 } attn_backend;

/* "auto" | "math" | "flash" */
ATTN_API attn_status attn_backend_from_name(const char *name, attn_backend *out);
ATTN_API const char *attn_backend_name(attn_backend b);

typedef struct {
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  float scale;   /* used only when has_scale; default 1/sqrt(D) */
  int has_scale;
  int causal;
  int64_t window_left, window_right; /* -1 = unbounded */
  const int32_t *key_lens;           /* [B] or NULL */
  const uint8_t *bool_mask;          /* NULL or, with bool_mask_stride[4] (b,h,i,j) */
  int64_t bool_mask_stride[4];
  const float *add_mask; /* NULL or, with add_mask_stride[4] (b,h,i,j) */
  int64_t add_mask_stride[4];
  /* element strides for b, h, l; all zero = contiguous */
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];

  /* ---- variants (docs/VARIANTS.md); zero / NULL = off -------------------
   * Positions: query row i sits at absolute position p_i = i + q_offset and
   * key j at position j (a decoder attending new queries against a cache of
   * Lk keys uses q_offset = Lk - Lq). causal then means j <= p_i and the
   * window p_i - left <= j <= p_i + right. Negative values are allowed
   * (bottom-right alignment when Lq > Lk, FlashAttention's causal: q_offset =
   * Lk - Lq); rows that then see no key give out 0, lse -inf, zero gradient.
   * A block-sparse layout needs every position >= 0. */
  int64_t q_offset;
  /* ALiBi: logit += -alibi_slopes[h] * |p_i - j| (attn_alibi_slopes). */
  const float *alibi_slopes; /* [Hq] or NULL */
  /* T5 bucketed relative bias: logit += rel_bias[h, bucket(j - p_i)] with
   * HF T5's _relative_position_bucket(j - p_i, rel_bidirectional,
   * rel_buckets, rel_max_distance) (attn_t5_bucket). */
  const float *rel_bias; /* [Hq, rel_buckets] or NULL */
  int64_t rel_buckets, rel_max_distance;
  int rel_bidirectional;
  /* Shaw et al. relative positions, r(i,j) = clip(p_i - j, -(M-1), M-1) + M-1
   * with M = shaw_max: logit = scale * q_i·(k_j + shaw_k[r(i,j)]) and
   * out_i = sum_j p_ij (v_j + shaw_v[r(i,j)]). Shared by all heads. */
  const float *shaw_k; /* [2M-1, D] or NULL */
  const float *shaw_v; /* [2M-1, Dv] or NULL */
  int64_t shaw_max;
  /* Block-sparse layout: key j is allowed for query i only if
   * block_mask[(p_i / block_size) * nkb + j / block_size] != 0, where
   * nkb = block_cols or ceil(Lk / block_size); rows: ceil((q_offset + Lq) / block_size).
   * Shared by all batches and heads (attn_block_sparse_*). */
  const uint8_t *block_mask;
  int64_t block_size;
  /* Row stride of block_mask in blocks; 0 = ceil(Lk / block_size). Set it
   * (>= ceil(Lk / block_size)) to keep one layout while Lk grows (decoding). */
  int64_t block_cols;
  /* Backward outputs for the learned tables (OVERWRITTEN; NULL = not wanted):
   * rel_bias_grad [Hq, rel_buckets], shaw_k_grad [2M-1, D], shaw_v_grad [2M-1, Dv]. */
  float *rel_bias_grad, *shaw_k_grad, *shaw_v_grad;

  /* ---- logit softcap and attention sinks (docs/VARIANTS.md); 0 / NULL = off
   * softcap > 0 (finite): the score s = scale * q·k becomes
   * softcap * tanh(s / softcap) BEFORE the additive mask and ALiBi are added
   * (FlashAttention's softcap, ggml's logit_softcap: the same place); a score
   * of -inf stays -inf. Not combined with T5 rel_bias or Shaw (ATTN_EUNSUPPORTED).
   * sinks [Hq]: a learned logit per query head that joins every row's softmax
   * denominator with no value (gpt-oss, ggml's flash_attn_ext sinks):
   *   out_i = sum_j e^(t_ij - m) v_j / (sum_j e^(t_ij - m) + e^(sink_h - m)),
   * m the max over the row's logits and the sink; lse includes the sink. A row
   * with no allowed key gives out = 0 and lse = sink_h. A NaN or +inf sink
   * makes its head's rows NaN; -inf is no sink.
   * sinks_grad [Hq] (OVERWRITTEN by the backward; NULL = not wanted):
   *   d sink_h = - sum over b, rows i of head h of e^(sink_h - lse_i) D_i,
   *   D_i = dout_i · out_i. */
  float softcap;
  const float *sinks;
  float *sinks_grad;
  /* ---- per-batch alignment and ALiBi slopes (src/kernels/sdpa/sdpa_batched.c) --
   * q_offsets: NULL or [B]: batch b's query i sits at p_i = i + q_offsets[b]
   * (overrides q_offset; any sign). A padded batch whose sequence b has Lq_b
   * queries and key_lens[b] keys, bottom-right aligned (FlashAttention's
   * causal/window per sequence), uses q_offsets[b] = key_lens[b] - Lq_b.
   * alibi_slopes_bstride: 0 = alibi_slopes is [Hq], shared by the batch;
   * Hq = alibi_slopes is [B, Hq], one row per batch element.
   * alibi_slopes_grad: NULL or the slopes' shape ([Hq] or [B, Hq]),
   * OVERWRITTEN by the backward with d slope[h] = -sum dS_ij |p_i - j|
   * (dS = d logit; learnable slopes). */
  const int64_t *q_offsets;
  int64_t alibi_slopes_bstride;
  float *alibi_slopes_grad;

  /* ---- user modifiers (attn/sdpa_mods.h; FlexAttention's score_mod /
   * mask_mod, with a backward); NULL = none ----------------------------- */
  const struct attn_sdpa_mods *mods;

  /* ---- attention dropout (torch's dropout on the probabilities, fused in
   * the flash kernels as FlashAttention does: the mask is never stored);
   * dropout_p = 0 = off -------------------------------------------------
   * dropout_p in [0, 1) (NaN, < 0 or >= 1: ATTN_EINVAL). Key j of query row
   * i of (b, h) (h the query head) is kept iff attn_sdpa_dropout_keep(d, b,
   * h, i, j): a counter-based hash of (dropout_seed, dropout_offset,
   * b + dropout_batch0, h, i, j mod 2^32), the same on every backend, ISA
   * level, tiling and thread count (src/kernels/sdpa/sdpa_dropout.c). Forward:
   *   out_i = sum_j keep_ij p_ij / (1 - dropout_p) v_j,
   * p the softmax of the logits as without dropout; lse stays the undropped
   * log-sum-exp. The backward (same descriptor) regenerates the mask. A
   * dropped entry is 0 even where p is NaN. The math forward's probs are
   * the probabilities after dropout (kept ones scaled by 1/(1-p), as
   * torch's MultiheadAttention returns its weights). bf16/int8 flash and
   * the varlen entry points refuse dropout (ATTN_EUNSUPPORTED; fp16 runs
   * the f32 loops and has it); not with Shaw positions (ATTN_EUNSUPPORTED).
   * dropout_batch0: batch b draws as batch b + dropout_batch0 (a shard or
   * a piece of a bigger batch keeps the masks of its rows). */
  float dropout_p;
  uint64_t dropout_seed, dropout_offset;
  int64_t dropout_batch0;

  /* ---- prefix-LM (FlexAttention's prefix_lm mask); NULL = off ------------
   * prefix_lens [B] (with causal only: ATTN_EINVAL without): keys
   * j < prefix_lens[b] are visible to every query of batch b (the prefix
   * attends bidirectionally), the rest causally: key j is allowed for the
   * query at position p_i iff j <= p_i or j < prefix_lens[b] (and every
   * other rule above: window, key_lens, masks). 0 <= prefix_lens[b] <= Lk.
   * Every dtype, path and layout (varlen: per sequence, in its own key
   * positions). */
  const int32_t *prefix_lens;
} attn_sdpa_desc;

/* Fills d with B..Dv, no masks, default scale, unbounded window, contiguous,
 * no variants (every field after o_stride zero). */
ATTN_API void attn_sdpa_desc_init(attn_sdpa_desc *d, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq,
                                  int64_t Lk, int64_t D, int64_t Dv);

/* ---- the entry: one call per direction ------------------------------------
 * Everything the call needs besides the descriptor (what is computed) is in
 * attn_sdpa_args (what it is computed on, and how): the element type of
 * q, k, v, the packed varlen layout (or none: [B,H,L,D] through the
 * descriptor's strides), the path, the tensors. The library routes:
 *
 *   dtype     path                 kernel
 *   F32       AUTO                 flash where it supports the call (and no
 *                                  probs are asked for), else math
 *   F32       MATH | FLASH         the plain reference | the fused kernel
 *   BF16/F16  AUTO | FLASH         the dtype's flash kernel, its best path
 *                                  here (attn/sdpa_bf16.h, attn/sdpa_f16.h)
 *   BF16/F16  PORTABLE|SIMD|AMX|F32  that path of it (ATTN_EUNSUPPORTED
 *                                  where the CPU lacks it)
 *   BF16/F16  MATH                 q, k, v widened to f32, the math path
 *                                  (the reference for the low-precision
 *                                  kernels; probs available)
 *   I8        AUTO|FLASH|PORTABLE|SIMD|AMX   the int8 flash forward on f32
 *                                  q, k, v (attn/sdpa_i8.h); no backward
 *
 * Modifiers (masks, positions, softcap, sinks, dropout, prefix-LM, user
 * mods) are descriptor fields; a combination a kernel lacks is refused
 * before anything is computed (ATTN_EUNSUPPORTED, naming the field and the
 * kernel), never computed wrongly. AUTO with F32 then falls back to math.
 * Peers' spellings of the fields (is_causal, window_size, logit_softcap...)
 * are accepted by files and Python keywords: docs/ARCHITECTURE.md.
 * The entry points of 0.1 (attn_sdpa_forward_bf16, ..._varlen_*, ...) are
 * kept as deprecated wrappers in attn/sdpa_deprecated.h. */
typedef enum {
  ATTN_PATH_AUTO = 0,
  ATTN_PATH_MATH = 1,  /* = ATTN_BACKEND_MATH */
  ATTN_PATH_FLASH = 2, /* = ATTN_BACKEND_FLASH */
  ATTN_PATH_PORTABLE = 3,
  ATTN_PATH_SIMD = 4,
  ATTN_PATH_AMX = 5,
  ATTN_PATH_F32 = 6
} attn_sdpa_path;

/* "auto" | "math" | "flash" | "portable" | "simd" | "amx" | "f32" */
ATTN_API attn_status attn_sdpa_path_from_name(const char *name, attn_sdpa_path *out);
ATTN_API const char *attn_sdpa_path_name(attn_sdpa_path p);

/* 1 if a call of element type dtype (attn_dtype) can take path here (the CPU
 * features and, for AMX, the tile permission), else 0. */
ATTN_API int attn_sdpa_path_available(int dtype, attn_sdpa_path path);

struct attn_sdpa_varlen; /* attn/sdpa_varlen.h */

/* Rows row0 .. row0 + nrows - 1 of batch b, query head h (attn_sdpa_args'
 * probs_rows). */
typedef struct {
  int64_t b, h, row0, nrows;
} attn_sdpa_rows;

typedef struct {
  /* q, k, v element type: ATTN_F32 (default), ATTN_BF16 or ATTN_F16
   * (uint16_t bit patterns), or ATTN_I8 (f32 q, k, v quantized to int8 per
   * call). out, lse, probs and every gradient are f32. */
  int dtype; /* attn_dtype (attn/tensor.h) */
  attn_sdpa_path path;
  /* NULL: q [B,Hq,Lq,D] ... through the descriptor's strides; else the
   * packed layout of attn/sdpa_varlen.h (cu_seqlens). */
  const struct attn_sdpa_varlen *varlen;
  const void *q, *k, *v;
  /* forward: written (out, lse required; probs optional [B,Hq,Lq,Lk],
   * math only). backward: out and lse are the forward's, read. */
  float *out, *lse, *probs;
  /* backward: dout read (strides of out); dq, dk, dv OVERWRITTEN (strides
   * of q, k, v) */
  const float *dout;
  float *dq, *dk, *dv;
  /* forward, set: the probabilities of these rows only, recomputed from q,
   * k and a finished forward's lse (read, [B,Hq,Lq]) into probs [nrows, Lk]
   * (P = exp(scaled, modified score - lse) on allowed keys, 0 elsewhere; a
   * row with lse = -inf all 0): what a flash forward, which never stores
   * them, costs only when asked. f32 dense calls, any of the f32 paths;
   * out and v are not used. Position schemes, block-sparse layouts and
   * user mods: ATTN_EUNSUPPORTED (the math path's probs). */
  const attn_sdpa_rows *probs_rows;
} attn_sdpa_args;

ATTN_API attn_status attn_sdpa_forward(const attn_sdpa_desc *d, const attn_sdpa_args *a);
/* The descriptor's table gradients (rel_bias_grad, shaw_*_grad, sinks_grad,
 * alibi_slopes_grad, user mods' parameters) are OVERWRITTEN too. */
ATTN_API attn_status attn_sdpa_backward(const attn_sdpa_desc *d, const attn_sdpa_args *a);

/* Attention dropout's mask (the dropout_* fields of d): 1 where key j of
 * query row i of (b, h) is kept, 0 where dropped (0 <= b < B, 0 <= h < Hq;
 * a bad descriptor, p or index: 0 and the error set).
 * attn_sdpa_dropout_mask fills mask [Lq, Lk] of (b, h); ATTN_EINVAL on a
 * bad descriptor, p or index. For references and tests: the backends
 * regenerate the mask themselves. */
ATTN_API int attn_sdpa_dropout_keep(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i,
                                    int64_t j);
ATTN_API attn_status attn_sdpa_dropout_mask(const attn_sdpa_desc *d, int64_t b, int64_t h,
                                            uint8_t *mask);

#ifdef __cplusplus
}
#endif
#endif
