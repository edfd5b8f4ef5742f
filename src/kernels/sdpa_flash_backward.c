/* Flash attention backward on the CPU: recomputes the scores from the saved
 * log-sum-exp (no [Lq, Lk] storage) and gives dq, dk, dv.
 *
 * Work items (b, K/V head g, key chunk c) run in parallel. Chunk c of C owns
 * the key blocks kb = c, c+C, c+2C, ... (interleaved, so causal work is
 * balanced): it alone writes their dk/dv rows, summing over the query heads
 * of the group in order. Its dq contributions go to dq itself (c = 0) or to
 * a partial buffer of its own (c > 0), added to dq in chunk order at the end.
 * C depends only on the shapes, so results are identical for any thread
 * count. Per key block of BC keys, for each query block of BQB rows that may
 * see it, and each row group of MR rows:
 *   s = q kᵀ, logits + masks; dp = dout vᵀ       (gemm on packed kᵀ, vᵀ)
 *   p = e^(s - lse), ds = p (dp - D_i) scale     (D_i = rowsum(dout * out))
 *   dq rows += ds k
 * then dv_blk += pᵀ dout and dk_blk += dsᵀ q over the query block. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "kernels/sdpa_flash.h"

#ifdef _OPENMP
#include <omp.h>
static int thread_id(void) { return omp_get_thread_num(); }
#else
static int thread_id(void) { return 0; }
#endif

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR, NC = ATTN_FLASH_NC, BQB = 48 };

/* Work items wanted before key chunks are added, and the memory the chunks'
 * partial dq buffers may take beyond the first. */
enum { WANT_ITEMS = 8 };
#define PART_BYTES_MAX ((int64_t)32 << 20)

typedef struct {
  const attn_flash_ops *ops;
  const attn_sdpa_desc *d;
  const attn_sdpa_resolved *rs;
  const float *q, *k, *v, *out, *lse, *dout, *di;
  float *dq, *dk, *dv, *part; /* part: [C-1][B, Hq, Lq, D] */
  int64_t C;
} bwd_ctx;

/* First i in [0, Lq) with key range hi(i) > j0 (want_hi) or lo(i) >= j1. */
static int64_t first_row(const attn_sdpa_desc *d, int64_t b, int64_t j, int want_hi) {
  int64_t a = 0, z = d->Lq;
  while (a < z) {
    int64_t mid = a + (z - a) / 2, lo, hi;
    attn_flash_key_range(d, b, mid, &lo, &hi);
    int ok = want_hi ? hi > j : lo >= j;
    if (ok)
      z = mid;
    else
      a = mid + 1;
  }
  return a;
}

/* dq rows of (b, h) for chunk c: the gradient itself or its partial buffer */
static float *dq_rows(const bwd_ctx *x, int64_t c, int64_t b, int64_t h, int64_t *ld) {
  const attn_sdpa_desc *d = x->d;
  if (c == 0) {
    *ld = x->rs->q[2];
    return x->dq + b * x->rs->q[0] + h * x->rs->q[1];
  }
  *ld = d->D;
  return x->part + (((c - 1) * d->B + b) * d->Hq + h) * d->Lq * d->D;
}

/* ws: kt [D, BC], vt [Dv, BC], dkb [BC, D], dvb [BC, Dv], p, ds [BQB, BC], s, dp [MR, BC] */
static void backward_item(const bwd_ctx *x, int64_t b, int64_t g, int64_t c, float *ws) {
  const attn_sdpa_desc *d = x->d;
  const attn_sdpa_resolved *rs = x->rs;
  const attn_flash_ops *ops = x->ops;
  const int64_t D = d->D, Dv = d->Dv, G = rs->group, nkb = (d->Lk + BC - 1) / BC;
  float *kt = ws, *vt = kt + D * BC, *dkb = vt + Dv * BC, *dvb = dkb + BC * D;
  float *p = dvb + BC * Dv, *ds = p + BQB * BC, *s = ds + BQB * BC, *dp = s + MR * BC;
  int lo[MR], hi[MR], all_lo[MR], all_hi[MR];
  for (int r = 0; r < MR; r++)
    all_lo[r] = 0, all_hi[r] = BC;
  for (int64_t h = g * G; h < (g + 1) * G; h++) {
    int64_t ld;
    float *dqh = dq_rows(x, c, b, h, &ld);
    for (int64_t i = 0; i < d->Lq; i++)
      memset(dqh + i * ld, 0, (size_t)D * sizeof(float));
  }
  const float *kh = x->k + b * rs->k[0] + g * rs->k[1];
  const float *vh = x->v + b * rs->v[0] + g * rs->v[1];
  int masks = d->bool_mask || d->add_mask;
  for (int64_t kb = c; kb < nkb; kb += x->C) {
    int64_t j0 = kb * BC;
    int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
    memset(dkb, 0, (size_t)nk * D * sizeof(float));
    memset(dvb, 0, (size_t)nk * Dv * sizeof(float));
    int64_t iq0 = first_row(d, b, j0, 1), iq1 = first_row(d, b, j0 + nk, 0);
    if (iq0 < iq1) {
      ops->pack_t(nk, D, kh + j0 * rs->k[2], rs->k[2], kt);
      ops->pack_t(nk, Dv, vh + j0 * rs->v[2], rs->v[2], vt);
    }
    for (int64_t h = g * G; iq0 < iq1 && h < (g + 1) * G; h++) {
      const float *qh = x->q + b * rs->q[0] + h * rs->q[1];
      const float *doh = x->dout + b * rs->o[0] + h * rs->o[1];
      const float *lseh = x->lse + (b * d->Hq + h) * d->Lq, *dih = x->di + (b * d->Hq + h) * d->Lq;
      int64_t ldq;
      float *dqh = dq_rows(x, c, b, h, &ldq);
      for (int64_t qb0 = iq0; qb0 < iq1; qb0 += BQB) {
        int nq = (int)(iq1 - qb0 < BQB ? iq1 - qb0 : BQB);
        for (int r0 = 0; r0 < nq; r0 += MR) {
          int R = nq - r0 < MR ? nq - r0 : MR;
          int64_t i = qb0 + r0;
          if (!attn_flash_tile_bounds(d, b, i, R, j0, nk, lo, hi)) {
            memset(p + r0 * BC, 0, (size_t)R * BC * sizeof(float));
            memset(ds + r0 * BC, 0, (size_t)R * BC * sizeof(float));
            continue;
          }
          ops->gemm(R, BC, D, qh + i * rs->q[2], rs->q[2], 1, kt, BC, s, BC, NULL, 0);
          ops->gemm(R, BC, Dv, doh + i * rs->o[2], rs->o[2], 1, vt, BC, dp, BC, NULL, 0);
          if (masks) { /* logits and masks first, then p, ds on finished logits */
            ops->logits(R, s, rs->scale, lo, hi);
            attn_flash_elem_masks(d, b, h, i, R, j0, nk, s);
            ops->probs_grad(R, s, 1.0f, all_lo, all_hi, dp, lseh + i, dih + i, rs->scale,
                            p + r0 * BC, ds + r0 * BC, BC);
          } else {
            ops->probs_grad(R, s, rs->scale, lo, hi, dp, lseh + i, dih + i, rs->scale, p + r0 * BC,
                            ds + r0 * BC, BC);
          }
          for (int64_t c0 = 0; c0 < D; c0 += NC) {
            int n = (int)(D - c0 < NC ? D - c0 : NC);
            ops->gemm(R, n, nk, ds + r0 * BC, BC, 1, kh + j0 * rs->k[2] + c0, rs->k[2],
                      dqh + i * ldq + c0, ldq, NULL, 1);
          }
        }
        /* dv_blk [nk, Dv] += pᵀ dout ; dk_blk [nk, D] += dsᵀ q over these nq rows */
        for (int jr = 0; jr < nk; jr += MR) {
          int R = nk - jr < MR ? nk - jr : MR;
          for (int64_t c0 = 0; c0 < Dv; c0 += NC) {
            int n = (int)(Dv - c0 < NC ? Dv - c0 : NC);
            ops->gemm(R, n, nq, p + jr, 1, BC, doh + qb0 * rs->o[2] + c0, rs->o[2],
                      dvb + jr * Dv + c0, Dv, NULL, 1);
          }
          for (int64_t c0 = 0; c0 < D; c0 += NC) {
            int n = (int)(D - c0 < NC ? D - c0 : NC);
            ops->gemm(R, n, nq, ds + jr, 1, BC, qh + qb0 * rs->q[2] + c0, rs->q[2],
                      dkb + jr * D + c0, D, NULL, 1);
          }
        }
      }
    }
    float *dkh = x->dk + b * rs->k[0] + g * rs->k[1], *dvh = x->dv + b * rs->v[0] + g * rs->v[1];
    for (int j = 0; j < nk; j++) {
      memcpy(dkh + (j0 + j) * rs->k[2], dkb + j * D, (size_t)D * sizeof(float));
      memcpy(dvh + (j0 + j) * rs->v[2], dvb + j * Dv, (size_t)Dv * sizeof(float));
    }
  }
}

attn_status attn_sdpa_backward_flash_ops(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                         const float *q, const float *k, const float *v,
                                         const float *out, const float *lse, const float *dout,
                                         float *dq, float *dk, float *dv) {
  attn_sdpa_resolved rs;
  attn_status st = attn_sdpa_validate(d, q, k, v, &rs);
  if (st) return st;
  if (attn_sdpa_has_positions(d)) /* not fused yet: the math backend has them */
    return attn_set_error(ATTN_EUNSUPPORTED, "sdpa flash: position schemes / block_mask unsupported");
  if (!ops) return attn_set_error(ATTN_EUNSUPPORTED, "sdpa flash: no kernels for this CPU");
  if (d->Lq > 0 && (!out || !lse || !dout || !dq))
    return attn_set_error(ATTN_EINVAL, "sdpa flash backward: %s is NULL",
                          !out    ? "out"
                          : !lse  ? "lse"
                          : !dout ? "dout"
                                  : "dq");
  if (d->Lk > 0 && (!dk || !dv))
    return attn_set_error(ATTN_EINVAL, "sdpa flash backward: %s is NULL", !dk ? "dk" : "dv");
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, Lq = d->Lq, D = d->D, Dv = d->Dv;
  const int64_t nkb = (d->Lk + BC - 1) / BC;
  if (nkb == 0) { /* no keys: every row is fully masked */
    for (int64_t bh = 0; bh < B * Hq; bh++)
      for (int64_t i = 0; i < Lq; i++)
        memset(dq + (bh / Hq) * rs.q[0] + (bh % Hq) * rs.q[1] + i * rs.q[2], 0,
               (size_t)D * sizeof(float));
    return ATTN_OK;
  }
  /* key chunks: enough items for the threads of a big machine, within memory */
  int64_t C = 1, dq_bytes = B * Hq * Lq * D * (int64_t)sizeof(float);
  while (B * Hkv * C < WANT_ITEMS && C < nkb && (C == 1 || C * dq_bytes <= PART_BYTES_MAX))
    C++;
  const int64_t items = B * Hkv * C;
  int nt = attn_flash_threads(2.5 * B * Hq * Lq * d->Lk * (D + Dv), items);
  float *di = attn_flash_alloc(B * Hq * Lq, 1, "backward rowsum");
  float *part = C > 1 ? attn_flash_alloc((C - 1) * B * Hq * Lq * D, 1, "partial dq") : NULL;
  int64_t per = 2 * (D + Dv) * BC + 2 * BQB * BC + 2 * MR * BC;
  float *ws = attn_flash_alloc(per, nt, "backward");
  if (!di || (C > 1 && !part) || !ws) {
    free(di);
    free(part);
    free(ws);
    return ATTN_ENOMEM;
  }
  per = (per + 15) & ~(int64_t)15;
  bwd_ctx x = {ops, d, &rs, q, k, v, out, lse, dout, di, dq, dk, dv, part, C};
#pragma omp parallel num_threads(nt)
  {
    /* D_i = rowsum(dout * out), in double per row */
#pragma omp for schedule(static)
    for (int64_t t = 0; t < B * Hq * Lq; t++) {
      int64_t bh = t / Lq, i = t % Lq, b = bh / Hq, h = bh % Hq;
      const float *o = out + b * rs.o[0] + h * rs.o[1] + i * rs.o[2];
      const float *g = dout + b * rs.o[0] + h * rs.o[1] + i * rs.o[2];
      double acc = 0;
      for (int64_t c = 0; c < Dv; c++)
        acc += (double)o[c] * g[c];
      di[t] = (float)acc;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < items; t++)
      backward_item(&x, t / C / Hkv, (t / C) % Hkv, t % C, ws + thread_id() * per);
    if (C > 1) { /* dq += the other chunks' parts, in chunk order */
#pragma omp for schedule(static)
      for (int64_t t = 0; t < B * Hq * Lq; t++) {
        int64_t bh = t / Lq, i = t % Lq;
        float *g = dq + (bh / Hq) * rs.q[0] + (bh % Hq) * rs.q[1] + i * rs.q[2];
        for (int64_t c = 1; c < C; c++) {
          const float *pc = part + ((c - 1) * B * Hq * Lq + t) * D;
          for (int64_t e = 0; e < D; e++)
            g[e] += pc[e];
        }
      }
    }
  }
  free(di);
  free(part);
  free(ws);
  return ATTN_OK;
}

attn_status attn_sdpa_backward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                     const float *v, const float *out, const float *lse,
                                     const float *dout, float *dq, float *dk, float *dv) {
  return attn_sdpa_backward_flash_ops(attn_flash_ops_default(), d, q, k, v, out, lse, dout, dq, dk,
                                      dv);
}
