/* Flash attention backend (placeholder until the fused kernel lands). */
#include "kernels/sdpa_internal.h"

attn_status attn_sdpa_forward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                    const float *v, float *out, float *lse) {
  return attn_set_error(ATTN_EUNSUPPORTED, "sdpa: flash backend not built");
}

attn_status attn_sdpa_backward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                     const float *v, const float *out, const float *lse,
                                     const float *dout, float *dq, float *dk, float *dv) {
  return attn_set_error(ATTN_EUNSUPPORTED, "sdpa: flash backend not built");
}
