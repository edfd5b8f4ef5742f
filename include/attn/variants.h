/* attn — attention variants around the SDPA (docs/VARIANTS.md): position
 * scheme helpers (ALiBi slopes, T5 buckets), rotary embeddings, block-sparse
 * layouts and a key/value cache for incremental decoding. The schemes
 * themselves are fields of attn_sdpa_desc (include/attn/sdpa.h). */
#ifndef ATTN_VARIANTS_H
#define ATTN_VARIANTS_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/sdpa.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ALiBi ------------------------------------------------------------------
 * slopes [H]: the geometric sequence of the ALiBi paper, 2^(-8(h+1)/n) for a
 * power of two n = H; otherwise (as BLOOM) those of the largest power of two
 * n < H followed by every other slope of 2n: 2^(-4(2h+1)/n), h < H - n. */
ATTN_API attn_status attn_alibi_slopes(int64_t H, float *slopes);

/* ---- T5 relative position buckets ---------------------------------------------
 * HF T5's _relative_position_bucket for rel = key position - query position. */
ATTN_API int64_t attn_t5_bucket(int64_t rel, int bidirectional, int64_t num_buckets,
                                int64_t max_distance);

/* ---- rotary embeddings (RoPE) ------------------------------------------------
 * x, y [N, L, H, D] (row-major; y may equal x): the D-vector of (n, l, h) at
 * position pos_offset + l is rotated pairwise by angle pos * theta^(-2c/D),
 * c = 0..D/2-1. Pairs: INTERLEAVED (GPT-J) (2c, 2c+1); HALF (GPT-NeoX,
 * LLaMA) (c, c + D/2). Angles and their sin/cos in double. D even. Layout
 * [B, L, H, D] is a projected [B, L, E] activation; [B*H, L, 1, D] is the
 * SDPA's [B, H, L, D]. */
typedef enum { ATTN_ROPE_INTERLEAVED = 0, ATTN_ROPE_HALF = 1 } attn_rope_layout;
/* "interleaved" | "half" */
ATTN_API attn_status attn_rope_layout_from_name(const char *name, attn_rope_layout *out);
ATTN_API attn_status attn_rope_f32(const float *x, float *y, int64_t N, int64_t L, int64_t H,
                                   int64_t D, float theta, int64_t pos_offset,
                                   attn_rope_layout layout);
/* dx = the inverse rotation of dy (dx may equal dy); OVERWRITES dx. */
ATTN_API attn_status attn_rope_backward_f32(const float *dy, float *dx, int64_t N, int64_t L,
                                            int64_t H, int64_t D, float theta, int64_t pos_offset,
                                            attn_rope_layout layout);
/* Partial rotary (GPT-NeoX's rotary_pct, Phi / HF's partial_rotary_factor,
 * ggml_rope's n_dims < head dim): only the first rotary_dim dims of each
 * D-vector are rotated, as a RoPE of dimension rotary_dim (angles pos *
 * theta^(-2c/rotary_dim), HALF pairs (c, c + rotary_dim/2)); dims
 * rotary_dim..D-1 pass through unchanged (copied when y != x). rotary_dim
 * even, 2 <= rotary_dim <= D (= D: attn_rope_f32). */
ATTN_API attn_status attn_rope_partial_f32(const float *x, float *y, int64_t N, int64_t L,
                                           int64_t H, int64_t D, int64_t rotary_dim, float theta,
                                           int64_t pos_offset, attn_rope_layout layout);
ATTN_API attn_status attn_rope_partial_backward_f32(const float *dy, float *dx, int64_t N,
                                                    int64_t L, int64_t H, int64_t D,
                                                    int64_t rotary_dim, float theta,
                                                    int64_t pos_offset, attn_rope_layout layout);

/* ---- block-sparse layouts ----------------------------------------------------
 * mask [nqb, nkb] (uint8, 1 = the query block may see the key block), for
 * attn_sdpa_desc.block_mask with block_size. Builders OVERWRITE the mask.
 * Longformer/BigBird: query block a sees key blocks c with |a - c| <= local
 * (local < 0: none); the first `global` blocks see and are seen by all;
 * plus `random` extra key blocks per query block, drawn from
 * attn_rng_uniform(seed, ...) (the same layout for the same seed); with
 * causal, blocks c > a are cleared at the end (the diagonal stays). */
ATTN_API attn_status attn_block_sparse_bigbird(uint8_t *mask, int64_t nqb, int64_t nkb,
                                               int64_t local, int64_t global, int64_t random,
                                               uint64_t seed, int causal);
/* The equivalent dense bool mask [Lq, Lk] (1 = may attend), for tests and
 * for backends without block support. */
ATTN_API attn_status attn_block_sparse_expand(const uint8_t *mask, int64_t block_size, int64_t Lq,
                                              int64_t Lk, uint8_t *dense);

/* ---- key/value cache for incremental decoding ----------------------------------
 * k [B, Hkv, cap, D], v [B, Hkv, cap, Dv]: rows 0..len-1 hold the keys and
 * values of positions 0..len-1 (rotated already when RoPE is used). Appending
 * grows the capacity by doubling (amortised O(1) per row). */
typedef struct {
  int64_t B, Hkv, D, Dv, cap, len;
  float *k, *v;
} attn_kv_cache;
/* A zeroed struct is a valid empty cache; init sets sizes and reserves cap rows. */
ATTN_API attn_status attn_kv_cache_init(attn_kv_cache *c, int64_t B, int64_t Hkv, int64_t D,
                                        int64_t Dv, int64_t cap);
ATTN_API void attn_kv_cache_free(attn_kv_cache *c);
ATTN_API void attn_kv_cache_reset(attn_kv_cache *c); /* len = 0, memory kept */
/* k_new [B, Hkv, n, D], v_new [B, Hkv, n, Dv] appended at positions len..len+n-1. */
ATTN_API attn_status attn_kv_cache_append(attn_kv_cache *c, const float *k_new, const float *v_new,
                                          int64_t n);
/* The new queries q [B, Hq, n, D] (positions len-n..len-1, i.e. appended
 * last) against every cached row: *tmpl supplies Hq, scale, causal, window,
 * position schemes and masks (its B, Hkv, D, Dv must match the cache; its Lq,
 * Lk, q_offset and k/v strides are set here: Lq = n, Lk = len, q_offset =
 * len - n). out [B, Hq, n, Dv], lse [B, Hq, n]. O(len) per query. A block
 * layout needs block_cols set (its row stride must not change as len grows). */
ATTN_API attn_status attn_kv_cache_attend(const attn_kv_cache *c, const attn_sdpa_desc *tmpl,
                                          attn_backend backend, const float *q, int64_t n,
                                          float *out, float *lse);

#ifdef __cplusplus
}
#endif
#endif
