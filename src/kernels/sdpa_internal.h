/* Internal to the SDPA backends (math in sdpa_math.c, flash in sdpa_flash*.c,
 * dispatch and validation in sdpa.c). Not part of the public API. */
#ifndef ATTN_SDPA_INTERNAL_H
#define ATTN_SDPA_INTERNAL_H

#include "attn/sdpa.h"

/* Checks sizes, pointers and strides; fills *r with resolved strides
 * (contiguous defaults applied) and the effective scale. */
typedef struct {
  int64_t q[3], k[3], v[3], o[3]; /* b, h, l element strides */
  float scale;
  int64_t group; /* Hq / Hkv */
} attn_sdpa_resolved;

attn_status attn_sdpa_validate(const attn_sdpa_desc *d, const float *q, const float *k,
                               const float *v, attn_sdpa_resolved *r);

/* The flash backend (sdpa_flash.c). Same contract as the math one. */
attn_status attn_sdpa_forward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                    const float *v, float *out, float *lse);
attn_status attn_sdpa_backward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                     const float *v, const float *out, const float *lse,
                                     const float *dout, float *dq, float *dk, float *dv);

#endif
