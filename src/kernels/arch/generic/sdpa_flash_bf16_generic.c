/* Portable tile kernels of the bf16 flash attention: the packed bf16
 * operands are widened to f32 (exact) and multiplied in f32, with the same
 * rounding points as the AMX kernels (p rounded to bf16 before P·V; sums
 * and statistics in f32). Summation order and exp differ slightly from the
 * AMX path, so the two agree closely, not bit for bit. */
#include <math.h>
#include <string.h>

#include "kernels/flash/sdpa_flash_bf16.h"

enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT };

static inline float bf(uint16_t h) { /* exact */
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* element (depth or key e, column q) of a run of B tiles (VNNI pairs) */
static inline float b_at(const uint16_t *t, int64_t e, int q) {
  return bf(t[(e >> 5) * 512 + ((e & 31) >> 1) * 32 + q * 2 + (e & 1)]);
}

static void nop(void) {}

static void scores_generic(const uint16_t *k, int64_t ldk, int dc, int np, const uint16_t *qp,
                           float *st) {
  (void)np;
  float qf[QT][ATTN_BF16_DMAX];
  for (int q = 0; q < QT; q++)
    for (int64_t e = 0; e < 32 * dc; e++)
      qf[q][e] = b_at(qp, e, q);
  for (int j = 0; j < BC; j++) {
    const uint16_t *kr = k + j * ldk;
    for (int q = 0; q < QT; q++) {
      float s = 0.0f;
      for (int64_t e = 0; e < 32 * dc; e++)
        s += bf(kr[e]) * qf[q][e];
      st[j * QT + q] = s;
    }
  }
}

static int softmax_generic(const float *st, float scale, const int *lo, const int *hi, float *m,
                           float *l, float *alpha, uint16_t *p) {
  int moved = 0;
  for (int q = 0; q < QT; q++) {
    int a = lo ? lo[q] : 0, z = hi ? hi[q] : BC;
    float mb = -INFINITY;
    for (int j = a; j < z; j++) {
      float t = scale * st[j * QT + q];
      mb = t > mb ? t : mb;
    }
    float mo = m[q], mn = mb > mo + ATTN_BF16_TAU ? mb : mo; /* the max skips NaN */
    alpha[q] = mn == mo ? 1.0f : expf(mo - mn);
    moved |= mn != mo;
    /* max still -inf: subtract 0 (-inf gives p = 0, NaN stays NaN) */
    const float ms = mn == -INFINITY ? 0.0f : mn;
    float se = 0.0f, so = 0.0f;
    for (int j = 0; j < BC; j++) {
      float t = j >= a && j < z ? scale * st[j * QT + q] : -INFINITY, x = t - ms;
      /* a NaN logit gives p = NaN: l and the row's out turn NaN (as math) */
      float pv = !(x < ATTN_BF16_PMIN_LOG) ? expf(x) : 0.0f;
      if (j & 1)
        so += pv;
      else
        se += pv;
      p[(j >> 5) * 512 + ((j & 31) >> 1) * 32 + q * 2 + (j & 1)] = attn_f32_to_bf16(pv);
    }
    m[q] = mn;
    l[q] = alpha[q] * l[q] + (se + so);
  }
  return moved;
}

static void accum_generic(float *ot, int dvt, const float *alpha, const uint16_t *vt,
                          const uint16_t *p) {
  float pf[BC][QT];
  for (int j = 0; j < BC; j++)
    for (int q = 0; q < QT; q++)
      pf[j][q] = b_at(p, j, q);
  for (int c = 0; c < dvt * 16; c++) {
    float *oc = ot + c * QT;
    const uint16_t *vc = vt + c * BC;
    for (int q = 0; q < QT; q++) {
      float s = 0.0f;
      for (int j = 0; j < BC; j++)
        s += bf(vc[j]) * pf[j][q];
      oc[q] = (alpha ? alpha[q] * oc[q] : oc[q]) + s;
    }
  }
}

static void probs_grad_generic(const float *st, const float *dpt, float scale, const int *lo,
                               const int *hi, const float *lse, const float *di, float dscale,
                               uint16_t *pt, uint16_t *dst, int64_t ldt, uint16_t *dsv) {
  for (int q = 0; q < QT; q++) {
    int a = lo ? lo[q] : 0, z = hi ? hi[q] : BC;
    if (lse[q] == -INFINITY) a = z = 0; /* a row with no allowed key */
    /* lse NaN (a NaN logit in the forward): p = ds = NaN at the allowed
     * keys (t > -inf); ds = 0 where p = 0 (as math), even for a NaN dp or D_i */
    for (int j = 0; j < BC; j++) {
      float t = j >= a && j < z ? scale * st[j * QT + q] : -INFINITY, x = t - lse[q];
      if (x > 88.0f) x = 88.0f;
      float p = t != -INFINITY && !(x < ATTN_BF16_PMIN_LOG) ? expf(x) : 0.0f;
      float ds = p == 0.0f ? 0.0f : p * (dpt[j * QT + q] - di[q]) * dscale;
      pt[j * ldt + q] = attn_f32_to_bf16(p);
      dst[j * ldt + q] = attn_f32_to_bf16(ds);
      dsv[(j >> 5) * 512 + ((j & 31) >> 1) * 32 + q * 2 + (j & 1)] = attn_f32_to_bf16(ds);
    }
  }
}

static void accum_t_generic(float *acc, int ntc, const uint16_t *a, int64_t lda, const uint16_t *b,
                            int nqc) {
  for (int kt = 0; kt < 4; kt++)
    for (int ct = 0; ct < ntc; ct++) {
      float *c = acc + (kt * ntc + ct) * 256;
      for (int r = 0; r < 16; r++)
        for (int col = 0; col < 16; col++) {
          float s = 0.0f;
          for (int qc = 0; qc < nqc; qc++) {
            const uint16_t *ar = a + (kt * 16 + r) * lda + qc * 32;
            const uint16_t *bt = b + (qc * ntc + ct) * 512;
            for (int e = 0; e < 32; e++)
              s += bf(ar[e]) * bf(bt[(e >> 1) * 32 + col * 2 + (e & 1)]);
          }
          c[r * 16 + col] += s;
        }
    }
}

static const attn_flash_bf16_ops generic_ops = {
    "portable",     nop, nop, scores_generic, softmax_generic, accum_generic, probs_grad_generic,
    accum_t_generic};

const attn_flash_bf16_ops *attn_flash_bf16_ops_generic(void) { return &generic_ops; }
