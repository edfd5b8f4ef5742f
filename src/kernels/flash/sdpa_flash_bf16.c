/* bf16 flash attention forward (attn/sdpa_bf16.h): the tile loop.
 *
 * Per call, k is copied into zero-padded rows [B, Hkv, nkb*64, Dp] (the A
 * tiles of sᵀ = K·Qᵀ) and v into per-block transposes vT [B, Hkv, nkb,
 * dvt*16, 64] (the A tiles of oᵀ += Vᵀ·P). Work items (b, h, BQ query rows)
 * run in parallel (dynamic, later query blocks first); each packs its
 * queries as B tiles, then for each key block some row may see and each
 * group of 16 queries:
 *   sᵀ [64, 16] = K·Qᵀ                 (ops->scores)
 *   masks (bool / additive) if any     (C, on the f32 logits)
 *   p = e^(t - m), m, l, alpha          (ops->softmax, p rounded to bf16)
 *   oᵀ [Dv, 16] = alpha oᵀ + Vᵀ·p       (ops->accum)
 * then out = oᵀᵀ / l, lse = m + log l. A row's arithmetic depends on nothing
 * but its own data, so results are identical for any thread count.
 * A loop of its own, not the f32 loop with a bf16 operand hook: the
 * arithmetic differs (bf16 dot products on packed tiles, p rounded to bf16,
 * the thresholded max; sdpa_flash_bf16.h). Without a bf16 dot product (path
 * f32, and auto on such a level) bf16 runs the f32 loops on operands
 * widened a block at a time (attn_flash_in_of, flash_operands.c), as fp16 does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "attn/tensor.h"
#include "kernels/arch/amx/amx.h"
#include "kernels/flash/flash_loop.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/flash/sdpa_flash_bf16.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_dropout.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/sdpa_usermod.h"
#include "kernels/util.h"

enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT, BQ = 64, NG = BQ / QT };


int attn_flash_bf16_amx_usable(void) {
  return attn_kern_get()->lowp.flash_bf16_amx && attn_amx_ready();
}

/* The vector units' bf16 tiles where the level has a bf16 dot product
 * (AVX512_BF16), else NULL. */
static const attn_flash_bf16_ops *simd_tiles(void) {
  const attn_lowp_ops *l = &attn_kern_get()->lowp;
  return l->bf16_simd ? l->flash_bf16_simd : NULL;
}

int attn_sdpa_bf16_path_available(attn_lowp_path path) {
  switch (path) {
  case ATTN_LOWP_AUTO:
  case ATTN_LOWP_PORTABLE:
  case ATTN_LOWP_F32: return 1;
  case ATTN_LOWP_SIMD: return simd_tiles() != NULL;
  case ATTN_LOWP_AMX: return attn_flash_bf16_amx_usable();
  default: return 0;
  }
}

/* AUTO took the AVX512_BF16 tiles: the route that short calls leave for
 * f32 (attn_sdpa_bf16_route_for) */
static int auto_simd(attn_lowp_path path, const attn_bf16_route *r) {
  return path == ATTN_LOWP_AUTO && r->tiles && r->tiles == attn_kern_get()->lowp.flash_bf16_simd;
}

const char *attn_sdpa_bf16_path_name(attn_lowp_path path) {
  attn_bf16_route r;
  if (!attn_sdpa_bf16_path_available(path) || attn_sdpa_bf16_route_of(path, &r)) return "?";
  if (r.f32) return attn_kern_get()->isa == ATTN_ISA_GENERIC ? "f32 (portable)" : "f32";
  if (auto_simd(path, &r)) {
    static _Thread_local char name[64]; /* the tiles' name, then the short-key rule */
    snprintf(name, sizeof name, "%s (f32 up to %d keys)", r.tiles->name, ATTN_BF16_AUTO_F32_LK);
    return name;
  }
  return r.tiles->name;
}

/* The route of path: bf16 tiles (r->tiles) or the f32 flash on widened
 * operands (r->f32); ATTN_EUNSUPPORTED with the error set. */
attn_status attn_sdpa_bf16_route_of(attn_lowp_path path, attn_bf16_route *r) {
  const attn_kern *t = attn_kern_get(); /* the level's tiles, read once */
  /* amx: attn_flash_bf16_amx_usable (asked only where the path may take it); simd: simd_tiles */
  const int may_amx = path == ATTN_LOWP_AUTO || path == ATTN_LOWP_AMX;
  const attn_flash_bf16_ops *amx =
      may_amx && t->lowp.flash_bf16_amx && attn_amx_ready() ? t->lowp.flash_bf16_amx : NULL;
  const attn_flash_bf16_ops *simd = t->lowp.bf16_simd ? t->lowp.flash_bf16_simd : NULL;
  r->tiles = NULL;
  r->f32 = NULL;
  /* AUTO: the vector units' bf16 tiles only where their dot product is fast */
  if (path == ATTN_LOWP_AUTO)
    path = amx ? ATTN_LOWP_AMX : simd && t->lowp.bf16_dot_auto ? ATTN_LOWP_SIMD : ATTN_LOWP_F32;
  switch (path) {
  case ATTN_LOWP_PORTABLE: r->tiles = attn_flash_bf16_ops_generic(); return ATTN_OK;
  case ATTN_LOWP_F32: r->f32 = t->flash; return ATTN_OK;
  case ATTN_LOWP_SIMD:
    if ((r->tiles = simd)) return ATTN_OK;
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa bf16: the simd path needs a bf16 dot product "
                          "(AVX512_BF16) at the active level (%s); the f32 "
                          "path (ATTN_LOWP_F32) runs bf16 on every level",
                          t->name);
  case ATTN_LOWP_AMX:
    if ((r->tiles = amx)) return ATTN_OK;
    return attn_set_error(ATTN_EUNSUPPORTED, "sdpa bf16: AMX-BF16 (with AVX512_BF16 and the tile "
                                             "permission) is not available on this CPU");
  default:
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa bf16: path %d is not a bf16 flash path (auto, portable, simd, amx "
                          "or f32)",
                          (int)path);
  }
}

attn_status attn_sdpa_bf16_route_for(const attn_sdpa_desc *d, attn_lowp_path path,
                                     attn_bf16_route *r) {
  attn_status st = attn_sdpa_bf16_route_of(path, r);
  if (!st && d->Lk <= ATTN_BF16_AUTO_F32_LK && auto_simd(path, r)) { /* not AMX (not measured) */
    r->tiles = NULL;
    r->f32 = attn_kern_get()->flash;
  }
  return st;
}

attn_status attn_bf16_check_limits(const attn_sdpa_desc *d, const char *who, const void *q,
                                   const void *k, const void *v, attn_sdpa_resolved *rs) {
  /* validate reads only sizes, strides and NULL-ness of the pointers */
  attn_status st = attn_sdpa_validate(d, q, k, v, rs);
  if (st) return st;
  if ((st = attn_sdpa_dropout_refuse(d, who))) return st;
  if (attn_sdpa_has_positions(d))
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "%s: position variants and block-sparse "
                          "layouts are not supported (use the f32 flash)",
                          who);
  if (d->D > ATTN_BF16_DMAX || d->Dv > ATTN_BF16_DMAX)
    return attn_set_error(ATTN_EUNSUPPORTED, "%s: D=%lld, Dv=%lld: head dims up to %d", who,
                          (long long)d->D, (long long)d->Dv, ATTN_BF16_DMAX);
  return ATTN_OK;
}

/* The common checks of forward and backward; fills rs. */
static attn_status check_desc(const attn_sdpa_desc *d, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, attn_sdpa_resolved *rs) {
  return attn_bf16_check_limits(d, "sdpa bf16", q, k, v, rs);
}

void *attn_bf16_alloc(int64_t bytes, const char *what) {
  void *p = NULL;
  if (bytes < 0 || posix_memalign(&p, 64, bytes ? (size_t)bytes : 64) != 0) {
    attn_set_error(ATTN_ENOMEM, "sdpa bf16: cannot allocate %lld bytes of %s", (long long)bytes,
                   what);
    return NULL;
  }
  return p;
}

int attn_bf16_tile_bounds(const attn_sdpa_desc *d, int64_t b, int64_t i0, int R, int64_t j0, int nk,
                          int *lo, int *hi) {
  /* the f32 tile's bounds (sdpa_flash.c), rows R..QT-1 padded with none */
  if (!attn_flash_tile_bounds(d, b, i0, R, j0, nk, lo, hi)) return 0;
  for (int r = R; r < QT; r++) lo[r] = hi[r] = 0;
  return 1;
}

void attn_bf16_tile_logits(const attn_sdpa_desc *d, int staged, int64_t b, int64_t h, int64_t i0,
                           int R, int64_t j0, int nk, const int *lo, const int *hi, int full,
                           float scale, float *st, const float *shift, float *raw) {
  if (!full || scale != 1.0f)
    for (int j = 0; j < BC; j++)
      for (int r = 0; r < QT; r++)
        st[j * QT + r] = j >= lo[r] && j < hi[r] ? scale * st[j * QT + r] : -INFINITY;
  if (staged) attn_stage_tile(d, h, 1, BC * QT, st, 0, NULL, 0);                /* elementwise */
  if (d->mods) attn_usermod_tile_t(d, b, h, i0, R, j0, nk, st, QT, shift, raw); /* true scores */
  attn_sdpa_elem_masks(d, b, h, i0, R, j0, nk, st, 1, QT);
}

void attn_bf16_pack_qp(const uint16_t *x, int64_t ldx, int n, int64_t D, int dc, uint16_t *qp) {
  memset(qp, 0, (size_t)dc * 512 * sizeof(uint16_t));
  for (int r = 0; r < n; r++) {
    const uint16_t *xr = x + r * ldx;
    int64_t e = 0;
    for (; e + 1 < D; e += 2) /* a depth pair at once: tile e/32, pair (e%32)/2 */
      memcpy(qp + (e >> 5) * 512 + ((e & 31) >> 1) * 32 + r * 2, xr + e, 2 * sizeof(uint16_t));
    if (e < D) qp[(e >> 5) * 512 + ((e & 31) >> 1) * 32 + r * 2] = xr[e];
  }
}

void attn_bf16_pack_rows(const uint16_t *x, int64_t ldx, int nk, int64_t n, uint16_t *y,
                         int64_t ldy) {
  /* plain loops, not a memcpy and a memset per row: rows are short (a head's
   * D, often 16 to 64 values) and there are 64 of them per key block */
  for (int j = 0; j < nk; j++) {
    uint16_t *yr = y + j * ldy;
    const uint16_t *xr = x + j * ldx;
    for (int64_t e = 0; e < n; e++)
      yr[e] = xr[e];
    for (int64_t e = n; e < ldy; e++)
      yr[e] = 0;
  }
  if (nk < BC) memset(y + nk * ldy, 0, (size_t)((BC - nk) * ldy) * sizeof(uint16_t));
}

void attn_bf16_pack_t(const uint16_t *x, int64_t ldx, int nk, int64_t n, int64_t nt, uint16_t *vt) {
  memset(vt, 0, (size_t)(nt * BC) * sizeof(uint16_t));
  for (int j = 0; j < nk; j++)
    for (int64_t c = 0; c < n; c++)
      vt[c * BC + j] = x[j * ldx + c];
}

void attn_bf16_pack_pairs(const uint16_t *x, int64_t ldx, int n, int64_t ncol, int ntc,
                          uint16_t *y) {
  memset(y, 0, (size_t)ntc * 512 * sizeof(uint16_t));
  for (int r = 0; r < n; r++)
    for (int64_t c = 0; c < ncol; c++)
      y[(c >> 4) * 512 + (r >> 1) * 32 + (c & 15) * 2 + (r & 1)] = x[r * ldx + c];
}

typedef struct {
  const attn_flash_bf16_ops *ops;
  const attn_sdpa_desc *d;
  const attn_sdpa_resolved *rs;
  const uint16_t *q, *kp, *vt;
  float *out, *lse;
  int64_t nkb, dc, dvt;
} fwd_ctx;

typedef attn_bf16_step step_t;
typedef attn_bf16_step_iter step_iter;

void attn_bf16_steps_begin(step_iter *it, const attn_sdpa_desc *d, int64_t b, int64_t i0, int nq) {
  attn_flash_span sp;
  attn_flash_item_span(d, b, i0, nq, BC, &sp);
  *it = (step_iter){
      d, b, i0, nq, (int)attn_ceil_div(nq, QT), sp.kb0, 0, 0, sp.lo1 == 0 && sp.hi0 == d->Lk};
  it->kb1 = sp.kb1;
}

int attn_bf16_next_step(step_iter *it, step_t *s) {
  const attn_sdpa_desc *d = it->d;
  for (; it->kb < it->kb1; it->kb++, it->g = 0) {
    const int64_t j0 = it->kb * BC;
    const int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
    while (it->g < it->ng) {
      const int g = it->g++, R = it->nq - g * QT < QT ? it->nq - g * QT : QT;
      if (it->all && nk == BC && R == QT) { /* the common case: nothing to look up */
        s->kb = it->kb;
        s->g = g;
        s->full = 1;
        for (int r = 0; r < QT; r++)
          s->lo[r] = 0, s->hi[r] = BC;
        return 1;
      }
      if (!attn_bf16_tile_bounds(d, it->b, it->i0 + g * QT, R, j0, nk, s->lo, s->hi)) continue;
      s->kb = it->kb;
      s->g = g;
      s->full = 1;
      for (int r = 0; r < QT; r++)
        s->full &= s->lo[r] == 0 && s->hi[r] == BC;
      return 1;
    }
  }
  return 0;
}

/* The scores of a bf16 work item: K·Qᵀ into st [2][64*16] f32. */
typedef struct {
  const attn_flash_bf16_ops *ops;
  const uint16_t *kh, *qp; /* the (b, kv head)'s packed k rows; the item's q groups */
  int64_t Dp;
  int dc, np; /* depth chunks of 32; depth pairs */
  float *st;
} bf16_scores;

static void bf16_scores_issue(const void *ctx, const step_t *s, int buf) {
  const bf16_scores *c = ctx;
  c->ops->scores(c->kh + s->kb * BC * c->Dp, c->Dp, c->dc, c->np, c->qp + s->g * c->dc * 512,
                 c->st + buf * BC * QT);
}

static float *bf16_scores_logits(const void *ctx, const step_t *s, int buf) {
  (void)s;
  return ((const bf16_scores *)ctx)->st + buf * BC * QT;
}

/* One work item: rows [i0, i0+nq) of (b, h). ws: qp [NG][dc*512] bf16,
 * then f32 oT [NG][dvt*256], m, l [BQ], st [2][64*16], and p [2][1024] bf16. */
static void forward_item(const fwd_ctx *x, int64_t b, int64_t h, int64_t i0, int nq, void *ws) {
  const attn_sdpa_desc *d = x->d;
  const attn_sdpa_resolved *rs = x->rs;
  const int64_t dc = x->dc, dvt = x->dvt, Dp = 32 * dc, kvh = h / rs->group;
  uint16_t *qp = ws;
  float *ot = (float *)(void *)(qp + NG * dc * 512), *m = ot + NG * dvt * 256, *l = m + BQ;
  float *st = l + BQ;                                   /* two score buffers [64*16] */
  uint16_t *p = (uint16_t *)(void *)(st + 2 * BC * QT); /* two p buffers [64*16] */
  const int ng = (int)attn_ceil_div(nq, QT);
  const uint16_t *qh = x->q + b * rs->q[0] + h * rs->q[1];
  for (int g = 0; g < ng; g++) {
    int R = nq - g * QT < QT ? nq - g * QT : QT;
    attn_bf16_pack_qp(qh + (i0 + g * QT) * rs->q[2], rs->q[2], R, d->D, (int)dc, qp + g * dc * 512);
  }
  const bf16_scores sc = {x->ops, x->kp + (b * d->Hkv + kvh) * x->nkb * BC * Dp, qp, Dp, (int)dc,
                          (int)((d->D + 1) / 2), st};
  const attn_bf16_scores_stage stage = {bf16_scores_issue, bf16_scores_logits, &sc, NULL};
  attn_bf16_item_forward(x->ops, d, b, h, i0, nq, rs->scale, &stage,
                         x->vt + (b * d->Hkv + kvh) * x->nkb * dvt * 16 * BC, dvt, ot, m, l, p,
                         x->out + b * rs->o[0] + h * rs->o[1] + i0 * rs->o[2], rs->o[2],
                         x->lse + (b * d->Hq + h) * d->Lq + i0);
}

/* The online softmax of tile step c on its transposed scores st: the
 * logits (attn_bf16_tile_logits) where the call has element masks, user
 * mods or the stage's tile units (tiled: 1), else in the softmax itself;
 * m, l of the item's rows (the step's group at c->g * 16). Returns 1 if
 * some alpha != 1. */
static int step_softmax(const attn_flash_bf16_ops *ops, const attn_sdpa_desc *d, int tiled,
                        int staged, int64_t b, int64_t h, int64_t i0, int nq, const step_t *c,
                        float *st, float scale, float *m, float *l, float *alpha, uint16_t *p,
                        const float *shift) {
  const int g = c->g, R = nq - g * QT < QT ? nq - g * QT : QT;
  const int64_t j0 = c->kb * BC;
  if (!tiled)
    return ops->softmax(st, scale, c->full ? NULL : c->lo, c->full ? NULL : c->hi, m + g * QT,
                        l + g * QT, alpha, p);
  const int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
  attn_bf16_tile_logits(d, staged, b, h, i0 + g * QT, R, j0, nk, c->lo, c->hi, c->full, scale, st,
                        shift ? shift + g * QT : NULL, NULL);
  return ops->softmax(st, 1.0f, NULL, NULL, m + g * QT, l + g * QT, alpha, p);
}

void attn_bf16_item_forward(const attn_flash_bf16_ops *ops, const attn_sdpa_desc *d, int64_t b,
                            int64_t h, int64_t i0, int nq, float scale,
                            const attn_bf16_scores_stage *sc, const uint16_t *vt, int64_t dvt,
                            float *ot, float *m, float *l, uint16_t *p, float *out, int64_t ldo,
                            float *lse) {
  const int ng = (int)attn_ceil_div(nq, QT);
  attn_stage_head sh; /* the stage's units of head h, looked up once per item */
  attn_stage_head_init(d, h, &sh, NULL);
  const int tiled = d->bool_mask || d->add_mask || sh.tile || d->mods;
  memset(ot, 0, (size_t)(ng * dvt * 256) * sizeof(float));
  for (int r = 0; r < ng * QT; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  step_iter it;
  attn_bf16_steps_begin(&it, d, b, i0, nq);
  step_t S[2];
  float alpha[2][QT];
  int moved[2] = {0, 0};
  int have = attn_bf16_next_step(&it, &S[0]), par = 0, pend = 0, pend_g = 0;
  int64_t pend_kb = 0;
  if (have) sc->issue(sc->ctx, &S[0], 0);
  while (have) {
    const step_t *c = &S[par];
    const int have_next = attn_bf16_next_step(&it, &S[par ^ 1]);
    if (have_next) sc->issue(sc->ctx, &S[par ^ 1], par ^ 1);
    if (pend)
      ops->accum(ot + pend_g * dvt * 256, (int)dvt, moved[par ^ 1] ? alpha[par ^ 1] : NULL,
                 vt + pend_kb * dvt * 16 * BC, p + (par ^ 1) * BC * QT);
    moved[par] = step_softmax(ops, d, tiled, sh.tile, b, h, i0, nq, c, sc->logits(sc->ctx, c, par),
                              scale, m, l, alpha[par], p + par * BC * QT, sc->shift);
    pend = 1;
    pend_g = c->g;
    pend_kb = c->kb;
    par ^= 1;
    have = have_next;
  }
  if (pend)
    ops->accum(ot + pend_g * dvt * 256, (int)dvt, moved[par ^ 1] ? alpha[par ^ 1] : NULL,
               vt + pend_kb * dvt * 16 * BC, p + (par ^ 1) * BC * QT);
  const float *shift = sc->shift; /* the rows' ends, the row units joining */
  for (int r = 0; r < nq; r++)
    attn_flash_row_store(sh.row_logit, shift ? m[r] + shift[r] : m[r], l[r],
                         ot + (r / QT) * dvt * 256 + r % QT, QT, d->Dv, out + r * ldo, lse + r);
}

attn_status attn_sdpa_forward_bf16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                        const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                        float *out, float *lse) {
  attn_sdpa_resolved rs;
  attn_status st = check_desc(d, q, k, v, &rs);
  if (st) return st;
  attn_bf16_route route;
  if ((st = attn_sdpa_bf16_route_for(d, path, &route))) return st;
  if ((!out || !lse) && d->Lq > 0)
    return attn_set_error(ATTN_EINVAL, "sdpa bf16: %s is NULL", !out ? "out" : "lse");
  if (route.f32) {
    attn_flash_in in; /* the bf16 operand hook: widened a block at a time */
    attn_flash_in_of(ATTN_BF16, 0, q, k, v, &in);
    return attn_sdpa_forward_flash_in(route.f32, d, &in, out, lse);
  }
  const attn_flash_bf16_ops *ops = route.tiles;
  if (d->Lq == 0) return ATTN_OK;
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv;
  const int64_t nkb = attn_ceil_div(d->Lk, BC), nqb = attn_ceil_div(d->Lq, BQ);
  const int64_t dc = attn_ceil_div(d->D, 32), dvt = attn_ceil_div(d->Dv, 16), Dp = 32 * dc;
  int nt = attn_kernel_threads((double)B * Hq * d->Lq * d->Lk * (d->D + d->Dv), B * Hq * nqb);
  /* packed k rows and vᵀ blocks: B*Hkv*nkb*64*(Dp + dvt*16) bf16 (fits: Lk*D was validated) */
  const int64_t kp_n = B * Hkv * nkb * BC * Dp, vt_n = B * Hkv * nkb * dvt * 16 * BC;
  uint16_t *kp = attn_bf16_alloc((kp_n + vt_n) * (int64_t)sizeof(uint16_t), "packed k, v");
  int64_t per = NG * dc * 512 * 2 + (NG * dvt * 256 + 2 * BQ + 2 * BC * QT) * 4 + 2 * BC * QT * 2;
  per = (per + 63) & ~(int64_t)63;
  char *ws = kp ? attn_bf16_alloc(per * nt, "forward workspace") : NULL;
  if (!ws) {
    free(kp);
    return ATTN_ENOMEM;
  }
  uint16_t *vt = kp + kp_n;
  fwd_ctx x = {ops, d, &rs, q, kp, vt, out, lse, nkb, dc, dvt};
  const int64_t npack = B * Hkv * nkb, items = B * Hq * nqb;
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < npack; t++) {
      int64_t bh = t / nkb, kb = t % nkb, b = bh / Hkv, g = bh % Hkv, j0 = kb * BC;
      int nk = (int)(d->Lk - j0 < BC ? d->Lk - j0 : BC);
      attn_bf16_pack_rows(k + b * rs.k[0] + g * rs.k[1] + j0 * rs.k[2], rs.k[2], nk, d->D,
                          kp + t * BC * Dp, Dp);
      attn_bf16_pack_t(v + b * rs.v[0] + g * rs.v[1] + j0 * rs.v[2], rs.v[2], nk, d->Dv, dvt * 16,
                       vt + t * dvt * 16 * BC);
    }
    ops->begin();
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < items; t++) {
      int64_t bh = t / nqb, qb = nqb - 1 - t % nqb; /* later query blocks first (causal) */
      int64_t i0 = qb * BQ;
      int nq = (int)(d->Lq - i0 < BQ ? d->Lq - i0 : BQ);
      forward_item(&x, bh / Hq, bh % Hq, i0, nq, ws + attn_thread_id() * per);
    }
    ops->end();
  }
  free(ws);
  free(kp);
  return ATTN_OK;
}

attn_status attn_sdpa_forward_bf16(const attn_sdpa_desc *d, const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, float *out, float *lse) {
  return attn_sdpa_forward_bf16_path(ATTN_LOWP_AUTO, d, q, k, v, out, lse);
}

attn_status attn_sdpa_bf16_check(const attn_sdpa_desc *d, const uint16_t *q, const uint16_t *k,
                                 const uint16_t *v, attn_sdpa_resolved *rs, attn_bf16_route *route,
                                 attn_lowp_path path) {
  attn_status st = check_desc(d, q, k, v, rs);
  if (st) return st;
  return attn_sdpa_bf16_route_for(d, path, route);
}
