/* attn — int8 flash attention, forward only (inference).
 *
 * Same descriptor, shapes, strides (in elements), masking rules and GQA as
 * attn_sdpa_forward (attn/sdpa.h), with f32 q, k, v (the activations a
 * model has; the int8 quantization is dynamic, done per call, like the
 * dynamic int8 Linear of attn/lowp.h, so callers need no quantized storage):
 *   q, k, v f32  ->  out f32 [B,Hq,Lq,Dv] (o_stride), lse f32 [B,Hq,Lq]
 *
 * Arithmetic (SageAttention's scheme):
 *   K smoothing: per (batch, kv head), the mean of k over all Lk keys is
 *     subtracted before quantizing. q·(k_j - mean) = q·k_j - q·mean differs
 *     from q·k_j by a constant per query row, so the softmax (hence out) is
 *     exactly the same in exact arithmetic; only lse shifts, and it is
 *     returned for the unsmoothed logits (q·mean is added back in f32). With
 *     key_lens or masks the mean is still over all Lk keys: the shift stays
 *     one constant per row. It takes out a common offset of the keys (often
 *     large in trained models), which int8 with per-row scales handles badly.
 *   Quantization: per query row and per key row, symmetric int8 with an f32
 *     scale (max|x| / 127, round to nearest even, as attn_quantize_weights_s8);
 *     the softmax scale is folded into the query scales.
 *   S = q·kᵀ exactly in int32 (AMX-INT8 TDPBSSD, AVX512_VNNI VPDPBUSD with
 *     the +128 correction, or portable C: the same integers on every path),
 *     dequantized in f32 as S * (scale_k[j] * scale_q[i]) (the same bits on
 *     every path).
 *   The online softmax and its statistics in f32, P rounded to bf16 and
 *     P·V with v rounded to bf16, f32 accumulators: the tile kernels of the
 *     bf16 flash attention (attn/sdpa_bf16.h).
 * Accuracy against the f32 math path (tests/test_sdpa_i8.c): with e_t =
 * |scale|·sqrt(D)·max|q|·max|k - mean| / 127, the logit error of one int8
 * step over a dot product (~8e-3 at the default scale for |q|, |k - mean|
 * <= 1), out is within 4e-3·max|v| + e_t (bf16 P and v, 2^-9 each, plus p
 * moving by ~e_t relative): ~1e-2 relative to max|v|; lse within e_t.
 * Larger logits (larger q or k) mean proportionally larger errors.
 * Cost: the quantization and packing are O((Lq + Lk)·D) per call; the
 * packed copies take (Lq + Lk)·D bytes plus Lk·Dv bf16.
 *
 * Supported: scale, causal, window, q_offset, key_lens, bool and additive
 * masks, GQA, Dv != D, 1 <= D, Dv <= 256 (zero-padded), any Lq, Lk >= 0.
 * Position variants and block-sparse layouts give ATTN_EUNSUPPORTED; so
 * does a non-finite value in q or k (ATTN_ENUMERIC: it cannot be
 * quantized; any key counts, masked or not, since all enter the key mean).
 * NaN/inf in v or the masks propagate as in math (attn/sdpa.h): a NaN or
 * +inf logit from the additive mask at an allowed key gives the row NaN out
 * and lse. A query row with no allowed key gives out = 0, lse = -inf.
 * Results are identical for any thread count. No backward: for training use
 * the f32 or bf16 flash attention.
 *
 * Paths: AMX (TDPBSSD scores + the AMX/AVX-512 bf16 softmax and P·V) where
 * the CPU has AMX-INT8, AMX-BF16, AVX512_BF16 and the tile permission; SIMD
 * (AVX512_VNNI scores + the portable softmax and P·V); portable C. The
 * scores are identical on all three; SIMD and portable outputs are
 * bit-identical, AMX differs from them in exp and summation order only.
 * ATTN_CPU=generic forces the portable path. */
#ifndef ATTN_SDPA_I8_H
#define ATTN_SDPA_I8_H

#include "attn/api.h"
#include "attn/lowp.h"
#include "attn/sdpa.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The same with the path forced: ATTN_LOWP_AUTO (as above), ATTN_LOWP_PORTABLE,
 * ATTN_LOWP_SIMD (AVX512_VNNI) or ATTN_LOWP_AMX; ATTN_EUNSUPPORTED where
 * unavailable. */
/* 1 if path can run here. */
ATTN_API int attn_sdpa_i8_path_available(attn_lowp_path path);

#ifdef __cplusplus
}
#endif
#endif
