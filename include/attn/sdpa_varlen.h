/* attn — SDPA on packed variable-length batches (FlashAttention's
 * flash_attn_varlen_func layout): B sequences concatenated without padding.
 *
 *   q [total_q, Hq, D]   k [total_k, Hkv, D]   v [total_k, Hkv, Dv]
 *   out [total_q, Hq, Dv]   lse: total_q * Hq floats (below)
 *   cu_seqlens_q, cu_seqlens_k [B + 1] (int32): sequence s is rows
 *   cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 of q and out, and rows
 *   cu_seqlens_k[s] .. cu_seqlens_k[s+1]-1 of k and v. Sequences never see
 *   each other; nothing is computed for padding (there is none).
 *
 * The descriptor (attn/sdpa.h) gives B (the number of sequences), Hq, Hkv,
 * D, Dv, Lq = max_seqlen_q and Lk = max_seqlen_k (each sequence's lengths
 * must be <= them), scale, causal, window, and the variants (ALiBi with
 * slopes [Hq] or per sequence [B, Hq], T5, Shaw, block layout; their
 * positions are each sequence's own). Alignment per sequence: query i of
 * sequence s sits at p_i = i + len_k(s) - len_q(s) (bottom-right, as
 * FlashAttention's causal and local windows), or at i + q_offsets[s] when
 * q_offsets is given. q_offset must be 0; key_lens, bool_mask, add_mask
 * must be NULL (the lengths come from cu_seqlens_k). Strides: q_stride[1],
 * q_stride[2] (head, row; likewise k, v, o) or all zero for the packed
 * contiguous layout; q_stride[0] etc. must be 0.
 * lse: sequence s's values start at lse + Hq * cu_seqlens_q[s], as
 * [Hq, len_q(s)] (contiguous per sequence).
 * The backend is used for each sequence (math, flash or auto); the
 * backward overwrites dq, dk, dv (strides of q, k, v; dout those of out)
 * and the table gradients of the descriptor (sums over the sequences). A
 * row with no allowed key gives out 0, lse -inf and zero gradient.
 * Bad cu_seqlens (not starting at 0, decreasing, ending other than at
 * total_q / total_k, a length above the maximum) are ATTN_EINVAL.
 *
 * Low precision: the same layout, validation and per-sequence alignment
 * with q, k, v in bf16 or fp16 (uint16_t bit patterns; out, lse, dout and
 * the gradients f32), each sequence run by the bf16 / fp16 flash kernel
 * (attn/sdpa_bf16.h, attn/sdpa_f16.h: their arithmetic, accuracy, paths
 * and supported variants — softcap and sinks, not the position schemes),
 * and the int8 flash forward (attn/sdpa_i8.h; f32 q, k, v quantized per
 * call; its key mean is each sequence's own). Results equal those of each
 * sequence run alone through that kernel. */
#ifndef ATTN_SDPA_VARLEN_H
#define ATTN_SDPA_VARLEN_H

#include <stdint.h>

#include "attn/sdpa.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_sdpa_varlen {
  const int32_t *cu_seqlens_q, *cu_seqlens_k; /* [B + 1] */
  int64_t total_q, total_k;                   /* rows of q/out, of k/v */
} attn_sdpa_varlen;

#ifdef __cplusplus
}
#endif
#endif
