/* `attn sdpa`: the q_offsets tensor (per-batch alignment, docs/VARIANTS.md). */
#include <stdlib.h>

#include "cli/cli_sdpa_align.h"

attn_status cli_sdpa_read_q_offsets(const attn_st *in, int64_t B, int64_t **out) {
  *out = NULL;
  const attn_tensor *t = attn_st_get(in, "q_offsets");
  if (!t) return ATTN_OK;
  if ((t->dtype != ATTN_I32 && t->dtype != ATTN_I64) || t->ndim != 1 || t->shape[0] != B)
    return attn_set_error(ATTN_EINVAL, "tensor 'q_offsets' is %s with %d dims, expected I32 or I64 [%lld]",
                          attn_dtype_name(t->dtype), t->ndim, (long long)B);
  int64_t *x = malloc((size_t)(B > 0 ? B : 1) * sizeof *x);
  if (!x) return attn_set_error(ATTN_ENOMEM, "q_offsets: out of memory");
  for (int64_t b = 0; b < B; b++)
    x[b] = t->dtype == ATTN_I32 ? ((const int32_t *)t->data)[b] : ((const int64_t *)t->data)[b];
  *out = x;
  return ATTN_OK;
}
