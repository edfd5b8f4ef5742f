/* Position schemes and the block-sparse layout inside the flash tiles
 * (forward sdpa_flash.c, backward sdpa_flash_backward.c). Per-(i, j)
 * formulas: kernels/sdpa/sdpa_positions.h (shared with the math path).
 *
 * ALiBi and T5 depend on j - p_i only: one per-call table per query head of
 * the bias by relative distance, x = j - i + Lq - 1 in [0, Lq + Lk - 1)
 * (O(N), filled with attn_pos_bias, so the values are the math path's bits);
 * a tile row adds a contiguous slice of it. Shaw: for a tile of R rows and nk
 * keys the clipped distances p_i - j form a band of at most nk + R - 1 table
 * rows; q·shaw_kᵀ (and dout·shaw_vᵀ) are computed for that band only, and p,
 * ds are summed onto it (nothing of size Lq x Lk, nor Lq x (2M-1), stored). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/flash/sdpa_flash.h"
#include "kernels/sdpa/sdpa_positions.h"

enum { BC = ATTN_FLASH_BC, NC = ATTN_FLASH_NC, QW = ATTN_FLASH_QW };

attn_status attn_flash_pos_init(const attn_sdpa_desc *d, attn_flash_pos *p) {
  memset(p, 0, sizeof *p);
  const int64_t nrel = d->Lq + d->Lk - 1, nr = attn_pos_shaw_rows(d);
  int64_t nb = 0, nk = 0, nv = 0;
  if ((d->alibi_slopes || d->rel_bias) && nrel > 0 && __builtin_mul_overflow(d->Hq, nrel + BC, &nb))
    return attn_set_error(ATTN_ENOMEM, "sdpa flash: position bias table too large");
  if (d->shaw_k) nk = nr * d->D;
  if (d->shaw_v) nv = nr * d->Dv;
  if (nb + nk + nv == 0) return ATTN_OK;
  float *buf = attn_flash_alloc(nb + nk + nv, 1, "position tables");
  if (!buf) return ATTN_ENOMEM;
  p->own = buf;
  if (nb) { /* bias[h, x]: query position Lq-1+q_offset, key x, so j - p_i = x - (Lq-1) - i */
    const int64_t pi = d->Lq - 1 + d->q_offset;
    for (int64_t h = 0; h < d->Hq; h++) {
      for (int64_t x = 0; x < nrel; x++)
        buf[h * (nrel + BC) + x] = attn_pos_bias(d, h, pi, x);
      memset(buf + h * (nrel + BC) + nrel, 0, BC * sizeof(float)); /* a tile reads past the end */
    }
    p->bias = buf;
    p->nrel = nrel;
  }
  p->nr = nr;
  if (nk) { /* shaw_kᵀ [D, nr] */
    float *t = buf + nb;
    for (int64_t e = 0; e < d->D; e++)
      for (int64_t r = 0; r < nr; r++)
        t[e * nr + r] = d->shaw_k[r * d->D + e];
    p->skt = t;
  }
  if (nv) { /* shaw_vᵀ [Dv, nr] */
    float *t = buf + nb + nk;
    for (int64_t e = 0; e < d->Dv; e++)
      for (int64_t r = 0; r < nr; r++)
        t[e * nr + r] = d->shaw_v[r * d->Dv + e];
    p->svt = t;
  }
  return ATTN_OK;
}

void attn_flash_pos_free(attn_flash_pos *p) {
  free(p->own);
  free(p->ends);
  memset(p, 0, sizeof *p);
}

attn_status attn_flash_shaw_ends(attn_flash_pos *p, const attn_sdpa_desc *d,
                                 const attn_sdpa_resolved *rs, const float *q, const float *dout,
                                 int nt) {
  if (!p->nr || d->Lq == 0) return ATTN_OK;
  const int64_t rows = d->B * d->Hq * d->Lq, top = p->nr - 1;
  p->ends = attn_flash_alloc(4 * rows, 1, "Shaw ends");
  if (!p->ends) return ATTN_ENOMEM;
  float *e = p->ends;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < rows; t++) {
    const int64_t bh = t / d->Lq, i = t % d->Lq, b = bh / d->Hq, h = bh % d->Hq;
    float x[4] = {0, 0, 0, 0};
    if (d->shaw_k) {
      const float *qi = q + b * rs->q[0] + h * rs->q[1] + i * rs->q[2];
      for (int64_t c = 0; c < d->D; c++)
        x[0] += qi[c] * d->shaw_k[c], x[1] += qi[c] * d->shaw_k[top * d->D + c];
      x[0] *= rs->scale, x[1] *= rs->scale;
    }
    if (d->shaw_v && dout) {
      const float *g = dout + b * rs->o[0] + h * rs->o[1] + i * rs->o[2];
      for (int64_t c = 0; c < d->Dv; c++)
        x[2] += g[c] * d->shaw_v[c], x[3] += g[c] * d->shaw_v[top * d->Dv + c];
    }
    memcpy(e + 4 * t, x, sizeof x);
  }
  return ATTN_OK;
}

int attn_flash_block_state(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk) {
  if (!d->block_mask) return 1;
  const int64_t bs = d->block_size, ncol = attn_pos_block_cols(d);
  int on = 0, off = 0;
  for (int64_t a = pi0 / bs; a <= (pi0 + R - 1) / bs; a++)
    for (int64_t c = j0 / bs; c <= (j0 + nk - 1) / bs; c++) {
      if (d->block_mask[a * ncol + c])
        on = 1;
      else
        off = 1;
    }
  return on ? (off ? 2 : 1) : 0;
}

void attn_flash_block_mask(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk,
                           float *s) {
  const int64_t bs = d->block_size, ncol = attn_pos_block_cols(d);
  for (int r = 0; r < R; r++) {
    const uint8_t *row = d->block_mask + ((pi0 + r) / bs) * ncol;
    float *sr = s + r * BC;
    for (int64_t c = j0 / bs; c <= (j0 + nk - 1) / bs; c++) {
      if (row[c]) continue;
      int64_t a = c * bs - j0, z = a + bs;
      if (a < 0) a = 0;
      if (z > nk) z = nk;
      for (int64_t e = a; e < z; e++)
        sr[e] = -INFINITY;
    }
  }
}

void attn_flash_pos_bias(const attn_flash_ops *ops, const attn_flash_pos *p, int64_t h, int64_t Lq,
                         int64_t i0, int R, int64_t j0, int nk, float *s) {
  /* row r reads the table from x = j0 - (i0 + r) + Lq - 1: one slot back per row */
  ops->add_rows(R, nk, s, BC, p->bias + h * (p->nrel + BC) + (j0 - i0 + Lq - 1), -1, 1, 1);
}

void attn_flash_mod_init(const attn_flash_ops *ops, const attn_sdpa_desc *d,
                         const attn_flash_pos *p, int64_t h, attn_flash_mod *mod) {
  const int64_t off = d->q_offset < 0 ? -d->q_offset : d->q_offset;
  memset(mod, 0, sizeof *mod);
  if (ops->tile_forward_mod && p->bias && !d->rel_bias && isfinite(d->alibi_slopes[h]) &&
      off < (1 << 24) && off + d->Lq + d->Lk + BC < (1 << 24)) {
    mod->alibi = 1;
    mod->slope = d->alibi_slopes[h];
  }
}

int attn_flash_shaw_band(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk,
                         int64_t *t0) {
  const int64_t lo = attn_pos_shaw_row(d, pi0, j0 + nk - 1), hi = attn_pos_shaw_row(d, pi0 + R - 1, j0);
  *t0 = lo;
  return (int)(hi - lo + 1);
}

void attn_flash_shaw_rows(const attn_flash_ops *ops, int R, const float *a, int64_t lda, int64_t K,
                          const float *bt, int64_t nr, int64_t t0, int w, float mul, float *xr) {
  /* only the interior rows 1..nr-2: the two ends come from the per-call ends */
  const int64_t ta = t0 > 1 ? t0 : 1, tb = t0 + w - 1 < nr - 2 ? t0 + w - 1 : nr - 2;
  for (int64_t c0 = ta; c0 <= tb; c0 += NC) {
    int n = (int)(tb + 1 - c0 < NC ? tb + 1 - c0 : NC);
    ops->gemm(R, n, K, a, lda, 1, bt + c0, nr, xr + (c0 - t0), QW, NULL, 0);
    if (mul != 1.0f)
      for (int r = 0; r < R; r++)
        for (int c = 0; c < n; c++)
          xr[r * QW + (c0 - t0) + c] *= mul;
  }
}

/* Columns of row pi against keys j0..j0+nk-1 by Shaw row: [0, *a) clipped
 * at the top row 2M-2 (pi - j >= M-1), [*a, *z) the band (row pi - j + M-1,
 * decreasing by one per column), [*z, nk) clipped at row 0. */
static void shaw_split(const attn_sdpa_desc *d, int64_t pi, int64_t j0, int nk, int *a, int *z) {
  const int64_t m = d->shaw_max - 1, base = pi - j0; /* pi - j at column 0 */
  int64_t x = base - m + 1, y = base + m;          /* first column below the top; at row 0 */
  *a = (int)(x < 0 ? 0 : x > nk ? nk : x);
  *z = (int)(y < *a ? *a : y > nk ? nk : y);
}

void attn_flash_shaw_gather(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t pi0, int R,
                            int64_t j0, int nk, int64_t t0, const float *xr, const float *ends,
                            int skip_ninf, float *s) {
  int a, z;
  shaw_split(d, pi0, j0, nk, &a, &z);
  int top = a == nk, bottom = z == 0; /* the first row entirely at one end */
  shaw_split(d, pi0 + R - 1, j0, nk, &a, &z);
  if ((top && a == nk) || (bottom && z == 0)) { /* every row (a, z grow with pi) */
    ops->add_rows(R, nk, s, BC, ends + (top && a == nk ? 1 : 0), 4, 0, skip_ninf);
    return;
  }
  for (int r = 0; r < R; r++) {
    const int64_t pi = pi0 + r;
    const float *x = xr + r * QW - t0;
    float *sr = s + r * BC;
    shaw_split(d, pi, j0, nk, &a, &z);
    const float *band = x + (pi - j0 + d->shaw_max - 1); /* band[-c] for column c */
    if (a > 0) ops->add_rows(1, a, sr, BC, ends + 4 * r + 1, 0, 0, skip_ninf);
    if (z > a) ops->add_rows(1, z - a, sr + a, BC, band - a, 0, -1, skip_ninf);
    if (z < nk) ops->add_rows(1, nk - z, sr + z, BC, ends + 4 * r, 0, 0, skip_ninf);
  }
}

void attn_flash_shaw_scatter(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t pi0,
                             int R, int64_t j0, int nk, int64_t t0, int w, const float *s,
                             int64_t lds, float *xr) {
  const int64_t top = 2 * d->shaw_max - 2;
  for (int r = 0; r < R; r++) {
    const int64_t pi = pi0 + r;
    float *x = xr + r * QW;
    const float *sr = s + r * lds;
    memset(x, 0, (size_t)w * sizeof(float));
    x -= t0;
    int a, z;
    shaw_split(d, pi, j0, nk, &a, &z);
    float *band = x + (pi - j0 + d->shaw_max - 1);
    for (int c = a; c < z; c++) /* distinct rows: no sums */
      band[-c] = sr[c];
    if (a > 0) x[top] += ops->sum(a, sr);
    if (z < nk) x[0] += ops->sum(nk - z, sr + z);
  }
}

int attn_flash_shaw_split(const attn_flash_ops *ops, const attn_sdpa_desc *d, int64_t pi0, int R,
                          int64_t j0, int nk, int64_t t0, int w, const float *s, int64_t lds,
                          float *ends, float *xr, int64_t *ta) {
  const int64_t nr = 2 * d->shaw_max - 1;
  const int64_t a0 = t0 > 1 ? t0 : 1, b0 = t0 + w - 1 < nr - 2 ? t0 + w - 1 : nr - 2;
  const int wi = b0 >= a0 ? (int)(b0 - a0 + 1) : 0;
  *ta = a0;
  for (int r = 0; r < R; r++) {
    const int64_t pi = pi0 + r;
    const float *sr = s + r * lds;
    int a, z;
    shaw_split(d, pi, j0, nk, &a, &z);
    if (a > 0) ends[2 * r + 1] += ops->sum(a, sr);
    if (z < nk) ends[2 * r] += ops->sum(nk - z, sr + z);
    if (!wi) continue;
    float *x = xr + r * QW;
    memset(x, 0, (size_t)wi * sizeof(float));
    float *band = x - a0 + (pi - j0 + d->shaw_max - 1);
    for (int c = a; c < z; c++) /* distinct rows: no sums */
      band[-c] = sr[c];
  }
  return wi;
}

void attn_flash_table_grad(const attn_flash_ops *ops, int R, int w, int64_t t0, const float *xr,
                           const float *rows, int64_t ldrows, int64_t n, float *g) {
  for (int x = 0; x < w; x += ATTN_FLASH_MR) {
    int m = w - x < ATTN_FLASH_MR ? w - x : ATTN_FLASH_MR;
    for (int64_t c0 = 0; c0 < n; c0 += NC) {
      int nn = (int)(n - c0 < NC ? n - c0 : NC);
      ops->gemm(m, nn, R, xr + x, 1, QW, rows + c0, ldrows, g + (t0 + x) * n + c0, n, NULL, 1);
    }
  }
}
