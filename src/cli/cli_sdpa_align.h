/* `attn sdpa` file contract for per-sequence alignment and packed
 * variable-length files (cli_sdpa_align.c, cli_sdpa_varlen.c). */
#ifndef ATTN_CLI_SDPA_ALIGN_H
#define ATTN_CLI_SDPA_ALIGN_H

#include <stdint.h>

#include "attn.h"

/* The optional tensor q_offsets (I32 or I64 [B]) as int64 values (*out
 * malloc'ed; NULL when absent). Range checks are the library's. */
attn_status cli_sdpa_read_q_offsets(const attn_st *in, int64_t B, int64_t **out);

/* key_lens or prefix_lens, tensor t named name (I32 or I64 [B]), as int32
 * values in [0, Lk] (*out malloc'ed). */
attn_status cli_sdpa_read_lens(const attn_tensor *t, const char *name, int64_t B, int64_t Lk,
                               int32_t **out);

/* The metadata causal / is_causal, window_left, window_right (or window_size), scale of in
 * into d (cli_sdpa.c); unknown keys are errors. */
attn_status cli_sdpa_read_metadata(const attn_st *in, const char *path, attn_sdpa_desc *d);

/* The metadata softcap (or logit_softcap; > 0, finite) and tensor sinks (F32 [d->Hq]) of in
 * into d (cli_sdpa.c). */
attn_status cli_sdpa_read_capsink(const attn_st *in, const char *path, attn_sdpa_desc *d);

/* A packed variable-length file (tensor cu_seqlens_q present;
 * cli_sdpa_varlen.c): q [total_q,Hq,D], k [total_k,Hkv,D], v [total_k,Hkv,Dv],
 * cu_seqlens_q/k I32/I64 [B+1], optional dout, alibi_slopes [Hq] or [B,Hq],
 * q_offsets, prefix_lens [B], sinks [Hq], metadata softcap; *res gets out [total_q,Hq,Dv],
 * lse [Hq,total_q] and with dout dq, dk, dv, dalibi_slopes, dsinks. qkv: F32,
 * or F16 / BF16 for q, k, v kept in that dtype and run by its varlen flash
 * kernel (attn/sdpa_varlen.h). */
attn_status cli_sdpa_varlen(const attn_st *in, const char *path, attn_sdpa_path be, attn_dtype qkv,
                            attn_st **res);

#endif
