/* Each layer's mean of heads appended to its heads (cross-attention grid and
 * alignment report). */
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz.h"

float *attn_viz_append_mean(const float *probs, int64_t layers, int64_t heads, int64_t n) {
  const int64_t cols = heads + 1;
  float *all = malloc((size_t)(layers * cols * n) * sizeof(float));
  if (!all) {
    attn_set_error(ATTN_ENOMEM, "mean of heads: %lld layers x %lld heads x %lld", (long long)layers,
                   (long long)heads, (long long)n);
    return NULL;
  }
  for (int64_t l = 0; l < layers; l++) {
    float *mean = all + (l * cols + heads) * n;
    memcpy(all + l * cols * n, probs + l * heads * n, (size_t)(heads * n) * sizeof(float));
    for (int64_t e = 0; e < n; e++) {
      double acc = 0;
      for (int64_t h = 0; h < heads; h++)
        acc += probs[(l * heads + h) * n + e];
      mean[e] = (float)(acc / (double)heads);
    }
  }
  return all;
}
