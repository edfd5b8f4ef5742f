/* attn — user modifiers of the attention logits, in C: PyTorch
 * FlexAttention's score_mod / mask_mod (and its BlockMask), with a backward.
 *
 * Set attn_sdpa_desc.mods to an attn_sdpa_mods. Per (batch b, query head h,
 * query row q_idx in [0, Lq), key kv_idx in [0, Lk)) the logit is
 *
 *   score = scale * q·k                       (the scaled score, as FlexAttention)
 *   score = softcap * tanh(score / softcap)   (the built-in softcap, if set)
 *   score = score_mod(score, b, h, q_idx, kv_idx, user)          (if set)
 *   logit = score + add_mask + ALiBi + T5 bias + Shaw            (the built-ins)
 *
 * and the key is allowed iff the built-in masks (causal, window, key_lens,
 * bool mask, block-sparse layout) AND mask_mod(b, h, q_idx, kv_idx, user) != 0
 * allow it. score_mod comes first so that it sees exactly what FlexAttention's
 * score_mod sees (q·k times the scale); the built-in additive terms are then
 * ordinary additions after it. q_idx is the row of the query in this call
 * (as FlexAttention's q_idx): with q_offset the query's position is
 * q_idx + q_offset, which the callback reads from its own user data.
 *
 * Calls: score_mod is called only at pairs that the built-in ranges (causal,
 * window, key_lens) and mask_mod allow (it may also be called at pairs a bool
 * mask or a block-sparse layout later excludes; its value there is unused);
 * mask_mod only inside the built-in ranges. A flash kernel skips whole tiles
 * that the built-ins or the block mask (below) exclude, and never calls
 * mask_mod in a block the block mask marks full. Callbacks may be called
 * concurrently from several threads, for any pairs, in any order, more than
 * once per pair (forward and backward recompute): they must be pure functions
 * of their arguments and of data that does not change during the call.
 *
 * NaN: a score_mod value is a logit like any other: NaN or +inf at an allowed
 * key makes that query row's out and lse NaN (and its gradients, as
 * attn/sdpa.h says for a NaN logit); -inf excludes the key (like an additive
 * -inf). A NaN or inf derivative from score_mod_grad makes the row's dq and
 * the dk rows of its keys NaN where that pair's gradient is nonzero. Nothing
 * crashes and nothing is dropped silently.
 *
 * Backward: dL/dscore = dL/dlogit * score_mod_grad(score, ...), where score
 * is the scaled score before score_mod. score_mod_grad is required when
 * score_mod is set (ATTN_EINVAL otherwise: a derivative of 1 would be a
 * silent wrong answer for softcap-like mods); return 1 for an additive bias.
 * score_mod_param_grad (optional) receives g = dL/d(score_mod's output) at
 * (b, h, q_idx, kv_idx) with the score it was called with, so that the user
 * adds g * d score_mod / d theta into the gradients of their own parameters
 * theta (learnable ALiBi slopes, a bias table). It is called only where g is
 * nonzero (NaN included); a pair whose probability is 0 has g = 0.
 * Determinism: every call of score_mod_param_grad for one (b, h) comes from
 * one thread, one after another, in an order fixed by the shapes (not by the
 * thread count); calls for different (b, h) may run at the same time. So
 * accumulate per (b, h) (e.g. a [B, Hq] partial for per-head parameters) and
 * sum the partials in a fixed order after the call: the same numbers for any
 * thread count. (The flash backward runs one work item per (b, K/V head) when
 * score_mod_param_grad is set, which can use fewer threads.)
 *
 * Not supported: score_mod together with Shaw relative keys (shaw_k), whose
 * term joins q·k before the softmax (ATTN_EUNSUPPORTED), and the
 * probabilities' recomputation (args.probs_rows). Math, the f32 and fp16
 * flash, the bf16 flash (forward, backward) and the int8 flash (forward)
 * take them.
 *
 * Row variants (vectorisable): score_mod_row is called once per query row
 * of a tile with n contiguous scores, keys kv_idx0 .. kv_idx0 + n - 1, and
 * modifies them in place: one call per tile row instead of one per pair, so
 * that a plain loop over the row (compiled with the caller's flags, e.g. -O3
 * and a vector ISA) vectorises. Use them for speed: a per-pair score_mod
 * costs an indirect call per pair (about the plain flash forward's own time
 * again) plus its body in scalar code, so one with a transcendental function
 * (tanh, exp) runs at several times the fused built-in's cost, while its row
 * form stays within 2x (docs/VARIANTS.md). Everything above holds with these changes:
 * the run may hold keys that the built-ins or mask_mod exclude; there the
 * score passed is 0 (a placeholder, never -inf: a fast exp/tanh need not
 * handle infinities) and the value written back is ignored (the key stays
 * excluded). score_mod_row_grad(scores, g, n, ...) multiplies g[c] by
 * d score_mod / d score at scores[c] (the scores before score_mod_row, 0 at
 * the placeholders); g[c] = 0 at pairs without gradient, and those stay 0
 * whatever the derivative. score_mod_row_param_grad(scores, g, n, ...) gets
 * g[c] = dL/d(score_mod's output) (0 at pairs without gradient; not called
 * when the whole run is 0), with the determinism rule above. Rows are split
 * into runs of at most 256 keys (a flash tile row: up to 64). Rules: set
 * score_mod or score_mod_row, not both (ATTN_EINVAL); the row derivatives
 * go with score_mod_row (ATTN_EINVAL without it); the backward needs
 * score_mod_row_grad when score_mod_row is set (ATTN_EINVAL); not with
 * shaw_k (ATTN_EUNSUPPORTED). mask_mod has no row variant (a score_mod_row
 * returning -inf excludes keys: document masks, say).
 *
 * FlexAttention equivalents: score_mod(score, b, h, q_idx, kv_idx) ->
 * score_mod; mask_mod(b, h, q_idx, kv_idx) -> mask_mod; create_block_mask
 * -> attn_block_mask_from_mask_mod; flex_attention(..., score_mod,
 * block_mask, scale) -> attn_sdpa_forward with d->mods. */
#ifndef ATTN_SDPA_MODS_H
#define ATTN_SDPA_MODS_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/sdpa.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The new logit from the scaled score; also the signature of its derivative
 * d score_mod / d score at score. */
typedef float (*attn_score_mod_fn)(float score, int64_t b, int64_t h, int64_t q_idx,
                                   int64_t kv_idx, void *user);
/* Nonzero: the query may attend to the key. */
typedef int (*attn_mask_mod_fn)(int64_t b, int64_t h, int64_t q_idx, int64_t kv_idx, void *user);
/* g = dL / d score_mod(score, ...) at that pair (see the determinism rule). */
typedef void (*attn_score_mod_param_grad_fn)(float score, float g, int64_t b, int64_t h,
                                             int64_t q_idx, int64_t kv_idx, void *user);

/* Row variants: scores[0 .. n-1] of query row q_idx, keys kv_idx0 .. kv_idx0
 * + n - 1, modified in place; g[c] *= d score_mod / d score at scores[c];
 * g[c] = dL / d score_mod(scores[c], ...) for the user's parameters. */
typedef void (*attn_score_mod_row_fn)(float *scores, int64_t n, int64_t b, int64_t h,
                                      int64_t q_idx, int64_t kv_idx0, void *user);
typedef void (*attn_score_mod_row_grad_fn)(const float *scores, float *g, int64_t n, int64_t b,
                                           int64_t h, int64_t q_idx, int64_t kv_idx0, void *user);
typedef void (*attn_score_mod_row_param_grad_fn)(const float *scores, const float *g, int64_t n,
                                                 int64_t b, int64_t h, int64_t q_idx,
                                                 int64_t kv_idx0, void *user);

/* A block mask (FlexAttention's BlockMask): per (query block, key block)
 * whether mask_mod is 0 everywhere in it (EMPTY: the flash kernels skip the
 * tiles), nonzero everywhere (FULL: no mask_mod calls there) or mixed. It is
 * authoritative: every backend trusts it (EMPTY blocks are excluded and FULL
 * blocks allowed without calling mask_mod), so build it from the same
 * mask_mod. B = 1 / H = 1: shared by every batch / head (mask_mod must then
 * not depend on b / h). */
enum { ATTN_BLOCK_EMPTY = 0, ATTN_BLOCK_FULL = 1, ATTN_BLOCK_PARTIAL = 2 };
typedef struct {
  int64_t B, H;              /* 1 (broadcast) or the call's B / Hq */
  int64_t Lq, Lk;            /* the call's Lq, Lk */
  int64_t q_block, kv_block; /* block sizes (rows, keys) */
  int64_t nq, nkv;           /* ceil(Lq / q_block), ceil(Lk / kv_block) */
  uint8_t *state;            /* [B, H, nq, nkv] of ATTN_BLOCK_* */
} attn_block_mask;

typedef struct attn_sdpa_mods {
  attn_score_mod_fn score_mod;                      /* NULL: the score itself */
  attn_score_mod_fn score_mod_grad;                 /* d score_mod / d score; backward */
  attn_score_mod_param_grad_fn score_mod_param_grad; /* NULL: no user parameters */
  attn_mask_mod_fn mask_mod;                        /* NULL: every key allowed */
  void *user;                                       /* passed to every callback */
  const attn_block_mask *block_mask;                /* NULL, or needs mask_mod */
  /* The row (vectorisable) variants of score_mod and its derivatives: NULL,
   * or instead of score_mod (see "Row variants" above) */
  attn_score_mod_row_fn score_mod_row;
  attn_score_mod_row_grad_fn score_mod_row_grad;
  attn_score_mod_row_param_grad_fn score_mod_row_param_grad;
} attn_sdpa_mods;

/* Evaluates mask_mod at every (b < B, h < H, q_idx < Lq, kv_idx < Lk) once
 * (FlexAttention's create_block_mask) and fills *out (its state allocated;
 * free with attn_block_mask_free). Block sizes >= 1; the flash tiles are 64
 * keys wide and 6 query rows tall (forward query blocks 144, backward 48),
 * so blocks of 64 x 64 or larger let whole tiles be skipped. */
ATTN_API attn_status attn_block_mask_from_mask_mod(attn_mask_mod_fn mask_mod, void *user,
                                                   int64_t B, int64_t H, int64_t Lq, int64_t Lk,
                                                   int64_t q_block, int64_t kv_block,
                                                   attn_block_mask *out);
ATTN_API void attn_block_mask_free(attn_block_mask *bm);

#ifdef __cplusplus
}
#endif
#endif
