/* Decode attention (attn/decode.h): split-KV ("flash-decoding") over a KV
 * cache of any storage (decode_check.c checks it, decode_internal.h
 * addresses it).
 *
 * Work items: (sequence b, KV head g, chunk of tokens). The chunk size is
 * attn_decode_chunk(seq_lens[b]), so the items, their blocks of
 * ATTN_DECODE_NB rows and each item's arithmetic do not depend on the
 * thread count; an item keeps, for each of its R = (Hq / Hkv) Lq query
 * rows, the running max m, the sum l and the unnormalised output acc
 * (online softmax). The items of a (b, g) are then merged in chunk order:
 *   M = max_c m_c,  L = sum_c l_c e^(m_c - M),  out = sum_c acc_c e^(m_c - M) / L,
 * the sink joining L at the end as in the SDPA's row finish, lse = M + log L.
 *
 * Per block: the level's `scores` micro-kernel (each K row widened once,
 * dotted with all R rows), then on the R x NB score tile the int8 scale,
 * the score-modifier stage's tile units (sdpa_stage.h, as the SDPA loops
 * run them), the key interval of each row, ALiBi and the online softmax (the
 * level's exp_sub_sum), then `pv` (each V row widened once, into all R
 * accumulators). The next block's rows are prefetched while one runs, and
 * during an item's last block the first rows of the item its thread runs
 * next: a paged cache's pages are not one stream the hardware prefetcher
 * follows; and the first lines of each 4 KiB region (or page) two blocks
 * ahead, to start that prefetcher there (warm_regions).
 *
 * Threads: each owns a contiguous run of the wave's units and takes them in
 * order (attn_decode_claim: consecutive chunks of a head are one stream in
 * memory), stealing from the fullest run when its own is done. A unit is one
 * item, or, with pages of at most a block, a chunk's KV heads run together
 * block by block (run_unit). Neither changes an item's arithmetic. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/tensor.h"
#include "kernels/cpu.h"
#include "kernels/decode/decode_internal.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/util.h"

enum { NB = ATTN_DECODE_NB };

/* partial results of a wave of items kept under this many floats (the
 * waves never change the bits: items and merges are the same) */
static const int64_t WAVE_FLOATS = (int64_t)1 << 22;

int64_t attn_decode_chunk(int64_t len) {
  const int64_t per = attn_round_up(attn_ceil_div(len > 0 ? len : 0, 64), 64);
  return per > 256 ? per : 256;
}

void attn_decode_desc_init(attn_decode_desc *d, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq,
                           int64_t D, int64_t Dv, int kv_dtype) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->B = B, d->Hq = Hq, d->Hkv = Hkv, d->Lq = Lq, d->D = D, d->Dv = Dv;
  d->kv_dtype = kv_dtype;
  d->causal = 1;
  d->window_left = -1;
}

typedef struct {
  const attn_decode_desc *d;
  const attn_kv_view *kv;
  const float *q;
  const attn_kern *kern;
  attn_sdpa_desc mods; /* the call's score modifiers for the SDPA's stage */
  int staged;          /* a tile unit is present (attn_stage_has_tile) */
  float scale;
  int64_t G, R, elt, stride; /* stride: floats of one item's state, R (Dv + 2) */
  int i8dot;                 /* int8 scores through the level's scores_i8: */
  int8_t *q8;                /* every query row times the scale, quantised [B, Hq, Lq, ldq] */
  float *qscale, *qsum;      /* their scales and sums of q8 [B, Hq, Lq] */
  int64_t ldq;               /* its quantised rows' stride: D rounded up to 64 */
  int i8pv;                  /* int8 P·V through the level's pv_i8 */
  int tiled;                 /* the int8 tiled layout (attn/decode.h) */
  int ktiled;                /* the K-tiled layout (f16, bf16) */
  int bf16pv, bf16qk;        /* bf16 P·V and (K-tiled) scores through the level's dot product */
  int64_t ldb;               /* bf16qk: a query row's bf16 elements (D rounded up to even) */
  int pf_l2;                 /* prefetches into L2 only (attn_cpu_decode_pf_l2) */
} call_t;

typedef struct {
  int64_t b, g, t0, t1;
} item_t;

typedef struct {
  float *qs, *s, *p, *corr, *slope;
  int64_t *pos, *lo, *hi;
  int64_t lo_max, hi_min; /* keys from lo_max to hi_min - 1: allowed for every row */
  int8_t *rows8;          /* tiled layout: a block's rows for the row kernels [NB, D + Dv] */
  uint16_t *rows16;       /* K-tiled layout: a block's K rows for the row kernels [NB, D] */
  uint16_t *qb;           /* bf16qk: the rows of qs in bf16 [R, ldb] */
} scratch_t;

static void *scratch_alloc(const call_t *c, scratch_t *w) {
  const int64_t R = c->R;
  const size_t floats = (size_t)(R * c->d->D + 2 * R * NB + 2 * R);
  const size_t ints = (size_t)(3 * R) * sizeof(int64_t);
  const size_t rows8 = c->tiled    ? (size_t)(NB * (c->d->D + c->d->Dv))
                       : c->ktiled ? (size_t)(NB * c->d->D) * sizeof(uint16_t)
                                   : 0;
  const size_t qb = (size_t)(R * c->ldb) * sizeof(uint16_t);
  char *mem = malloc(floats * sizeof(float) + ints + rows8 + qb);
  if (!mem) return NULL;
  char *end = mem + floats * sizeof(float) + ints;
  w->rows8 = c->tiled ? (int8_t *)end : NULL;
  w->rows16 = c->ktiled ? (uint16_t *)end : NULL;
  w->qb = (uint16_t *)(end + rows8);
  w->pos = (int64_t *)mem;
  w->lo = w->pos + R;
  w->hi = w->lo + R;
  w->qs = (float *)(w->hi + R);
  w->s = w->qs + R * c->d->D;
  w->p = w->s + R * NB;
  w->corr = w->p + R * NB;
  w->slope = w->corr + R;
  return mem;
}

/* The first key any query row of sequence b may see (window), and the
 * number of keys. */
static void seq_span(const call_t *c, int64_t b, int64_t *lo, int64_t *len) {
  *len = c->kv->seq_lens[b];
  *lo = 0;
  if (c->d->window_left >= 0) {
    const int64_t p0 = *len - c->d->Lq; /* the first query's position */
    if (p0 - c->d->window_left > 0) *lo = p0 - c->d->window_left;
  }
}

/* The next n rows of cursor cu into blk (and their int8 scales): a run of
 * consecutive rows per page (the whole block in a contiguous cache), its
 * addresses in a plain loop (per row through the cursor, this took 5 % of
 * an f16 decode's time at Lk 32k). */
static void gather(const call_t *c, attn_kv_cursor *cu, int n, attn_decode_block *blk) {
  const attn_kv_view *kv = c->kv;
  const int64_t kb = kv->D * c->elt, vb = kv->Dv * c->elt;
  blk->n = n;
  blk->nt = 0;
  for (int j = 0; j < n;) {
    const int64_t row = attn_kv_cursor_next(cu); /* the run's first row; its page's rest: */
    const int run = (int)attn_min64(n - j, cu->rows - cu->slot + 1);
    cu->slot += run - 1;
    const char *k = (const char *)kv->k + row * kb, *v = (const char *)kv->v + row * vb;
    if (c->tiled || c->ktiled) { /* the run's tiles (a run starts the block at lane toff, or a
                                    page at 0) */
      if (j == 0) blk->toff = (int)(row & 15);
      for (int64_t x = row >> 4; x <= (row + run - 1) >> 4; x++) {
        blk->kt[blk->nt] = (const char *)kv->k + x * 16 * kb;
        if (c->tiled) blk->vt[blk->nt] = (const char *)kv->v + x * 16 * vb;
        blk->nt++;
      }
      for (int i = 0; c->ktiled && i < run; i++) /* V in rows */
        blk->v[j + i] = v + i * vb;
    } else
      for (int i = 0; i < run; i++) {
        blk->k[j + i] = k + i * kb;
        blk->v[j + i] = v + i * vb;
      }
    if (kv->dtype == ATTN_I8) { /* (a scalar loop here was 6 % of an int8 call: may alias) */
      memcpy(blk->ks + j, kv->k_scale + row, (size_t)run * sizeof(float));
      memcpy(blk->vs + j, kv->v_scale + row, (size_t)run * sizeof(float));
    }
    j += run;
  }
}

/* the line at p prefetched into L1, or into L2 only (pf_l2) */
static inline void pf_line(const call_t *c, const void *p) {
  if (c->pf_l2)
    __builtin_prefetch(p, 0, 2);
  else
    __builtin_prefetch(p);
}

/* The rows of blk prefetched, all at once (the first blocks of an item; every
 * block where the micro-kernels do not prefetch). */
static void prefetch_block(const call_t *c, const attn_decode_block *blk) {
  const int64_t kb = c->kv->D * c->elt, vb = c->kv->Dv * c->elt;
  if (c->tiled || c->ktiled) {
    for (int i = 0; i < blk->nt; i++) {
      for (int64_t o = 0; o < 16 * kb; o += 64)
        pf_line(c, (const char *)blk->kt[i] + o);
      for (int64_t o = 0; c->tiled && o < 16 * vb; o += 64)
        pf_line(c, (const char *)blk->vt[i] + o);
    }
    if (c->tiled) return;
    for (int j = 0; j < blk->n; j++)
      for (int64_t o = 0; o < vb; o += 64)
        pf_line(c, (const char *)blk->v[j] + o);
    return;
  }
  for (int j = 0; j < blk->n; j++) {
    for (int64_t o = 0; o < kb; o += 64)
      pf_line(c, (const char *)blk->k[j] + o);
    for (int64_t o = 0; o < vb; o += 64)
      pf_line(c, (const char *)blk->v[j] + o);
  }
}

/* Region starts, warmed early. The L2's stream prefetcher stops at 4 KiB
 * boundaries and at every page of a paged cache, and restarts only after a few
 * misses in the new region; the micro-kernels' L1 prefetches, one block
 * ahead, then wait on DRAM at each region's start. So the first WARM_LINES
 * lines of every region of at most 4 KiB of one head's K rows (a page's run
 * where it is shorter), and of its V rows, are prefetched WARM_AHEAD blocks
 * ahead of the block that runs, once each: the prefetcher is running on a
 * region before the kernel gets there. Measured on a Zen 5 (docs/DECODE.md):
 * f32 caches from DRAM 1.09-1.20x, 16-token pages 1.06-1.38x. An int8
 * cache's 4 KiB is one block of its rows: warmed so, a contiguous one ran
 * 0.95x; so int8 warms page starts only (16-token pages 1.15x). */
enum { WARM_LINES = 4, WARM_AHEAD = 2, WARM_BYTES = 4096 };

/* tokens of one warmed region; 0: none warmed */
static int64_t warm_tokens(const call_t *c) {
  const int64_t row = c->kv->D * c->elt, P = c->kv->page_size;
  if (c->kv->dtype == ATTN_I8) return P; /* int8: page starts only */
  int64_t r = row < WARM_BYTES ? WARM_BYTES / row : 1;
  if (c->ktiled) r = r < 16 ? 16 : r / 16 * 16; /* regions of whole K tiles */
  return P > 0 && P < r ? P : r;
}

/* The regions of item it from *next on that start before token upto (not past
 * its end): their first lines prefetched; *next moved past them. */
static void warm_regions(const call_t *c, const item_t *it, int64_t rt, int64_t *next,
                         int64_t upto) {
  const attn_kv_view *kv = c->kv;
  if (upto > it->t1) upto = it->t1;
  const int64_t kb = kv->D * c->elt, vb = kv->Dv * c->elt;
  const int64_t nk = attn_min64(WARM_LINES, attn_ceil_div(rt * kb, 64));
  const int64_t nv = attn_min64(WARM_LINES, attn_ceil_div(rt * vb, 64));
  for (; *next * rt < upto; ++*next) {
    const int64_t row = attn_kv_row(kv, it->b, it->g, *next * rt);
    const char *k = (const char *)kv->k + row * kb, *v = (const char *)kv->v + row * vb;
    for (int64_t i = 0; i < nk; i++)
      __builtin_prefetch(k + 64 * i);
    for (int64_t i = 0; i < nv; i++)
      __builtin_prefetch(v + 64 * i);
  }
}

/* The score tile of one block (query heads h0.., Lq rows each) ->
 * probabilities w->p, corrections w->corr, state m, l updated. Returns 0 when
 * no row has an allowed key here. */
static int block_softmax(const call_t *c, scratch_t *w, const attn_decode_block *blk, int64_t h0,
                         int64_t t, float *m, float *l) {
  const int n = blk->n;
  const attn_decode_desc *d = c->d;
  if (c->kern->decode->softmax && !d->alibi_slopes && !c->staged && t >= w->lo_max &&
      t + n <= w->hi_min) /* a plain block: the level's vector softmax */
    return c->kern->decode->softmax(blk, w->s, w->p, c->R, m, l, w->corr);
  const attn_row_ops *ro = &c->kern->row;
  int any = 0;
  if (c->kv->dtype == ATTN_I8) /* the rows' scales on their scores */
    for (int64_t r = 0; r < c->R; r++)
      for (int j = 0; j < n; j++)
        w->s[r * NB + j] *= blk->ks[j];
  if (c->staged) /* the score modifiers' units, as the SDPA loops run them */
    for (int64_t hh = 0; hh < c->G; hh++)
      attn_stage_tile(&c->mods, h0 + hh, (int)d->Lq, n, w->s + hh * d->Lq * NB, NB, NULL, 0);
  for (int64_t r = 0; r < c->R; r++) {
    float *sr = w->s + r * NB, *pr = w->p + r * NB;
    int nan = 0;
    float bm = -INFINITY;
    if (!d->alibi_slopes && t >= w->lo[r] && t + n <= w->hi[r]) { /* all keys allowed */
      for (int j = 0; j < n; j++) {
        bm = sr[j] > bm ? sr[j] : bm;
        nan |= sr[j] != sr[j];
      }
    } else {
      for (int j = 0; j < n; j++) {
        const int64_t tt = t + j;
        if (tt < w->lo[r] || tt >= w->hi[r]) {
          sr[j] = -INFINITY;
          continue;
        }
        if (d->alibi_slopes) sr[j] -= w->slope[r] * (float)llabs(w->pos[r] - tt);
        bm = sr[j] > bm ? sr[j] : bm;
        nan |= sr[j] != sr[j];
      }
    }
    if (bm == -INFINITY && !nan) { /* nothing allowed here: the row unchanged */
      w->corr[r] = 1.0f;
      memset(pr, 0, (size_t)n * sizeof(float));
      continue;
    }
    any = 1;
    const float mn = bm > m[r] ? bm : m[r];
    w->corr[r] = mn == m[r] ? 1.0f : expf(m[r] - mn);
    l[r] = l[r] * w->corr[r] + ro->exp_sub_sum(sr, pr, n, mn);
    m[r] = mn;
    if (c->kv->dtype == ATTN_I8)
      for (int j = 0; j < n; j++)
        pr[j] *= blk->vs[j];
  }
  return any;
}

/* An item's rows' state (m [R], l [R], acc [R, Dv] in st) and w's per-row
 * fields set up for its first block. */
static void item_begin(const call_t *c, const item_t *it, scratch_t *w, float *st) {
  const attn_decode_desc *d = c->d;
  const int64_t R = c->R, D = d->D, Lq = d->Lq, len = c->kv->seq_lens[it->b];
  float *m = st, *l = st + R, *acc = st + 2 * R;
  for (int64_t r = 0; r < R; r++) {
    const int64_t hh = r / Lq, i = r % Lq, h = it->g * c->G + hh;
    const int64_t p = len - Lq + i;
    w->pos[r] = p;
    w->lo[r] = d->window_left >= 0 && p - d->window_left > 0 ? p - d->window_left : 0;
    w->hi[r] = d->causal && p + 1 < len ? p + 1 : len;
    w->slope[r] = d->alibi_slopes ? d->alibi_slopes[h] : 0.0f;
    const float *qr = c->q + ((it->b * d->Hq + h) * Lq + i) * D;
    float *qs = w->qs + r * D;
    const float sc = c->scale;
#pragma omp simd
    for (int64_t e = 0; e < D; e++)
      qs[e] = qr[e] * sc;
    if (c->bf16qk) { /* in bf16, to nearest even; an odd row's pair completed with 0 */
      c->kern->row.f32_to_bf16(qs, w->qb + r * c->ldb, D);
      if (D % 2) w->qb[r * c->ldb + D] = 0;
    }
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  w->lo_max = 0, w->hi_min = INT64_MAX;
  for (int64_t r = 0; r < R; r++) {
    w->lo_max = w->lo[r] > w->lo_max ? w->lo[r] : w->lo_max;
    w->hi_min = w->hi[r] < w->hi_min ? w->hi[r] : w->hi_min;
  }
  memset(acc, 0, (size_t)(R * d->Dv) * sizeof(float));
}

/* A tiled block's rows taken out of its tiles into w->rows8, for the
 * kernels on rows (levels without the tiled ones, and the float paths):
 * *rb = b with row pointers to them. */
static const attn_decode_block *untile(const call_t *c, scratch_t *w, const attn_decode_block *b,
                                       attn_decode_block *rb) {
  const int64_t D = c->d->D, Dv = c->d->Dv;
  *rb = *b;
  rb->pn = 0;
  for (int j = 0; j < b->n; j++) {
    const int lane = b->toff + j;
    const uint8_t *kt = b->kt[lane >> 4], *vt = b->vt[lane >> 4];
    int8_t *kr = w->rows8 + j * (D + Dv), *vr = kr + D;
    attn_kv_tk_get(kt, D, lane & 15, kr);
    attn_kv_tv_get(vt, Dv, lane & 15, vr);
    rb->k[j] = kr;
    rb->v[j] = vr;
  }
  return rb;
}

/* A K-tiled block's K rows taken out of its tiles into w->rows16, for the
 * scores on rows (levels without scores_kt): *rb = b with row pointers to
 * them (V: b's rows). */
static const attn_decode_block *untile_k(const call_t *c, scratch_t *w, const attn_decode_block *b,
                                         attn_decode_block *rb) {
  const int64_t D = c->d->D;
  *rb = *b;
  rb->pn = 0;
  for (int j = 0; j < b->n; j++) {
    const int lane = b->toff + j;
    uint16_t *kr = w->rows16 + j * D;
    attn_kv_kt_get(b->kt[lane >> 4], D, lane & 15, kr);
    rb->k[j] = kr;
  }
  return rb;
}

/* One block of an item (its keys from t): scores, the online softmax, P·V.
 * A tiled block goes to the level's tiled kernels, or is taken out into
 * rows for the others (the same bits). */
static void item_block(const call_t *c, const item_t *it, scratch_t *w, float *st,
                       const attn_decode_block *b, int64_t t) {
  const attn_decode_desc *d = c->d;
  const attn_decode_ops *ops = c->kern->decode;
  const int64_t R = c->R;
  float *m = st, *l = st + R, *acc = st + 2 * R;
  const int64_t q0 = (it->b * d->Hq + it->g * c->G) * d->Lq; /* the item's first query row */
  attn_decode_block rows;
  const attn_decode_block *rb = b; /* b's rows (tiled: taken out when a kernel needs them) */
  if (c->tiled && !(c->i8dot && ops->scores_i8t)) rb = untile(c, w, b, &rows);
  if (c->ktiled && c->bf16qk)
    ops->scores_kt_bf16(b, w->qb, c->ldb, R, w->s);
  else if (c->ktiled) {
    if (ops->scores_kt)
      ops->scores_kt(b, w->qs, R, w->s);
    else
      ops->scores(untile_k(c, w, b, &rows), w->qs, R, w->s);
  } else if (c->tiled && rb == b)
    ops->scores_i8t(b, c->q8 + q0 * c->ldq, c->ldq, c->qsum + q0, c->qscale + q0, R, w->s);
  else if (c->i8dot)
    ops->scores_i8(rb, c->q8 + q0 * c->ldq, c->ldq, c->qsum + q0, c->qscale + q0, R, w->s);
  else
    ops->scores(rb, w->qs, R, w->s);
  if (!block_softmax(c, w, b, it->g * c->G, t, m, l)) return;
  if (c->tiled && rb == b && c->i8pv && ops->pv_i8t && ops->pv_i8t(b, w->p, w->corr, R, acc))
    return;
  if (c->tiled && rb == b) rb = untile(c, w, b, &rows);
  if (c->bf16pv)
    ops->pv_bf16(rb, w->p, w->corr, R, acc);
  else if (!(c->i8pv && ops->pv_i8(rb, w->p, w->corr, R, acc)))
    ops->pv(rb, w->p, w->corr, R, acc);
}

/* A unit of work: nm items over the same tokens [t0, t1) of one sequence,
 * member j the item u.first + j u.step of the wave, run block by block with
 * the members inner (block 0 of each, then block 1 of each, ...). One item
 * (nm = 1), or, in a paged cache of small pages, the KV heads of one chunk:
 * a page holds its KV heads' rows one after another, so the heads of a
 * block read each page as one run of memory instead of one head's few
 * rows of it at a time (docs/DECODE.md, "Small pages"). Each item's blocks
 * and arithmetic are those it has alone: the same bits either way. */
typedef struct {
  int64_t first, step;
  int nm;
} unit_t;

/* a thread's scratch for units of up to nm members */
typedef struct {
  int nm;
  scratch_t *w;         /* [nm] */
  void **mem;           /* [nm] */
  attn_kv_cursor *rows; /* [nm]: each member's next row to gather */
  int64_t *wr;          /* [nm]: each member's next region to warm */
} unit_scratch;

static void unit_scratch_free(unit_scratch *us) {
  for (int j = 0; us->mem && j < us->nm; j++)
    free(us->mem[j]);
  free(us->w), free(us->mem), free(us->rows), free(us->wr);
}

static int unit_scratch_alloc(const call_t *c, int nm, unit_scratch *us) {
  us->nm = nm;
  us->w = calloc((size_t)nm, sizeof(scratch_t));
  us->mem = calloc((size_t)nm, sizeof(void *));
  us->rows = malloc((size_t)nm * sizeof(attn_kv_cursor));
  us->wr = malloc((size_t)nm * sizeof(int64_t));
  int ok = us->w && us->mem && us->rows && us->wr;
  for (int j = 0; ok && j < nm; j++)
    ok = (us->mem[j] = scratch_alloc(c, &us->w[j])) != NULL;
  if (!ok) unit_scratch_free(us);
  return ok;
}

/* Unit u (its items' states into st, stride floats each). next (or NULL):
 * the first item of the unit this thread runs after it, whose first block's
 * rows are prefetched during this unit's last block (no cold start). The
 * next block (the next member's, or the next of the first member) is
 * gathered one block ahead, and its rows prefetched by the micro-kernels as
 * they run (or by the loop); region starts are warmed WARM_AHEAD blocks
 * ahead. */
static void run_unit(const call_t *c, const item_t *items, float *st, unit_t u, const item_t *next,
                     unit_scratch *us) {
  const attn_decode_ops *ops = c->kern->decode;
  const int nm = u.nm;
  const item_t *it0 = &items[u.first];
  const int64_t t0 = it0->t0, t1 = it0->t1, nb = attn_ceil_div(t1 - t0, NB), steps = nb * nm;
  for (int j = 0; j < nm; j++) {
    const item_t *it = &items[u.first + j * u.step];
    item_begin(c, it, &us->w[j], st + (u.first + j * u.step) * c->stride);
    attn_kv_cursor_init(&us->rows[j], c->kv, it->b, it->g, t0);
  }
  attn_decode_block blk[2]; /* the block that runs and the next one */
  memset(blk, 0, sizeof blk);
  for (int i = 0; i < 2; i++) {
    blk[i].pf_l2 = c->pf_l2;
    blk[i].dtype = c->kv->dtype;
    blk[i].D = c->d->D;
    blk[i].Dv = c->d->Dv;
  }
  gather(c, &us->rows[0], (int)attn_min64(NB, t1 - t0), &blk[0]);
  prefetch_block(c, &blk[0]);
  const int64_t rt = warm_tokens(c);
  for (int j = 0; j < nm; j++) /* the first block of member 0 is prefetched whole */
    us->wr[j] = rt ? attn_ceil_div(j == 0 ? t0 + blk[0].n : t0, rt) : 0;
  /* steps s = i nm + j (block i of member j), counted without divisions:
   * (i2, j2) the step WARM_AHEAD on, warmed */
  int64_t i2 = 0;
  int j2 = 0;
  for (int64_t s2 = 1; s2 <= WARM_AHEAD; s2++) {
    if (++j2 == nm) j2 = 0, i2++;
    if (rt && s2 < WARM_AHEAD && s2 < steps)
      warm_regions(c, &items[u.first + j2 * u.step], rt, &us->wr[j2], t0 + (i2 + 1) * NB);
  }
  int cur = 0, j = 0;
  int64_t i = 0;
  for (int64_t s = 0; s < steps; s++, cur ^= 1) {
    const int64_t t = t0 + i * NB;
    if (rt && s + WARM_AHEAD < steps) /* the block WARM_AHEAD steps on */
      warm_regions(c, &items[u.first + j2 * u.step], rt, &us->wr[j2], t0 + (i2 + 1) * NB);
    if (++j2 == nm) j2 = 0, i2++;
    const int jn = j + 1 == nm ? 0 : j + 1; /* the next step's member and block */
    const int64_t in = jn ? i : i + 1;
    attn_decode_block *b = &blk[cur], *last = &blk[cur ^ 1];
    int nn = 0;
    if (s + 1 < steps) {
      nn = (int)attn_min64(NB, t1 - (t0 + in * NB));
      gather(c, &us->rows[jn], nn, last);
      if (!ops->prefetches) prefetch_block(c, last);
    } else if (next) { /* the last block: the next unit's first rows */
      attn_kv_cursor nrows;
      attn_kv_cursor_init(&nrows, c->kv, next->b, next->g, next->t0);
      nn = (int)attn_min64(NB, next->t1 - next->t0);
      gather(c, &nrows, nn, last);
      if (!ops->prefetches) prefetch_block(c, last);
    }
    b->pn = ops->prefetches && nn > 0 ? nn : 0; /* the micro-kernels prefetch them */
    b->pk = last->k;
    b->pv = last->v;
    b->pnt = ops->prefetches && nn > 0 ? last->nt : 0;
    memcpy(b->pkt, last->kt, sizeof b->pkt);
    memcpy(b->pvt, last->vt, sizeof b->pvt);
    const int64_t k = u.first + j * u.step;
    item_block(c, &items[k], &us->w[j], st + k * c->stride, b, t);
    j = jn, i = in;
  }
}

/* Row r of pair (b, g) from its items' states st[0..nc) (stride floats apart). */
static void merge_row(const call_t *c, int64_t b, int64_t g, int64_t r, const float *st, int64_t nc,
                      float *out, float *lse) {
  const attn_decode_desc *d = c->d;
  const int64_t R = c->R, Dv = d->Dv, Lq = d->Lq, h = g * c->G + r / Lq;
  const int64_t o = (b * d->Hq + h) * Lq + r % Lq;
  float *y = out + o * Dv;
  float M = -INFINITY, L = 0.0f;
  for (int64_t k = 0; k < nc; k++)
    if (st[k * c->stride + r] > M) M = st[k * c->stride + r];
  memset(y, 0, (size_t)Dv * sizeof(float));
  for (int64_t k = 0; k < nc; k++) {
    const float *s = st + k * c->stride;
    if (s[r] == -INFINITY && s[R + r] == 0.0f) continue; /* no key of this row in the chunk */
    const float a = expf(s[r] - M), *acc = s + 2 * R + r * Dv;
    L += s[R + r] * a;
#pragma omp simd /* each column on its own: the same sums (scalar, this was 4 % of a call) */
    for (int64_t e = 0; e < Dv; e++)
      y[e] += a * acc[e];
  }
  float inv, ls; /* the row's end with the row units' logit (sinks), as SDPA's */
  if (!attn_stage_row_finish(attn_stage_row_logit(&c->mods, h), M, L, &inv, &ls)) inv = 0.0f;
  if (L == 0.0f)
    memset(y, 0, (size_t)Dv * sizeof(float));
  else
#pragma omp simd
    for (int64_t e = 0; e < Dv; e++)
      y[e] *= inv;
  if (lse) lse[o] = ls;
}

/* Items of pair (b, g) appended to items (NULL: only counted). */
static int64_t pair_items(const call_t *c, int64_t b, int64_t g, item_t *items) {
  int64_t lo, len;
  seq_span(c, b, &lo, &len);
  if (lo >= len) return 0;
  const int64_t C = attn_decode_chunk(len);
  int64_t n = 0;
  for (int64_t k = lo / C; k * C < len; k++, n++)
    if (items) items[n] = (item_t){b, g, attn_max64(k * C, lo), attn_min64((k + 1) * C, len)};
  return n;
}

/* The threads' runs of items (decode_internal.h: why runs, and how they are
 * claimed and stolen) */
static uint64_t run_pack(uint64_t lo, uint64_t hi) { return hi << 32 | lo; }

void attn_decode_run_init(attn_decode_run *runs, int T, int t, int64_t n) {
  atomic_init(&runs[t].r, run_pack((uint64_t)(n * t / T), (uint64_t)(n * (t + 1) / T)));
}

int64_t attn_decode_claim(attn_decode_run *runs, int T, int t) {
  for (;;) {
    uint64_t x = atomic_load(&runs[t].r);
    while ((uint32_t)x < (uint32_t)(x >> 32))
      if (atomic_compare_exchange_weak(&runs[t].r, &x, x + 1)) return (int64_t)(uint32_t)x;
    int v = -1; /* runs[t] is empty, and only its owner adds to it: steal */
    uint32_t most = 0;
    for (int u = 0; u < T; u++) {
      const uint64_t y = atomic_load(&runs[u].r);
      const uint32_t lo = (uint32_t)y, hi = (uint32_t)(y >> 32);
      if (lo < hi && hi - lo > most) most = hi - lo, v = u;
    }
    if (v < 0) return -1;
    uint64_t y = atomic_load(&runs[v].r);
    const uint32_t lo = (uint32_t)y, hi = (uint32_t)(y >> 32);
    if (lo >= hi) continue;
    const uint32_t mid = lo + (hi - lo) / 2; /* the thief takes [mid, hi): at least one */
    if (!atomic_compare_exchange_strong(&runs[v].r, &y, run_pack(lo, mid))) continue;
    atomic_store(&runs[t].r, run_pack((uint64_t)mid + 1, hi));
    return (int64_t)mid;
  }
}

/* Pairs [p0, p1) (p = b Hkv + g): their items, then their rows merged. */
static attn_status run_wave(const call_t *c, int64_t p0, int64_t p1, int64_t nitems, float *out,
                            float *lse) {
  const int64_t Hkv = c->d->Hkv, np = p1 - p0;
  item_t *items = malloc((size_t)(nitems > 0 ? nitems : 1) * sizeof(item_t));
  int64_t *first = malloc((size_t)(np + 1) * sizeof(int64_t));
  float *st = malloc((size_t)(nitems > 0 ? nitems : 1) * (size_t)c->stride * sizeof(float));
  if (!items || !first || !st) {
    free(items), free(first), free(st);
    return attn_set_error(ATTN_ENOMEM, "decode: no memory for %lld partial results",
                          (long long)nitems);
  }
  int64_t n = 0, tokens = 0;
  for (int64_t p = p0; p < p1; p++) {
    first[p - p0] = n;
    n += pair_items(c, p / Hkv, p % Hkv, items + n);
  }
  first[np] = n;
  for (int64_t k = 0; k < n; k++)
    tokens += items[k].t1 - items[k].t0;
  const double macs = (double)tokens * (double)c->R * (double)(c->d->D + c->d->Dv);
  /* the units: each item alone, or with pages of at most a block, the
   * wave's KV heads of a sequence's chunk together (run_unit) */
  const int heads_inner = c->kv->page_size > 0 && c->kv->page_size <= NB;
  int64_t nu = 0;
  int maxnm = 1;
  unit_t *units = malloc((size_t)(n > 0 ? n : 1) * sizeof(unit_t));
  if (!units) {
    free(items), free(first), free(st);
    return attn_set_error(ATTN_ENOMEM, "decode: no memory for %lld units", (long long)n);
  }
  for (int64_t p = p0; p < p1;) {
    int64_t pe = p + 1; /* the wave's pairs of sequence p / Hkv: the same chunks */
    while (heads_inner && pe < p1 && pe / Hkv == p / Hkv)
      pe++;
    const int64_t C = first[p - p0 + 1] - first[p - p0];
    for (int64_t k = 0; k < C; k++)
      units[nu++] = (unit_t){first[p - p0] + k, C, (int)(pe - p)};
    maxnm = (int)(pe - p) > maxnm ? (int)(pe - p) : maxnm;
    p = pe;
  }
  int nt = attn_kernel_threads(macs, nu), failed = 0;
  /* each thread claims its next unit as it starts one, so that it can
   * prefetch that unit's first rows */
  attn_decode_run *runs = malloc((size_t)nt * sizeof(attn_decode_run));
  if (!runs) {
    free(items), free(first), free(st), free(units);
    return attn_set_error(ATTN_ENOMEM, "decode: no memory for %d runs of items", nt);
  }
#pragma omp parallel num_threads(nt) reduction(| : failed)
  {
    const int t = attn_thread_id(), T = attn_team_size();
    attn_decode_run_init(runs, T, t, nu);
#pragma omp barrier
    unit_scratch us;
    const int ok = unit_scratch_alloc(c, maxnm, &us);
    if (!ok) failed = 1;
    int64_t k = attn_decode_claim(runs, T, t);
    while (k >= 0) {
      const int64_t k2 = attn_decode_claim(runs, T, t);
      if (ok) run_unit(c, items, st, units[k], k2 >= 0 ? &items[units[k2].first] : NULL, &us);
      k = k2;
    }
    if (ok) unit_scratch_free(&us);
  }
  free(units);
  free(runs);
  if (!failed) {
    const int64_t rows = np * c->R;
    nt = attn_kernel_threads((double)rows * (double)c->d->Dv * 8.0, rows);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t x = 0; x < rows; x++) {
      const int64_t p = p0 + x / c->R;
      const int64_t k0 = first[p - p0];
      merge_row(c, p / Hkv, p % Hkv, x % c->R, st + k0 * c->stride, first[p - p0 + 1] - k0, out,
                lse);
    }
  }
  free(items), free(first), free(st);
  return failed ? attn_set_error(ATTN_ENOMEM, "decode: no memory for the threads' scratch")
                : ATTN_OK;
}

/* Every query row (times the scale) quantised for the int8 dot product:
 * symmetric per row, scale max|x| / 127, rounded to nearest even, zero from
 * D to ldq. With a NaN or inf anywhere nothing is set and the call takes the
 * float path, which carries them. ATTN_ENOMEM. */
int attn_decode_quantize_q8(const float *x, int64_t rows, int64_t D, float sc, int8_t *y,
                            int64_t ldy, float *scale, float *sum) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * D;
    int8_t *yr = y + r * ldy;
    float amax = 0.0f;
    int bad = 0; /* a value NaN or infinite (its comparison false) */
    /* vectorised: each value's test and the max reduced apart, with no exit
     * from the loop (a max is a max in any order) */
#pragma omp simd reduction(max : amax) reduction(| : bad)
    for (int64_t e = 0; e < D; e++) {
      const float a = fabsf(xr[e] * sc);
      bad |= !(a <= FLT_MAX);
      amax = a > amax ? a : amax;
    }
    if (bad) return 1;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t s = 0;
    /* rounded to nearest even by the 1.5 x 2^23 shift (|v| <= 127 here:
     * nearbyintf's result in the default rounding mode, without a libm call
     * per element, which was 4 % of an int8 call at Lk 8k) */
#pragma omp simd reduction(+ : s)
    for (int64_t e = 0; e < D; e++) {
      float v = (xr[e] * sc * inv + 12582912.0f) - 12582912.0f;
      v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
      yr[e] = (int8_t)v;
      s += (int32_t)v;
    }
    memset(yr + D, 0, (size_t)(ldy - D));
    scale[r] = amax / 127.0f;
    sum[r] = (float)s;
  }
  return 0;
}

/* The call's query rows for the int8 dot products (the level's quantize_q8:
 * the portable loop compiled for the baseline ISA was 10 % of an int8 call
 * at Lk 512); a row that is not finite leaves them to the f32 path. */
static attn_status quantize_queries(call_t *c) {
  const int64_t D = c->d->D, rows = c->d->B * c->d->Hq * c->d->Lq;
  c->q8 = malloc((size_t)(rows * c->ldq));
  c->qscale = malloc((size_t)(2 * rows) * sizeof(float));
  if (!c->q8 || !c->qscale) {
    free(c->q8), free(c->qscale);
    c->q8 = NULL, c->qscale = NULL;
    return attn_set_error(ATTN_ENOMEM, "decode: no memory for %lld quantised query rows",
                          (long long)rows);
  }
  c->qsum = c->qscale + rows;
  const attn_decode_ops *ops = c->kern->decode;
  const int bad = (ops->quantize_q8 ? ops->quantize_q8 : attn_decode_quantize_q8)(
      c->q, rows, D, c->scale, c->q8, c->ldq, c->qscale, c->qsum);
  if (bad) {
    free(c->q8), free(c->qscale);
    c->q8 = NULL, c->qscale = c->qsum = NULL;
    c->i8dot = 0;
  }
  return ATTN_OK;
}

attn_status attn_decode_forward(const attn_decode_desc *d, const attn_kv_view *kv, const float *q,
                                float *out, float *lse) {
  attn_status s = attn_decode_check(d, kv, q, out);
  if (s) return s;
  call_t c;
  c.d = d;
  c.kv = kv;
  c.q = q;
  c.kern = attn_kern_get();
  attn_stage_decode_mods(d, &c.mods);
  c.staged = attn_stage_has_tile(&c.mods);
  c.scale = d->has_scale ? d->scale : 1.0f / sqrtf((float)d->D);
  c.G = d->Hq / d->Hkv;
  c.R = c.G * d->Lq;
  c.elt = (int64_t)attn_dtype_size((attn_dtype)kv->dtype);
  c.stride = c.R * (d->Dv + 2);
  c.i8dot = kv->dtype == ATTN_I8 && c.kern->decode->scores_i8 && d->D <= ATTN_DECODE_I8DOT_MAX_D;
  c.ldq = attn_round_up(d->D, 64);
  c.i8pv = kv->dtype == ATTN_I8 && c.kern->decode->pv_i8 && !d->int8_pv_f32;
  c.tiled = attn_kv_tiled(kv);
  c.ktiled = kv->layout == ATTN_KV_K_TILED;
  /* bf16_f32 0: the dot products where they are fast (bf16_dot_auto), 2: wherever the level has
   * them */
  c.bf16pv = kv->dtype == ATTN_BF16 && c.kern->decode->pv_bf16 &&
             (d->bf16_f32 == 2 || (!d->bf16_f32 && c.kern->lowp.bf16_dot_auto));
  c.bf16qk = c.bf16pv && c.ktiled && c.kern->decode->scores_kt_bf16;
  c.ldb = c.bf16qk ? attn_round_up(d->D, 2) : 0;
  int64_t bytes = 0; /* the cache the call reads: the prefetch hint's size */
  for (int64_t b = 0; b < d->B; b++) {
    int64_t lo, len;
    seq_span(&c, b, &lo, &len);
    if (len > lo) bytes += (len - lo) * d->Hkv * (d->D + d->Dv) * c.elt;
  }
  c.pf_l2 = attn_cpu_decode_pf_l2(bytes);
  c.q8 = NULL, c.qscale = c.qsum = NULL;
  if (c.i8dot && (s = quantize_queries(&c))) return s;
  const int64_t npairs = d->B * d->Hkv;
  for (int64_t p0 = 0; p0 < npairs;) { /* waves of pairs, their partial results bounded */
    int64_t p1 = p0, nitems = 0;
    while (p1 < npairs) {
      const int64_t k = pair_items(&c, p1 / d->Hkv, p1 % d->Hkv, NULL);
      if (p1 > p0 && (nitems + k) * c.stride > WAVE_FLOATS) break;
      nitems += k;
      p1++;
    }
    if ((s = run_wave(&c, p0, p1, nitems, out, lse))) break;
    p0 = p1;
  }
  free(c.q8), free(c.qscale);
  return s;
}
