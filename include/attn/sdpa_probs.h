/* attn — attention probabilities on request, recomputed from q, k and the
 * forward's log-sum-exp (so the flash path, which never stores them, costs
 * nothing extra in normal runs). Only the chosen head and query rows are
 * computed: P[i, j] = exp(scale·q_i·k_j + add_mask[i, j] − lse_i) on allowed
 * keys, 0 elsewhere; a row with lse = −inf (no allowed key) is all zeros.
 * Deprecated since 0.2: attn_sdpa_forward with args.probs_rows (attn/sdpa.h)
 * computes the same; this wrapper calls it. */
#ifndef ATTN_SDPA_PROBS_H
#define ATTN_SDPA_PROBS_H

#include "attn/api.h"
#include "attn/sdpa.h"
#include "attn/sdpa_deprecated.h"

#ifdef __cplusplus
extern "C" {
#endif

/* d, q, k as given to attn_sdpa_forward; lse [B, Hq, Lq] from it.
 * probs [nrows, Lk] receives rows row0 .. row0+nrows-1 of batch b, query
 * head h. Descriptors with position schemes or block-sparse layouts are
 * ATTN_EUNSUPPORTED here (use the math path's probs output). */
ATTN_API attn_status attn_sdpa_probs_f32(const attn_sdpa_desc *d, const float *q, const float *k,
                                         const float *lse, int64_t b, int64_t h, int64_t row0,
                                         int64_t nrows, float *probs) ATTN_DEPRECATED;

#ifdef __cplusplus
}
#endif
#endif
