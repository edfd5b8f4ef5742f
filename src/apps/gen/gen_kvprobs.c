/* The cache's attention probabilities (gen_kvprobs.h). */
#include "apps/gen/gen_kvprobs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

attn_status attn_lm_kv_probs(const attn_kvc *kv, const float *k_own, const float *q, int64_t Hq,
                             int64_t n, float *probs) {
  attn_kv_view view;
  attn_status st = attn_kvc_view(kv, &view);
  if (st) return st;
  const int64_t len = attn_kvc_len(kv, 0), Hkv = view.Hkv, D = view.D;
  if (!q || !probs || n < 1 || n > len || Hq < 1 || Hq % Hkv)
    return attn_set_error(ATTN_EINVAL, "lm kv probs: %lld queries, %lld heads over %lld keys",
                          (long long)n, (long long)Hq, (long long)len);
  float *kw = malloc((size_t)(len * D) * sizeof *kw);
  double *s = malloc((size_t)len * sizeof *s);
  if (!kw || !s) st = attn_set_error(ATTN_ENOMEM, "lm kv probs: out of memory");
  const double scale = 1.0 / sqrt((double)D);
  for (int64_t g = 0; !st && g < Hkv; g++) {
    for (int64_t t = 0; !st && t < len; t++) /* KV head g's keys, widened */
      if (k_own)
        memcpy(kw + t * D, k_own + (t * Hkv + g) * D, (size_t)D * sizeof *kw);
      else
        st = attn_kvc_read(kv, 0, g, t, kw + t * D, NULL);
    for (int64_t h = g * (Hq / Hkv); !st && h < (g + 1) * (Hq / Hkv); h++)
      for (int64_t i = 0; i < n; i++) {
        const float *qi = q + (i * Hq + h) * D;
        float *row = probs + (h * n + i) * len;
        const int64_t last = len - n + i; /* causal: keys 0..last */
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= last; j++) {
          double d = 0;
          for (int64_t e = 0; e < D; e++)
            d += (double)qi[e] * kw[j * D + e];
          s[j] = d * scale;
          mx = s[j] > mx ? s[j] : mx;
        }
        for (int64_t j = 0; j <= last; j++)
          sum += s[j] = exp(s[j] - mx);
        for (int64_t j = 0; j < len; j++)
          row[j] = j <= last ? (float)(s[j] / sum) : 0.0f;
      }
  }
  free(kw);
  free(s);
  return st;
}
