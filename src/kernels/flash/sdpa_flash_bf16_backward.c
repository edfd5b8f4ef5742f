/* bf16 flash attention backward (attn/sdpa_bf16.h): recomputes P from the
 * saved lse and gives dq, dk, dv (f32), all in the transposed orientation of
 * the forward (keys as rows, 16 queries as the lanes of a vector).
 *
 * Per call: k and v as padded rows (A tiles of sᵀ = K·Qᵀ and dpᵀ = V·doutᵀ),
 * kᵀ per 64-key block (A tiles of dqᵀ += Kᵀ·dsᵀ); q and dout (rounded to
 * bf16) as B tiles along their depth (for sᵀ, dpᵀ) and as B tiles along
 * queries (for dv += pᵀ·dout and dk += dsᵀ·q); D_i = rowsum(dout ∘ out).
 *
 * Work items (b, K/V head g, key chunk c) run in parallel. Chunk c of C owns
 * the super-blocks of SB key blocks sb = c, c+C, ... (interleaved for causal
 * balance): it alone
 * writes their dk/dv rows, summing over the query heads of the group in
 * order; its dq contributions go to a transposed partial of its own
 * (dqᵀ [C][B, Hq, Lq/16, D16, 16]), summed in chunk order at the end. C
 * depends only on the shapes, so results are identical for any thread
 * count. Per super-block and query block of qb rows that may see it, per 16
 * queries and each key block of the super-block:
 *   sᵀ = K·Qᵀ, dpᵀ = V·doutᵀ           (ops->scores twice)
 *   p = e^(t - lse), ds = p (dp - D_i) scale (ops->probs_grad; masks first)
 *   dqᵀ += Kᵀ·ds                        (ops->accum)
 * then dv_blk += pᵀ·dout and dk_blk += dsᵀ·q over the query block
 * (ops->accum_t).
 * A loop of its own, not the f32 backward with a bf16 operand hook: the
 * arithmetic differs (bf16 dot products on packed tiles, p and ds rounded
 * to bf16; sdpa_flash_bf16.h). The f32 backward runs bf16 where there is no
 * bf16 dot product (path f32) and where the score-modifier stage has tile
 * units (their derivative multiplies ds before any rounding). The rest is
 * shared: the query rows of a key block and the element masks
 * (flash_loop.h), the logits (attn_bf16_tile_logits, the forward's), the
 * stage's parameter gradients and the user mods. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "attn/tensor.h"
#include "kernels/flash/flash_loop.h"
#include "kernels/flash/sdpa_flash_bf16.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/sdpa_usermod.h"
#include "kernels/util.h"

/* SB key blocks per pass over the queries: the query-side tiles (q, dout,
 * the dqᵀ partial) are read once per SB blocks, not once per block. */
enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT, QB = 128, SB = 8, WANT_ITEMS = 8 };
#define PART_BYTES_MAX ((int64_t)32 << 20)

/* Queries per query block: QB, or for a short sequence the smallest power
 * of two >= Lq from 32 up. The query-side packs and dk/dv's sums over a
 * block's queries (accum_t) are padded to whole blocks, so 12 queries (a
 * word's letters) in blocks of 128 did and zeroed ten times the work and
 * memory (a G2P model's bf16 backward at 0.2x f32). Padded queries add
 * exact zeros, so the block size changes no result. */
static int query_block(int64_t Lq) {
  int qb = 32;
  while (qb < QB && qb < Lq)
    qb *= 2;
  return qb;
}

typedef struct {
  const attn_flash_bf16_ops *ops;
  const attn_sdpa_desc *d;
  const attn_sdpa_resolved *rs;
  const float *lse, *di;
  float *dk, *dv, *dqt;
  /* packed operands (see the file comment) */
  const uint16_t *kp, *vr, *kt, *qp, *dop, *qv, *dov;
  int64_t nkb, Lqp, C;
  int dc, dvc, ntk, ntv; /* depth chunks of 32 (D, Dv); column tiles of 16 (D, Dv) */
  int qb;                /* queries per query block: query_block(Lq) */
} bwd_ctx;

/* ws: st, dpt [64*16] f32, dkb [SB][64][ntk*16], dvb [SB][64][ntv*16] f32
 * (C-tile blocked), pt, dst [SB][64][qb] bf16, dsv [1024] bf16. */
static void backward_item(const bwd_ctx *x, int64_t b, int64_t g, int64_t c, void *ws) {
  const attn_sdpa_desc *d = x->d;
  const attn_sdpa_resolved *rs = x->rs;
  const attn_flash_bf16_ops *ops = x->ops;
  const int64_t G = rs->group, Lqp = x->Lqp, nq16 = Lqp / QT, nq32 = Lqp / 32;
  const int dc = x->dc, dvc = x->dvc, ntk = x->ntk, ntv = x->ntv, qb = x->qb;
  float *st = ws, *dpt = st + BC * QT, *dkb = dpt + BC * QT, *dvb = dkb + SB * BC * ntk * 16;
  uint16_t *pt = (uint16_t *)(void *)(dvb + SB * BC * ntv * 16), *dst = pt + SB * BC * qb;
  uint16_t *dsv = dst + SB * BC * qb;
  int lo[QT], hi[QT], act[SB];
  float raw[BC * QT]; /* the scores before a user score_mod */
  const int64_t bg = b * d->Hkv + g, nsb = attn_ceil_div(x->nkb, SB);
  for (int64_t h = g * G; h < (g + 1) * G; h++) /* this chunk's dqᵀ partial of the group's heads */
    memset(x->dqt + ((c * d->B + b) * d->Hq + h) * nq16 * ntk * 256, 0,
           (size_t)(nq16 * ntk * 256) * sizeof(float));
  const int masks = d->bool_mask || d->add_mask || d->mods;
  for (int64_t sb = c; sb < nsb; sb += x->C) { /* super-blocks of SB key blocks */
    const int64_t kb0 = sb * SB, nb = x->nkb - kb0 < SB ? x->nkb - kb0 : SB;
    const int64_t j0s = kb0 * BC, j1s = d->Lk < j0s + nb * BC ? d->Lk : j0s + nb * BC;
    memset(dkb, 0, (size_t)(nb * BC * ntk * 16) * sizeof(float));
    memset(dvb, 0, (size_t)(nb * BC * ntv * 16) * sizeof(float));
    const int64_t iq0 = attn_flash_first_row(d, b, j0s, 1),
                  iq1 = attn_flash_first_row(d, b, j1s, 0);
    for (int64_t h = g * G; iq0 < iq1 && h < (g + 1) * G; h++) {
      const int64_t bh = b * d->Hq + h;
      const float *lseh = x->lse + bh * d->Lq, *dih = x->di + bh * d->Lq;
      float *dqh = x->dqt + (c * d->B * d->Hq + bh) * nq16 * ntk * 256;
      for (int64_t qa = iq0 & ~(int64_t)(qb - 1); qa < iq1; qa += qb) {
        float ls[QB / QT][QT], ds_i[QB / QT][QT];
        int R[QB / QT];
        for (int t = 0; t < qb / QT; t++) {
          const int64_t i = qa + t * QT;
          R[t] = i < d->Lq ? (d->Lq - i < QT ? (int)(d->Lq - i) : QT) : 0;
          for (int r = 0; r < QT; r++) {
            ls[t][r] = r < R[t] ? lseh[i + r] : -INFINITY;
            ds_i[t][r] = r < R[t] ? dih[i + r] : 0.0f;
          }
        }
        for (int kbi = 0; kbi < nb; kbi++) { /* each key block against the block's query tiles */
          const int64_t kb = kb0 + kbi, j0 = kb * BC;
          const int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
          const uint16_t *kpb = x->kp + (bg * x->nkb + kb) * BC * (32 * dc);
          const uint16_t *vrb = x->vr + (bg * x->nkb + kb) * BC * (32 * dvc);
          const uint16_t *ktb = x->kt + (bg * x->nkb + kb) * ntk * 16 * BC;
          act[kbi] = 0;
          for (int t = 0; t < qb / QT; t++) {
            const int64_t i = qa + t * QT;
            uint16_t *ptb = pt + kbi * BC * qb + t * QT, *dstb = dst + kbi * BC * qb + t * QT;
            if (!R[t] || !attn_bf16_tile_bounds(d, b, i, R[t], j0, nk, lo, hi) ||
                !attn_usermod_tile_state(d, b, h, i, R[t], j0, nk)) {
              for (int j = 0; j < BC; j++) {
                memset(ptb + j * qb, 0, QT * sizeof(uint16_t));
                memset(dstb + j * qb, 0, QT * sizeof(uint16_t));
              }
              continue;
            }
            act[kbi] = 1;
            int full = 1;
            for (int r = 0; r < QT; r++)
              full &= lo[r] == 0 && hi[r] == BC;
            ops->scores(kpb, 32 * dc, dc, (int)((d->D + 1) / 2),
                        x->qp + (bh * nq16 + i / QT) * dc * 512, st);
            ops->scores(vrb, 32 * dvc, dvc, (int)((d->Dv + 1) / 2),
                        x->dop + (bh * nq16 + i / QT) * dvc * 512, dpt);
            if (masks) { /* (stage tile units: the f32 backward) */
              attn_bf16_tile_logits(d, 0, b, h, i, R[t], j0, nk, lo, hi, full, rs->scale, st, NULL,
                                    raw);
              if (attn_usermod_has_grad(d)) /* dp so that p (dp - D_i) is d score */
                attn_usermod_dp_t(d, b, h, i, R[t], j0, nk, raw, st, QT, dpt, ls[t], ds_i[t]);
              ops->probs_grad(st, dpt, 1.0f, NULL, NULL, ls[t], ds_i[t], rs->scale, ptb, dstb, qb,
                              dsv);
            } else {
              ops->probs_grad(st, dpt, rs->scale, full ? NULL : lo, full ? NULL : hi, ls[t],
                              ds_i[t], rs->scale, ptb, dstb, qb, dsv);
            }
            ops->accum(dqh + (i / QT) * ntk * 256, ntk, NULL, ktb, dsv);
          }
        }
        const int nqc = qb / 32;
        for (int kbi = 0; kbi < nb; kbi++) {
          if (!act[kbi]) continue;
          ops->accum_t(dvb + kbi * BC * ntv * 16, ntv, pt + kbi * BC * qb, qb,
                       x->dov + (bh * nq32 + qa / 32) * ntv * 512, nqc);
          ops->accum_t(dkb + kbi * BC * ntk * 16, ntk, dst + kbi * BC * qb, qb,
                       x->qv + (bh * nq32 + qa / 32) * ntk * 512, nqc);
        }
      }
    }
    /* dk, dv rows of the super-block from the C-tile blocked accumulators */
    float *dkh = x->dk + b * rs->k[0] + g * rs->k[1], *dvh = x->dv + b * rs->v[0] + g * rs->v[1];
    for (int64_t j = j0s; j < j1s; j++) {
      const int64_t jj = j - j0s, kt = jj / 16, r = jj % 16;
      float *dkr = dkh + j * rs->k[2], *dvr = dvh + j * rs->v[2];
      for (int64_t e = 0; e < d->D; e++)
        dkr[e] = dkb[(kt * ntk + e / 16) * 256 + r * 16 + e % 16];
      for (int64_t e = 0; e < d->Dv; e++)
        dvr[e] = dvb[(kt * ntv + e / 16) * 256 + r * 16 + e % 16];
    }
  }
}

attn_status attn_sdpa_backward_bf16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                         const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                         const float *out, const float *lse, const float *dout,
                                         float *dq, float *dk, float *dv) {
  attn_sdpa_resolved rs;
  attn_bf16_route route;
  attn_status st = attn_sdpa_bf16_check(d, q, k, v, &rs, &route, path);
  if (st) return st;
  if ((st = attn_sdpa_check_backward_ptrs(d, "sdpa bf16 backward", out, lse, dout, dq, dk, dv))) return st;
  if (route.f32 ||
      attn_stage_has_tile(d)) { /* the stage's derivative: on ds before the bf16 rounding */
    attn_flash_in in;           /* the bf16 operand hook (flash_operands.c) */
    attn_flash_in_of(ATTN_BF16, 0, q, k, v, &in);
    return attn_sdpa_backward_flash_in(route.f32 ? route.f32 : attn_kern_get()->flash, d, &in, out,
                                       lse, dout, dq, dk, dv);
  }
  attn_stage_backward(d, &rs, out, lse,
                      dout); /* the tiles need only lse (it holds the row units) */
  const attn_flash_bf16_ops *ops = route.tiles;
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, Lq = d->Lq, D = d->D, Dv = d->Dv;
  const int64_t nkb = attn_ceil_div(d->Lk, BC);
  if (nkb == 0) { /* no keys: every row is fully masked */
    attn_flash_dq_zero(d, &rs, dq);
    return ATTN_OK;
  }
  const int dc = (int)attn_ceil_div(D, 32), dvc = (int)attn_ceil_div(Dv, 32);
  const int ntk = (int)attn_ceil_div(D, 16), ntv = (int)attn_ceil_div(Dv, 16);
  const int qb = query_block(Lq);
  const int64_t Lqp = attn_ceil_div(Lq, qb) * qb, nq16 = Lqp / QT, nq32 = Lqp / 32;
  /* key chunks: enough items for the threads of a big machine, within memory */
  int64_t C = 1, part = B * Hq * Lqp * ntk * 16 * (int64_t)sizeof(float);
  const int64_t nsb = attn_ceil_div(nkb, SB);
  while (B * Hkv * C < WANT_ITEMS && C < nsb && (C + 1) * part <= PART_BYTES_MAX + part &&
         !attn_usermod_serial(d)) /* score_mod_param_grad: one item per (b, h) */
    C++;
  const int64_t items = B * Hkv * C;
  int nt = attn_kernel_threads(2.5 * B * Hq * Lq * d->Lk * (D + Dv), items);
  /* sizes in elements */
  const int64_t n_kp = B * Hkv * nkb * BC * 32 * dc, n_vr = B * Hkv * nkb * BC * 32 * dvc;
  const int64_t n_kt = B * Hkv * nkb * ntk * 16 * BC, n_qp = B * Hq * nq16 * dc * 512;
  const int64_t n_dop = B * Hq * nq16 * dvc * 512, n_qv = B * Hq * nq32 * ntk * 512;
  const int64_t n_dov = B * Hq * nq32 * ntv * 512, n_doh = B * Hq * Lq * Dv;
  const int64_t n16 = n_kp + n_vr + n_kt + n_qp + n_dop + n_qv + n_dov + n_doh;
  const int64_t n32 = B * Hq * Lq + C * part / (int64_t)sizeof(float);
  int64_t per =
      2 * BC * QT * 4 + SB * BC * (ntk + ntv) * 16 * 4 + 2 * SB * BC * qb * 2 + BC * QT * 2;
  per = (per + 63) & ~(int64_t)63;
  uint16_t *p16 = attn_bf16_alloc(n16 * 2, "backward packed operands");
  float *p32 = p16 ? attn_bf16_alloc(n32 * 4, "backward rowsums and partial dq") : NULL;
  char *ws = p32 ? attn_bf16_alloc(per * nt, "backward workspace") : NULL;
  if (!ws) {
    free(p16);
    free(p32);
    return ATTN_ENOMEM;
  }
  uint16_t *kp = p16, *vr = kp + n_kp, *kt = vr + n_vr, *qp = kt + n_kt, *dop = qp + n_qp;
  uint16_t *qv = dop + n_dop, *dov = qv + n_qv, *doh = dov + n_dov; /* doh: dout as bf16 */
  float *di = p32, *dqt = di + B * Hq * Lq;
  /* the level's conversion: the same bits as attn_f32_to_bf16_n */
  void (*to_bf16)(const float *, uint16_t *, int64_t) = attn_kern_get()->row.f32_to_bf16;
  bwd_ctx x = {ops, d,  &rs, lse, di,  dk, dv, dqt, kp,  vr,  kt, qp,
               dop, qv, dov, nkb, Lqp, C,  dc, dvc, ntk, ntv, qb};
#pragma omp parallel num_threads(nt)
  {
    /* dout rounded to bf16, and D_i = rowsum(dout * out) of the ROUNDED dout
     * (in double per row): the dp = dout·vᵀ of the tiles uses it too, so
     * dp - D_i keeps its exact cancellation (a row attending to one key
     * gets ds = 0, not the rounding of dout) */
#pragma omp for schedule(static)
    for (int64_t t = 0; t < B * Hq * Lq; t++) {
      int64_t bh = t / Lq, i = t % Lq, b = bh / Hq, h = bh % Hq;
      const float *o = out + b * rs.o[0] + h * rs.o[1] + i * rs.o[2];
      uint16_t *g16 = doh + t * Dv;
      to_bf16(dout + b * rs.o[0] + h * rs.o[1] + i * rs.o[2], g16, Dv);
      double acc = 0;
      for (int64_t e = 0; e < Dv; e++) {
        const uint32_t u = (uint32_t)g16[e] << 16; /* bf16 -> f32, exact */
        float g;
        memcpy(&g, &u, sizeof g);
        acc += (double)o[e] * g;
      }
      di[t] = (float)acc;
    }
#pragma omp for schedule(static)
    for (int64_t t = 0; t < B * Hkv * nkb; t++) {
      int64_t bg = t / nkb, kb = t % nkb, b = bg / Hkv, g = bg % Hkv, j0 = kb * BC;
      int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
      const uint16_t *kb0 = k + b * rs.k[0] + g * rs.k[1] + j0 * rs.k[2];
      const uint16_t *vb0 = v + b * rs.v[0] + g * rs.v[1] + j0 * rs.v[2];
      attn_bf16_pack_rows(kb0, rs.k[2], nk, D, kp + t * BC * 32 * dc, 32 * dc);
      attn_bf16_pack_rows(vb0, rs.v[2], nk, Dv, vr + t * BC * 32 * dvc, 32 * dvc);
      attn_bf16_pack_t(kb0, rs.k[2], nk, D, ntk * 16, kt + t * ntk * 16 * BC);
    }
    /* (barrier: doh is complete) query-side packs per 32 queries */
#pragma omp for schedule(static)
    for (int64_t t = 0; t < B * Hq * nq32; t++) {
      int64_t bh = t / nq32, i = (t % nq32) * 32, b = bh / Hq, h = bh % Hq;
      int n = (int)(Lq - i < 32 ? (Lq - i > 0 ? Lq - i : 0) : 32);
      const uint16_t *qi = n ? q + b * rs.q[0] + h * rs.q[1] + i * rs.q[2] : q;
      const uint16_t *di16 = n ? doh + (bh * Lq + i) * Dv : doh;
      for (int half = 0; half < 2; half++) {
        int nh = n - 16 * half < 0 ? 0 : (n - 16 * half > 16 ? 16 : n - 16 * half);
        int64_t tile = bh * nq16 + i / QT + half;
        attn_bf16_pack_qp(nh ? qi + 16 * half * rs.q[2] : qi, rs.q[2], nh, D, dc,
                          qp + tile * dc * 512);
        attn_bf16_pack_qp(nh ? di16 + 16 * half * Dv : di16, Dv, nh, Dv, dvc,
                          dop + tile * dvc * 512);
      }
      attn_bf16_pack_pairs(qi, rs.q[2], n, D, ntk, qv + t * ntk * 512);
      attn_bf16_pack_pairs(di16, Dv, n, Dv, ntv, dov + t * ntv * 512);
    }
    ops->begin();
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < items; t++)
      backward_item(&x, t / C / Hkv, (t / C) % Hkv, t % C, (char *)ws + attn_thread_id() * per);
    ops->end();
    /* dq = the chunks' dqᵀ partials summed in chunk order, transposed back */
#pragma omp for schedule(static)
    for (int64_t t = 0; t < B * Hq * Lq; t++) {
      int64_t bh = t / Lq, i = t % Lq;
      float *gq = dq + (bh / Hq) * rs.q[0] + (bh % Hq) * rs.q[1] + i * rs.q[2];
      const float *p0 = dqt + (bh * nq16 + i / QT) * ntk * 256 + i % QT;
      const int64_t cs = B * Hq * nq16 * ntk * 256; /* one chunk's partial */
      for (int64_t e = 0; e < D; e++)
        gq[e] = p0[e * QT];
      for (int64_t c = 1; c < C; c++) /* chunk order: the same sums as before */
        for (int64_t e = 0; e < D; e++)
          gq[e] += p0[c * cs + e * QT];
    }
  }
  free(ws);
  free(p32);
  free(p16);
  return ATTN_OK;
}

attn_status attn_sdpa_backward_bf16(const attn_sdpa_desc *d, const uint16_t *q, const uint16_t *k,
                                    const uint16_t *v, const float *out, const float *lse,
                                    const float *dout, float *dq, float *dk, float *dv) {
  return attn_sdpa_backward_bf16_path(ATTN_LOWP_AUTO, d, q, k, v, out, lse, dout, dq, dk, dv);
}
