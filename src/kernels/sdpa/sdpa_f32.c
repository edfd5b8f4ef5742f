/* f32 attention on the dense layout: the math path, the flash kernels, or
 * auto (flash where it takes the call and no probs are asked for, else
 * math). The entry (sdpa_entry.c) routes f32 calls here; so do the varlen
 * runner's pieces and the widened bf16 / fp16 reference. */
#include "kernels/sdpa/sdpa_internal.h"

attn_status attn_sdpa_forward_f32(const attn_sdpa_desc *d, attn_backend backend, const float *q,
                                  const float *k, const float *v, float *out, float *lse,
                                  float *probs) {
  attn_status st;
  switch (backend) { /* each path validates the call itself */
  case ATTN_BACKEND_MATH: return attn_sdpa_forward_math(d, q, k, v, out, lse, probs);
  case ATTN_BACKEND_FLASH:
    if (probs)
      return attn_set_error(ATTN_EUNSUPPORTED,
                            "sdpa: the flash backend cannot return probs (use math or auto)");
    return attn_sdpa_forward_flash(d, q, k, v, out, lse);
  case ATTN_BACKEND_AUTO:
    if (!probs) {
      st = attn_sdpa_forward_flash(d, q, k, v, out, lse);
      if (st != ATTN_EUNSUPPORTED) return st;
      attn_clear_error();
    }
    return attn_sdpa_forward_math(d, q, k, v, out, lse, probs);
  }
  return attn_set_error(ATTN_EINVAL, "sdpa: unknown backend %d", (int)backend);
}

attn_status attn_sdpa_backward_f32(const attn_sdpa_desc *d, attn_backend backend, const float *q,
                                   const float *k, const float *v, const float *out,
                                   const float *lse, const float *dout, float *dq, float *dk,
                                   float *dv) {
  attn_status st;
  switch (backend) { /* each path validates the call itself */
  case ATTN_BACKEND_MATH: return attn_sdpa_backward_math(d, q, k, v, out, lse, dout, dq, dk, dv);
  case ATTN_BACKEND_FLASH: return attn_sdpa_backward_flash(d, q, k, v, out, lse, dout, dq, dk, dv);
  case ATTN_BACKEND_AUTO:
    st = attn_sdpa_backward_flash(d, q, k, v, out, lse, dout, dq, dk, dv);
    if (st != ATTN_EUNSUPPORTED) return st;
    attn_clear_error();
    return attn_sdpa_backward_math(d, q, k, v, out, lse, dout, dq, dk, dv);
  }
  return attn_set_error(ATTN_EINVAL, "sdpa: unknown backend %d", (int)backend);
}
