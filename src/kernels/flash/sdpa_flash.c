/* Flash attention forward on the CPU: a fused, tiled SDPA that never stores
 * the [Lq, Lk] scores (O(N) memory), exact up to f32 rounding.
 *
 * Work items (b, h, query block of BQ rows) run in parallel (dynamic, most
 * expensive first); each row's arithmetic does not depend on the item or the
 * thread, so results are identical for any thread count. Per item, for each
 * key block of BC keys that some row may see (causal, window and key_lens
 * skip whole tiles), and each row group of MR rows:
 *   s [MR, BC] = q · kᵀ          (gemm on kᵀ packed once per call)
 *   t = scale * s, masks         (bool/additive masks, if any, in a pass of their own)
 *   p = e^(t - m), m, l updated  (online softmax, one rescale per tile)
 *   o [MR, Dv] = alpha * o + p v (gemm straight from v, rows strided)
 * then out = o / l and lse = m + log l (out 0, lse -inf for a row with no
 * allowed key). K/V heads are shared by their query heads (no copies).
 * NaN: a NaN logit at an allowed key (NaN in q or k, +inf·0, an additive
 * mask NaN or -inf added to a NaN/+inf score; +inf logits give inf - inf)
 * is skipped by the max but gives p = NaN, so l, out and lse of that row
 * are NaN, as in the math path: no per-element test, the p = 0 compare is
 * unordered. Keys outside the row's range, bool mask or block layout are
 * -inf before the softmax and stay ignored whatever their data. NaN in v
 * reaches the rows whose p·v reads it (p > 0; p = 0 times NaN too, as in
 * the math GEMMs, for keys of a tile the row does not see).
 * Fast path: where the kernel set has tile_forward and every row of the item
 * sees every key of a full block (no masks, no Shaw values), the item's
 * whole row groups go through it in one call (scores, softmax and p·v in
 * registers, pipelined across groups, the same numbers as the steps above;
 * with the score-modifier stage's units or ALiBi, tile_forward_mod where
 * the set has it);
 * for it, a block of v whose rows are not 64-byte aligned is copied to an
 * aligned per-thread block first (else every 64-byte load of v splits two
 * cache lines).
 * Variants (sdpa_flash_positions.c): a tile whose blocks are all off in the
 * block-sparse layout is skipped like a causal one (partly-on tiles are
 * masked per element); ALiBi + T5 add a slice of a per-call bias table by
 * relative distance; Shaw adds scale q·shaw_k on the tile's band of clipped
 * distances (the two clipped ends once per row per call) and, after the
 * softmax, o += (p summed by table row) · shaw_v[band] for the interior
 * rows, while the clipped ends are running sums per row (rescaled like o)
 * applied once at the end.
 * Attention dropout (sdpa_dropout.h): after each tile's softmax update (m, l
 * from the undropped p) the tile's p is dropped and scaled by 1/(1-p) before
 * p·v, the keep bits regenerated from the hash of (seed, offset, b, h, row,
 * key); the whole-tile kernels are skipped then.
 * fp16 inputs (attn_flash_in, sdpa_flash_f16.c): k is converted a key block
 * at a time before packing kᵀ, the item's q rows once per item and each
 * block of v into the aligned per-thread block; the rest is unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "kernels/flash/flash_loop.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_batched.h"
#include "kernels/sdpa/sdpa_dropout.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/sdpa_usermod.h"
#include "kernels/sdpa/sdpa_usermod_fused.h"
#include "kernels/util.h"

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR, NC = ATTN_FLASH_NC, QW = ATTN_FLASH_QW, BQ = 144 };

const attn_flash_ops *attn_flash_ops_default(void) { return attn_kern_get()->flash; }

int attn_flash_tile_bounds(const attn_sdpa_desc *d, int64_t b, int64_t i0, int R, int64_t j0,
                           int nk, int *lo, int *hi) {
  int64_t lo0, hi0, lo1, hi1, j1 = j0 + nk;
  attn_sdpa_key_range(d, b, i0, &lo0, &hi0);
  attn_sdpa_key_range(d, b, i0 + R - 1, &lo1, &hi1);
  if (hi1 <= j0 || lo0 >= j1 || lo0 >= hi1) return 0; /* no row sees this block */
  if (lo1 <= j0 && hi0 >= j1) {                       /* every row sees all of it */
    for (int r = 0; r < R; r++) {
      lo[r] = 0;
      hi[r] = nk;
    }
    return 1;
  }
  int any = 0;
  for (int r = 0; r < R; r++) {
    int64_t l, h;
    attn_sdpa_key_range(d, b, i0 + r, &l, &h);
    l -= j0;
    h -= j0;
    if (l < 0) l = 0;
    if (h > nk) h = nk;
    if (h <= l) l = h = 0;
    lo[r] = (int)l;
    hi[r] = (int)h;
    any |= h > l;
  }
  return any;
}

void attn_flash_tile_logits(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                            const attn_sdpa_resolved *rs, const attn_flash_pos *pos,
                            const attn_flash_tile *t, int staged, const float *qi, int64_t ldq,
                            int64_t t0, int w, float *s, float *g, float *raw, float *xr) {
  const int64_t b = t->b, h = t->h, i = t->i, j0 = t->j0, pi = i + d->q_offset;
  const int R = t->R, nk = t->nk;
  ops->logits(R, s, rs->scale, t->lo, t->hi);
  if (staged) attn_stage_tile(d, h, R, nk, s, BC, g, BC);
  if (t->um == 2) attn_usermod_tile(d, b, h, i, R, j0, nk, s, BC, raw, BC);
  attn_sdpa_elem_masks(d, b, h, i, R, j0, nk, s, BC, 1);
  if (t->blk == 2) attn_flash_block_mask(d, pi, R, j0, nk, s);
  if (pos->bias) attn_flash_pos_bias(ops, pos, h, d->Lq, i, R, j0, nk, s);
  if (pos->skt) {
    attn_flash_shaw_rows(ops, R, qi, ldq, d->D, pos->skt, pos->nr, t0, w, rs->scale, xr);
    attn_flash_shaw_gather(ops, d, pi, R, j0, nk, t0, xr,
                           pos->ends + ((b * d->Hq + h) * d->Lq + i) * 4, 1, s);
  }
}

int attn_flash_tile_cols(int R, const int *hi) {
  int n = 0;
  for (int r = 0; r < R; r++)
    n = hi[r] > n ? hi[r] : n;
  n = (int)attn_flash_cols8(n);
  return n < BC ? n : BC;
}

/* Every one of the MR rows sees all BC keys of the block. */
static int whole_tile(const int *lo, const int *hi) {
  int ok = 1;
  for (int r = 0; r < MR; r++)
    ok &= lo[r] == 0 && hi[r] == BC;
  return ok;
}

const float *attn_flash_in_rows(const float *x, const uint16_t *x16, const attn_flash_in *in,
                                int64_t off, int64_t ld, int64_t n, int64_t cols, float *buf,
                                int64_t ldb, int64_t *ldo) {
  if (!x16) {
    *ldo = ld;
    return x + off;
  }
  *ldo = ldb;
  if (ld == cols && ldb == cols)
    in->cvt(x16 + off, buf, n * cols);
  else
    for (int64_t r = 0; r < n; r++)
      in->cvt(x16 + off + r * ld, buf + r * ldb, cols);
  return buf;
}

/* ops->tile_forward, or tile_forward_mod with the fused units or user hook
 * of mod (rows from query i, keys from j0). */
static void tiles_fused(const attn_flash_ops *ops, const attn_sdpa_desc *d, attn_flash_mod *mod,
                        int64_t i, int64_t j0, int G, const float *q, int64_t ldq, const float *kt,
                        const float *v, int64_t ldv, float scale, float *s, float *o, float *m,
                        float *l, const float *ktn, const float *vn, int64_t ldvn) {
  mod->rel0 = (float)(i + d->q_offset - j0);
  mod->ui0 = i, mod->uj0 = j0;
  if (attn_flash_mod_kinds(mod) || mod->user)
    ops->tile_forward_mod(mod, G, d->D, d->Dv, q, ldq, kt, v, ldv, scale, s, o, d->Dv, m, l, ktn,
                          vn, ldvn);
  else
    ops->tile_forward(G, d->D, d->Dv, q, ldq, kt, v, ldv, scale, s, o, d->Dv, m, l, ktn, vn, ldvn);
}

/* One work item: rows [i0, i0+nq) of (b, h). ws: o [BQ, Dv], m, l [BQ], s [2, MR, BC],
 * and with Shaw xr [MR, QW] (q·shaw_kᵀ on the tile's band, then p summed on it); for
 * qc [BQ, D] (the item's q rows as dense f32 rows: fp16 converted, strided ones copied). */
static void forward_item(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                         const attn_sdpa_resolved *rs, const attn_flash_pos *pos, int64_t b,
                         int64_t h, int64_t i0, int nq, const attn_flash_in *in, const float *kt,
                         float *out, float *lse, float *ws) {
  const int64_t D = d->D, Dv = d->Dv, nkb = attn_ceil_div(d->Lk, BC), kvh = h / rs->group;
  float *o = ws, *m = o + (int64_t)BQ * Dv, *l = m + BQ, *s = l + BQ, *xr = s + 2 * MR * BC;
  float *pe = xr + MR * QW; /* [BQ, 2]: p summed at Shaw rows 0 and 2M-2 */
  float *vc = pe + 2 * BQ;  /* [BC, Dvp]: a block of v, 64-byte aligned rows */
  const int64_t Dvp = (Dv + 15) & ~(int64_t)15;
  float *qc = vc + BC * Dvp; /* [BQ, D]: q rows as dense f32 rows */
  float alpha[MR];
  int lo[MR], hi[MR], all_lo[MR], all_hi[MR];
  for (int r = 0; r < MR; r++)
    all_lo[r] = 0, all_hi[r] = BC;
  /* the item's q rows: qb row r is query i0 + r (rows ldq apart) */
  int64_t ldq;
  const float *qb =
      attn_flash_in_rows(in->q, in->q16, in, b * rs->q[0] + h * rs->q[1] + i0 * rs->q[2], rs->q[2],
                         nq, D, qc, D, &ldq);
  qb = attn_flash_dense_rows(qb, ldq, nq, D, qc, &ldq); /* read once per key block */
  const int64_t voff = b * rs->v[0] + kvh * rs->v[1];
  const float *kth = kt + (b * d->Hkv + kvh) * nkb * D * BC;
  memset(o, 0, (size_t)nq * Dv * sizeof(float));
  for (int r = 0; r < nq; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    pe[2 * r] = pe[2 * r + 1] = 0.0f;
  }
  attn_flash_span sp; /* key blocks some row of the item may see */
  attn_flash_item_span(d, b, i0, nq, BC, &sp);
  const int64_t kb0 = sp.kb0, kb1 = sp.kb1, lo1 = sp.lo1, hi0 = sp.hi0;
  attn_stage_head sh;         /* the stage: the logits' pass, or fused where it can */
  attn_flash_mod mod = {0};   /* the stage's units and ALiBi for the fused tiles */
  if (pos->bias) attn_flash_mod_init(ops, d, pos, h, &mod);
  attn_stage_head_init(d, h, &sh, &mod);
  const int staged = sh.tile;
  /* score_mod in the fused tiles (the call's pieces apart from the plain
   * path: user mods, block layout, positions, each entered only when set) */
  const int hooked = d->mods && attn_usermod_fuse(ops, d, b, h, &mod);
  const int elem = d->bool_mask || d->add_mask || d->shaw_k, masks = elem || pos->bias;
  /* whole-tile kernel: no masks nor position terms but a fused ALiBi (Shaw's values need alpha) */
  const int fused = ops->tile_forward && !elem && (!pos->bias || mod.alibi) && !d->shaw_v &&
                    d->dropout_p == 0.0f && /* dropout: the steps, p dropped before p·v */
                    (!staged || sh.fusable) && (!(staged || mod.alibi) || ops->tile_forward_mod);
  for (int64_t kb = kb0; kb < kb1; kb++) {
    int64_t j0 = kb * BC;
    int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
    const float *ktb = kth + kb * D * BC;
    int64_t ldv; /* the block of v: in place, or fp16 converted into vc */
    const float *vb = attn_flash_in_rows(in->v, in->v16, in, voff + j0 * rs->v[2], rs->v[2], nk, Dv,
                                         vc, Dvp, &ldv);
    int r0 = 0;
    if (fused && nk == BC && !d->block_mask && lo1 <= j0 && hi0 >= j0 + BC &&
        (hooked || !d->mods || attn_usermod_tile_state(d, b, h, i0, nq, j0, nk) == 1)) {
      /* every row of the item sees every key of the block: its whole tiles
       * in one call (the next block's kᵀ and v fetched into L2 meanwhile) */
      int G = nq / MR, next = kb + 1 < kb1 && d->Lk - j0 >= 2 * BC;
      const float *vt = vb;
      int64_t ldvt = ldv;
      if ((ldv != Dvp || (uintptr_t)vb % 64) && G > 1) {
        /* rows of v off 64-byte lines (each 64-byte load would split two
         * lines) or strided (sdpa_flash_layout.c: the block thrashes L1):
         * the block is copied to dense aligned rows (in L1 after) */
        for (int j = 0; j < BC; j++)
          memcpy(vc + j * Dvp, vb + j * ldv, (size_t)Dv * sizeof(float));
        vt = vc, ldvt = Dvp;
      }
      tiles_fused(ops, d, &mod, i0, j0, G, qb, ldq, ktb, vt, ldvt, rs->scale, s, o,
                  m, l, next ? ktb + D * BC : NULL, next && in->v ? vb + BC * ldv : NULL, ldv);
      r0 = G * MR;
    }
    for (; r0 < nq; r0 += MR) {
      int R = nq - r0 < MR ? nq - r0 : MR;
      const int64_t i = i0 + r0, pi = i + d->q_offset;
      /* block layout, user mods: 0 skip the tile, 1 none, 2 per element */
      const int blk = d->block_mask ? attn_flash_block_state(d, pi, R, j0, nk) : 1;
      const int um = d->mods ? attn_usermod_tile_state(d, b, h, i, R, j0, nk) : 1;
      if (!blk || !um || !attn_flash_tile_bounds(d, b, i, R, j0, nk, lo, hi)) continue;
      const float *qi = qb + r0 * ldq;
      if (fused && R == MR && nk == BC && blk == 1 && (um == 1 || hooked) && whole_tile(lo, hi)) {
        tiles_fused(ops, d, &mod, i, j0, 1, qi, ldq, ktb, vb, ldv, rs->scale, s, o + r0 * Dv,
                    m + r0, l + r0, NULL, NULL, 0);
        continue;
      }
      ops->gemm(R, attn_flash_tile_cols(R, hi), D, qi, ldq, 1, ktb, BC, s, BC, NULL, 0);
      int64_t t0 = 0;
      int w = pos->nr ? attn_flash_shaw_band(d, pi, R, j0, nk, &t0) : 0;
      if (masks || staged || blk == 2 || um == 2) { /* logits, mods, masks, positions, softmax */
        const attn_flash_tile tl = {b, h, i, j0, R, nk, blk, um, lo, hi};
        attn_flash_tile_logits(ops, d, rs, pos, &tl, staged, qi, ldq, t0, w, s, NULL, NULL, xr);
        ops->softmax_update(R, s, 1.0f, all_lo, all_hi, m + r0, l + r0, alpha);
      } else {
        ops->softmax_update(R, s, rs->scale, lo, hi, m + r0, l + r0, alpha);
      }
      if (d->dropout_p != 0.0f) attn_sdpa_dropout_tile(d, b, h, i, R, j0, nk, s, BC); /* l: undropped */
      for (int64_t c0 = 0; c0 < Dv; c0 += NC) {
        int n = (int)(Dv - c0 < NC ? Dv - c0 : NC);
        ops->gemm(R, n, nk, s, BC, 1, vb + c0, ldv, o + r0 * Dv + c0, Dv, alpha, 1);
      }
      if (d->shaw_v) { /* ends: running sums; o += (p by interior row) · shaw_v[band] */
        for (int r = 0; r < R; r++)
          pe[2 * (r0 + r)] *= alpha[r], pe[2 * (r0 + r) + 1] *= alpha[r];
        int64_t ta;
        int wi = attn_flash_shaw_split(ops, d, pi, R, j0, nk, t0, w, s, BC, pe + 2 * r0, xr, &ta);
        for (int64_t c0 = 0; wi > 0 && c0 < Dv; c0 += NC) {
          int n = (int)(Dv - c0 < NC ? Dv - c0 : NC);
          ops->gemm(R, n, wi, xr, QW, 1, d->shaw_v + ta * Dv + c0, Dv, o + r0 * Dv + c0, Dv, NULL,
                    1);
        }
      }
    }
  }
  float *oh = out + b * rs->o[0] + h * rs->o[1];
  float *lh = lse + (b * d->Hq + h) * d->Lq;
  for (int r = 0; r < nq; r++) {
    if (d->shaw_v) { /* the clipped distances' share of shaw_v (a row without keys: out 0) */
      const float *v0 = d->shaw_v, *vt = d->shaw_v + (pos->nr - 1) * Dv;
      for (int64_t c = 0; c < Dv; c++)
        o[r * Dv + c] += pe[2 * r] * v0[c] + pe[2 * r + 1] * vt[c];
    }
    attn_flash_row_store(sh.row_logit, m[r], l[r], o + r * Dv, 1, Dv, oh + (i0 + r) * rs->o[2],
                         lh + i0 + r);
  }
}

attn_status attn_sdpa_forward_flash_in(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                       const attn_flash_in *in, float *out, float *lse) {
  attn_sdpa_resolved rs;
  const int f16 = in->q16 != NULL || in->k16 != NULL || in->v16 != NULL;
  /* validate reads only the NULL-ness of q, k, v */
  attn_status st = attn_sdpa_validate(d, f16 ? (const float *)(const void *)in->q16 : in->q,
                                      f16 ? (const float *)(const void *)in->k16 : in->k,
                                      f16 ? (const float *)(const void *)in->v16 : in->v, &rs);
  if (st) return st;
  if (!ops) return attn_set_error(ATTN_EUNSUPPORTED, "sdpa flash: no kernels for this CPU");
  if (f16 && attn_sdpa_has_positions(d))
    return attn_set_error(ATTN_EUNSUPPORTED, "sdpa flash: position variants and block-sparse "
                                             "layouts need f32 inputs");
  const float *q = in->q, *k = in->k;
  if ((!out || !lse) && d->Lq > 0)
    return attn_set_error(ATTN_EINVAL, "sdpa flash: %s is NULL", !out ? "out" : "lse");
  if (d->Lq == 0) return ATTN_OK;
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, D = d->D, Dv = d->Dv;
  const int64_t nkb = attn_ceil_div(d->Lk, BC), nqb = attn_ceil_div(d->Lq, BQ);
  /* threads by the tiles' work: a row's softmax spans whole BC-key blocks, so
   * a short sequence costs more than its Lq Lk (D + Dv) */
  int nt = attn_kernel_threads((double)B * Hq * d->Lq * (nkb * BC) * (D + Dv), B * Hq * nqb);
  /* kᵀ packed per key block: [B, Hkv, nkb, D, BC] */
  int64_t kt_n;
  if (__builtin_mul_overflow(B * Hkv * nkb, D * BC, &kt_n))
    return attn_set_error(ATTN_ENOMEM, "sdpa flash: k too large");
  attn_flash_pos pos = {0}; /* the position tables (none without positions) */
  if (attn_sdpa_has_positions(d) && (st = attn_flash_pos_init(d, &pos))) return st;
  if (d->shaw_k && (st = attn_flash_shaw_ends(&pos, d, &rs, q, NULL, nt))) {
    attn_flash_pos_free(&pos);
    return st;
  }
  float *kt = attn_flash_alloc(kt_n, 1, "packed k");
  /* qc [BQ, D] after the item's workspace (fp16: also the block of k to pack) */
  const int64_t qc_at = (int64_t)BQ * Dv + 4 * BQ + 2 * MR * BC + MR * QW + BC * ((Dv + 15) & ~15);
  int64_t per = qc_at + (int64_t)BQ * D;
  float *ws = kt ? attn_flash_alloc(per, nt, "forward") : NULL;
  if (!ws) {
    free(kt);
    attn_flash_pos_free(&pos);
    return ATTN_ENOMEM;
  }
  per = (per + 15) & ~(int64_t)15;
  const int64_t npack = B * Hkv * nkb;
  const int64_t items = B * Hq * nqb;
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < npack; t++) {
      int64_t bh = t / nkb, kb = t % nkb, b = bh / Hkv, g = bh % Hkv, j0 = kb * BC;
      int64_t n = d->Lk - j0 < BC ? d->Lk - j0 : BC, ldk;
      const float *kr = attn_flash_in_rows(k, in->k16, in, b * rs.k[0] + g * rs.k[1] + j0 * rs.k[2],
                                           rs.k[2], n, D, ws + attn_thread_id() * per + qc_at, D, &ldk);
      ops->pack_t(n, D, kr, ldk, kt + t * D * BC);
    }
    /* (the loop's barrier: all of kᵀ is packed) */
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < items; t++) {
      int64_t bh = t / nqb, qb = nqb - 1 - t % nqb; /* later query blocks first (causal) */
      int64_t i0 = qb * BQ;
      int nq = (int)(d->Lq - i0 < BQ ? d->Lq - i0 : BQ);
      forward_item(ops, d, &rs, &pos, bh / Hq, bh % Hq, i0, nq, in, kt, out, lse,
                   ws + attn_thread_id() * per);
    }
  }
  free(ws);
  free(kt);
  if (pos.own || pos.ends) attn_flash_pos_free(&pos);
  return ATTN_OK;
}

static attn_status forward_piece(const attn_sdpa_desc *d, const attn_sdpa_io *x, void *ops) {
  const attn_flash_in in = {x->q, x->k, x->v, NULL, NULL, NULL, NULL};
  return attn_sdpa_forward_flash_in(ops, d, &in, x->out, x->lse);
}

attn_status attn_sdpa_forward_flash_ops(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                        const float *q, const float *k, const float *v, float *out,
                                        float *lse) {
  if (d && attn_sdpa_batched_needed(d)) { /* per-batch alignment or slopes with positions */
    const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out = out, .lse = lse};
    return attn_sdpa_run_batched(d, 0, &io, forward_piece, (void *)ops);
  }
  const attn_flash_in in = {q, k, v, NULL, NULL, NULL, NULL};
  return attn_sdpa_forward_flash_in(ops, d, &in, out, lse);
}

attn_status attn_sdpa_forward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                    const float *v, float *out, float *lse) {
  return attn_sdpa_forward_flash_ops(attn_flash_ops_default(), d, q, k, v, out, lse);
}
