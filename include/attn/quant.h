/* attn — quantized models: int8 safetensors files (`attn quantize`), their
 * loader (dequantized f32 params, or int8 Linears for inference), and the
 * quantization-aware-training state.
 *
 * File format: every Linear weight W [out, in] (attn_quant_is_linear_weight)
 * is stored as "<name>" I8 [out, in] and "<name>.scale" F32 [out], per output
 * channel symmetric (attn_quantize_weights_s8: scale = max|W[r,:]| / 127,
 * W ≈ scale[r] * q); every other tensor and metadata entry is copied as is,
 * and metadata "quantized" = "int8" is added. */
#ifndef ATTN_QUANT_H
#define ATTN_QUANT_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/lowp.h"
#include "attn/nn.h"
#include "attn/params.h"
#include "attn/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if the tensor `name` is a Linear weight to quantize: F32, 2-D, the name
 * ends in "weight" (".weight", "in_proj_weight", "q_proj_weight", ...), and
 * no component names an embedding, position table or norm ("embed", "emb",
 * "position", "pos_", "norm", "ln_", "wte", "wpe", "rel"). */
ATTN_API int attn_quant_is_linear_weight(const char *name, const attn_tensor *t);

typedef struct {
  int tensors;         /* in the input */
  int quantized;       /* Linear weights quantized */
  int64_t linear_f32_bytes; /* those weights as F32 */
  int64_t linear_i8_bytes;  /* as I8 + F32 scales */
  int64_t file_in_bytes, file_out_bytes; /* attn_quantize_file only */
} attn_quant_report;

/* New set *out: in with its Linear weights quantized (format above). An
 * already quantized input is ATTN_EINVAL. rep may be NULL. */
ATTN_API attn_status attn_quantize_st(const attn_st *in, attn_st **out, attn_quant_report *rep);
/* File to file (atomic write of out_path). */
ATTN_API attn_status attn_quantize_file(const char *in_path, const char *out_path,
                                        attn_quant_report *rep);
/* 1 if st carries metadata quantized=int8. */
ATTN_API int attn_st_is_quantized(const attn_st *st);
/* New set *out: every I8 tensor with a "<name>.scale" back to F32
 * (scale[r] * q), the ".scale" tensors dropped, the rest copied. Ready for
 * attn_params_load_st. */
ATTN_API attn_status attn_dequantize_st(const attn_st *in, attn_st **out);

/* ---- int8 Linears for inference ----------------------------------------------
 * One attn_qlinear per quantized weight of st found (by name) in p, keyed by
 * the weight's storage in p (so put it in attn_nn_ctx.qlinears and the nn
 * modules run those Linears in int8). A packed "in_proj_weight" [3E, E] gets
 * one entry per q/k/v block, as MHA uses it. p must hold the dequantized
 * weights (attn_dequantize_st + attn_params_load_st); biases come from p. */
ATTN_API attn_status attn_qlinear_set_build(attn_qlinear_set **out, const attn_st *st,
                                            const attn_params *p);
/* One more entry: W [out, in] quantized as attn_qlinear_quantize does (per
 * output channel; bias b may be NULL), keyed by W's storage. *s NULL: a new
 * set. For int8 inference of an f32 model without a quantized file. */
ATTN_API attn_status attn_qlinear_set_add_f32(attn_qlinear_set **s, const float *W, const float *b,
                                              int64_t out, int64_t in);
ATTN_API void attn_qlinear_set_free(attn_qlinear_set *s);
ATTN_API int attn_qlinear_set_count(const attn_qlinear_set *s);
/* The entry for weight storage W with that shape, else NULL. */
ATTN_API const attn_qlinear *attn_qlinear_set_find(const attn_qlinear_set *s, const float *W,
                                                   int64_t out, int64_t in);
/* Bytes held by the int8 weights + scales + colsums + biases of every entry. */
ATTN_API int64_t attn_qlinear_set_bytes(const attn_qlinear_set *s);

/* The loader: every parameter of p from st (attn_params_load_st, prefix ""),
 * dequantized when st is an int8 file; then, when qlinears != NULL, *qlinears
 * = the int8 Linear table of st (NULL for an f32 file). */
ATTN_API attn_status attn_quant_load_params(attn_params *p, const attn_st *st, int allow_missing,
                                            attn_qlinear_set **qlinears);

/* ---- quantization-aware training (attn_nn_ctx.qat) ---------------------------
 * Per Linear (keyed by its weight storage): an EMA min/max observer of its
 * input, like torch's MovingAverageMinMaxObserver: the first batch sets
 * lo/hi, later ones lo += c * (min(x) - lo), hi likewise (c = averaging
 * constant, 0.01 by default); it updates in training forwards only. The input
 * is fake-quantized per tensor (u8 over [min(lo,0), max(hi,0)], as
 * attn_quant_params_u8) with the range after the update, the weight per
 * output channel (symmetric int8, scales from the current weights). Backward
 * is the straight-through estimator: gradients pass where the value was not
 * clipped (attn_fake_quant_*). Export: attn_quantize_file on the trained
 * checkpoint (the same per-channel weight quantization). */
ATTN_API attn_status attn_qat_new(attn_qat **out, float averaging_constant);
ATTN_API void attn_qat_free(attn_qat *q);
/* How the input of each Linear is fake-quantized: ATTN_QAT_ACT_TENSOR (the
 * default above: per tensor over the observer's range, as torch's static
 * QAT) or ATTN_QAT_ACT_ROW: per row over that row's own [min(x,0),
 * max(x,0)], exactly the parameters attn_quantize_rows_u8 gives the int8
 * Linear at run time (attn_qlinear_forward), so the QAT forward computes what
 * the exported dynamic int8 model will (up to the order of the f32 sums);
 * nothing is clipped, so the STE passes every input gradient; no observer. */
typedef enum { ATTN_QAT_ACT_TENSOR = 0, ATTN_QAT_ACT_ROW = 1 } attn_qat_act;
ATTN_API attn_status attn_qat_set_activation(attn_qat *q, attn_qat_act mode);
/* Linears observed so far. */
ATTN_API int attn_qat_count(const attn_qat *q);
/* 1 and the observer range of the Linear with weight W, 0 if not observed. */
ATTN_API int attn_qat_range(const attn_qat *q, const float *W, float *lo, float *hi);

#ifdef __cplusplus
}
#endif
#endif
