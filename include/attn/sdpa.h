/* attn — scaled dot-product attention, forward and backward.
 *
 *   q [B, Hq,  Lq, D ]   k [B, Hkv, Lk, D ]   v [B, Hkv, Lk, Dv]
 *   out [B, Hq, Lq, Dv]  lse [B, Hq, Lq] (contiguous)  probs [B, Hq, Lq, Lk]
 *
 * Hq must be a multiple of Hkv: query head h reads key/value head
 * h / (Hq/Hkv) (grouped-query attention, no copies). The last dim of every
 * tensor is contiguous; the b, h and l strides (in elements) are given per
 * tensor (all zero = contiguous [B,H,L,D] layout). dq/dk/dv use the strides of
 * q/k/v and dout the strides of out.
 *
 * Key j is allowed for query i iff all of:
 *   causal        -> j <= i
 *   window_left  >= 0 -> j >= i - window_left
 *   window_right >= 0 -> j <= i + window_right
 *   key_lens      -> j < key_lens[b]
 *   bool_mask     -> bool_mask[b,h,i,j] != 0 (1 = may attend)
 * and its logit is scale * q·k + add_mask[b,h,i,j] (an add_mask of -inf also
 * disallows). Masks broadcast through their strides (0 on broadcast dims).
 * A query row with no allowed key gives out = 0, lse = -inf, zero gradient.
 */
#ifndef ATTN_SDPA_H
#define ATTN_SDPA_H

#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ATTN_BACKEND_AUTO = 0, ATTN_BACKEND_MATH = 1, ATTN_BACKEND_FLASH = 2 } attn_backend;

/* "auto" | "math" | "flash" */
attn_status attn_backend_from_name(const char *name, attn_backend *out);
const char *attn_backend_name(attn_backend b);

typedef struct {
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  float scale;   /* used only when has_scale; default 1/sqrt(D) */
  int has_scale;
  int causal;
  int64_t window_left, window_right; /* -1 = unbounded */
  const int32_t *key_lens;           /* [B] or NULL */
  const uint8_t *bool_mask;          /* NULL or, with bool_mask_stride[4] (b,h,i,j) */
  int64_t bool_mask_stride[4];
  const float *add_mask; /* NULL or, with add_mask_stride[4] (b,h,i,j) */
  int64_t add_mask_stride[4];
  /* element strides for b, h, l; all zero = contiguous */
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
} attn_sdpa_desc;

/* Fills d with B..Dv, no masks, default scale, unbounded window, contiguous. */
void attn_sdpa_desc_init(attn_sdpa_desc *d, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq,
                         int64_t Lk, int64_t D, int64_t Dv);

/* out and lse required; probs optional ([B,Hq,Lq,Lk] contiguous, 0 where masked). */
attn_status attn_sdpa_forward(const attn_sdpa_desc *d, attn_backend backend, const float *q,
                              const float *k, const float *v, float *out, float *lse,
                              float *probs);
/* Gradients dq, dk, dv are OVERWRITTEN. out and lse are the forward's. */
attn_status attn_sdpa_backward(const attn_sdpa_desc *d, attn_backend backend, const float *q,
                               const float *k, const float *v, const float *out,
                               const float *lse, const float *dout, float *dq, float *dk,
                               float *dv);

/* The plain reference implementations behind ATTN_BACKEND_MATH. */
attn_status attn_sdpa_forward_math(const attn_sdpa_desc *d, const float *q, const float *k,
                                   const float *v, float *out, float *lse, float *probs);
attn_status attn_sdpa_backward_math(const attn_sdpa_desc *d, const float *q, const float *k,
                                    const float *v, const float *out, const float *lse,
                                    const float *dout, float *dq, float *dk, float *dv);

#ifdef __cplusplus
}
#endif
#endif
