/* Internal to the SDPA entry (sdpa_entry.c): the routes it takes that are
 * not a kernel's public function of 0.1. */
#ifndef ATTN_SDPA_ENTRY_H
#define ATTN_SDPA_ENTRY_H

#include "attn/sdpa.h"

/* bf16 / fp16 q, k, v widened to f32 copies (the same strides, gaps zero)
 * and run on the f32 math path, dense or varlen (sdpa_entry_widen.c):
 * the low-precision kernels' reference, and probs for a bf16 / fp16 call. */
attn_status attn_sdpa_widened_run(const attn_sdpa_desc *d, const attn_sdpa_args *a, int backward);

#endif
