/* attn — decode attention: Lq = 1..16 new queries per sequence over a KV
 * cache (generation), at the memory-bandwidth limit (docs/DECODE.md).
 *
 *   q   [B, Hq, Lq, D]  f32, contiguous      (the new tokens' queries)
 *   out [B, Hq, Lq, Dv] f32, contiguous
 *   lse [B, Hq, Lq]     f32 (may be NULL)    natural-log log-sum-exp
 *   the cache: an attn_kv_view (what it is, where it lies), B sequences of
 *   seq_lens[b] tokens each (a ragged batch), Hkv heads.
 *
 * Query i of sequence b sits at position p = seq_lens[b] - Lq + i: the new
 * tokens' keys and values are appended to the cache first, then attended
 * (as attn_kv_cache_attend). Query head h reads KV head h / (Hq / Hkv) (GQA;
 * Hkv = 1: MQA). Key j (0 <= j < seq_lens[b]) is allowed for that query iff
 *   causal            -> j <= p
 *   window_left >= 0  -> j >= p - window_left
 * and its logit is
 *   t = scale q·k_j, then softcap * tanh(t / softcap) (softcap > 0),
 *   then - alibi_slopes[h] |p - j| (ALiBi),
 * the order of attn_sdpa_forward (attn/sdpa.h), which is the reference:
 * attn_decode_forward computes what attn_sdpa_forward computes on the same
 * cache widened to f32 with key_lens = seq_lens, q_offsets[b] = seq_lens[b]
 * - Lq and the same modifiers (tests/test_decode.c checks it). sinks [Hq]
 * join each row's denominator as there. A row with no allowed key: out 0,
 * lse -inf (with a sink: lse = the sink). NaN in q or in an allowed key
 * makes the row's out and lse NaN; NaN or inf in a value can reach rows
 * through 0 x NaN products, as in the SDPA.
 *
 * Each K and V row is read once per KV head and call: all Hq / Hkv query
 * heads of the group and all Lq queries use it while it is in L1. The
 * cache is split along the tokens into chunks whose size depends only on
 * seq_lens[b] (never on the thread count), the chunks run on any threads,
 * and their partial results are merged by their log-sum-exp in chunk
 * order: the same bits for any thread count, and for a paged or a
 * contiguous cache holding the same rows.
 *
 * A bad descriptor or view (a page number outside the pool, a sequence
 * longer than its pages or its capacity, a view of another dtype than the
 * descriptor says, an int8 view without scales, ...) is refused with
 * ATTN_EINVAL naming the field, before any cache row is read. */
#ifndef ATTN_DECODE_H
#define ATTN_DECODE_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most new queries per sequence in one call (prefill: attn_sdpa_forward). */
#define ATTN_DECODE_MAX_LQ 16

/* ---- a view of a KV cache: memory the caller (or an attn_kvc) owns ------
 * dtype: the element type of k and v: ATTN_F32, ATTN_F16, ATTN_BF16
 * (uint16_t bit patterns) or ATTN_I8 (int8_t, symmetric: the value is
 * k_scale * k; one scale per token and head, k_scale and v_scale required).
 *
 * Contiguous (page_size == 0): sequence b's rows in one block,
 *   k [B, Hkv, capacity, D], v [B, Hkv, capacity, Dv],
 *   k_scale, v_scale [B, Hkv, capacity];
 * seq_lens[b] <= capacity.
 * Paged (page_size > 0), as vLLM pages it: a pool of num_pages pages of
 * page_size tokens,
 *   k [num_pages, Hkv, page_size, D], v [num_pages, Hkv, page_size, Dv],
 *   k_scale, v_scale [num_pages, Hkv, page_size];
 * token t of sequence b lies in page block_table[b * block_table_stride +
 * t / page_size] at slot t % page_size. Every page a sequence's tokens
 * need must be in [0, num_pages) and seq_lens[b] <= block_table_stride *
 * page_size; entries past a sequence's last page are never read.
 *
 * layout: how an int8 cache's bytes lie (the scales are per row as above
 * either way). ATTN_KV_ROWS (or 0): a row per token as above.
 * ATTN_KV_I8_TILED: the rows of a (page, head) block, numbered i = the row
 * index above (t or slot within it, P = capacity or page_size rows per
 * block, P a multiple of 16), stored for the integer dot products without
 * a transpose in the kernel:
 *   K: tiles of 16 rows, [i / 16][D / 4][16][4]: byte (i, d) at
 *      (i / 16) 16 D + (d / 4) 64 + (i % 16) 4 + d % 4, holding k + 128
 *      (the int8 value as an unsigned byte, its top bit flipped);
 *   V: quads of 4 rows, [i / 4][Dv][4]: byte (i, c) at (i / 4) 4 Dv + 4 c
 *      + i % 4, the int8 value.
 * Requires D % 4 == 0, Dv % 16 == 0 and P % 16 == 0. An attn_kvc uses it
 * where the CPU level has the kernels for it (attn_kvc_config.layout). The
 * result is the same bits as the row layout's.
 * ATTN_KV_K_TILED (f16 and bf16): K in tiles of 16 rows, [i / 16][D][16]:
 *   element (i, d) at (i / 16) 16 D + 16 d + i % 16, so that the 16 keys'
 *   element d is one vector and the scores need no horizontal sums; V in
 *   rows as above. Requires P % 16 == 0. The result is the row layout's up
 *   to the order of the scores' sums (within rounding, not the same bits);
 *   the same for any thread count and page size. */
enum { ATTN_KV_ROWS = 1, ATTN_KV_I8_TILED = 2, ATTN_KV_K_TILED = 3 };

typedef struct {
  int dtype; /* attn_dtype */
  int64_t B, Hkv, D, Dv;
  const int32_t *seq_lens; /* [B] tokens cached per sequence (>= 0) */
  const void *k, *v;
  const float *k_scale, *v_scale; /* int8 only (else ignored) */
  int64_t capacity;               /* contiguous: tokens each sequence's block holds */
  int64_t page_size, num_pages;   /* paged */
  const int32_t *block_table;     /* paged: [B, block_table_stride] */
  int64_t block_table_stride;
  int layout; /* 0 or ATTN_KV_ROWS; ATTN_KV_I8_TILED (int8 only); ATTN_KV_K_TILED (f16, bf16) */
} attn_kv_view;

/* ---- what one call computes ------------------------------------------------
 * B, Hkv, D, Dv and kv_dtype are what the call expects of the view: each
 * must equal the view's (a mismatch is refused naming both). */
typedef struct {
  int64_t B, Hq, Hkv, Lq, D, Dv;
  int kv_dtype; /* attn_dtype of the cache */
  float scale;  /* used only when has_scale; default 1/sqrt(D) */
  int has_scale;
  int causal;                /* query i sees keys j <= its position */
  int64_t window_left;       /* -1 = unbounded; else keys j >= p - window_left */
  const float *alibi_slopes; /* [Hq] or NULL */
  float softcap;             /* 0 = off; else finite > 0 */
  const float *sinks;        /* [Hq] or NULL */
  /* int8 cache only. 0 (default): where the level has an integer dot
   * product (AVX512_VNNI), P·V runs in integers too: per query row and block
   * of 16 keys the weights (softmax numerators times the rows' v_scale) are
   * quantised to u8 with scale (the block's largest) / 255, an error per key
   * of at most 1/510 of that weight (docs/DECODE.md). 1: P·V in f32 on the
   * widened rows (the scores' query quantisation stays). */
  int int8_pv_f32;
  /* bf16 cache only. 0 (default): where the level has a bf16 dot product
   * (AVX512_BF16: VDPBF16PS) and it is fast (attn_cpu_features.bf16_dot_fast:
   * AMD Zen 4 and 5, not Intel's half-rate one), P·V runs on it, each weight
   * (a softmax numerator) rounded to bf16, and so do the scores of a K-tiled
   * cache (ATTN_KV_K_TILED), each query row times the scale rounded to bf16;
   * the products exact, their sums in f32; subnormals flushed to zero (the
   * instruction's rule). The error is of the order of the cache's own
   * rounding (docs/DECODE.md). 1: scores and P·V in f32 on the widened rows.
   * 2: the dot products wherever the level has them, fast or not. */
  int bf16_f32;
} attn_decode_desc;

/* Fills d: the sizes, kv_dtype, causal on, no window, no modifiers, default
 * scale. */
ATTN_API void attn_decode_desc_init(attn_decode_desc *d, int64_t B, int64_t Hq, int64_t Hkv,
                                    int64_t Lq, int64_t D, int64_t Dv, int kv_dtype);

/* out (and lse, when not NULL) for q against the cache (the rule above).
 * Threads: attn_set_num_threads; results do not depend on them. */
ATTN_API attn_status attn_decode_forward(const attn_decode_desc *d, const attn_kv_view *kv,
                                         const float *q, float *out, float *lse);

/* The chunk (tokens) a sequence of len tokens is split into for threads:
 * a function of len alone (docs/DECODE.md). */
ATTN_API int64_t attn_decode_chunk(int64_t len);

/* ---- attn_kvc: a KV cache that owns its memory -------------------------------
 * B sequences (slots), each up to max_len tokens, stored as dtype,
 * contiguous (page_size 0) or paged (page_size > 0: pages taken from a pool
 * of num_pages as a sequence grows and given back when it shrinks; 0 =
 * enough for every sequence at max_len). attn_kvc_view gives the view that
 * attn_decode_forward reads. */
typedef struct {
  int dtype; /* ATTN_F32, ATTN_F16, ATTN_BF16 or ATTN_I8 */
  int64_t B, Hkv, D, Dv;
  int64_t max_len;
  int64_t page_size, num_pages;
  /* 0: the library's choice, ATTN_KV_I8_TILED for an int8 cache where the
   * CPU level has its kernels (AVX512_VNNI) and the shapes allow it (D % 4,
   * Dv % 16, page_size % 16 == 0; a contiguous cache's rows rounded up to
   * 16), ATTN_KV_K_TILED for an f16 or bf16 cache where the level has its
   * kernels (AVX2, AVX-512) and page_size % 16 == 0, else rows; ATTN_KV_ROWS;
   * ATTN_KV_I8_TILED or ATTN_KV_K_TILED (refused where the dtype or shapes
   * do not allow it; any level reads them). */
  int layout;
} attn_kvc_config;

typedef struct attn_kvc attn_kvc;

ATTN_API attn_status attn_kvc_create(attn_kvc **out, const attn_kvc_config *cfg);
ATTN_API void attn_kvc_free(attn_kvc *c);
/* Tokens cached for sequence b (-1 for a bad c or b). */
ATTN_API int64_t attn_kvc_len(const attn_kvc *c, int64_t b);
/* Appends n tokens to sequence b: k_new [Hkv, n, D], v_new [Hkv, n, Dv]
 * f32 (rounded to f16/bf16 to nearest even; int8: scale = max|row| / 127
 * per token and head, values rounded half to even). ATTN_EINVAL past
 * max_len, ATTN_ENOMEM when the page pool runs out (nothing appended). */
ATTN_API attn_status attn_kvc_append(attn_kvc *c, int64_t b, const float *k_new, const float *v_new,
                                     int64_t n);
/* Keeps the first len tokens of sequence b (len <= its length; rollback for
 * speculative decoding and beam search); a paged cache gives the pages no
 * longer needed back to the pool. */
ATTN_API attn_status attn_kvc_truncate(attn_kvc *c, int64_t b, int64_t len);
/* Sequence dst := a copy of sequence src (beam search's reordering). */
ATTN_API attn_status attn_kvc_copy_seq(attn_kvc *c, int64_t dst, int64_t src);
/* Every sequence emptied (pages back in the pool; memory kept). */
ATTN_API void attn_kvc_reset(attn_kvc *c);
/* The view of the cache's current content (valid until the next change of
 * the cache: append, truncate, copy, reset, free). */
ATTN_API attn_status attn_kvc_view(const attn_kvc *c, attn_kv_view *view);
/* Row t of sequence b, head g widened to f32: k [D], v [Dv] (either may be
 * NULL); for references and tests. */
ATTN_API attn_status attn_kvc_read(const attn_kvc *c, int64_t b, int64_t g, int64_t t, float *k,
                                   float *v);

#ifdef __cplusplus
}
#endif
#endif
