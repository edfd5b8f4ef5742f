/* Key/value cache for incremental decoding: rows appended per step, new
 * queries attend against all cached rows through the SDPA with q_offset set
 * so that causal masks and position schemes see absolute positions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variants.h"

/* *n = a * b * c floats, 0 on overflow */
static int cache_floats(int64_t a, int64_t b, int64_t c, size_t *n) {
  int64_t x;
  if (__builtin_mul_overflow(a, b, &x) || __builtin_mul_overflow(x, c, &x) ||
      (uint64_t)x > SIZE_MAX / sizeof(float))
    return 0;
  *n = (size_t)x;
  return 1;
}

attn_status attn_kv_cache_init(attn_kv_cache *c, int64_t B, int64_t Hkv, int64_t D, int64_t Dv,
                               int64_t cap) {
  if (!c) return attn_set_error(ATTN_EINVAL, "kv cache: NULL cache");
  memset(c, 0, sizeof *c);
  int64_t bh;
  if (B < 1 || Hkv < 1 || D < 1 || Dv < 1 || cap < 0 || __builtin_mul_overflow(B, Hkv, &bh))
    return attn_set_error(ATTN_EINVAL, "kv cache: B %lld, Hkv %lld, D %lld, Dv %lld, cap %lld",
                          (long long)B, (long long)Hkv, (long long)D, (long long)Dv,
                          (long long)cap);
  c->B = B;
  c->Hkv = Hkv;
  c->D = D;
  c->Dv = Dv;
  if (cap == 0) return ATTN_OK;
  size_t nk, nv;
  if (!cache_floats(B * Hkv, cap, D, &nk) || !cache_floats(B * Hkv, cap, Dv, &nv))
    return attn_set_error(ATTN_ENOMEM, "kv cache: %lld rows are too many", (long long)cap);
  c->k = malloc(nk * sizeof(float));
  c->v = malloc(nv * sizeof(float));
  if (!c->k || !c->v) {
    attn_kv_cache_free(c);
    return attn_set_error(ATTN_ENOMEM, "kv cache: cannot reserve %lld rows", (long long)cap);
  }
  c->cap = cap;
  return ATTN_OK;
}

void attn_kv_cache_free(attn_kv_cache *c) {
  if (!c) return;
  free(c->k);
  free(c->v);
  memset(c, 0, sizeof *c);
}

void attn_kv_cache_reset(attn_kv_cache *c) {
  if (c) c->len = 0;
}

/* x [BH, cap, w] -> [BH, ncap, w], the first len rows kept */
static float *regrow(const float *x, int64_t BH, int64_t cap, int64_t ncap, int64_t len,
                     int64_t w) {
  size_t n;
  float *y = cache_floats(BH, ncap, w, &n) ? malloc(n * sizeof(float)) : NULL;
  if (!y) return NULL;
  for (int64_t t = 0; t < BH && len > 0; t++)
    memcpy(y + t * ncap * w, x + t * cap * w, (size_t)(len * w) * sizeof(float));
  return y;
}

attn_status attn_kv_cache_append(attn_kv_cache *c, const float *k_new, const float *v_new,
                                 int64_t n) {
  if (!c || c->B < 1) return attn_set_error(ATTN_EINVAL, "kv cache: not initialised");
  if (n < 0) return attn_set_error(ATTN_EINVAL, "kv cache: append of %lld rows", (long long)n);
  if (n == 0) return ATTN_OK;
  if (!k_new || !v_new)
    return attn_set_error(ATTN_EINVAL, "kv cache: %s is NULL", !k_new ? "k_new" : "v_new");
  const int64_t BH = c->B * c->Hkv;
  if (c->len + n > c->cap) {
    int64_t ncap = c->cap > 0 ? c->cap : 16;
    if (n > INT64_MAX / 4 - c->len)
      return attn_set_error(ATTN_EINVAL, "kv cache: append of %lld rows", (long long)n);
    while (ncap < c->len + n)
      ncap *= 2;
    float *k = regrow(c->k, BH, c->cap, ncap, c->len, c->D);
    float *v = k ? regrow(c->v, BH, c->cap, ncap, c->len, c->Dv) : NULL;
    if (!k || !v) {
      free(k);
      return attn_set_error(ATTN_ENOMEM, "kv cache: cannot grow to %lld rows", (long long)ncap);
    }
    free(c->k);
    free(c->v);
    c->k = k;
    c->v = v;
    c->cap = ncap;
  }
  for (int64_t t = 0; t < BH; t++) {
    memcpy(c->k + (t * c->cap + c->len) * c->D, k_new + t * n * c->D,
           (size_t)(n * c->D) * sizeof(float));
    memcpy(c->v + (t * c->cap + c->len) * c->Dv, v_new + t * n * c->Dv,
           (size_t)(n * c->Dv) * sizeof(float));
  }
  c->len += n;
  return ATTN_OK;
}

attn_status attn_kv_cache_attend(const attn_kv_cache *c, const attn_sdpa_desc *tmpl,
                                 attn_backend backend, const float *q, int64_t n, float *out,
                                 float *lse) {
  if (!c || !tmpl) return attn_set_error(ATTN_EINVAL, "kv cache attend: NULL argument");
  if (tmpl->B != c->B || tmpl->Hkv != c->Hkv || tmpl->D != c->D || tmpl->Dv != c->Dv)
    return attn_set_error(ATTN_EINVAL,
                          "kv cache attend: desc B %lld Hkv %lld D %lld Dv %lld, cache has "
                          "%lld %lld %lld %lld",
                          (long long)tmpl->B, (long long)tmpl->Hkv, (long long)tmpl->D,
                          (long long)tmpl->Dv, (long long)c->B, (long long)c->Hkv, (long long)c->D,
                          (long long)c->Dv);
  if (n < 0 || n > c->len)
    return attn_set_error(ATTN_EINVAL, "kv cache attend: %lld new queries, %lld cached rows",
                          (long long)n, (long long)c->len);
  attn_sdpa_desc d = *tmpl;
  d.Lq = n;
  d.Lk = c->len;
  d.q_offset = c->len - n;
  d.k_stride[0] = c->Hkv * c->cap * c->D;
  d.k_stride[1] = c->cap * c->D;
  d.k_stride[2] = c->D;
  d.v_stride[0] = c->Hkv * c->cap * c->Dv;
  d.v_stride[1] = c->cap * c->Dv;
  d.v_stride[2] = c->Dv;
  const attn_sdpa_args a = {
      .path = (attn_sdpa_path)backend, .q = q, .k = c->k, .v = c->v, .out = out, .lse = lse};
  return attn_sdpa_forward(&d, &a);
}
