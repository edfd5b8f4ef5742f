/* The row variants of the user score modifier (sdpa_usermod_row.h). The
 * runs are copied through small buffers on the stack: the callback sees
 * contiguous finite placeholders whatever the tile's layout (row-major f32
 * tiles, transposed bf16 / int8 tiles, shifted int8 scores). */
#include <math.h>
#include <string.h>

#include "kernels/sdpa/sdpa_usermod_row.h"

void attn_usermod_row_scores(const attn_sdpa_mods *m, int64_t b, int64_t h, int64_t i, int64_t j0,
                             int64_t n, float *x, int64_t cs, int shift, float sh, float *raw) {
  float buf[ATTN_USERMOD_RUN];
  uint8_t off[ATTN_USERMOD_RUN];
  for (int64_t k0 = 0; k0 < n; k0 += ATTN_USERMOD_RUN) {
    const int nn = (int)(n - k0 < ATTN_USERMOD_RUN ? n - k0 : ATTN_USERMOD_RUN);
    float *xr = x + k0 * cs;
    if (cs == 1 && !shift) { /* f32 tiles, math rows: in place when no key is excluded */
      int ex = 0;
#pragma omp simd reduction(| : ex)
      for (int c = 0; c < nn; c++)
        ex |= xr[c] == -INFINITY;
      if (!ex) {
        if (raw) memcpy(raw + k0, xr, (size_t)nn * sizeof(float));
        m->score_mod_row(xr, nn, b, h, i, j0 + k0, m->user);
        continue;
      }
    }
    int on = 0;
    for (int c = 0; c < nn; c++) {
      const float v = xr[c * cs];
      off[c] = v == -INFINITY;
      on |= !off[c];
      buf[c] = off[c] ? 0.0f : shift ? v + sh : v;
    }
    if (raw)
      for (int c = 0; c < nn; c++)
        raw[(k0 + c) * cs] = buf[c];
    if (!on) continue; /* every key of the run excluded */
    m->score_mod_row(buf, nn, b, h, i, j0 + k0, m->user);
    for (int c = 0; c < nn; c++)
      xr[c * cs] = off[c] ? -INFINITY : shift ? buf[c] - sh : buf[c];
  }
}

/* One run: sc the scores (0 where g is 0), g = dL/d(output) for the
 * parameter gradient, dd := dd * derivative. Returns 0 if g is 0 throughout
 * (nothing called). */
static int grad_run(const attn_sdpa_mods *m, int64_t b, int64_t h, int64_t i, int64_t j0, int nn,
                    const float *sc, const float *g, float *dd) {
  int any = 0;
  for (int c = 0; c < nn; c++)
    any |= g[c] != 0.0f; /* NaN counts */
  if (!any) return 0;
  if (m->score_mod_row_param_grad) m->score_mod_row_param_grad(sc, g, nn, b, h, i, j0, m->user);
  m->score_mod_row_grad(sc, dd, nn, b, h, i, j0, m->user);
  return 1;
}

void attn_usermod_row_grad(const attn_sdpa_mods *m, int64_t b, int64_t h, int64_t i, int64_t j0,
                           int64_t n, const float *raw, float *g) {
  float sc[ATTN_USERMOD_RUN], dd[ATTN_USERMOD_RUN];
  for (int64_t k0 = 0; k0 < n; k0 += ATTN_USERMOD_RUN) {
    const int nn = (int)(n - k0 < ATTN_USERMOD_RUN ? n - k0 : ATTN_USERMOD_RUN);
    float *gr = g + k0;
    int zero = 0;
#pragma omp simd reduction(| : zero)
    for (int c = 0; c < nn; c++)
      zero |= gr[c] == 0.0f;
    if (!zero) { /* every pair carries gradient: in place */
      if (m->score_mod_row_param_grad)
        m->score_mod_row_param_grad(raw + k0, gr, nn, b, h, i, j0 + k0, m->user);
      m->score_mod_row_grad(raw + k0, gr, nn, b, h, i, j0 + k0, m->user);
      continue;
    }
    for (int c = 0; c < nn; c++) {
      sc[c] = gr[c] != 0.0f ? raw[k0 + c] : 0.0f; /* raw may be stale where g is 0 */
      dd[c] = gr[c];
    }
    if (!grad_run(m, b, h, i, j0 + k0, nn, sc, gr, dd)) continue;
    for (int c = 0; c < nn; c++)
      gr[c] = gr[c] != 0.0f ? dd[c] : 0.0f;
  }
}

void attn_usermod_row_dp_t(const attn_sdpa_mods *m, int64_t b, int64_t h, int64_t i0, int64_t R,
                           int64_t j0, int64_t nk, const float *raw, const float *st,
                           int64_t ldst, float *dpt, const float *lse, const float *di) {
  float sc[ATTN_USERMOD_RUN], g[ATTN_USERMOD_RUN], dd[ATTN_USERMOD_RUN];
  for (int64_t r = 0; r < R; r++) {
    if (lse[r] == -INFINITY) continue;
    for (int64_t k0 = 0; k0 < nk; k0 += ATTN_USERMOD_RUN) {
      const int nn = (int)(nk - k0 < ATTN_USERMOD_RUN ? nk - k0 : ATTN_USERMOD_RUN);
      for (int c = 0; c < nn; c++) {
        const int64_t e = (k0 + c) * ldst + r;
        dd[c] = st[e] == -INFINITY ? 0.0f : dpt[e] - di[r];
        g[c] = st[e] == -INFINITY ? 0.0f : expf(st[e] - lse[r]) * dd[c];
        sc[c] = g[c] != 0.0f ? raw[e] : 0.0f;
      }
      if (!grad_run(m, b, h, i0 + r, j0 + k0, nn, sc, g, dd)) continue;
      for (int c = 0; c < nn; c++)
        if (g[c] != 0.0f) dpt[(k0 + c) * ldst + r] = dd[c] + di[r];
    }
  }
}
