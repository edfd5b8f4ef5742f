/* attn — the SDPA entry points of 0.1, deprecated: use attn_sdpa_forward /
 * attn_sdpa_backward (attn/sdpa.h) with attn_sdpa_args. Each is a thin wrapper
 * over the same kernels, kept for source compatibility through the 0.x
 * series (their semantics: the dtype headers attn/sdpa_bf16.h, _f16.h,
 * _i8.h, attn/sdpa_varlen.h). Calls warn (-Wdeprecated-declarations) unless
 * ATTN_ALLOW_DEPRECATED is defined before including attn headers.
 *
 *   0.1                                      attn_sdpa_args of the new call
 *   attn_sdpa_forward(d, backend, ...)       renamed attn_sdpa_forward_f32;
 *                                            dtype F32, path = backend
 *   attn_sdpa_forward_math / _backward_math  dtype F32, path MATH
 *   attn_sdpa_forward_bf16 / _f16            dtype BF16 / F16, path AUTO
 *   attn_sdpa_forward_bf16_path(p, ...)      path PORTABLE, SIMD, AMX, F32
 *   attn_sdpa_forward_i8 / _i8_path          dtype I8 (f32 q, k, v)
 *   attn_sdpa_varlen_*(d, vl, ...)           varlen = vl, dtype as named
 * (and the same for each backward). */
#ifndef ATTN_SDPA_DEPRECATED_H
#define ATTN_SDPA_DEPRECATED_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/lowp.h"
#include "attn/sdpa.h"
#include "attn/sdpa_varlen.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(ATTN_ALLOW_DEPRECATED)
#define ATTN_DEPRECATED                                                                            \
  __attribute__((                                                                                  \
      deprecated("use attn_sdpa_forward/attn_sdpa_backward with attn_sdpa_args (attn/sdpa.h)")))
#else
#define ATTN_DEPRECATED
#endif

ATTN_API attn_status attn_sdpa_forward_f32(const attn_sdpa_desc *d, attn_backend backend,
                                           const float *q, const float *k, const float *v,
                                           float *out, float *lse, float *probs) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_backward_f32(const attn_sdpa_desc *d, attn_backend backend,
                                            const float *q, const float *k, const float *v,
                                            const float *out, const float *lse, const float *dout,
                                            float *dq, float *dk, float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_forward_math(const attn_sdpa_desc *d, const float *q, const float *k,
                                            const float *v, float *out, float *lse,
                                            float *probs) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_backward_math(const attn_sdpa_desc *d, const float *q,
                                             const float *k, const float *v, const float *out,
                                             const float *lse, const float *dout, float *dq,
                                             float *dk, float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_forward_bf16(const attn_sdpa_desc *d, const uint16_t *q,
                                            const uint16_t *k, const uint16_t *v, float *out,
                                            float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_backward_bf16(const attn_sdpa_desc *d, const uint16_t *q,
                                             const uint16_t *k, const uint16_t *v, const float *out,
                                             const float *lse, const float *dout, float *dq,
                                             float *dk, float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_forward_bf16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                                 const uint16_t *q, const uint16_t *k,
                                                 const uint16_t *v, float *out,
                                                 float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_backward_bf16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                                  const uint16_t *q, const uint16_t *k,
                                                  const uint16_t *v, const float *out,
                                                  const float *lse, const float *dout, float *dq,
                                                  float *dk, float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_forward_f16(const attn_sdpa_desc *d, const uint16_t *q,
                                           const uint16_t *k, const uint16_t *v, float *out,
                                           float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_backward_f16(const attn_sdpa_desc *d, const uint16_t *q,
                                            const uint16_t *k, const uint16_t *v, const float *out,
                                            const float *lse, const float *dout, float *dq,
                                            float *dk, float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_forward_f16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                                const uint16_t *q, const uint16_t *k,
                                                const uint16_t *v, float *out,
                                                float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_backward_f16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                                 const uint16_t *q, const uint16_t *k,
                                                 const uint16_t *v, const float *out,
                                                 const float *lse, const float *dout, float *dq,
                                                 float *dk, float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_forward_i8(const attn_sdpa_desc *d, const float *q, const float *k,
                                          const float *v, float *out, float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_forward_i8_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                               const float *q, const float *k, const float *v,
                                               float *out, float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_varlen_forward(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                              attn_backend backend, const float *q, const float *k,
                                              const float *v, float *out,
                                              float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_varlen_backward(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                               attn_backend backend, const float *q, const float *k,
                                               const float *v, const float *out, const float *lse,
                                               const float *dout, float *dq, float *dk,
                                               float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_varlen_forward_bf16(const attn_sdpa_desc *d,
                                                   const attn_sdpa_varlen *vl, const uint16_t *q,
                                                   const uint16_t *k, const uint16_t *v, float *out,
                                                   float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_varlen_backward_bf16(const attn_sdpa_desc *d,
                                                    const attn_sdpa_varlen *vl, const uint16_t *q,
                                                    const uint16_t *k, const uint16_t *v,
                                                    const float *out, const float *lse,
                                                    const float *dout, float *dq, float *dk,
                                                    float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_varlen_forward_f16(const attn_sdpa_desc *d,
                                                  const attn_sdpa_varlen *vl, const uint16_t *q,
                                                  const uint16_t *k, const uint16_t *v, float *out,
                                                  float *lse) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_varlen_backward_f16(const attn_sdpa_desc *d,
                                                   const attn_sdpa_varlen *vl, const uint16_t *q,
                                                   const uint16_t *k, const uint16_t *v,
                                                   const float *out, const float *lse,
                                                   const float *dout, float *dq, float *dk,
                                                   float *dv) ATTN_DEPRECATED;
ATTN_API attn_status attn_sdpa_varlen_forward_i8(const attn_sdpa_desc *d,
                                                 const attn_sdpa_varlen *vl, const float *q,
                                                 const float *k, const float *v, float *out,
                                                 float *lse) ATTN_DEPRECATED;

#ifdef __cplusplus
}
#endif
#endif
