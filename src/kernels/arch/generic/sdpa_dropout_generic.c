/* Attention dropout's portable row kernel (sdpa_dropout.h; the row keys,
 * the tile loop and the checks are sdpa_dropout.c's). */
#include "kernels/sdpa/sdpa_dropout.h"

void attn_sdpa_dropout_row_generic(const uint32_t k[2], uint32_t thr, float scale, int64_t j0,
                                   int64_t n, float *x) {
  for (int64_t c = 0; c < n; c++)
    x[c] = (attn_drop_word(k, (uint32_t)(j0 + c)) >> 8) >= thr ? x[c] * scale : 0.0f;
}
