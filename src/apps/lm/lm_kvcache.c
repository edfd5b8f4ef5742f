/* The LM's KV cache on the library's f32 attn_kv_cache (lm_kvcache.h). */
#include "apps/lm/lm_kvcache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"f32", "f16", "int8", "paged"};

const char *attn_lm_kv_kind_name(attn_lm_kv_kind k) {
  return k >= ATTN_LM_KV_F32 && k <= ATTN_LM_KV_PAGED ? kind_names[k] : "?";
}

attn_status attn_lm_kv_kind_from_name(const char *name, attn_lm_kv_kind *out) {
  for (int i = 0; name && i < 4; i++)
    if (!strcmp(name, kind_names[i])) {
      if (i != ATTN_LM_KV_F32)
        return attn_set_error(ATTN_EUNSUPPORTED,
                              "--kv-cache %s: not yet available in this build (the f16, int8 and "
                              "paged caches come with the decode kernel of issue 36); use f32",
                              name);
      if (out) *out = (attn_lm_kv_kind)i;
      return ATTN_OK;
    }
  return attn_set_error(ATTN_EINVAL, "--kv-cache '%s': one of f32, f16, int8, paged",
                        name ? name : "(null)");
}

void attn_lm_kv_free(attn_lm_kv *c) {
  if (!c) return;
  for (int l = 0; c->kv && l < c->layers; l++)
    attn_kv_cache_free(&c->kv[l]);
  free(c->kv);
  memset(c, 0, sizeof *c);
}

attn_status attn_lm_kv_init(attn_lm_kv *c, attn_lm_kv_kind kind, int layers, int64_t Hq,
                            int64_t Hkv, int64_t hd, int64_t cap) {
  if (!c) return attn_set_error(ATTN_EINVAL, "lm kv cache: NULL");
  memset(c, 0, sizeof *c);
  if (kind != ATTN_LM_KV_F32) return attn_lm_kv_kind_from_name(attn_lm_kv_kind_name(kind), NULL);
  if (layers < 1 || Hq < 1 || Hkv < 1 || Hq % Hkv || hd < 1)
    return attn_set_error(ATTN_EINVAL, "lm kv cache: layers %d, heads %lld / %lld, head_dim %lld",
                          layers, (long long)Hq, (long long)Hkv, (long long)hd);
  c->kind = kind, c->layers = layers, c->Hq = Hq, c->Hkv = Hkv, c->hd = hd;
  c->kv = calloc((size_t)layers, sizeof *c->kv);
  if (!c->kv) return attn_set_error(ATTN_ENOMEM, "lm kv cache: out of memory");
  for (int l = 0; l < layers; l++) {
    attn_status st = attn_kv_cache_init(&c->kv[l], 1, Hkv, hd, hd, cap);
    if (st) {
      attn_lm_kv_free(c);
      return st;
    }
  }
  return ATTN_OK;
}

int64_t attn_lm_kv_len(const attn_lm_kv *c, int layer) {
  return c && c->kv && layer >= 0 && layer < c->layers ? c->kv[layer].len : 0;
}

attn_status attn_lm_kv_append(attn_lm_kv *c, int layer, const float *k, const float *v, int64_t n) {
  if (!c || !c->kv || layer < 0 || layer >= c->layers || !k || !v || n < 1)
    return attn_set_error(ATTN_EINVAL, "lm kv append: bad argument (layer %d, n %lld)", layer,
                          (long long)n);
  const int64_t H = c->Hkv, D = c->hd;
  float *t = malloc((size_t)(2 * n * H * D) * sizeof *t);
  if (!t) return attn_set_error(ATTN_ENOMEM, "lm kv append: out of memory");
  for (int64_t i = 0; i < n; i++) /* [n, H, D] -> [H, n, D] */
    for (int64_t h = 0; h < H; h++) {
      memcpy(t + (h * n + i) * D, k + (i * H + h) * D, (size_t)D * sizeof *t);
      memcpy(t + n * H * D + (h * n + i) * D, v + (i * H + h) * D, (size_t)D * sizeof *t);
    }
  attn_status st = attn_kv_cache_append(&c->kv[layer], t, t + n * H * D, n);
  free(t);
  return st;
}

static void desc(const attn_lm_kv *c, int64_t n, int64_t len, attn_sdpa_desc *d) {
  const int64_t Hq = c->Hq, D = c->hd;
  attn_sdpa_desc_init(d, 1, Hq, c->Hkv, n, len, D, D);
  d->causal = 1;
  const int64_t qs[3] = {n * Hq * D, D, Hq * D}; /* (b, h, l) strides of [n, Hq, D] */
  memcpy(d->q_stride, qs, sizeof qs);
  memcpy(d->o_stride, qs, sizeof qs);
}

attn_status attn_lm_kv_attend(const attn_lm_kv *c, int layer, const float *q, int64_t n, float *out,
                              float *lse) {
  if (!c || !c->kv || layer < 0 || layer >= c->layers || !q || !out || !lse || n < 1 ||
      n > c->kv[layer].len)
    return attn_set_error(ATTN_EINVAL, "lm kv attend: bad argument (layer %d, n %lld)", layer,
                          (long long)n);
  attn_sdpa_desc d;
  desc(c, n, c->kv[layer].len, &d);
  return attn_kv_cache_attend(&c->kv[layer], &d, ATTN_BACKEND_AUTO, q, n, out, lse);
}

attn_status attn_lm_kv_probs(const attn_lm_kv *c, int layer, const float *q, int64_t n,
                             const float *lse, float *probs) {
  if (!c || !c->kv || layer < 0 || layer >= c->layers || !q || !lse || !probs || n < 1 ||
      n > c->kv[layer].len)
    return attn_set_error(ATTN_EINVAL, "lm kv probs: bad argument");
  const attn_kv_cache *kv = &c->kv[layer];
  const int64_t Hq = c->Hq, D = c->hd, len = kv->len, G = Hq / c->Hkv;
  const double scale = 1.0 / sqrt((double)D);
  for (int64_t h = 0; h < Hq; h++)
    for (int64_t i = 0; i < n; i++) {
      const float *qi = q + (i * Hq + h) * D;
      float *row = probs + (h * n + i) * len;
      const int64_t last = len - n + i; /* causal: keys 0..last */
      for (int64_t j = 0; j < len; j++) {
        if (j > last) {
          row[j] = 0.0f;
          continue;
        }
        const float *kj = kv->k + ((h / G) * kv->cap + j) * D;
        double s = 0;
        for (int64_t e = 0; e < D; e++)
          s += (double)qi[e] * kj[e];
        row[j] = (float)exp(s * scale - lse[h * n + i]);
      }
    }
  return ATTN_OK;
}
