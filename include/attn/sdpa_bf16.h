/* attn — bf16 flash attention (forward and backward) on AMX tiles.
 *
 * Same descriptor, shapes, strides (in elements), masking rules and GQA as
 * attn_sdpa_forward (attn/sdpa.h): q, k, v are bf16 (uint16_t bit patterns);
 * out, lse and the gradients are f32:
 *   forward:  q, k, v bf16  ->  out f32 [B,Hq,Lq,Dv] (o_stride), lse f32 [B,Hq,Lq]
 *   backward: q, k, v bf16, out, lse (the forward's), dout f32 (o_stride)
 *             -> dq, dk, dv f32 (OVERWRITTEN; strides of q, k, v)
 *
 * Arithmetic: S = q·kᵀ with bf16 products summed in f32 (TDPBF16PS); the
 * online softmax, its statistics (running max, sum, lse) and all
 * accumulators are f32; P is rounded to bf16 for P·V. Backward: P is
 * recomputed from lse in f32; dout is rounded to bf16 and D_i = rowsum(dout ∘ out)
 * of the rounded dout in f32 (so dP - D_i cancels exactly where it should); P and
 * dS = P ∘ (dP − D_i) are rounded to bf16 as GEMM operands; dq, dk, dv are
 * accumulated in f32. Against the f32 math path on the same (bf16-valued)
 * inputs, expect ~1e-2 relative error (bf16 P and dS: 2^-9 per element).
 *
 * Supported: scale, causal, window, q_offset, key_lens, bool and additive
 * masks, Hq a multiple of Hkv (GQA), Dv != D, any Lq, Lk >= 0, and
 * 1 <= D, Dv <= 256 (any value: operands are zero-padded to 32 / 16; 64 and
 * 128 waste none). Position variants and block-sparse layouts
 * (alibi_slopes, rel_bias, shaw_*, block_mask) give ATTN_EUNSUPPORTED.
 * A query row with no allowed key gives out = 0, lse = -inf, zero gradient.
 * NaN/inf in q, k, v or the masks propagate as in the f32 math path
 * (attn/sdpa.h): a NaN logit at an allowed key gives that row NaN out, lse
 * and gradients.
 * Results are identical for any thread count (the backward's key-block split
 * depends only on the shapes).
 *
 * Paths: AMX (TDPBF16PS) + AVX-512 softmax where the CPU has AMX-BF16,
 * AVX512_BF16 and the tile permission; else portable C (bf16 converted to
 * f32 per tile, the same rounding points; results close to, not bit-equal
 * with, the AMX path). ATTN_CPU=generic forces the portable path. */
#ifndef ATTN_SDPA_BF16_H
#define ATTN_SDPA_BF16_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/lowp.h"
#include "attn/sdpa.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The same with the path forced (ATTN_EUNSUPPORTED where unavailable):
 *   ATTN_LOWP_AUTO      AMX, else SIMD where the CPU has a fast bf16 dot
 *                       product (AVX512_BF16 with bf16_dot_fast: not Intel's,
 *                       at half the f32 FMA's rate) and the call has more
 *                       than 128 keys, else F32 (docs/MIXED_PRECISION.md)
 *   ATTN_LOWP_PORTABLE  portable C tiles (p rounded to bf16 before P·V, as
 *                       the bf16 tile paths)
 *   ATTN_LOWP_SIMD      the bf16 tiles on the vector units (VDPBF16PS)
 *   ATTN_LOWP_AMX       AMX tiles (AMX-BF16 and the tile permission)
 *   ATTN_LOWP_F32       q, k, v widened to f32 a block at a time and run on
 *                       the level's f32 flash (the f32 results on the
 *                       bf16 values; any level) */
/* 1 if path can run here ("amx" needs the CPU features and tile permission). */
ATTN_API int attn_sdpa_bf16_path_available(attn_lowp_path path);
/* What path runs here (AUTO: the one it picks for more than 128 keys, with
 * " (f32 up to 128 keys)" after "avx512_bf16"): "amx", "avx512_bf16",
 * "portable", "f32" (the level's f32 flash on widened operands), or "?"
 * where it is unavailable. */
ATTN_API const char *attn_sdpa_bf16_path_name(attn_lowp_path path);

#ifdef __cplusplus
}
#endif
#endif
