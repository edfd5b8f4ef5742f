/* The generation kit's KV cache on attn_kvc and attn_decode_forward (gen_kvcache.h). */
#include "apps/gen/gen_kvcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/gen/gen_kvprobs.h"
#include "attn/sdpa.h"
#include "attn/tensor.h"

static const struct {
  const char *name;
  int dtype;
} storages[] = {{"f32", ATTN_F32}, {"f16", ATTN_F16}, {"bf16", ATTN_BF16}, {"int8", ATTN_I8}};
#define NSTORAGES (int)(sizeof storages / sizeof storages[0])

attn_status attn_lm_kv_spec_parse(const char *name, int64_t page_size, attn_lm_kv_spec *out) {
  const char *nm = name ? name : "f32";
  const size_t len = strlen(nm), sfx = strlen("-paged");
  int paged = !strcmp(nm, "paged"), dtype = paged ? ATTN_F32 : -1;
  for (int i = 0; dtype < 0 && i < NSTORAGES; i++) {
    const size_t n = strlen(storages[i].name);
    if (strncmp(nm, storages[i].name, n)) continue;
    if (len == n || (len == n + sfx && !strcmp(nm + n, "-paged")))
      dtype = storages[i].dtype, paged = len > n;
  }
  if (dtype < 0)
    return attn_set_error(ATTN_EINVAL,
                          "--kv-cache '%s': one of f32, f16, bf16, int8, each contiguous or with "
                          "-paged (f16-paged; paged = f32-paged)",
                          nm);
  if (page_size != -1 && (page_size < 1 || page_size > ATTN_LM_KV_PAGE_MAX))
    return attn_set_error(ATTN_EINVAL, "--kv-page-size %lld: a page holds 1..%d tokens",
                          (long long)page_size, ATTN_LM_KV_PAGE_MAX);
  if (page_size != -1 && !paged)
    return attn_set_error(ATTN_EINVAL,
                          "--kv-page-size %lld: the cache '%s' is contiguous (a paged one: "
                          "--kv-cache %s-paged)",
                          (long long)page_size, nm, nm);
  if (out) {
    out->dtype = dtype;
    out->page_size = !paged ? 0 : page_size > 0 ? page_size : ATTN_LM_KV_PAGE_DEFAULT;
  }
  return ATTN_OK;
}

const char *attn_lm_kv_spec_name(const attn_lm_kv_spec *s, char *buf, size_t n) {
  const char *d = "?";
  for (int i = 0; s && i < NSTORAGES; i++)
    if (storages[i].dtype == s->dtype) d = storages[i].name;
  if (s && s->page_size > 0)
    snprintf(buf, n, "%s-paged (pages of %lld)", d, (long long)s->page_size);
  else
    snprintf(buf, n, "%s", d);
  return buf;
}

void attn_lm_kv_free(attn_lm_kv *c) {
  if (!c) return;
  for (int l = 0; c->kv && l < c->layers; l++)
    attn_kvc_free(c->kv[l]);
  free(c->kv);
  free(c->work);
  memset(c, 0, sizeof *c);
}

attn_status attn_lm_kv_init(attn_lm_kv *c, const attn_lm_kv_spec *spec, int layers, int64_t Hq,
                            int64_t Hkv, int64_t hd, int64_t cap) {
  if (!c) return attn_set_error(ATTN_EINVAL, "lm kv cache: NULL");
  memset(c, 0, sizeof *c);
  const attn_lm_kv_spec f32 = {ATTN_F32, 0};
  if (!spec) spec = &f32;
  if (layers < 1 || Hq < 1 || Hkv < 1 || Hq % Hkv || hd < 1 || cap < 1)
    return attn_set_error(ATTN_EINVAL,
                          "lm kv cache: layers %d, heads %lld / %lld, head_dim %lld, %lld tokens",
                          layers, (long long)Hq, (long long)Hkv, (long long)hd, (long long)cap);
  c->spec = *spec, c->layers = layers, c->Hq = Hq, c->Hkv = Hkv, c->hd = hd, c->cap = cap;
  c->kv = calloc((size_t)layers, sizeof *c->kv);
  if (!c->kv) return attn_set_error(ATTN_ENOMEM, "lm kv cache: out of memory");
  const attn_kvc_config kc = {.dtype = spec->dtype,
                              .B = 1,
                              .Hkv = Hkv,
                              .D = hd,
                              .Dv = hd,
                              .max_len = cap,
                              .page_size = spec->page_size};
  for (int l = 0; l < layers; l++) {
    attn_status st = attn_kvc_create(&c->kv[l], &kc);
    if (st) {
      attn_lm_kv_free(c);
      return st;
    }
  }
  return ATTN_OK;
}

int64_t attn_lm_kv_len(const attn_lm_kv *c, int layer) {
  return c && c->kv && layer >= 0 && layer < c->layers ? attn_kvc_len(c->kv[layer], 0) : 0;
}

static float *work(attn_lm_kv *c, int64_t n) {
  if (n <= c->work_n) return c->work;
  float *w = realloc(c->work, (size_t)n * sizeof *w);
  if (!w) return NULL;
  c->work = w, c->work_n = n;
  return w;
}

/* x [n, H, D] (token-major) -> y [H, n, D], or back with back != 0 */
static void transpose(const float *x, float *y, int64_t n, int64_t H, int64_t D, int back) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t h = 0; h < H; h++) {
      const int64_t tm = (i * H + h) * D, hm = (h * n + i) * D;
      memcpy(y + (back ? tm : hm), x + (back ? hm : tm), (size_t)D * sizeof *y);
    }
}

static attn_status append(attn_lm_kv *c, int layer, const float *k, const float *v, int64_t n,
                          float *kt) {
  if (n == 1) return attn_kvc_append(c->kv[layer], 0, k, v, 1); /* [1, H, D] = [H, 1, D] */
  const int64_t T = n * c->Hkv * c->hd;
  transpose(k, kt, n, c->Hkv, c->hd, 0);
  transpose(v, kt + T, n, c->Hkv, c->hd, 0);
  return attn_kvc_append(c->kv[layer], 0, kt, kt + T, n);
}

/* An empty cache and a prompt: the causal SDPA on the step's f32 q, k, v. */
static attn_status prefill(attn_lm_kv *c, int layer, const float *q, const float *k, const float *v,
                           int64_t n, float *out) {
  const int64_t Hq = c->Hq, Hkv = c->Hkv, D = c->hd;
  float *w = work(c, 2 * n * Hkv * D + Hq * n);
  if (!w)
    return attn_set_error(ATTN_ENOMEM, "lm kv cache: out of memory for %lld tokens", (long long)n);
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, Hq, Hkv, n, n, D, D);
  d.causal = 1;
  const int64_t qs[3] = {n * Hq * D, D, Hq * D}, ks[3] = {n * Hkv * D, D, Hkv * D};
  memcpy(d.q_stride, qs, sizeof qs), memcpy(d.o_stride, qs, sizeof qs);
  memcpy(d.k_stride, ks, sizeof ks), memcpy(d.v_stride, ks, sizeof ks);
  const attn_sdpa_args a = {
      .dtype = ATTN_F32, .path = ATTN_PATH_AUTO, .q = q, .k = k, .v = v, .out = out, .lse = w};
  attn_status st = attn_sdpa_forward(&d, &a);
  return st ? st : append(c, layer, k, v, n, w);
}

/* Chunks of up to ATTN_DECODE_MAX_LQ: append them, then attend (the
 * chunk's queries are the cache's last positions). */
static attn_status decode(attn_lm_kv *c, int layer, const float *q, const float *k, const float *v,
                          int64_t n, float *out) {
  const int64_t Hq = c->Hq, Hkv = c->Hkv, D = c->hd, M = ATTN_DECODE_MAX_LQ;
  float *w = work(c, 2 * M * (Hq + Hkv) * D);
  if (!w) return attn_set_error(ATTN_ENOMEM, "lm kv cache: out of memory");
  float *qt = w, *ot = qt + M * Hq * D, *kt = ot + M * Hq * D;
  for (int64_t i0 = 0; i0 < n; i0 += M) {
    const int64_t m = n - i0 < M ? n - i0 : M;
    const float *qi = q + i0 * Hq * D;
    float *oi = out + i0 * Hq * D;
    attn_status st = append(c, layer, k + i0 * Hkv * D, v + i0 * Hkv * D, m, kt);
    if (st) return st;
    attn_kv_view view;
    attn_decode_desc d;
    if ((st = attn_kvc_view(c->kv[layer], &view))) return st;
    attn_decode_desc_init(&d, 1, Hq, Hkv, m, D, D, c->spec.dtype);
    if (m > 1) transpose(qi, qt, m, Hq, D, 0);
    /* [1, Hq, 1, D] is the token-major row itself */
    if ((st = attn_decode_forward(&d, &view, m > 1 ? qt : qi, m > 1 ? ot : oi, NULL))) return st;
    if (m > 1) transpose(ot, oi, m, Hq, D, 1);
  }
  return ATTN_OK;
}

attn_status attn_lm_kv_step(attn_lm_kv *c, int layer, const float *q, const float *k,
                            const float *v, int64_t n, float *out, float *probs) {
  if (!c || !c->kv || layer < 0 || layer >= c->layers || !q || !k || !v || !out)
    return attn_set_error(ATTN_EINVAL, "lm kv step: bad argument (layer %d)", layer);
  const int64_t len = attn_kvc_len(c->kv[layer], 0);
  if (n < 1 || n > c->cap - len)
    return attn_set_error(ATTN_EINVAL,
                          "lm kv step: %lld new tokens after %lld exceed the cache's %lld",
                          (long long)n, (long long)len, (long long)c->cap);
  const int pre = len == 0 && n > 1;
  attn_status st = pre ? prefill(c, layer, q, k, v, n, out) : decode(c, layer, q, k, v, n, out);
  if (st || !probs) return st;
  /* the keys the attention read: the step's own (prefill) or the cache's */
  return attn_lm_kv_probs(c->kv[layer], pre ? k : NULL, q, c->Hq, n, probs);
}
