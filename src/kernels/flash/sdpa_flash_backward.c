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
 * then dv_blk += pᵀ dout and dk_blk += dsᵀ q over the query block (only the
 * rows whose tiles were computed).
 * Variants: logits as in the forward; Shaw: dp += dout·shaw_vᵀ on the band,
 * dq += (ds by table row) shaw_k; table gradients (d rel_bias by relative
 * distance, d shaw_k, d shaw_v on the band) go to per-work-item partials,
 * summed in item order at the end (table_grads_finish).
 * Attention dropout (sdpa_dropout.h): the forward's keep bits regenerated per
 * tile: dp is masked and scaled before ds = p (dp - D_i) (p the undropped
 * probabilities, D_i from the dropped output), then p itself before dv += pᵀ
 * dout.
 * fp16 inputs (attn_flash_in, sdpa_flash_f16.c): each key block of k and v
 * is converted to f32 rows (packed from there; dq reads k's), and each query
 * block's q rows before its tiles; the rest is unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "kernels/flash/flash_loop.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/sdpa/sdpa_batched.h"
#include "kernels/sdpa/sdpa_dropout.h"
#include "kernels/sdpa/sdpa_positions.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/sdpa_usermod.h"
#include "kernels/util.h"

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR, NC = ATTN_FLASH_NC, QW = ATTN_FLASH_QW, BQB = 48 };

/* Work items wanted before key chunks are added, and the memory the chunks'
 * partial dq buffers may take beyond the first. */
enum { WANT_ITEMS = 8 };
#define PART_BYTES_MAX ((int64_t)32 << 20)

typedef struct {
  const attn_flash_ops *ops;
  const attn_sdpa_desc *d;
  const attn_sdpa_resolved *rs;
  const attn_flash_in *in;
  const float *out, *lse, *dout, *di;
  float *dq, *dk, *dv, *part; /* part: [C-1+dense0][B, Hq, Lq, D] */
  int64_t C;
  int dense0; /* chunk 0's dq in part's first slot too (dq's rows strided: copied at the end) */
  const attn_flash_pos *pos;
  /* per-item table gradient partials [items, tper]: d bias by relative
   * distance [G, nrel] (T5), d shaw_k [nr, D], d shaw_v [nr, Dv] */
  float *tpart;
  int64_t tper, nt5, nsk, nsv;
} bwd_ctx;

/* dq rows of (b, h) for chunk c: the gradient itself or its partial buffer */
static float *dq_rows(const bwd_ctx *x, int64_t c, int64_t b, int64_t h, int64_t *ld) {
  const attn_sdpa_desc *d = x->d;
  if (c == 0 && !x->dense0) {
    *ld = x->rs->q[2];
    return x->dq + b * x->rs->q[0] + h * x->rs->q[1];
  }
  *ld = d->D;
  return x->part + (((c - 1 + x->dense0) * d->B + b) * d->Hq + h) * d->Lq * d->D;
}

/* ws: kt [D, BC], vt [Dv, BC], dkb [BC, D], dvb [BC, Dv], p, ds [BQB, BC], s, dp [MR, BC],
 * xq, xv [MR, QW] (Shaw bands: q·shaw_kᵀ then ds summed; dout·shaw_vᵀ then p summed),
 * gc [MR, BC] (the score-modifier stage's derivative on the tile), raw [MR, BC] (the scores before
 * a user score_mod); kc [BC, D]: the block of k as dense rows (fp16: converted, as vc [BC, Dv] and
 * qc [BQB, D] the blocks of v and q; strided f32 q and dout are dense copies already). tp: this
 * item's table gradient partials (x->tper floats). */
static void backward_item(const bwd_ctx *x, int64_t b, int64_t g, int64_t c, float *ws,
                          float *tp) {
  const attn_sdpa_desc *d = x->d;
  const attn_sdpa_resolved *rs = x->rs;
  const attn_flash_ops *ops = x->ops;
  const int64_t D = d->D, Dv = d->Dv, G = rs->group, nkb = (d->Lk + BC - 1) / BC;
  float *kt = ws, *vt = kt + D * BC, *dkb = vt + Dv * BC, *dvb = dkb + BC * D;
  float *p = dvb + BC * Dv, *ds = p + BQB * BC, *s = ds + BQB * BC, *dp = s + MR * BC;
  float *xq = dp + MR * BC, *xv = xq + MR * QW;
  float *gc = attn_stage_has_tile(d) ? xv + MR * QW : NULL, *raw = xv + MR * QW + MR * BC;
  float *kc = raw + MR * BC, *vc = kc + BC * D, *qc = vc + BC * Dv;
  const attn_flash_in *in = x->in;
  const attn_flash_pos *pos = x->pos;
  float *grel = x->nt5 ? tp : NULL, *gsk = x->nsk ? tp + x->nt5 : NULL;
  float *gsv = x->nsv ? tp + x->nt5 + x->nsk : NULL;
  if (x->tper) memset(tp, 0, (size_t)x->tper * sizeof(float));
  int lo[MR], hi[MR], all_lo[MR], all_hi[MR];
  for (int r = 0; r < MR; r++)
    all_lo[r] = 0, all_hi[r] = BC;
  for (int64_t h = g * G; h < (g + 1) * G; h++) {
    int64_t ld;
    float *dqh = dq_rows(x, c, b, h, &ld);
    for (int64_t i = 0; i < d->Lq; i++)
      memset(dqh + i * ld, 0, (size_t)D * sizeof(float));
  }
  const int64_t koff = b * rs->k[0] + g * rs->k[1], voff = b * rs->v[0] + g * rs->v[1];
  const int masks = d->bool_mask || d->add_mask || pos->bias || d->shaw_k || gc;
  const int drop = d->dropout_p != 0.0f;
  for (int64_t kb = c; kb < nkb; kb += x->C) {
    int64_t j0 = kb * BC;
    int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
    memset(dkb, 0, (size_t)nk * D * sizeof(float));
    memset(dvb, 0, (size_t)nk * Dv * sizeof(float));
    int64_t iq0 = attn_flash_first_row(d, b, j0, 1), iq1 = attn_flash_first_row(d, b, j0 + nk, 0);
    int64_t ldk = 0, ldv;
    const float *kr = NULL; /* the block's k rows (in place or converted) */
    if (iq0 < iq1) {
      kr = attn_flash_in_rows(in->k, in->k16, in, koff + j0 * rs->k[2], rs->k[2], nk, D, kc, D,
                              &ldk);
      kr = attn_flash_dense_rows(kr, ldk, nk, D, kc, &ldk);
      const float *vb = attn_flash_in_rows(in->v, in->v16, in, voff + j0 * rs->v[2], rs->v[2], nk,
                                           Dv, vc, Dv, &ldv);
      ops->pack_t(nk, D, kr, ldk, kt);
      ops->pack_t(nk, Dv, vb, ldv, vt);
    }
    for (int64_t h = g * G; iq0 < iq1 && h < (g + 1) * G; h++) {
      const int64_t qoff = b * rs->q[0] + h * rs->q[1];
      const float *doh = x->dout + b * rs->o[0] + h * rs->o[1];
      const float *lseh = x->lse + (b * d->Hq + h) * d->Lq, *dih = x->di + (b * d->Hq + h) * d->Lq;
      int64_t lddq;
      float *dqh = dq_rows(x, c, b, h, &lddq);
      const int64_t hh = h - g * G;
      for (int64_t qb0 = iq0; qb0 < iq1; qb0 += BQB) {
        int nq = (int)(iq1 - qb0 < BQB ? iq1 - qb0 : BQB);
        int ra = nq, rz = 0; /* rows [ra, rz) hold the tiles computed */
        int64_t ldq;         /* the block's q rows: qb row r is query qb0 + r */
        const float *qb = attn_flash_in_rows(in->q, in->q16, in, qoff + qb0 * rs->q[2], rs->q[2],
                                             nq, D, qc, D, &ldq);
        const int64_t ldo = rs->o[2]; /* the block's dout rows */
        const float *dob = doh + qb0 * ldo;
        for (int r0 = 0; r0 < nq; r0 += MR) {
          int R = nq - r0 < MR ? nq - r0 : MR;
          const int64_t i = qb0 + r0, pi = i + d->q_offset;
          /* block layout, user mods: 0 skip the tile, 1 none, 2 per element */
          const int blk = d->block_mask ? attn_flash_block_state(d, pi, R, j0, nk) : 1;
          const int um = d->mods ? attn_usermod_tile_state(d, b, h, i, R, j0, nk) : 1;
          if (!blk || !um || !attn_flash_tile_bounds(d, b, i, R, j0, nk, lo, hi)) {
            memset(p + r0 * BC, 0, (size_t)R * BC * sizeof(float));
            memset(ds + r0 * BC, 0, (size_t)R * BC * sizeof(float));
            continue;
          }
          if (ra > r0) ra = r0;
          rz = r0 + R;
          const float *qi = qb + r0 * ldq, *doi = dob + r0 * ldo;
          const float *ends = pos->ends ? pos->ends + ((b * d->Hq + h) * d->Lq + i) * 4 : NULL;
          float *pr = p + r0 * BC, *dsr = ds + r0 * BC;
          const int nc = attn_flash_tile_cols(R, hi);
          ops->gemm(R, nc, D, qi, ldq, 1, kt, BC, s, BC, NULL, 0);
          ops->gemm(R, nc, Dv, doi, ldo, 1, vt, BC, dp, BC, NULL, 0);
          int64_t t0 = 0;
          int w = pos->nr ? attn_flash_shaw_band(d, pi, R, j0, nk, &t0) : 0;
          if (pos->svt) { /* dp += dout·shaw_vᵀ at each (i, j)'s table row */
            attn_flash_shaw_rows(ops, R, doi, ldo, Dv, pos->svt, pos->nr, t0, w, 1.0f, xv);
            attn_flash_shaw_gather(ops, d, pi, R, j0, nk, t0, xv, ends + 2, 0, dp);
          }
          if (drop) attn_sdpa_dropout_tile(d, b, h, i, R, j0, nk, dp, BC); /* d drop(P) -> dP */
          /* T5 and score_mod want ds without the scale: scaled below, after them */
          const int umg = um == 2 && attn_usermod_has_grad(d);
          const float dsc = grel || umg ? 1.0f : rs->scale;
          if (masks || blk == 2 || um == 2) { /* logits, mods, masks, positions, then p, ds */
            const attn_flash_tile tl = {b, h, i, j0, R, nk, blk, um, lo, hi};
            attn_flash_tile_logits(ops, d, rs, pos, &tl, gc != NULL, qi, ldq, t0, w, s, gc,
                                   umg ? raw : NULL, xq);
            ops->probs_grad(R, s, 1.0f, all_lo, all_hi, dp, lseh + i, dih + i, dsc, pr, dsr, BC);
          } else {
            ops->probs_grad(R, s, rs->scale, lo, hi, dp, lseh + i, dih + i, dsc, pr, dsr, BC);
          }
          if (drop) attn_sdpa_dropout_tile(d, b, h, i, R, j0, nk, pr, BC); /* dv from drop(P) */
          if (grel) /* d bias by relative distance x = j - i + Lq - 1 */
            ops->add_rows(R, nk, grel + hh * pos->nrel + (j0 - i + d->Lq - 1), -1, dsr, BC, 1, 0);
          if (umg) attn_usermod_tile_grad(d, b, h, i, R, j0, nk, raw, BC, dsr, BC);
          if (grel || umg)
            for (int e = 0; e < R * BC; e++)
              dsr[e] *= rs->scale;
          if (gc) attn_stage_grad_tile(R, nk, dsr, BC, gc, BC);
          for (int64_t c0 = 0; c0 < D; c0 += NC) {
            int n = (int)(D - c0 < NC ? D - c0 : NC);
            ops->gemm(R, n, nk, dsr, BC, 1, kr + c0, ldk, dqh + i * lddq + c0, lddq, NULL, 1);
          }
          if (d->shaw_k) { /* dq += dqr · shaw_k[band]; d shaw_k[band] += dqrᵀ q */
            attn_flash_shaw_scatter(ops, d, pi, R, j0, nk, t0, w, dsr, BC, xq);
            for (int64_t c0 = 0; c0 < D; c0 += NC) {
              int n = (int)(D - c0 < NC ? D - c0 : NC);
              ops->gemm(R, n, w, xq, QW, 1, d->shaw_k + t0 * D + c0, D, dqh + i * lddq + c0, lddq,
                        NULL, 1);
            }
            if (gsk) attn_flash_table_grad(ops, R, w, t0, xq, qi, ldq, D, gsk);
          }
          if (gsv) { /* d shaw_v[band] += prᵀ dout */
            attn_flash_shaw_scatter(ops, d, pi, R, j0, nk, t0, w, pr, BC, xv);
            attn_flash_table_grad(ops, R, w, t0, xv, doi, ldo, Dv, gsv);
          }
        }
        /* dv_blk [nk, Dv] += pᵀ dout ; dk_blk [nk, D] += dsᵀ q over rows [ra, rz) */
        const int nr = rz - ra;
        for (int jr = 0; nr > 0 && jr < nk; jr += MR) {
          int R = nk - jr < MR ? nk - jr : MR;
          for (int64_t c0 = 0; c0 < Dv; c0 += NC) {
            int n = (int)(Dv - c0 < NC ? Dv - c0 : NC);
            ops->gemm(R, n, nr, p + ra * BC + jr, 1, BC, dob + ra * ldo + c0, ldo,
                      dvb + jr * Dv + c0, Dv, NULL, 1);
          }
          for (int64_t c0 = 0; c0 < D; c0 += NC) {
            int n = (int)(D - c0 < NC ? D - c0 : NC);
            ops->gemm(R, n, nr, ds + ra * BC + jr, 1, BC, qb + ra * ldq + c0, ldq,
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

/* Table gradients of a call that computes nothing: zeros (overwritten later
 * by table_grads_finish when there is work). */
static void table_grads_zero(const attn_sdpa_desc *d) {
  const int64_t nr = attn_pos_shaw_rows(d);
  if (d->rel_bias && d->rel_bias_grad)
    memset(d->rel_bias_grad, 0, (size_t)(d->Hq * d->rel_buckets) * sizeof(float));
  if (d->shaw_k && d->shaw_k_grad) memset(d->shaw_k_grad, 0, (size_t)(nr * d->D) * sizeof(float));
  if (d->shaw_v && d->shaw_v_grad) memset(d->shaw_v_grad, 0, (size_t)(nr * d->Dv) * sizeof(float));
  attn_pos_alibi_grad_zero(d);
}

/* The item partials summed in item order (b, chunk for each K/V head), in
 * double: d rel_bias[h, bucket(x)] over the relative distances x, and the
 * Shaw tables element by element. Independent of the thread count. */
static void table_grads_finish(const bwd_ctx *x, int64_t items) {
  const attn_sdpa_desc *d = x->d;
  const int64_t G = x->rs->group, C = x->C, Hkv = d->Hkv;
  if (x->nt5) {
    const int t5 = d->rel_bias && d->rel_bias_grad; /* else only the ALiBi slopes' */
    const int64_t nrel = x->pos->nrel, nb = t5 ? d->rel_buckets : 1;
    double *acc = calloc((size_t)nb, sizeof(double));
    int64_t *bucket = malloc((size_t)nrel * sizeof(int64_t));
    for (int64_t e = 0; acc && bucket && e < nrel; e++)
      bucket[e] = t5 ? attn_pos_t5_bucket(e - (d->Lq - 1) - d->q_offset, d->rel_bidirectional, nb,
                                          d->rel_max_distance)
                     : 0;
    for (int64_t h = 0; acc && bucket && h < d->Hq; h++) {
      const int64_t g = h / G, hh = h % G;
      memset(acc, 0, (size_t)nb * sizeof(double));
      double ga = 0.0; /* d slope = -sum ds |p_i - j| */
      for (int64_t e = 0; e < nrel; e++) {
        double s = 0.0;
        for (int64_t b = 0; b < d->B; b++)
          for (int64_t c = 0; c < C; c++)
            s += x->tpart[((b * Hkv + g) * C + c) * x->tper + hh * nrel + e];
        acc[bucket[e]] += s;
        ga += s * (double)attn_pos_abs(e - (d->Lq - 1) - d->q_offset);
      }
      for (int64_t u = 0; t5 && u < nb; u++)
        d->rel_bias_grad[h * nb + u] = (float)acc[u];
      if (d->alibi_slopes && d->alibi_slopes_grad) d->alibi_slopes_grad[h] = (float)-ga;
    }
    free(acc);
    free(bucket);
  }
  float *dst[2] = {x->nsk ? d->shaw_k_grad : NULL, x->nsv ? d->shaw_v_grad : NULL};
  const int64_t n[2] = {x->nsk, x->nsv}, off[2] = {x->nt5, x->nt5 + x->nsk};
  for (int part = 0; part < 2; part++)
    for (int64_t e = 0; dst[part] && e < n[part]; e++) {
      double s = 0.0;
      for (int64_t t = 0; t < items; t++)
        s += x->tpart[t * x->tper + off[part] + e];
      dst[part][e] = (float)s;
    }
}

attn_status attn_sdpa_backward_flash_in(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                        const attn_flash_in *in, const float *out, const float *lse,
                                        const float *dout, float *dq, float *dk, float *dv) {
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
  if ((st = attn_sdpa_check_backward_ptrs(d, "sdpa flash backward", out, lse, dout, dq, dk, dv))) return st;
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, Lq = d->Lq, D = d->D, Dv = d->Dv;
  const int64_t nkb = (d->Lk + BC - 1) / BC;
  table_grads_zero(d);
  attn_stage_backward(d, &rs, out, lse, dout); /* O(rows Dv), outside the tiles */
  if (nkb == 0) { /* no keys: every row is fully masked */
    attn_flash_dq_zero(d, &rs, dq);
    return ATTN_OK;
  }
  /* key chunks: enough items for the threads of a big machine, within memory */
  int64_t C = 1, dq_bytes = B * Hq * Lq * D * (int64_t)sizeof(float);
  while (B * Hkv * C < WANT_ITEMS && C < nkb && (C == 1 || C * dq_bytes <= PART_BYTES_MAX) &&
         !attn_usermod_serial(d)) /* score_mod_param_grad: one item per (b, h) */
    C++;
  const int64_t items = B * Hkv * C;
  /* threads by the tiles' work (whole BC-key blocks: sdpa_flash.c) */
  int nt = attn_kernel_threads(2.5 * B * Hq * Lq * (double)(nkb * BC) * (D + Dv), items);
  float *di = attn_flash_alloc(B * Hq * Lq, 1, "backward rowsum");
  /* dq's rows strided (e.g. [B, L, H, D]): chunk 0 accumulates in dense rows,
   * which stay in L2 across the key blocks (sdpa_flash_layout.c) */
  const int dense0 = rs.q[2] != D;
  const int64_t nparts = C - 1 + dense0;
  float *part = nparts ? attn_flash_alloc(nparts * B * Hq * Lq * D, 1, "partial dq") : NULL;
  int64_t per = 2 * (D + Dv) * BC + 2 * BQB * BC + 4 * MR * BC + 2 * MR * QW;
  per += BC * D;                             /* kc */
  if (f16) per += Dv * BC + BQB * D;          /* vc, qc */
  float *ws = attn_flash_alloc(per, nt, "backward");
  /* q's and dout's rows strided: the items read dense copies (made with D_i
   * below; each query row is read once per key block, sdpa_flash_layout.c) */
  attn_flash_dense_io dio;
  int dio_ok = attn_flash_dense_io_init(&dio, d, &rs, in, dout);
  attn_flash_pos pos;
  bwd_ctx x = {ops, d, &dio.rs, &dio.in, out, lse, dio.dout, di, dq, dk, dv, part, C, dense0,
               &pos, NULL, 0, 0, 0, 0};
  st = attn_flash_pos_init(d, &pos);
  if (!st && (st = attn_flash_shaw_ends(&pos, d, &rs, in->q, dout, nt))) attn_flash_pos_free(&pos);
  if (!st) {
    x.nt5 = attn_pos_wants_rel_grad(d) ? rs.group * pos.nrel : 0;
    x.nsk = d->shaw_k && d->shaw_k_grad ? pos.nr * D : 0;
    x.nsv = d->shaw_v && d->shaw_v_grad ? pos.nr * Dv : 0;
    x.tper = (x.nt5 + x.nsk + x.nsv + 15) & ~(int64_t)15;
    int64_t n;
    if (x.tper && !__builtin_mul_overflow(x.tper, items, &n))
      x.tpart = attn_flash_alloc(n, 1, "table gradients");
    else if (x.tper)
      attn_set_error(ATTN_ENOMEM, "sdpa flash: table gradient partials too large");
  }
  if (st || !di || (nparts && !part) || !ws || (x.tper && !x.tpart) || !dio_ok) {
    attn_flash_dense_io_free(&dio);
    free(di);
    free(part);
    free(ws);
    free(x.tpart);
    if (!st) attn_flash_pos_free(&pos);
    return st ? st : ATTN_ENOMEM;
  }
  per = (per + 15) & ~(int64_t)15;
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
      attn_flash_dense_io_row(&dio, t, b, h, i);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < items; t++)
      backward_item(&x, t / C / Hkv, (t / C) % Hkv, t % C, ws + attn_thread_id() * per,
                    x.tpart ? x.tpart + t * x.tper : NULL);
    if (nparts) { /* dq = chunk 0's (dense0), += the other chunks' parts, in chunk order */
#pragma omp for schedule(static)
      for (int64_t t = 0; t < B * Hq * Lq; t++) {
        int64_t bh = t / Lq, i = t % Lq;
        float *g = dq + (bh / Hq) * rs.q[0] + (bh % Hq) * rs.q[1] + i * rs.q[2];
        if (dense0) memcpy(g, part + t * D, (size_t)D * sizeof(float));
        for (int64_t c = 1; c < C; c++) {
          const float *pc = part + ((c - 1 + dense0) * B * Hq * Lq + t) * D;
          for (int64_t e = 0; e < D; e++)
            g[e] += pc[e];
        }
      }
    }
  }
  if (x.tper) table_grads_finish(&x, items);
  attn_flash_dense_io_free(&dio);
  free(di);
  free(part);
  free(ws);
  free(x.tpart);
  attn_flash_pos_free(&pos);
  return ATTN_OK;
}

static attn_status backward_piece(const attn_sdpa_desc *d, const attn_sdpa_io *x, void *ops) {
  const attn_flash_in in = {x->q, x->k, x->v, NULL, NULL, NULL, NULL};
  return attn_sdpa_backward_flash_in(ops, d, &in, x->out_in, x->lse_in, x->dout, x->dq, x->dk,
                                     x->dv);
}

attn_status attn_sdpa_backward_flash_ops(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                                         const float *q, const float *k, const float *v,
                                         const float *out, const float *lse, const float *dout,
                                         float *dq, float *dk, float *dv) {
  if (d && attn_sdpa_batched_needed(d)) { /* per-batch alignment or slopes with positions */
    const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out_in = out, .lse_in = lse, .dout = dout,
                             .dq = dq, .dk = dk, .dv = dv};
    return attn_sdpa_run_batched(d, 1, &io, backward_piece, (void *)ops);
  }
  const attn_flash_in in = {q, k, v, NULL, NULL, NULL, NULL};
  return attn_sdpa_backward_flash_in(ops, d, &in, out, lse, dout, dq, dk, dv);
}

attn_status attn_sdpa_backward_flash(const attn_sdpa_desc *d, const float *q, const float *k,
                                     const float *v, const float *out, const float *lse,
                                     const float *dout, float *dq, float *dk, float *dv) {
  return attn_sdpa_backward_flash_ops(attn_flash_ops_default(), d, q, k, v, out, lse, dout, dq, dk,
                                      dv);
}
