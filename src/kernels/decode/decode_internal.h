/* Decode attention's loop (decode.c), checks (decode_check.c) and the
 * addressing of a view's rows, shared with the cache (kvc.c). Internal. */
#ifndef ATTN_DECODE_INTERNAL_H
#define ATTN_DECODE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "attn/decode.h"
#include "core/checked.h"

/* The descriptor and the view, every field and page checked (attn/decode.h). */
attn_status attn_decode_check(const attn_decode_desc *d, const attn_kv_view *kv, const float *q,
                              const float *out);

/* Index (in rows of its tensor) of token t of sequence b, KV head g: the row
 * k + index * D, v + index * Dv, k_scale + index. The view must have passed
 * attn_decode_check and t < seq_lens[b]. */
static inline int64_t attn_kv_row(const attn_kv_view *kv, int64_t b, int64_t g, int64_t t) {
  if (kv->page_size == 0) return (b * kv->Hkv + g) * kv->capacity + t;
  const int64_t page = kv->block_table[b * kv->block_table_stride + t / kv->page_size];
  return (page * kv->Hkv + g) * kv->page_size + t % kv->page_size;
}

/* Rows t, t+1, ... of (b, g) in order without a division per row: the
 * page and the slot advance together (contiguous: one page of capacity
 * rows). Same preconditions as attn_kv_row. */
typedef struct {
  const attn_kv_view *kv;
  int64_t b, g, p, slot, base, rows; /* page index in the table, slot, its first row, page rows */
} attn_kv_cursor;

static inline void attn_kv_cursor_init(attn_kv_cursor *c, const attn_kv_view *kv, int64_t b,
                                       int64_t g, int64_t t) {
  c->kv = kv, c->b = b, c->g = g;
  c->rows = kv->page_size ? kv->page_size : kv->capacity;
  c->p = t / c->rows;
  c->slot = t % c->rows;
  const int64_t page = kv->page_size ? kv->block_table[b * kv->block_table_stride + c->p] : b;
  c->base = (page * kv->Hkv + g) * c->rows;
}

/* the row of the cursor's token, then the cursor on the next token (whose
 * page is looked up only when the next row is asked for) */
static inline int64_t attn_kv_cursor_next(attn_kv_cursor *c) {
  if (c->slot == c->rows) { /* the previous row ended a page */
    const attn_kv_view *kv = c->kv;
    c->p++;
    c->slot = 0;
    c->base = (kv->block_table[c->b * kv->block_table_stride + c->p] * kv->Hkv + c->g) * c->rows;
  }
  return c->base + c->slot++;
}

/* The int8 tiled layout (attn/decode.h, ATTN_KV_I8_TILED): the byte of row
 * i (the index attn_kv_row gives), element d of K, column c of V. A tile
 * of 16 rows, or a quad of 4, never straddles two (page, head) blocks: their
 * rows are a multiple of 16. */
static inline int64_t attn_kv_tk(int64_t D, int64_t i, int64_t d) {
  return (i >> 4) * 16 * D + (d >> 2) * 64 + (i & 15) * 4 + (d & 3);
}
static inline int64_t attn_kv_tv(int64_t Dv, int64_t i, int64_t c) {
  return (i >> 2) * 4 * Dv + 4 * c + (i & 3);
}

/* Row i of a tiled K (D bytes, stored as k + 128) or V (Dv) out of, or
 * into, the cache's bytes. */
static inline void attn_kv_tk_get(const uint8_t *k, int64_t D, int64_t i, int8_t *row) {
  for (int64_t d = 0; d < D; d++)
    row[d] = (int8_t)(k[attn_kv_tk(D, i, d)] ^ 0x80);
}
static inline void attn_kv_tk_put(uint8_t *k, int64_t D, int64_t i, const int8_t *row) {
  for (int64_t d = 0; d < D; d++)
    k[attn_kv_tk(D, i, d)] = (uint8_t)row[d] ^ 0x80;
}
static inline void attn_kv_tv_get(const uint8_t *v, int64_t Dv, int64_t i, int8_t *row) {
  for (int64_t c = 0; c < Dv; c++)
    row[c] = (int8_t)v[attn_kv_tv(Dv, i, c)];
}
static inline void attn_kv_tv_put(uint8_t *v, int64_t Dv, int64_t i, const int8_t *row) {
  for (int64_t c = 0; c < Dv; c++)
    v[attn_kv_tv(Dv, i, c)] = (uint8_t)row[c];
}

/* 1 when the view is int8 in the tiled layout */
static inline int attn_kv_tiled(const attn_kv_view *kv) { return kv->layout == ATTN_KV_I8_TILED; }

/* The K-tiled layout (ATTN_KV_K_TILED, 16-bit elements): the element of
 * row i (the index attn_kv_row gives), column d of K. Like the int8 tiles,
 * a tile of 16 rows never straddles two (page, head) blocks, and the tile
 * of rows 16 m .. 16 m + 15 holds the same bytes of the pool as those rows
 * do in the row layout. */
static inline int64_t attn_kv_kt(int64_t D, int64_t i, int64_t d) {
  return (i >> 4) * 16 * D + d * 16 + (i & 15);
}
static inline void attn_kv_kt_get(const uint16_t *k, int64_t D, int64_t i, uint16_t *row) {
  for (int64_t d = 0; d < D; d++)
    row[d] = k[attn_kv_kt(D, i, d)];
}
static inline void attn_kv_kt_put(uint16_t *k, int64_t D, int64_t i, const uint16_t *row) {
  for (int64_t d = 0; d < D; d++)
    k[attn_kv_kt(D, i, d)] = row[d];
}

/* The threads' runs of work items (decode.c's loop). Consecutive items of a
 * (sequence, KV head) are consecutive chunks of its rows, adjacent in
 * memory: a thread that takes them in order reads one stream, which the
 * L2's stream prefetcher keeps running, where items handed out one at a
 * time across the threads (the loop until 2026-12-05) made each item's
 * start a cold one (at Lk 32k on 2 threads the same items ran 1.2-1.4x
 * faster so: docs/DECODE.md). Thread t of T owns the contiguous run of
 * items [n t / T, n (t + 1) / T) and takes them from its front; when its
 * run is done it takes the back half of the run with the most items left
 * (vCPUs are not always equally fast). Which thread runs an item never
 * changes the item's arithmetic. A run is [lo, hi) in one word (lo in the
 * low 32 bits; n < 2^32), on a cache line of its own. */
typedef struct {
  _Atomic uint64_t r;
  char pad[56];
} attn_decode_run;

/* runs[t] set to thread t's share of n items (each thread its own, before
 * any thread claims) */
void attn_decode_run_init(attn_decode_run *runs, int T, int t, int64_t n);

/* The next item for thread t: the front of runs[t], else the back half of
 * the fullest run moved to runs[t] and its first item; -1 when no run has
 * an item left. Each of the n items is returned exactly once in all, with
 * any number of threads claiming at once. */
int64_t attn_decode_claim(attn_decode_run *runs, int T, int t);

#endif
