/* The incremental decoder's cache (include/attn/nn.h): per layer a
 * self-attention KV cache that grows by one step per token, and the cross
 * K/V of the encoder memory projected once per source batch. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

attn_status attn_decoder_cache_init(attn_decoder_cache *c, const attn_decoder_layer *m,
                                    int n_layers, int64_t B, int64_t cap) {
  if (!c || !m) return attn_set_error(ATTN_EINVAL, "decoder_cache_init: NULL argument");
  memset(c, 0, sizeof *c);
  if (n_layers < 1 || B < 1 || cap < 0)
    return attn_set_error(ATTN_EINVAL, "decoder_cache_init: n_layers %d, B %lld, cap %lld",
                          n_layers, (long long)B, (long long)cap);
  const attn_mha *a = &m->self_attn;
  c->B = B;
  c->E = m->c.d_model;
  c->H = a->c.num_heads;
  c->Hkv = a->c.num_kv_heads;
  c->hd = a->head_dim;
  c->self = calloc((size_t)n_layers, sizeof *c->self);
  if (!c->self) return attn_set_error(ATTN_ENOMEM, "decoder_cache_init: %d layers", n_layers);
  c->n_layers = n_layers;
  c->rows_alloc = B;
  c->cap_alloc = cap;
  for (int l = 0; l < n_layers; l++) {
    attn_status st = attn_kv_cache_init(&c->self[l], B, c->Hkv, c->hd, c->hd, cap);
    if (st) {
      attn_decoder_cache_free(c);
      return st;
    }
  }
  return ATTN_OK;
}

void attn_decoder_cache_free(attn_decoder_cache *c) {
  if (!c) return;
  for (int l = 0; c->self && l < c->n_layers; l++)
    attn_kv_cache_free(&c->self[l]);
  free(c->self);
  free(c->cross_k);
  free(c->cross_v);
  free(c->mem_lens_buf);
  memset(c, 0, sizeof *c);
}

void attn_decoder_cache_reset(attn_decoder_cache *c) {
  for (int l = 0; c && c->self && l < c->n_layers; l++)
    attn_kv_cache_reset(&c->self[l]);
}

attn_status attn_decoder_cache_restart(attn_decoder_cache *c, int64_t B) {
  if (!c || !c->self) return attn_set_error(ATTN_EINVAL, "decoder_cache_restart: no cache");
  if (B < 1) return attn_set_error(ATTN_EINVAL, "decoder_cache_restart: B %lld", (long long)B);
  int fits = B <= c->rows_alloc;
  for (int l = 0; l < c->n_layers; l++) fits = fits && c->self[l].cap == c->cap_alloc;
  for (int l = 0; l < c->n_layers; l++) {
    attn_kv_cache *k = &c->self[l];
    if (fits) {
      k->B = B;
      k->len = 0;
      continue;
    }
    attn_kv_cache_free(k);
    attn_status st = attn_kv_cache_init(k, B, c->Hkv, c->hd, c->hd, c->cap_alloc);
    if (st) { /* the layers before keep B rows: the cache is unusable until a restart succeeds */
      c->B_mem = 0;
      return st;
    }
  }
  if (!fits) c->rows_alloc = B;
  c->B = B;
  c->B_mem = 0;
  c->Lm = 0;
  c->mem_lens = NULL;
  return ATTN_OK;
}

int64_t attn_decoder_cache_len(const attn_decoder_cache *c) {
  return c && c->self ? c->self[0].len : 0;
}

/* cross K/V storage for n floats per tensor per layer */
static attn_status reserve_memory(attn_decoder_cache *c, int64_t n) {
  if (n <= c->mem_cap) return ATTN_OK;
  size_t bytes = (size_t)n * (size_t)c->n_layers * sizeof(float);
  float *k = malloc(bytes), *v = malloc(bytes);
  if (!k || !v) {
    free(k);
    free(v);
    return attn_set_error(ATTN_ENOMEM, "decoder_cache: cannot hold the memory's K/V (%lld floats)",
                          (long long)n);
  }
  free(c->cross_k);
  free(c->cross_v);
  c->cross_k = k;
  c->cross_v = v;
  c->mem_cap = n;
  return ATTN_OK;
}

attn_status attn_decoder_cache_set_memory(attn_decoder_cache *c, const attn_decoder_layer *layers,
                                          const attn_params *p, const attn_nn_ctx *ctx,
                                          const float *memory, int64_t B_mem, int64_t Lm,
                                          const int32_t *mem_lens) {
  if (!c || !c->self || !layers || !p || !memory)
    return attn_set_error(ATTN_EINVAL, "decoder_cache_set_memory: NULL argument or no cache");
  if (B_mem < 1 || Lm < 1 || c->B % B_mem != 0)
    return attn_set_error(ATTN_EINVAL,
                          "decoder_cache_set_memory: B_mem %lld must divide the cache's %lld "
                          "rows; Lm %lld",
                          (long long)B_mem, (long long)c->B, (long long)Lm);
  for (int64_t b = 0; mem_lens && b < B_mem; b++)
    if (mem_lens[b] < 0 || mem_lens[b] > Lm)
      return attn_set_error(ATTN_EINVAL, "decoder_cache_set_memory: mem_lens[%lld] = %d, Lm %lld",
                            (long long)b, (int)mem_lens[b], (long long)Lm);
  const int64_t n = B_mem * Lm * c->Hkv * c->hd;
  attn_status st = reserve_memory(c, n);
  if (st) return st;
  c->B_mem = 0; // invalid until every layer is projected
  int32_t *lens = NULL;
  if (mem_lens) {
    lens = realloc(c->mem_lens_buf, (size_t)B_mem * sizeof(int32_t));
    if (!lens) return attn_set_error(ATTN_ENOMEM, "decoder_cache_set_memory: mem_lens");
    c->mem_lens_buf = lens;
    memcpy(lens, mem_lens, (size_t)B_mem * sizeof(int32_t));
  }
  for (int l = 0; l < c->n_layers && !st; l++) {
    const attn_mha *a = &layers[l].multihead_attn;
    if (a->c.embed_dim != c->E || a->c.num_heads != c->H || a->c.num_kv_heads != c->Hkv)
      return attn_set_error(ATTN_EINVAL,
                            "decoder_cache_set_memory: layer %d does not match the cache", l);
    st = attn_nn_mha_project(a, p, ctx, 1, memory, c->cross_k + l * n, B_mem * Lm);
    if (!st) st = attn_nn_mha_project(a, p, ctx, 2, memory, c->cross_v + l * n, B_mem * Lm);
  }
  if (st) return st;
  c->B_mem = B_mem;
  c->Lm = Lm;
  c->mem_lens = lens;
  return ATTN_OK;
}

/* x [B, Hkv, cap, w] in place: new row b := old row src[b] (first len
 * steps), group rows at a time (src[b] stays within b's group); a group whose
 * rows all keep their own history is not touched, and only the rows another
 * row continues go through tmp. tmp: group * Hkv * len * w. */
static void reorder_rows(const attn_kv_cache *k, float *x, int64_t w, const int64_t *src,
                         int64_t group, float *tmp) {
  const int64_t block = k->Hkv * k->cap * w, span = k->len * w, hs = k->cap * w;
  const size_t bytes = (size_t)span * sizeof(float);
  for (int64_t g0 = 0; g0 < k->B; g0 += group) {
    int moved = 0;
    for (int64_t b = g0; b < g0 + group && !moved; b++) moved = src[b] != b;
    if (!moved) continue;
    for (int64_t b = g0; b < g0 + group; b++) { /* only the rows some other row continues */
      int source = 0;
      for (int64_t r = g0; r < g0 + group && !source; r++) source = src[r] == b && r != b;
      for (int64_t h = 0; source && h < k->Hkv; h++)
        memcpy(tmp + ((b - g0) * k->Hkv + h) * span, x + b * block + h * hs, bytes);
    }
    for (int64_t b = g0; b < g0 + group; b++) {
      if (src[b] == b) continue;
      for (int64_t h = 0; h < k->Hkv; h++)
        memcpy(x + b * block + h * hs, tmp + ((src[b] - g0) * k->Hkv + h) * span, bytes);
    }
  }
}

attn_status attn_decoder_cache_reorder(attn_decoder_cache *c, const int64_t *src) {
  if (!c || !c->self || !src)
    return attn_set_error(ATTN_EINVAL, "decoder_cache_reorder: NULL argument or no cache");
  const int64_t group = c->B_mem > 0 ? c->B / c->B_mem : c->B;
  for (int64_t b = 0; b < c->B; b++)
    if (src[b] < 0 || src[b] >= c->B || src[b] / group != b / group)
      return attn_set_error(ATTN_EINVAL,
                            "decoder_cache_reorder: src[%lld] = %lld (rows %lld, %lld per memory "
                            "row)",
                            (long long)b, (long long)src[b], (long long)c->B, (long long)group);
  // one scratch for every layer, taken before any row moves: a failure leaves the cache as it was
  int64_t most = 0;
  for (int l = 0; l < c->n_layers; l++) {
    const attn_kv_cache *k = &c->self[l];
    const int64_t w = k->len * (k->D > k->Dv ? k->D : k->Dv);
    most = w > most ? w : most;
  }
  if (most == 0) return ATTN_OK;
  float *tmp = malloc((size_t)(group * c->Hkv * most) * sizeof(float));
  if (!tmp) return attn_set_error(ATTN_ENOMEM, "decoder_cache_reorder: %lld rows", (long long)c->B);
  for (int l = 0; l < c->n_layers; l++) {
    attn_kv_cache *k = &c->self[l];
    if (k->len == 0) continue;
    reorder_rows(k, k->k, k->D, src, group, tmp);
    reorder_rows(k, k->v, k->Dv, src, group, tmp);
  }
  free(tmp);
  return ATTN_OK;
}

/* x [B, Hkv, cap, w]: rows g*i .. g*i+g-1 := old rows g*keep[i] .. (first len steps) */
static void keep_rows(const attn_kv_cache *k, float *x, int64_t w, const int64_t *keep, int64_t n,
                      int64_t g) {
  const int64_t block = k->Hkv * k->cap * w, hs = k->cap * w;
  const size_t bytes = (size_t)(k->len * w) * sizeof(float);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; keep[i] != i && j < g; j++)
      for (int64_t h = 0; h < k->Hkv; h++)
        memcpy(x + (i * g + j) * block + h * hs, x + (keep[i] * g + j) * block + h * hs, bytes);
}

attn_status attn_decoder_cache_keep(attn_decoder_cache *c, const int64_t *keep, int64_t n) {
  if (!c || !c->self || !keep || c->B_mem < 1)
    return attn_set_error(ATTN_EINVAL, "decoder_cache_keep: NULL argument, no cache or no memory");
  if (n < 1 || n > c->B_mem)
    return attn_set_error(ATTN_EINVAL, "decoder_cache_keep: %lld of %lld memory rows",
                          (long long)n, (long long)c->B_mem);
  for (int64_t i = 0; i < n; i++)
    if (keep[i] < 0 || keep[i] >= c->B_mem || (i > 0 && keep[i] <= keep[i - 1]))
      return attn_set_error(ATTN_EINVAL,
                            "decoder_cache_keep: keep[%lld] = %lld (increasing, below %lld)",
                            (long long)i, (long long)keep[i], (long long)c->B_mem);
  const int64_t g = c->B / c->B_mem, row = c->Lm * c->Hkv * c->hd;
  const int64_t nm = c->B_mem * row, nn = n * row;
  for (int l = 0; l < c->n_layers; l++) {
    attn_kv_cache *k = &c->self[l];
    keep_rows(k, k->k, k->D, keep, n, g);
    keep_rows(k, k->v, k->Dv, keep, n, g);
    k->B = n * g;
    // destinations only ever below the sources still to read: memmove in order
    for (int64_t i = 0; i < n; i++) {
      memmove(c->cross_k + l * nn + i * row, c->cross_k + l * nm + keep[i] * row,
              (size_t)row * sizeof(float));
      memmove(c->cross_v + l * nn + i * row, c->cross_v + l * nm + keep[i] * row,
              (size_t)row * sizeof(float));
    }
  }
  for (int64_t i = 0; c->mem_lens && i < n; i++)
    c->mem_lens_buf[i] = c->mem_lens_buf[keep[i]];
  c->B_mem = n;
  c->B = n * g;
  return ATTN_OK;
}
