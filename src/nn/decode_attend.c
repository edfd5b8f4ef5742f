/* Self-attention of one new position per decoder row against its KV cache
 * (attn_nn_attend_last, nn_internal.h): the decode step's shape, Lq = 1, a
 * few dozen keys, B*H small problems at once. The SDPA backends tile and
 * pack for long sequences; here a direct pass per (row, head): scores,
 * softmax (max subtracted), weighted sum of the values; compiled for AVX2
 * and the base set alike (ATTN_NN_CLONES: the same bits). */
#include <math.h>
#include <stdlib.h>

#include "nn/nn_internal.h"

/* eight running sums (one AVX register once vectorised), then added */
__attribute__((always_inline)) static inline float dot(const float *a, const float *b,
                                                      int64_t n) {
  float acc[8] = {0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int i = 0; i < 8; i++) acc[i] += a[d + i] * b[d + i];
  float x = 0.0f;
  for (; d < n; d++) x += a[d] * b[d];
  for (int i = 0; i < 8; i++) x += acc[i];
  return x;
}

/* o [hd] := softmax(scale * K q) V over keys k, values v [len, hd] (rows
 * ks floats apart); no keys: o = 0 */
ATTN_NN_CLONES
static void attend_one(const float *q, const float *k, const float *v, int64_t len, int64_t ks,
                       int64_t hd, float scale, float *s, float *o) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < len; j++) {
    s[j] = dot(q, k + j * ks, hd) * scale;
    mx = s[j] > mx ? s[j] : mx;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < len; j++) sum += s[j] = expf(s[j] - mx);
  for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
  for (int64_t j = 0; j < len; j++) {
    const float p = s[j] / sum;
    const float *vj = v + j * ks;
#pragma omp simd
    for (int64_t d = 0; d < hd; d++) o[d] += p * vj[d];
  }
}

attn_status attn_nn_attend_last(const attn_kv_cache *c, int64_t H, float scale, const float *q,
                                float *o) {
  const int64_t B = c->B, Hkv = c->Hkv, hd = c->D, len = c->len, E = H * hd;
  if (c->Dv != hd || len < 1 || H % Hkv != 0)
    return attn_set_error(ATTN_EINVAL, "attend_last: D %lld, Dv %lld, %lld keys, heads %lld/%lld",
                          (long long)hd, (long long)c->Dv, (long long)len, (long long)H,
                          (long long)Hkv);
  float *s = attn_nn_scratch_uninit(B * H * len);
  if (!s) return ATTN_ENOMEM;
#pragma omp parallel for num_threads(attn_nn_pass_threads(B * H * len * hd)) schedule(static)
  for (int64_t bh = 0; bh < B * H; bh++) {
    const int64_t b = bh / H, h = bh % H, kh = h / (H / Hkv);
    const int64_t at = (b * Hkv + kh) * c->cap * hd;
    attend_one(q + b * E + h * hd, c->k + at, c->v + at, len, hd, hd, scale, s + bh * len,
               o + b * E + h * hd);
  }
  free(s);
  return ATTN_OK;
}

attn_status attn_nn_attend_memory(const attn_decoder_cache *c, const float *K, const float *V,
                                  float scale, const float *q, float *o) {
  const int64_t B = c->B, H = c->H, Hkv = c->Hkv, hd = c->hd, Lm = c->Lm, G = c->B / c->B_mem;
  const int64_t E = H * hd, Ekv = Hkv * hd;
  float *s = attn_nn_scratch_uninit(B * H * Lm);
  if (!s) return ATTN_ENOMEM;
#pragma omp parallel for num_threads(attn_nn_pass_threads(B * H * Lm * hd)) schedule(static)
  for (int64_t bh = 0; bh < B * H; bh++) {
    const int64_t b = bh / H, h = bh % H, m = b / G, kh = h / (H / Hkv);
    const int64_t len = c->mem_lens ? c->mem_lens[m] : Lm, at = m * Lm * Ekv + kh * hd;
    attend_one(q + b * E + h * hd, K + at, V + at, len, Ekv, hd, scale, s + bh * Lm,
               o + b * E + h * hd);
  }
  free(s);
  return ATTN_OK;
}
