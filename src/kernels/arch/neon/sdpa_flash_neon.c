/* arm64 NEON tile kernels of the flash backend (attn_flash_ops; contract in
 * sdpa_flash.h, portable reference in sdpa_flash_generic.c).
 *
 * gemm: c [R, n] (=|+=) A·B, R <= 6, n <= 64. A 6 x 64 tile is 96 q-registers
 * of accumulators, three times the register file, so the columns go in
 * slices: 16 columns (4 vectors) for R <= 4, 12 (3 vectors) for R = 5, 6, so
 * that accumulators + A + B stay within the 32 v-registers:
 *   R = 6, 12 columns: 18 accumulators + 6 A + 3 B = 27 registers;
 *   R = 4, 16 columns: 16 + 4 + 4 = 24.
 * When A's rows are contiguous in k (acs = 1: q·kᵀ, p·v, ds·k, the Shaw
 * rows) one 16-byte load takes 4 k steps of a row and the FMAs use its lanes
 * (FMLA by element), so per 4 k steps of a 6 x 12 slice: 6 A loads + 12 B
 * loads for 72 FMAs (4 lanes each). In the transposed use (ars = 1,
 * acs = BC: pᵀ·dout, dsᵀ·q) each A element is one scalar load (LDR s) feeding
 * the FMLA by element of its row: per k 6 + 3 loads for 18 FMAs. Both are
 * FMA-bound on cores with 2 load pipes (N1: 2 FMA pipes, 18 FMAs = 9 cycles
 * against 4.5 of loads) and with 3 (V1 / M1: 4 FMA pipes, 4.5 cycles of FMA
 * against 3 of loads); 18 independent chains cover 2 x 4 (N1) and 4 x 4 (V1)
 * FMAs in flight. Expected ~80-90% of the FMA peak in L1; the slices re-read
 * A (6 rows x K, in L1) once per slice, and the accumulators are loaded and
 * stored once per call. Every element is one FMA chain over k = 0..K-1 in
 * order, whichever path (vector or scalar A, slice width): the same bits.
 * objdump (gcc 12, -O2), no spills in the loops: the acs = 1 loop of a 6 x 12
 * slice is 100 instructions per 4 k steps (72 FMLA, 6 LDR q of A, B in an
 * LDP q + LDR q per k, addressing); the scalar-A loop 31 per k (18 FMLA, 6
 * A scalars, B's LDP + LDR); a 4 x 16 slice 89 per 4 k steps (64 FMLA).
 * Column counts not a multiple of 4 end with one partial vector (lanes built
 * from scalars: NEON has no masked loads, and reading past n may fault).
 *
 * Softmax and probs_grad: one row of 64 columns at a time (16 q-registers
 * of logits held across the max and the exp), masks from a lane-index
 * compare, NaN-skipping max with FMAXNM (the maximum of a number and a NaN is
 * the number, as the portable `if (x > mx)`), e^x from vexp_neon.h (the
 * in-range variant for the softmax, whose arguments are in [-64, 0] or NaN
 * after the ATTN_FLASH_PMIN_LOG cut; the full one for probs_grad, where
 * t - lse may be positive); horizontal max and sum with FMAXNMV / FADDP.
 * Per 4 logits ~13 vector ops of exp + ~6 of mask, max, sum, store.
 *
 * tile_forward is NULL: the step-by-step loop already runs every op with
 * its operands in L1, and a fused tile cannot keep the 6 x 64 scores in
 * registers on NEON (96 q-registers) the way AVX-512 does (24 zmm). */
#include "kernels/kern.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/arch/neon/vexp_neon.h"

#define NEON_INLINE __attribute__((always_inline)) static inline

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR, NVEC = BC / 4 };

/* ---- gemm ---------------------------------------------------------------- */

/* The first rem (1..3) floats of p in the low lanes, zero above. */
NEON_INLINE float32x4_t load_part(const float *p, int rem) {
  float32x4_t x = vsetq_lane_f32(p[0], vdupq_n_f32(0.0f), 0);
  if (rem > 1) x = vsetq_lane_f32(p[1], x, 1);
  if (rem > 2) x = vsetq_lane_f32(p[2], x, 2);
  return x;
}

NEON_INLINE void store_part(float *p, float32x4_t x, int rem) {
  p[0] = vgetq_lane_f32(x, 0);
  if (rem > 1) p[1] = vgetq_lane_f32(x, 1);
  if (rem > 2) p[2] = vgetq_lane_f32(x, 2);
}

/* One k step with A's 4 k values of each row in the lanes of av[r]: lane L. */
#define GEMM_LANE_STEP(L)                                                                          \
  do {                                                                                             \
    const float *bk = b + (k + (L)) * ldb;                                                         \
    float32x4_t bv[4];                                                                             \
    _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) bv[v] =                                    \
        PART ? load_part(bk, rem) : vld1q_f32(bk + 4 * v);                                         \
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) t[r][v] =                              \
            vfmaq_laneq_f32(t[r][v], bv[v], av[r], L);                                             \
  } while (0)

/* c [R, 4V columns] (=|+=) A·B for constant R (1..6) and V (1..4 vectors);
 * PART: V = 1 and the vector is the partial one of rem (1..3) columns. */
NEON_INLINE void gemm_body(const int R, const int V, const int PART, int rem, int64_t K,
                           const float *a, int64_t ars, int64_t acs, const float *b, int64_t ldb,
                           float *c, int64_t ldc, const float *cs, int acc) {
  float32x4_t t[MR][4];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++)
      t[r][v] = vdupq_n_f32(0.0f);
  int64_t k = 0;
  if (acs == 1) /* rows of A contiguous in k: 4 k steps per load of A */
    for (; k + 4 <= K; k += 4) {
      float32x4_t av[MR];
#pragma GCC unroll 6
      for (int r = 0; r < R; r++)
        av[r] = vld1q_f32(a + r * ars + k);
      GEMM_LANE_STEP(0);
      GEMM_LANE_STEP(1);
      GEMM_LANE_STEP(2);
      GEMM_LANE_STEP(3);
    }
  for (; k < K; k++) { /* one k step, A element by element */
    const float *bk = b + k * ldb, *ak = a + k * acs;
    float32x4_t bv[4];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++)
      bv[v] = PART ? load_part(bk, rem) : vld1q_f32(bk + 4 * v);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      const float ar = ak[r * ars];
#pragma GCC unroll 4
      for (int v = 0; v < V; v++)
        t[r][v] = vfmaq_n_f32(t[r][v], bv[v], ar);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *cr = c + r * ldc;
    const float32x4_t f = vdupq_n_f32(cs ? cs[r] : 1.0f);
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      float32x4_t y = t[r][v];
      if (acc) y = vfmaq_f32(y, f, PART ? load_part(cr, rem) : vld1q_f32(cr + 4 * v));
      if (PART)
        store_part(cr, y, rem);
      else
        vst1q_f32(cr + 4 * v, y);
    }
  }
}

/* One column slice: the body inlined with constant (R, V, PART). */
static void gemm_slice(int R, int V, int rem, int64_t K, const float *a, int64_t ars, int64_t acs,
                       const float *b, int64_t ldb, float *c, int64_t ldc, const float *cs,
                       int acc) {
#define GEMM_CASE(R_, V_, P_)                                                                      \
  case (R_)*16 + (V_)*2 + (P_):                                                                    \
    gemm_body(R_, V_, P_, rem, K, a, ars, acs, b, ldb, c, ldc, cs, acc);                           \
    break
#define GEMM_CASES(R_)                                                                             \
  GEMM_CASE(R_, 1, 0);                                                                             \
  GEMM_CASE(R_, 2, 0);                                                                             \
  GEMM_CASE(R_, 3, 0);                                                                             \
  GEMM_CASE(R_, 1, 1)
  switch (R * 16 + V * 2 + (rem > 0)) { /* V = 4 only for R <= 4 (see gemm_neon) */
    GEMM_CASES(1);
    GEMM_CASE(1, 4, 0);
    GEMM_CASES(2);
    GEMM_CASE(2, 4, 0);
    GEMM_CASES(3);
    GEMM_CASE(3, 4, 0);
    GEMM_CASES(4);
    GEMM_CASE(4, 4, 0);
    GEMM_CASES(5);
    GEMM_CASES(6);
  default: break;
  }
#undef GEMM_CASES
#undef GEMM_CASE
}

static void gemm_neon(int R, int n, int64_t K, const float *a, int64_t ars, int64_t acs,
                      const float *b, int64_t ldb, float *c, int64_t ldc, const float *cs,
                      int acc) {
  const int W = R <= 4 ? 4 : 3; /* vectors per slice: accumulators + A + B <= 32 */
  int nv = n / 4, c0 = 0;
  for (; nv >= W; nv -= W, c0 += 4 * W)
    gemm_slice(R, W, 0, K, a, ars, acs, b + c0, ldb, c + c0, ldc, cs, acc);
  if (nv > 0) {
    gemm_slice(R, nv, 0, K, a, ars, acs, b + c0, ldb, c + c0, ldc, cs, acc);
    c0 += 4 * nv;
  }
  if (n % 4) gemm_slice(R, 1, n % 4, K, a, ars, acs, b + c0, ldb, c + c0, ldc, cs, acc);
}

/* ---- masks, max, sums -------------------------------------------------- */

/* Lanes of vector v (columns 4v .. 4v+3) with lo <= j < hi. The lane index
 * {0, 1, 2, 3} is compared with lo - 4v and hi - 4v (two DUPs from general
 * registers), so one constant vector is live instead of 16. */
NEON_INLINE uint32x4_t allowed_cols(int v, int lo, int hi) {
  static const int32_t iota4[4] = {0, 1, 2, 3};
  const int32x4_t iota = vld1q_s32(iota4);
  return vandq_u32(vcgeq_s32(iota, vdupq_n_s32(lo - 4 * v)),
                   vcltq_s32(iota, vdupq_n_s32(hi - 4 * v)));
}

/* Row sr := t = scale * s where lo <= j < hi, -inf elsewhere; returns the
 * maximum of t skipping NaN (FMAXNM gives the number of a (number, NaN)
 * pair; the tree starts from -inf, so the result is never NaN). */
NEON_INLINE float row_logits(float *sr, float scale, int lo, int hi) {
  const float32x4_t vs = vdupq_n_f32(scale), ninf = vdupq_n_f32(-INFINITY);
  float32x4_t mx0 = ninf, mx1 = ninf; /* two chains: FMAXNM latency */
  if (lo <= 0 && hi >= BC) {          /* every column allowed: no mask */
#pragma GCC unroll 16
    for (int v = 0; v < NVEC; v++) {
      float32x4_t t = vmulq_f32(vs, vld1q_f32(sr + 4 * v));
      vst1q_f32(sr + 4 * v, t);
      if (v & 1)
        mx1 = vmaxnmq_f32(mx1, t);
      else
        mx0 = vmaxnmq_f32(mx0, t);
    }
  } else { /* rolled by 4: unrolled, the scheduler hoists all 32 DUPs and spills */
#pragma GCC unroll 4
    for (int v = 0; v < NVEC; v++) {
      float32x4_t t =
          vbslq_f32(allowed_cols(v, lo, hi), vmulq_f32(vs, vld1q_f32(sr + 4 * v)), ninf);
      vst1q_f32(sr + 4 * v, t);
      if (v & 1)
        mx1 = vmaxnmq_f32(mx1, t);
      else
        mx0 = vmaxnmq_f32(mx0, t);
    }
  }
  return vmaxnmvq_f32(vmaxnmq_f32(mx0, mx1));
}

/* Lanes with x >= ATTN_FLASH_PMIN_LOG or x NaN (the compare is false for a
 * NaN, so its negation keeps it): the others give p = 0, no denormal p. */
NEON_INLINE uint32x4_t normal_exp(float32x4_t x) {
  return vmvnq_u32(vcltq_f32(x, vdupq_n_f32(ATTN_FLASH_PMIN_LOG)));
}

static void logits_neon(int R, float *s, float scale, const int *lo, const int *hi) {
  for (int r = 0; r < R; r++)
    (void)row_logits(s + r * BC, scale, lo[r], hi[r]);
}

/* Two passes over each row: the logits and their max (stored to s), then
 * p and its sum from s (in L1). Keeping the 16 vectors of logits in
 * registers across the max instead would spill them anyway: the exp needs
 * ~10 constant vectors and temporaries beside them. */
static void softmax_update_neon(int R, float *s, float scale, const int *lo, const int *hi,
                                float *m, float *l, float *alpha) {
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC;
    const float mx = row_logits(sr, scale, lo[r], hi[r]);
    const float mn = mx > m[r] ? mx : m[r];
    /* max still -inf (nothing allowed yet): subtract 0, so -inf gives p = 0
     * and NaN stays NaN */
    const float32x4_t vm = vdupq_n_f32(mn == -INFINITY ? 0.0f : mn);
    float32x4_t sum0 = vdupq_n_f32(0.0f), sum1 = sum0;
#pragma GCC unroll 4
    for (int v = 0; v < NVEC; v++) {
      float32x4_t d = vsubq_f32(vld1q_f32(sr + 4 * v), vm);
      float32x4_t p = attn_vmaskz4_neon(normal_exp(d), attn_vexp4_inrange_neon(d));
      vst1q_f32(sr + 4 * v, p);
      if (v & 1)
        sum1 = vaddq_f32(sum1, p);
      else
        sum0 = vaddq_f32(sum0, p);
    }
    const float sum = vaddvq_f32(vaddq_f32(sum0, sum1));
    const float mo = m[r];
    const float a = mo == mn ? 1.0f : mo == -INFINITY ? 0.0f : expf(mo - mn);
    alpha[r] = a;
    l[r] = l[r] * a + sum;
    m[r] = mn;
  }
}

static void probs_grad_neon(int R, const float *s, float scale, const int *lo, const int *hi,
                            const float *dp, const float *lse, const float *di, float dscale,
                            float *p, float *ds, int64_t ldp) {
  const float32x4_t vs = vdupq_n_f32(scale), vg = vdupq_n_f32(dscale);
  for (int r = 0; r < R; r++) {
    const float *sr = s + r * BC, *dpr = dp + r * BC;
    float *pr = p + r * ldp, *dsr = ds + r * ldp;
    if (lse[r] == -INFINITY) { /* the row has no key: p = ds = 0 */
      memset(pr, 0, BC * sizeof(float));
      memset(dsr, 0, BC * sizeof(float));
      continue;
    }
    if (lse[r] != lse[r]) { /* NaN row: p = ds = NaN at its allowed keys with t > -inf */
      const float32x4_t nan = vdupq_n_f32(NAN), ninf = vdupq_n_f32(-INFINITY);
#pragma GCC unroll 4
      for (int v = 0; v < NVEC; v++) {
        float32x4_t t = vmulq_f32(vld1q_f32(sr + 4 * v), vs);
        uint32x4_t ok = vandq_u32(allowed_cols(v, lo[r], hi[r]), vmvnq_u32(vceqq_f32(t, ninf)));
        vst1q_f32(pr + 4 * v, attn_vmaskz4_neon(ok, nan));
        vst1q_f32(dsr + 4 * v, attn_vmaskz4_neon(ok, nan));
      }
      continue;
    }
    const float32x4_t vl = vdupq_n_f32(lse[r]), vd = vdupq_n_f32(di[r]);
#pragma GCC unroll 4
    for (int v = 0; v < NVEC; v++) {
      /* x = t - lse; x = -inf for t = -inf, so the PMIN cut drops it */
      float32x4_t x = vsubq_f32(vmulq_f32(vld1q_f32(sr + 4 * v), vs), vl);
      uint32x4_t ok = vandq_u32(allowed_cols(v, lo[r], hi[r]), normal_exp(x));
      float32x4_t pv = attn_vmaskz4_neon(ok, attn_vexp4_neon(x));
      vst1q_f32(pr + 4 * v, pv);
      /* ds = 0 where p = 0 (as math), even for a NaN dp or D_i */
      float32x4_t g = vmulq_f32(vsubq_f32(vld1q_f32(dpr + 4 * v), vd), vg);
      vst1q_f32(dsr + 4 * v, attn_vmaskz4_neon(ok, vmulq_f32(pv, g)));
    }
  }
}

/* ---- layout and small row ops ------------------------------------------ */

/* kt [D, BC] = xᵀ (x [n, D], rows ldx apart), zero columns n up to the next
 * multiple of 8 (flash_tiles.h): 4x4 blocks through TRN1/TRN2 (rows of x read
 * 16 bytes at a time, rows of kt written so), the edges element by element. */
static void pack_t_neon(int64_t n, int64_t D, const float *x, int64_t ldx, float *kt) {
  int64_t j0 = 0;
  for (; j0 + 4 <= n; j0 += 4) {
    const float *x0 = x + j0 * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
    int64_t dd = 0;
    for (; dd + 4 <= D; dd += 4) {
      float32x4_t r0 = vld1q_f32(x0 + dd), r1 = vld1q_f32(x1 + dd), r2 = vld1q_f32(x2 + dd),
                  r3 = vld1q_f32(x3 + dd);
      float32x4_t t0 = vtrn1q_f32(r0, r1), t1 = vtrn2q_f32(r0, r1);
      float32x4_t t2 = vtrn1q_f32(r2, r3), t3 = vtrn2q_f32(r2, r3);
      float64x2_t d0 = vreinterpretq_f64_f32(t0), d1 = vreinterpretq_f64_f32(t1);
      float64x2_t d2 = vreinterpretq_f64_f32(t2), d3 = vreinterpretq_f64_f32(t3);
      vst1q_f32(kt + (dd + 0) * BC + j0, vreinterpretq_f32_f64(vtrn1q_f64(d0, d2)));
      vst1q_f32(kt + (dd + 1) * BC + j0, vreinterpretq_f32_f64(vtrn1q_f64(d1, d3)));
      vst1q_f32(kt + (dd + 2) * BC + j0, vreinterpretq_f32_f64(vtrn2q_f64(d0, d2)));
      vst1q_f32(kt + (dd + 3) * BC + j0, vreinterpretq_f32_f64(vtrn2q_f64(d1, d3)));
    }
    for (; dd < D; dd++) {
      float *row = kt + dd * BC + j0;
      row[0] = x0[dd];
      row[1] = x1[dd];
      row[2] = x2[dd];
      row[3] = x3[dd];
    }
  }
  for (int64_t dd = 0; dd < D; dd++) {
    float *row = kt + dd * BC;
    for (int64_t j = j0; j < n; j++)
      row[j] = x[j * ldx + dd];
    for (int64_t j = n; j < attn_flash_cols8(n); j++)
      row[j] = 0.0f;
  }
}

/* 4 columns at a time; the reversed band (bcs = -1) is the 4 floats ending
 * at b[-c0] with the lanes reversed (REV64 + EXT). Tails element by element. */
static void add_rows_neon(int R, int n, float *s, int64_t lds, const float *b, int64_t brs, int bcs,
                          int skip) {
  const float32x4_t ninf = vdupq_n_f32(-INFINITY);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * lds;
    const float *br = b + r * brs;
    int c = 0;
    for (; c + 4 <= n; c += 4) {
      float32x4_t x = vld1q_f32(sr + c), y;
      if (bcs == 1)
        y = vld1q_f32(br + c);
      else if (bcs == 0)
        y = vdupq_n_f32(br[0]);
      else { /* lanes br[-c], br[-c-1], br[-c-2], br[-c-3] */
        float32x4_t w = vrev64q_f32(vld1q_f32(br - c - 3));
        y = vextq_f32(w, w, 2);
      }
      float32x4_t z = vaddq_f32(x, y);
      if (skip) z = vbslq_f32(vceqq_f32(x, ninf), x, z);
      vst1q_f32(sr + c, z);
    }
    for (; c < n; c++)
      if (!skip || sr[c] != -INFINITY) sr[c] += br[c * bcs];
  }
}

static float sum_neon(int n, const float *x) {
  float32x4_t acc = vdupq_n_f32(0.0f);
  int c = 0;
  for (; c + 4 <= n; c += 4)
    acc = vaddq_f32(acc, vld1q_f32(x + c));
  float t = vaddvq_f32(acc);
  for (; c < n; c++)
    t += x[c];
  return t;
}

static const attn_flash_ops neon_ops = {
    "neon",        gemm_neon, logits_neon, softmax_update_neon, probs_grad_neon, pack_t_neon,
    add_rows_neon, sum_neon,  NULL /* tile_forward: the steps one by one (see above) */,
    NULL /* tile_forward_mod */};

const attn_flash_ops *attn_flash_ops_neon(void) { return &neon_ops; }

#else

const attn_flash_ops *attn_flash_ops_neon(void) { return 0; }

#endif
