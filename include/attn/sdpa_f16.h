/* attn — fp16 flash attention (forward and backward), f32 arithmetic.
 *
 * Same descriptor, shapes, strides (in elements), masking rules and GQA as
 * attn_sdpa_forward (attn/sdpa.h) and the bf16 API (attn/sdpa_bf16.h): q, k,
 * v are IEEE binary16 (uint16_t bit patterns); out, lse and the gradients
 * are f32:
 *   forward:  q, k, v fp16  ->  out f32 [B,Hq,Lq,Dv] (o_stride), lse f32 [B,Hq,Lq]
 *   backward: q, k, v fp16, out, lse (the forward's), dout f32 (o_stride)
 *             -> dq, dk, dv f32 (OVERWRITTEN; strides of q, k, v)
 *
 * Arithmetic: f32. q, k, v are converted to f32 a tile at a time (each key
 * block of k and v, each query block of q, into per-thread buffers) and the
 * f32 flash tile loop runs on them: scores, online softmax, P, dS, every
 * statistic and accumulator are f32, so the results are those of the f32
 * flash backend on the fp16 values converted to f32 (bit for bit, same
 * kernels), within f32 rounding of the math path. Why not fp16 arithmetic:
 * AVX512_FP16 FMAs accumulate in fp16 (an 11-bit significand loses ~3 bits
 * against f32 even over short sums), there is no fp16 -> f32 dot product
 * instruction, and this CPU has no AMX-FP16; a product of two fp16 values is
 * exact in f32 (11 + 11 bits < 24), so f32 FMAs lose nothing. What fp16
 * gives: half the memory and bandwidth of f32 for q, k, v (a KV cache kept in
 * fp16, say) at the accuracy of f32 attention on those values; the speed is
 * that of the f32 flash plus the conversion (vcvtph2ps, a few percent).
 *
 * Supported: scale, causal, window, q_offset, key_lens, bool and additive
 * masks, Hq a multiple of Hkv (GQA), Dv != D, any Lq, Lk >= 0, any D, Dv.
 * Position variants and block-sparse layouts (alibi_slopes, rel_bias,
 * shaw_*, block_mask) give ATTN_EUNSUPPORTED (use the f32 flash). NaN or inf
 * in the inputs propagates as in the f32 flash. A query row with no allowed
 * key gives out = 0, lse = -inf, zero gradient. Results are identical for
 * any thread count.
 *
 * Paths: SIMD = the AVX-512 f32 tile kernels with vcvtph2ps conversion
 * (needs AVX-512F/BW); PORTABLE = the portable C tile kernels and C
 * conversion. AUTO takes SIMD where the CPU has it; ATTN_CPU=generic forces
 * PORTABLE. */
#ifndef ATTN_SDPA_F16_H
#define ATTN_SDPA_F16_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/lowp.h"
#include "attn/sdpa.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The same with the path forced: ATTN_LOWP_AUTO (as above), ATTN_LOWP_PORTABLE
 * or ATTN_LOWP_SIMD (ATTN_EUNSUPPORTED where unavailable); ATTN_LOWP_AMX is
 * not a path here (no AMX-FP16: ATTN_EUNSUPPORTED). */
/* 1 if path can run here ("simd" needs AVX-512F and BW). */
ATTN_API int attn_sdpa_f16_path_available(attn_lowp_path path);

#ifdef __cplusplus
}
#endif
#endif
