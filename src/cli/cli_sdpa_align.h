/* `attn sdpa` file contract for per-sequence alignment (cli_sdpa_align.c). */
#ifndef ATTN_CLI_SDPA_ALIGN_H
#define ATTN_CLI_SDPA_ALIGN_H

#include <stdint.h>

#include "attn.h"

/* The optional tensor q_offsets (I32 or I64 [B]) as int64 values (*out
 * malloc'ed; NULL when absent). Range checks are the library's. */
attn_status cli_sdpa_read_q_offsets(const attn_st *in, int64_t B, int64_t **out);

#endif
