/* attn_kvc (attn/decode.h): a KV cache that owns its memory, in the layout
 * of attn_kv_view, contiguous or paged. Paged: one pool of num_pages pages,
 * a free list (a stack: pages leave in ascending order from a fresh pool),
 * a block table per sequence, -1 where no page is assigned. Rows arrive in
 * f32 and are stored in the cache's dtype (the level's conversions; int8:
 * symmetric, one scale per token and head), int8 in rows or in the tiled
 * layout, f16 and bf16 in rows or with K in tiles (attn/decode.h;
 * decode_internal.h addresses their elements). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

#include "attn/tensor.h"
#include "kernels/decode/decode_internal.h"
#include "kernels/kern.h"
#include "kernels/util.h"

struct attn_kvc {
  attn_kvc_config cfg;
  int64_t elt;
  int64_t nblocks, rows; /* contiguous: B blocks of max_len rows; paged: pages of page_size */
  int64_t bt_stride;     /* paged: pages per sequence at max_len */
  void *k, *v;
  float *ks, *vs;        /* int8 only */
  int32_t *lens, *table; /* [B], paged: [B, bt_stride] */
  int32_t *free_pages;   /* paged: a stack of nfree pages */
  int64_t nfree;
  int layout;   /* ATTN_KV_ROWS, ATTN_KV_I8_TILED or ATTN_KV_K_TILED */
  int8_t *row8; /* int8: one row's values, max(D, Dv) */
};

static int64_t pages_for(const attn_kvc *c, int64_t len) {
  return c->cfg.page_size ? attn_ceil_div(len, c->cfg.page_size) : 0;
}

attn_status attn_kvc_view(const attn_kvc *c, attn_kv_view *v) {
  if (!c || !v) return attn_set_error(ATTN_EINVAL, "kvc view: NULL %s", !c ? "cache" : "view");
  memset(v, 0, sizeof *v);
  v->dtype = c->cfg.dtype;
  v->B = c->cfg.B, v->Hkv = c->cfg.Hkv, v->D = c->cfg.D, v->Dv = c->cfg.Dv;
  v->seq_lens = c->lens;
  v->k = c->k, v->v = c->v;
  v->k_scale = c->ks, v->v_scale = c->vs;
  v->layout = c->layout;
  if (c->cfg.page_size) {
    v->page_size = c->cfg.page_size;
    v->num_pages = c->nblocks;
    v->block_table = c->table;
    v->block_table_stride = c->bt_stride;
  } else {
    v->capacity = c->rows;
  }
  return ATTN_OK;
}

void attn_kvc_free(attn_kvc *c) {
  if (!c) return;
  free(c->k), free(c->v), free(c->ks), free(c->vs);
  free(c->lens), free(c->table), free(c->free_pages), free(c->row8);
  free(c);
}

void attn_kvc_reset(attn_kvc *c) {
  if (!c) return;
  memset(c->lens, 0, (size_t)c->cfg.B * sizeof(int32_t));
  if (!c->cfg.page_size) return;
  for (int64_t i = 0; i < c->cfg.B * c->bt_stride; i++)
    c->table[i] = -1;
  for (int64_t i = 0; i < c->nblocks; i++)
    c->free_pages[i] = (int32_t)(c->nblocks - 1 - i);
  c->nfree = c->nblocks;
}

static void *alloc_bytes(int64_t a, int64_t b, int64_t w, int64_t elt) {
  int64_t n;
  if (attn_ck_mul(a, b, &n) || attn_ck_mul(n, w, &n) || attn_ck_mul(n, elt, &n) ||
      (uint64_t)n > SIZE_MAX)
    return NULL;
  return malloc(n > 0 ? (size_t)n : 1);
}

/* The K/V pools: from 2 MiB up, aligned to 2 MiB and marked for
 * transparent huge pages where the kernel offers them (madvise mode), so
 * that a long cache, and a paged one read in any page order, do not miss
 * the TLB every 4 KiB. Freed with free(). */
static void *alloc_pool(int64_t a, int64_t b, int64_t w, int64_t elt) {
  int64_t n;
  if (attn_ck_mul(a, b, &n) || attn_ck_mul(n, w, &n) || attn_ck_mul(n, elt, &n) ||
      (uint64_t)n > SIZE_MAX)
    return NULL;
  const size_t huge = (size_t)2 << 20;
  if ((size_t)n < huge) return malloc(n > 0 ? (size_t)n : 1);
  void *p = NULL;
  if (posix_memalign(&p, huge, (size_t)n)) return NULL;
#if defined(MADV_HUGEPAGE)
  (void)madvise(p, (size_t)n, MADV_HUGEPAGE); /* advice: ignored where not offered */
#endif
  return p;
}

attn_status attn_kvc_create(attn_kvc **out, const attn_kvc_config *cfg) {
  if (!out || !cfg) return attn_set_error(ATTN_EINVAL, "kvc: NULL %s", !out ? "out" : "config");
  *out = NULL;
  const int t = cfg->dtype;
  if (t != ATTN_F32 && t != ATTN_F16 && t != ATTN_BF16 && t != ATTN_I8)
    return attn_set_error(ATTN_EINVAL, "kvc: dtype %d is no cache type (F32, F16, BF16, I8)", t);
  if (cfg->B < 1 || cfg->Hkv < 1 || cfg->D < 1 || cfg->Dv < 1)
    return attn_set_error(ATTN_EINVAL, "kvc: B %lld, Hkv %lld, D %lld, Dv %lld must be >= 1",
                          (long long)cfg->B, (long long)cfg->Hkv, (long long)cfg->D,
                          (long long)cfg->Dv);
  if (cfg->max_len < 1 || cfg->max_len > INT32_MAX)
    return attn_set_error(ATTN_EINVAL, "kvc: max_len %lld (1..2^31-1)", (long long)cfg->max_len);
  if (cfg->page_size < 0 || cfg->num_pages < 0 || cfg->num_pages > INT32_MAX ||
      (cfg->page_size == 0 && cfg->num_pages))
    return attn_set_error(ATTN_EINVAL,
                          "kvc: page_size %lld, num_pages %lld (page_size 0: "
                          "contiguous, no pool)",
                          (long long)cfg->page_size, (long long)cfg->num_pages);
  /* the tiled layouts: asked for, or the library's choice where the level
   * has their kernels */
  const int tile_shapes =
      t == ATTN_I8 && cfg->D % 4 == 0 && cfg->Dv % 16 == 0 && cfg->page_size % 16 == 0;
  const int ktile_shapes = (t == ATTN_F16 || t == ATTN_BF16) && cfg->page_size % 16 == 0;
  int layout = cfg->layout;
  if (layout != 0 && layout != ATTN_KV_ROWS && layout != ATTN_KV_I8_TILED &&
      layout != ATTN_KV_K_TILED)
    return attn_set_error(ATTN_EINVAL,
                          "kvc: layout %d (0: the library's choice, ATTN_KV_ROWS %d, "
                          "ATTN_KV_I8_TILED %d, ATTN_KV_K_TILED %d)",
                          layout, ATTN_KV_ROWS, ATTN_KV_I8_TILED, ATTN_KV_K_TILED);
  if (layout == ATTN_KV_K_TILED && !ktile_shapes)
    return attn_set_error(ATTN_EINVAL,
                          "kvc: the K-tiled layout needs an F16 or BF16 cache with page_size %% "
                          "16 == 0 (dtype %s, page_size %lld)",
                          attn_dtype_name((attn_dtype)t), (long long)cfg->page_size);
  if (layout == ATTN_KV_I8_TILED && !tile_shapes)
    return attn_set_error(ATTN_EINVAL,
                          "kvc: the int8 tiled layout needs an I8 cache with D %% 4 == 0, Dv %% "
                          "16 == 0 and page_size %% 16 == 0 (dtype %s, D %lld, Dv %lld, "
                          "page_size %lld)",
                          attn_dtype_name((attn_dtype)t), (long long)cfg->D, (long long)cfg->Dv,
                          (long long)cfg->page_size);
  if (layout == 0) {
    const attn_decode_ops *ops = attn_kern_get()->decode;
    layout = tile_shapes && ops->scores_i8t && ops->pv_i8t && cfg->D <= ATTN_DECODE_I8DOT_MAX_D
                 ? ATTN_KV_I8_TILED
             : ktile_shapes && ops->scores_kt ? ATTN_KV_K_TILED
                                              : ATTN_KV_ROWS;
  }
  attn_kvc *c = calloc(1, sizeof *c);
  if (!c) return attn_set_error(ATTN_ENOMEM, "kvc: no memory");
  c->cfg = *cfg;
  c->layout = layout;
  c->elt = (int64_t)attn_dtype_size((attn_dtype)t);
  if (cfg->page_size) {
    c->rows = cfg->page_size;
    c->bt_stride = attn_ceil_div(cfg->max_len, cfg->page_size);
    int64_t all;
    if (attn_ck_mul(c->bt_stride, cfg->B, &all)) all = INT32_MAX;
    c->nblocks = cfg->num_pages ? cfg->num_pages : all;
    if (c->nblocks > INT32_MAX) {
      attn_kvc_free(c);
      return attn_set_error(ATTN_EINVAL, "kvc: %lld pages are too many (set num_pages)",
                            (long long)c->nblocks);
    }
    c->table = alloc_bytes(cfg->B, c->bt_stride, 1, sizeof(int32_t));
    c->free_pages = alloc_bytes(c->nblocks, 1, 1, sizeof(int32_t));
  } else { /* tiled: a sequence's block of whole tiles */
    c->rows = layout != ATTN_KV_ROWS ? attn_round_up(cfg->max_len, 16) : cfg->max_len;
    c->nblocks = cfg->B;
  }
  c->lens = alloc_bytes(cfg->B, 1, 1, sizeof(int32_t));
  c->k = alloc_pool(c->nblocks * cfg->Hkv, c->rows, cfg->D, c->elt);
  c->v = alloc_pool(c->nblocks * cfg->Hkv, c->rows, cfg->Dv, c->elt);
  int bad = !c->lens || !c->k || !c->v || (cfg->page_size && (!c->table || !c->free_pages));
  if (t == ATTN_I8) {
    c->ks = alloc_pool(c->nblocks * cfg->Hkv, c->rows, 1, sizeof(float));
    c->vs = alloc_pool(c->nblocks * cfg->Hkv, c->rows, 1, sizeof(float));
    c->row8 = malloc((size_t)(cfg->D > cfg->Dv ? cfg->D : cfg->Dv));
    bad |= !c->ks || !c->vs || !c->row8;
  }
  if (bad) {
    attn_kvc_free(c);
    return attn_set_error(ATTN_ENOMEM, "kvc: no memory for %lld x %lld rows of %lld + %lld %s",
                          (long long)c->nblocks, (long long)c->rows, (long long)cfg->D,
                          (long long)cfg->Dv, attn_dtype_name((attn_dtype)t));
  }
  attn_kvc_reset(c);
  *out = c;
  return ATTN_OK;
}

static attn_status check_seq(const attn_kvc *c, int64_t b, const char *what) {
  if (!c) return attn_set_error(ATTN_EINVAL, "kvc %s: NULL cache", what);
  if (b < 0 || b >= c->cfg.B)
    return attn_set_error(ATTN_EINVAL, "kvc %s: sequence %lld outside 0..%lld", what, (long long)b,
                          (long long)c->cfg.B - 1);
  return ATTN_OK;
}

int64_t attn_kvc_len(const attn_kvc *c, int64_t b) {
  return c && b >= 0 && b < c->cfg.B ? c->lens[b] : -1;
}

/* row index of token t of (b, g) (its page assigned) */
static int64_t row_of(const attn_kvc *c, int64_t b, int64_t g, int64_t t) {
  attn_kv_view v;
  attn_kvc_view(c, &v);
  return attn_kv_row(&v, b, g, t);
}

/* the int8 values of row `row` of K (is_v 0) or V stored: a row of the
 * pool, or the tiled layout's bytes */
static void put_i8(const attn_kvc *c, int is_v, int64_t row, const int8_t *x) {
  const int64_t w = is_v ? c->cfg.Dv : c->cfg.D;
  uint8_t *base = is_v ? c->v : c->k;
  if (c->layout != ATTN_KV_I8_TILED)
    memcpy(base + row * w, x, (size_t)w);
  else if (is_v)
    attn_kv_tv_put(base, w, row, x);
  else
    attn_kv_tk_put(base, w, row, x);
}

static void get_i8(const attn_kvc *c, int is_v, int64_t row, int8_t *x) {
  const int64_t w = is_v ? c->cfg.Dv : c->cfg.D;
  const uint8_t *base = is_v ? c->v : c->k;
  if (c->layout != ATTN_KV_I8_TILED)
    memcpy(x, base + row * w, (size_t)w);
  else if (is_v)
    attn_kv_tv_get(base, w, row, x);
  else
    attn_kv_tk_get(base, w, row, x);
}

enum { KT_PIECE = 64 }; /* K-tiled rows: elements converted at a time */

/* one f32 row x [w] stored as row `row` of K (is_v 0) or V (and its int8
 * scale) */
static void store_row(attn_kvc *c, const float *x, int is_v, int64_t row) {
  const attn_row_ops *ro = &attn_kern_get()->row;
  const int64_t w = is_v ? c->cfg.Dv : c->cfg.D;
  void *dst = (char *)(is_v ? c->v : c->k) + row * w * c->elt;
  if (!is_v && c->layout == ATTN_KV_K_TILED) { /* converted a piece at a time, then put */
    uint16_t h[KT_PIECE];
    for (int64_t d0 = 0; d0 < w; d0 += KT_PIECE) {
      const int64_t n = attn_min64(KT_PIECE, w - d0);
      if (c->cfg.dtype == ATTN_F16)
        ro->f32_to_f16(x + d0, h, n);
      else
        ro->f32_to_bf16(x + d0, h, n);
      for (int64_t d = 0; d < n; d++)
        ((uint16_t *)c->k)[attn_kv_kt(w, row, d0 + d)] = h[d];
    }
    return;
  }
  switch (c->cfg.dtype) {
  case ATTN_F16: ro->f32_to_f16(x, dst, w); break;
  case ATTN_BF16: ro->f32_to_bf16(x, dst, w); break;
  case ATTN_I8: {
    float amax = 0.0f;
    for (int64_t i = 0; i < w; i++)
      amax = fmaxf(amax, fabsf(x[i]));
    const float s = amax / 127.0f;
    int8_t *q = c->row8;
    for (int64_t i = 0; i < w; i++) { /* NaN, inf / inf: 0 (never a cast out of range) */
      const float y = s > 0.0f ? nearbyintf(x[i] / s) : 0.0f;
      q[i] = (int8_t)(y >= -127.0f && y <= 127.0f ? y
                      : y > 127.0f                ? 127.0f
                      : y < -127.0f               ? -127.0f
                                                  : 0.0f);
    }
    (is_v ? c->vs : c->ks)[row] = s;
    put_i8(c, is_v, row, q);
    break;
  }
  default: memcpy(dst, x, (size_t)w * sizeof(float));
  }
}

static void release_pages(attn_kvc *c, int64_t b, int64_t keep) {
  int32_t *row = c->table + b * c->bt_stride;
  for (int64_t p = pages_for(c, c->lens[b]) - 1; p >= keep; p--) {
    c->free_pages[c->nfree++] = row[p];
    row[p] = -1;
  }
}

attn_status attn_kvc_append(attn_kvc *c, int64_t b, const float *k_new, const float *v_new,
                            int64_t n) {
  attn_status s = check_seq(c, b, "append");
  if (s) return s;
  if (n < 0 || n > c->cfg.max_len - c->lens[b])
    return attn_set_error(ATTN_EINVAL,
                          "kvc append: %lld tokens to sequence %lld of %d (max_len "
                          "%lld)",
                          (long long)n, (long long)b, c->lens[b], (long long)c->cfg.max_len);
  if (n == 0) return ATTN_OK;
  if (!k_new || !v_new)
    return attn_set_error(ATTN_EINVAL, "kvc append: %s is NULL", !k_new ? "k_new" : "v_new");
  const int64_t len = c->lens[b], Hkv = c->cfg.Hkv, D = c->cfg.D, Dv = c->cfg.Dv;
  if (c->cfg.page_size) {
    const int64_t have = pages_for(c, len), need = pages_for(c, len + n);
    if (need - have > c->nfree)
      return attn_set_error(ATTN_ENOMEM,
                            "kvc append: the pool of %lld pages is full (%lld "
                            "free, sequence %lld needs %lld more)",
                            (long long)c->nblocks, (long long)c->nfree, (long long)b,
                            (long long)(need - have));
    for (int64_t p = have; p < need; p++)
      c->table[b * c->bt_stride + p] = c->free_pages[--c->nfree];
  }
  c->lens[b] = (int32_t)(len + n);
  for (int64_t g = 0; g < Hkv; g++)
    for (int64_t t = 0; t < n; t++) {
      const int64_t row = row_of(c, b, g, len + t);
      store_row(c, k_new + (g * n + t) * D, 0, row);
      store_row(c, v_new + (g * n + t) * Dv, 1, row);
    }
  return ATTN_OK;
}

attn_status attn_kvc_truncate(attn_kvc *c, int64_t b, int64_t len) {
  attn_status s = check_seq(c, b, "truncate");
  if (s) return s;
  if (len < 0 || len > c->lens[b])
    return attn_set_error(ATTN_EINVAL, "kvc truncate: length %lld for sequence %lld of %d",
                          (long long)len, (long long)b, c->lens[b]);
  if (c->cfg.page_size) release_pages(c, b, pages_for(c, len));
  c->lens[b] = (int32_t)len;
  return ATTN_OK;
}

attn_status attn_kvc_copy_seq(attn_kvc *c, int64_t dst, int64_t src) {
  attn_status s = check_seq(c, dst, "copy (dst)");
  if (!s) s = check_seq(c, src, "copy (src)");
  if (s || dst == src) return s;
  const int64_t len = c->lens[src];
  if (c->cfg.page_size) {
    if (pages_for(c, len) > c->nfree + pages_for(c, c->lens[dst]))
      return attn_set_error(ATTN_ENOMEM, "kvc copy: the pool of %lld pages is full",
                            (long long)c->nblocks);
    release_pages(c, dst, 0);
    for (int64_t p = 0; p < pages_for(c, len); p++)
      c->table[dst * c->bt_stride + p] = c->free_pages[--c->nfree];
  }
  c->lens[dst] = (int32_t)len;
  const int64_t kb = c->cfg.D * c->elt, vb = c->cfg.Dv * c->elt;
  for (int64_t g = 0; g < c->cfg.Hkv; g++)
    for (int64_t t = 0; t < len; t++) {
      const int64_t from = row_of(c, src, g, t), to = row_of(c, dst, g, t);
      if (c->layout != ATTN_KV_ROWS && t % 16 == 0 && t + 16 <= len) {
        /* a whole tile (and its 4 quads, or its 16 V rows): the same bytes
         * at the same place of its page, as the slots of t .. t + 15 are
         * the same in both */
        memcpy((char *)c->k + to * kb, (const char *)c->k + from * kb, (size_t)(16 * kb));
        memcpy((char *)c->v + to * vb, (const char *)c->v + from * vb, (size_t)(16 * vb));
        if (c->ks) {
          memcpy(c->ks + to, c->ks + from, 16 * sizeof(float));
          memcpy(c->vs + to, c->vs + from, 16 * sizeof(float));
        }
        t += 15;
        continue;
      }
      if (c->layout == ATTN_KV_I8_TILED) {
        for (int is_v = 0; is_v < 2; is_v++)
          get_i8(c, is_v, from, c->row8), put_i8(c, is_v, to, c->row8);
      } else if (c->layout == ATTN_KV_K_TILED) {
        uint16_t *k = c->k;
        for (int64_t d = 0; d < c->cfg.D; d++)
          k[attn_kv_kt(c->cfg.D, to, d)] = k[attn_kv_kt(c->cfg.D, from, d)];
        memcpy((char *)c->v + to * vb, (const char *)c->v + from * vb, (size_t)vb);
      } else {
        memcpy((char *)c->k + to * kb, (const char *)c->k + from * kb, (size_t)kb);
        memcpy((char *)c->v + to * vb, (const char *)c->v + from * vb, (size_t)vb);
      }
      if (c->ks) c->ks[to] = c->ks[from], c->vs[to] = c->vs[from];
    }
  return ATTN_OK;
}

/* x [w] := row `row` of K (is_v 0) or V, widened */
static void widen_row(const attn_kvc *c, int is_v, int64_t row, float *x) {
  const attn_row_ops *ro = &attn_kern_get()->row;
  const int64_t w = is_v ? c->cfg.Dv : c->cfg.D;
  const void *src = (const char *)(is_v ? c->v : c->k) + row * w * c->elt;
  if (!is_v && c->layout == ATTN_KV_K_TILED) { /* taken out a piece at a time, then widened */
    uint16_t h[KT_PIECE];
    for (int64_t d0 = 0; d0 < w; d0 += KT_PIECE) {
      const int64_t n = attn_min64(KT_PIECE, w - d0);
      for (int64_t d = 0; d < n; d++)
        h[d] = ((const uint16_t *)c->k)[attn_kv_kt(w, row, d0 + d)];
      if (c->cfg.dtype == ATTN_F16)
        ro->f16_to_f32(h, x + d0, n);
      else
        ro->bf16_to_f32(h, x + d0, n);
    }
    return;
  }
  switch (c->cfg.dtype) {
  case ATTN_F16: ro->f16_to_f32(src, x, w); break;
  case ATTN_BF16: ro->bf16_to_f32(src, x, w); break;
  case ATTN_I8: {
    const float scale = (is_v ? c->vs : c->ks)[row];
    const uint8_t *base = is_v ? c->v : c->k;
    for (int64_t i = 0; i < w; i++) {
      const int8_t q = c->layout != ATTN_KV_I8_TILED ? (int8_t)base[row * w + i]
                       : is_v                        ? (int8_t)base[attn_kv_tv(w, row, i)]
                                                     : (int8_t)(base[attn_kv_tk(w, row, i)] ^ 0x80);
      x[i] = scale * (float)q;
    }
    break;
  }
  default: memcpy(x, src, (size_t)w * sizeof(float));
  }
}

attn_status attn_kvc_read(const attn_kvc *c, int64_t b, int64_t g, int64_t t, float *k, float *v) {
  attn_status s = check_seq(c, b, "read");
  if (s) return s;
  if (g < 0 || g >= c->cfg.Hkv || t < 0 || t >= c->lens[b])
    return attn_set_error(ATTN_EINVAL,
                          "kvc read: head %lld, token %lld of sequence %lld (%d "
                          "tokens, %lld heads)",
                          (long long)g, (long long)t, (long long)b, c->lens[b],
                          (long long)c->cfg.Hkv);
  const int64_t row = row_of(c, b, g, t);
  if (k) widen_row(c, 0, row, k);
  if (v) widen_row(c, 1, row, v);
  return ATTN_OK;
}
