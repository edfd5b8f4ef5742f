/* Position schemes and the block-sparse layout inside the flash tiles
 * (forward sdpa_flash.c, backward sdpa_flash_backward.c). Per-(i, j)
 * formulas: kernels/sdpa_positions.h (shared with the math path).
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

#include "kernels/sdpa_flash.h"
#include "kernels/sdpa_positions.h"

enum { BC = ATTN_FLASH_BC, NC = ATTN_FLASH_NC, QW = ATTN_FLASH_QW };

attn_status attn_flash_pos_init(const attn_sdpa_desc *d, attn_flash_pos *p) {
  memset(p, 0, sizeof *p);
  const int64_t nrel = d->Lq + d->Lk - 1, nr = attn_pos_shaw_rows(d);
  int64_t nb = 0, nk = 0, nv = 0;
  if ((d->alibi_slopes || d->rel_bias) && nrel > 0 && __builtin_mul_overflow(d->Hq, nrel, &nb))
    return attn_set_error(ATTN_ENOMEM, "sdpa flash: position bias table too large");
  if (d->shaw_k) nk = nr * d->D;
  if (d->shaw_v) nv = nr * d->Dv;
  if (nb + nk + nv == 0) return ATTN_OK;
  float *buf = attn_flash_alloc(nb + nk + nv, 1, "position tables");
  if (!buf) return ATTN_ENOMEM;
  p->own = buf;
  if (nb) { /* bias[h, x]: query position Lq-1+q_offset, key x, so j - p_i = x - (Lq-1) - i */
    const int64_t pi = d->Lq - 1 + d->q_offset;
    for (int64_t h = 0; h < d->Hq; h++)
      for (int64_t x = 0; x < nrel; x++)
        buf[h * nrel + x] = attn_pos_bias(d, h, pi, x);
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
  memset(p, 0, sizeof *p);
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

void attn_flash_pos_bias(const attn_flash_pos *p, int64_t h, int64_t Lq, int64_t i0, int R,
                         int64_t j0, int nk, float *s) {
  for (int r = 0; r < R; r++) {
    const float *bt = p->bias + h * p->nrel + (j0 - (i0 + r) + Lq - 1);
    float *sr = s + r * BC;
    for (int c = 0; c < nk; c++) /* -inf stays -inf (as the math path) */
      sr[c] = sr[c] == -INFINITY ? sr[c] : sr[c] + bt[c];
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
  for (int c0 = 0; c0 < w; c0 += NC) {
    int n = w - c0 < NC ? w - c0 : NC;
    ops->gemm(R, n, K, a, lda, 1, bt + t0 + c0, nr, xr + c0, QW, NULL, 0);
  }
  if (mul != 1.0f)
    for (int r = 0; r < R; r++)
      for (int c = 0; c < w; c++)
        xr[r * QW + c] *= mul;
}

void attn_flash_shaw_gather(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk,
                            int64_t t0, const float *xr, int skip_ninf, float *s) {
  for (int r = 0; r < R; r++) {
    const float *x = xr + r * QW - t0;
    float *sr = s + r * BC;
    for (int c = 0; c < nk; c++) {
      if (skip_ninf && sr[c] == -INFINITY) continue;
      sr[c] += x[attn_pos_shaw_row(d, pi0 + r, j0 + c)];
    }
  }
}

void attn_flash_shaw_scatter(const attn_sdpa_desc *d, int64_t pi0, int R, int64_t j0, int nk,
                             int64_t t0, int w, const float *s, int64_t lds, float *xr) {
  for (int r = 0; r < R; r++) {
    float *x = xr + r * QW;
    const float *sr = s + r * lds;
    memset(x, 0, (size_t)w * sizeof(float));
    x -= t0;
    for (int c = 0; c < nk; c++)
      x[attn_pos_shaw_row(d, pi0 + r, j0 + c)] += sr[c];
  }
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
