/* int8 flash attention forward (attn/sdpa_i8.h): quantization, packing and
 * the tile loop.
 *
 * Per call, in parallel: the mean of k per (b, kv head) over all Lk keys;
 * k - mean quantized per key into zero-padded int8 rows [B, Hkv, nkb*64, Dp]
 * with scales sk; v rounded to bf16 into per-block transposes vT [B, Hkv,
 * nkb, dvt*16, 64] (as the bf16 flash); q quantized per row into groups of
 * 16 (B tiles, sums, scales; sdpa_flash_i8.h) with the row's shift
 * scale·q·mean (added back to lse). Then work items (b, h, 64 query rows)
 * run in parallel; for each key block some row may see and each group of 16
 * queries:
 *   sᵀ [64, 16] = dequant(K·Qᵀ)        (int8 scores kernel, exact int32)
 *   masks (bool / additive) if any     (C, on the f32 logits)
 *   p = e^(t - m), m, l, alpha          (bf16 flash softmax, p rounded to bf16)
 *   oᵀ [Dv, 16] = alpha oᵀ + Vᵀ·p       (bf16 flash accum)
 * then out = oᵀᵀ / l, lse = m + log l + shift. A row's arithmetic depends on
 * its own data only, so results are identical for any thread count.
 * Only the scores are this file's (the arithmetic differs: exact int32 dot
 * products of quantized rows, VPDPBUSD / VPMADDWD / TDPBSSD, then the
 * dequantization); the tile steps, the softmax, p·v and the rows' ends are
 * the bf16 flash's (attn_bf16_item_forward), with its score modifiers,
 * masks and user mods. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "attn/sdpa_i8.h"
#include "kernels/flash/sdpa_flash_bf16.h"
#include "kernels/flash/sdpa_flash_i8.h"
#include "kernels/kern.h"
#include "kernels/lowp/gemm_lowp_internal.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/util.h"

enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT, BQ = 64, NG = BQ / QT };


/* element (depth e, query r) of a run of int8 B tiles */
static inline int64_t qp_at(int64_t e, int r) {
  return (e >> 6) * 1024 + ((e & 63) >> 2) * 64 + r * 4 + (e & 3);
}

void attn_flash_i8_scores_generic(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                  int32_t *st) {
  for (int j = 0; j < BC; j++) {
    const int8_t *kr = k + j * ldk;
    for (int r = 0; r < QT; r++) {
      int32_t s = 0;
      for (int64_t e = 0; e < 64 * dc; e++)
        s += (int32_t)kr[e] * qp[qp_at(e, r)];
      st[j * QT + r] = s;
    }
  }
}

void attn_i8_dequant_generic(const int32_t *s, const float *sk, const float *sq, float *st) {
  for (int j = 0; j < BC; j++)
    for (int r = 0; r < QT; r++)
      st[j * QT + r] = (float)s[j * QT + r] * (sk[j] * sq[r]);
}

int attn_i8_quantize_row_generic(const float *x, int64_t n, int8_t *q, float *scale) {
  return attn_quantize_weights_s8(x, 1, n, q, scale) != ATTN_OK;
}

/* The scores kernel of a path with the bf16 flash's softmax and P·V; the
 * quantizer and dequantization by the CPU (every variant gives the same bits). */
typedef struct {
  attn_i8_scores_fn scores;
  const attn_flash_bf16_ops *ops;
  attn_i8_quantize_fn quant;
  attn_i8_dequant_fn dequant;
  attn_i8_colsum_fn colsum;
  void (*to_bf16)(const float *x, uint16_t *y, int64_t n);
} i8_kernels;

void attn_i8_colsum_generic(const float *x, int64_t ld, int64_t n, int64_t D, double *acc) {
  for (int64_t j = 0; j < n; j++)
    for (int64_t e = 0; e < D; e++)
      acc[e] += x[j * ld + e];
}

static int amx_usable(void) {
  return attn_kern_get()->lowp.i8_scores_amx && attn_flash_bf16_amx_usable();
}

static int vnni_usable(void) { return attn_kern_get()->lowp.i8_scores_simd != NULL; }

int attn_sdpa_i8_path_available(attn_lowp_path path) {
  if (path == ATTN_LOWP_AUTO || path == ATTN_LOWP_PORTABLE) return 1;
  if (path == ATTN_LOWP_SIMD) return vnni_usable();
  if (path == ATTN_LOWP_AMX) return amx_usable();
  return 0;
}

static attn_status pick(attn_lowp_path path, i8_kernels *kr) {
  if (path == ATTN_LOWP_AUTO) path = amx_usable()    ? ATTN_LOWP_AMX
                                     : vnni_usable() ? ATTN_LOWP_SIMD
                                                     : ATTN_LOWP_PORTABLE;
  const attn_kern *t = attn_kern_get();
  const attn_lowp_ops *l = &t->lowp;
  kr->ops = attn_flash_bf16_ops_generic();
  kr->quant = l->i8_quantize_row ? l->i8_quantize_row : attn_i8_quantize_row_generic;
  kr->dequant = l->i8_dequant ? l->i8_dequant : attn_i8_dequant_generic;
  kr->colsum = l->i8_colsum ? l->i8_colsum : attn_i8_colsum_generic;
  kr->to_bf16 = t->row.f32_to_bf16; /* the same bits at every level */
  switch (path) {
  case ATTN_LOWP_PORTABLE: kr->scores = attn_flash_i8_scores_generic; return ATTN_OK;
  case ATTN_LOWP_SIMD:
    if (!vnni_usable())
      return attn_set_error(ATTN_EUNSUPPORTED, "sdpa i8: the level (%s) has no int8 scores kernel",
                            t->name);
    kr->scores = l->i8_scores_simd;
    if (l->flash_bf16_simd) kr->ops = l->flash_bf16_simd;
    return ATTN_OK;
  case ATTN_LOWP_AMX:
    if (!amx_usable())
      return attn_set_error(ATTN_EUNSUPPORTED, "sdpa i8: AMX-INT8 and AMX-BF16 (with AVX512_BF16 "
                                               "and the tile permission) are not available");
    kr->scores = l->i8_scores_amx;
    kr->ops = l->flash_bf16_amx;
    return ATTN_OK;
  default:
    return attn_set_error(ATTN_EUNSUPPORTED, "sdpa i8: path %d is not an int8 flash path", (int)path);
  }
}

typedef struct {
  const attn_sdpa_desc *d;
  const attn_sdpa_resolved *rs;
  i8_kernels kr;
  int64_t nkb, nqg, dc, dvt, Dp;
  int8_t *kp, *qp; /* packed k rows [B,Hkv,nkb*64,Dp]; q groups [B,Hq,nqg] */
  float *sk, *mean, *shift; /* [B,Hkv,nkb*64], [B,Hkv,D], [B,Hq,Lq] */
  uint16_t *vt;
  float *out, *lse;
} i8_ctx;

/* Mean of k over the Lk keys of (b, kv head g), in double then f32. */
static void key_mean(const i8_ctx *x, const float *k, int64_t b, int64_t g) {
  const attn_sdpa_desc *d = x->d;
  double acc[ATTN_BF16_DMAX] = {0};
  const float *kh = k + b * x->rs->k[0] + g * x->rs->k[1];
  x->kr.colsum(kh, x->rs->k[2], d->Lk, d->D, acc);
  float *m = x->mean + (b * d->Hkv + g) * d->D;
  const int centre = d->Lk > 0 && attn_stage_shift_invariant(d); /* else the true logits */
  for (int64_t e = 0; e < d->D; e++)
    m[e] = centre ? (float)(acc[e] / (double)d->Lk) : 0.0f;
}

/* Key block t of (b, g): k - mean quantized per row, v rounded to bf16 and
 * transposed. Returns 1 if some k is not finite. */
static int pack_kv(const i8_ctx *x, const float *k, const float *v, int64_t t) {
  const attn_sdpa_desc *d = x->d;
  const attn_sdpa_resolved *rs = x->rs;
  const int64_t bh = t / x->nkb, b = bh / d->Hkv, g = bh % d->Hkv, j0 = (t % x->nkb) * BC;
  const int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
  const float *mean = x->mean + bh * d->D;
  int8_t *kp = x->kp + t * BC * x->Dp;
  float *sk = x->sk + t * BC, row[ATTN_BF16_DMAX];
  uint16_t vr[ATTN_BF16_DMAX];
  int bad = 0;
  memset(kp, 0, (size_t)(BC * x->Dp));
  for (int j = 0; j < BC; j++) {
    sk[j] = 0.0f;
    if (j >= nk) continue;
    const float *kr = k + b * rs->k[0] + g * rs->k[1] + (j0 + j) * rs->k[2];
    for (int64_t e = 0; e < d->D; e++)
      row[e] = kr[e] - mean[e];
    bad |= x->kr.quant(row, d->D, kp + j * x->Dp, sk + j);
  }
  uint16_t *vt = x->vt + t * x->dvt * 16 * BC;
  memset(vt, 0, (size_t)(x->dvt * 16 * BC) * sizeof(uint16_t));
  const float *vb = v + b * rs->v[0] + g * rs->v[1] + j0 * rs->v[2];
  for (int j = 0; j < nk; j++) {
    x->kr.to_bf16(vb + j * rs->v[2], vr, d->Dv);
    for (int64_t c = 0; c < d->Dv; c++)
      vt[c * BC + j] = vr[c];
  }
  return bad;
}

/* Query group t of (b, h): rows quantized into B tiles, their sums and
 * scales, and the shifts scale·q·mean. Returns 1 if some q is not finite. */
static int pack_q(const i8_ctx *x, const float *q, int64_t t) {
  const attn_sdpa_desc *d = x->d;
  const attn_sdpa_resolved *rs = x->rs;
  const int64_t bh = t / x->nqg, b = bh / d->Hq, h = bh % d->Hq, i0 = (t % x->nqg) * QT;
  const int R = (int)(d->Lq - i0 < QT ? d->Lq - i0 : QT);
  const float *mean = x->mean + (b * d->Hkv + h / rs->group) * d->D;
  int8_t *qp = x->qp + t * ATTN_I8_QP_BYTES(x->dc), row[ATTN_BF16_DMAX];
  int32_t *qsum = (int32_t *)(void *)(qp + x->dc * 1024);
  float *sq = (float *)(void *)(qsum + QT), *shift = x->shift + bh * d->Lq + i0;
  int bad = 0;
  memset(qp, 0, (size_t)ATTN_I8_QP_BYTES(x->dc));
  for (int r = 0; r < R; r++) {
    const float *qr = q + b * rs->q[0] + h * rs->q[1] + (i0 + r) * rs->q[2];
    float s = 0.0f;
    bad |= x->kr.quant(qr, d->D, row, &s);
    memset(row + d->D, 0, (size_t)(x->Dp - d->D));
    int32_t sum = 0;
    double dot = 0.0;
    for (int64_t e = 0; e < x->Dp; e += 4) /* a depth quad at once */
      memcpy(qp + qp_at(e, r), row + e, 4);
    for (int64_t e = 0; e < d->D; e++) {
      sum += row[e];
      dot += (double)qr[e] * mean[e];
    }
    qsum[r] = sum;
    sq[r] = s * rs->scale;
    shift[r] = (float)(rs->scale * dot);
  }
  return bad;
}

/* The scores of an int8 work item: exact int32 K·Qᵀ into s [2][64*16],
 * dequantized (scale included, in the query scales) into st [64*16]. */
typedef struct {
  const i8_kernels *kr;
  const int8_t *kh, *qg; /* the (b, kv head)'s packed k rows; the item's q groups */
  const float *skh;      /* their key scales */
  int64_t Dp, qpb;
  int dc;
  int32_t *si;
  float *st;
} i8_scores;

static void i8_scores_issue(const void *ctx, const attn_bf16_step *s, int buf) {
  const i8_scores *c = ctx;
  c->kr->scores(c->kh + s->kb * BC * c->Dp, c->Dp, c->dc, c->qg + s->g * c->qpb,
                c->si + buf * BC * QT);
}

static float *i8_scores_logits(const void *ctx, const attn_bf16_step *s, int buf) {
  const i8_scores *c = ctx;
  const float *sq = (const float *)(const void *)(c->qg + s->g * c->qpb + c->dc * 1024 + 64);
  c->kr->dequant(c->si + buf * BC * QT, c->skh + s->kb * BC, sq, c->st);
  return c->st;
}

/* One work item: rows [i0, i0+nq) of (b, h), through the bf16 flash's tile
 * steps (attn_bf16_item_forward). ws: f32 oT [NG][dvt*256], m, l [BQ], st
 * [64*16], int32 s [2][64*16], then p [2][64*16] bf16. */
static void forward_item(const i8_ctx *x, int64_t b, int64_t h, int64_t i0, int nq, void *ws) {
  const attn_sdpa_desc *d = x->d;
  const attn_sdpa_resolved *rs = x->rs;
  const int64_t dvt = x->dvt, Dp = x->Dp, bkv = b * d->Hkv + h / rs->group;
  const int64_t qpb = ATTN_I8_QP_BYTES(x->dc);
  float *ot = ws, *m = ot + NG * dvt * 256, *l = m + BQ, *st = l + BQ;
  int32_t *si = (int32_t *)(void *)(st + BC * QT);
  uint16_t *p = (uint16_t *)(void *)(si + 2 * BC * QT);
  const i8_scores sc = {&x->kr,
                        x->kp + bkv * x->nkb * BC * Dp,
                        x->qp + ((b * d->Hq + h) * x->nqg + i0 / QT) * qpb,
                        x->sk + bkv * x->nkb * BC,
                        Dp,
                        qpb,
                        (int)x->dc,
                        si,
                        st};
  const int64_t row0 = (b * d->Hq + h) * d->Lq + i0; /* lse and shift */
  const attn_bf16_scores_stage stage = {i8_scores_issue, i8_scores_logits, &sc, x->shift + row0};
  attn_bf16_item_forward(
      x->kr.ops, d, b, h, i0, nq, 1.0f, &stage, x->vt + bkv * x->nkb * dvt * 16 * BC, dvt, ot, m, l,
      p, x->out + b * rs->o[0] + h * rs->o[1] + i0 * rs->o[2], rs->o[2], x->lse + row0);
}

attn_status attn_sdpa_forward_i8_path(attn_lowp_path path, const attn_sdpa_desc *d, const float *q,
                                      const float *k, const float *v, float *out, float *lse) {
  attn_sdpa_resolved rs;
  attn_status st = attn_bf16_check_limits(d, "sdpa i8", q, k, v, &rs);
  if (st) return st;
  i8_ctx x = {d, &rs, {0}, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, out, lse};
  if ((st = pick(path, &x.kr))) return st;
  if ((!out || !lse) && d->Lq > 0)
    return attn_set_error(ATTN_EINVAL, "sdpa i8: %s is NULL", !out ? "out" : "lse");
  if (d->Lq == 0) return ATTN_OK;
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, nqb = attn_ceil_div(d->Lq, BQ);
  x.nkb = attn_ceil_div(d->Lk, BC);
  x.nqg = attn_ceil_div(d->Lq, QT);
  x.dc = attn_ceil_div(d->D, 64);
  x.dvt = attn_ceil_div(d->Dv, 16);
  x.Dp = 64 * x.dc;
  int nt = attn_kernel_threads((double)B * Hq * d->Lq * d->Lk * (d->D + d->Dv), B * Hq * nqb);
  /* one block, each part 64-byte aligned: k rows, v blocks, q groups, sk, mean, shift */
  const int64_t nkv = B * Hkv * x.nkb, nq = B * Hq * x.nqg;
  int64_t sz[6] = {nkv * BC * x.Dp, nkv * x.dvt * 16 * BC * 2, nq * ATTN_I8_QP_BYTES(x.dc),
                   nkv * BC * 4, B * Hkv * d->D * 4, B * Hq * d->Lq * 4};
  int64_t off[7] = {0};
  for (int i = 0; i < 6; i++)
    off[i + 1] = off[i] + ((sz[i] + 63) & ~(int64_t)63);
  char *buf = attn_bf16_alloc(off[6], "packed q, k, v");
  int64_t per = (NG * x.dvt * 256 + 2 * BQ + 3 * BC * QT) * 4 + 2 * BC * QT * 2;
  per = (per + 63) & ~(int64_t)63;
  char *ws = buf ? attn_bf16_alloc(per * nt, "forward workspace") : NULL;
  if (!ws) {
    free(buf);
    return ATTN_ENOMEM;
  }
  x.kp = (int8_t *)buf;
  x.vt = (uint16_t *)(void *)(buf + off[1]);
  x.qp = (int8_t *)(buf + off[2]);
  x.sk = (float *)(void *)(buf + off[3]);
  x.mean = (float *)(void *)(buf + off[4]);
  x.shift = (float *)(void *)(buf + off[5]);
  int bad = 0;
#pragma omp parallel num_threads(nt) reduction(| : bad)
  {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < B * Hkv; t++)
      key_mean(&x, k, t / Hkv, t % Hkv);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < nkv; t++)
      bad |= pack_kv(&x, k, v, t);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < nq; t++)
      bad |= pack_q(&x, q, t);
  }
  if (bad) {
    free(ws);
    free(buf);
    return attn_set_error(ATTN_ENUMERIC, "sdpa i8: q or k holds a value that is not finite "
                                         "(it cannot be quantized)");
  }
  const int64_t items = B * Hq * nqb;
#pragma omp parallel num_threads(nt)
  {
    x.kr.ops->begin();
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < items; t++) {
      int64_t bh = t / nqb, i0 = (nqb - 1 - t % nqb) * BQ; /* later query blocks first (causal) */
      int nrow = (int)(d->Lq - i0 < BQ ? d->Lq - i0 : BQ);
      forward_item(&x, bh / Hq, bh % Hq, i0, nrow, ws + attn_thread_id() * per);
    }
    x.kr.ops->end();
  }
  free(ws);
  free(buf);
  return ATTN_OK;
}

attn_status attn_sdpa_forward_i8(const attn_sdpa_desc *d, const float *q, const float *k,
                                 const float *v, float *out, float *lse) {
  return attn_sdpa_forward_i8_path(ATTN_LOWP_AUTO, d, q, k, v, out, lse);
}
