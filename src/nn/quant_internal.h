/* Internal to the quantized nn paths: the QAT fake quantization of one
 * Linear (qat.c), used by the ctx-aware dense forward/backward (dense_ctx.c). */
#ifndef ATTN_NN_QUANT_INTERNAL_H
#define ATTN_NN_QUANT_INTERNAL_H

#include <stdint.h>

#include "attn/quant.h"

/* For the Linear with weight W [out, in] and input x [rows, in]:
 * xq = fake-quantized x (mask mx: 1 where not clipped) and wq = fake-quantized
 * W (mask mw). forward = 1: find or add the observer and, when update, fold
 * x's range into it first; forward = 0 (backward): reuse the parameters of the
 * last forward (ATTN_EINVAL if there was none). mx / mw may be NULL. */
attn_status attn_nn_qat_apply(attn_qat *q, int forward, int update, const float *W, const float *x,
                         int64_t rows, int64_t in, int64_t out, float *xq, uint8_t *mx,
                         float *wq, uint8_t *mw);

#endif
