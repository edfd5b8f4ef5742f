/* AVX512_BF16 tile kernels of the bf16 flash attention (VDPBF16PS on the
 * vector units: AMD Zen 4, Intel Cooper Lake and later), and the softmax and
 * probs_grad tiles that the AMX set (sdpa_flash_bf16_amx.c) shares.
 *
 * The GEMM tiles are one shape, C [16 rows, 16 lanes] (+)= sum over depth
 * pairs p of bcast(A row r, pair p) · B row p, where a B row is the 16
 * lanes' pair of bf16 (the VNNI layout the AMX B tiles already use) and the
 * A pair is a 32-bit broadcast folded into VDPBF16PS's memory operand:
 *   scores   sᵀ [64 keys, 16 queries] = K rows · Qp      (lanes: queries)
 *   accum    oᵀ [Dv, 16 queries] = alpha oᵀ + vT · p      (lanes: queries)
 *   accum_t  acc [64 keys, 16 columns] += pᵀ or dsᵀ · (dout or q pairs)
 * 16 accumulators, one B row and the broadcast operands: per pair one load
 * and 16 VDPBF16PS (32 bf16 products each), no shuffles.
 *
 * softmax: one zmm per key row (16 query lanes). When every lane has a
 *   running max, one pass against it (p = 2^((t - m) log2 e), exp2_or_zero),
 *   kept unless some exponent exceeds TAU; else a max pass and the exp pass
 *   against the moved max. Two running sums; each pair of key rows rounded
 *   to bf16 and interleaved (VCVTNE2PS2BF16 + VPERMW) into the VNNI rows of
 *   the p tiles.
 * probs_grad recomputes p from lse the same way and writes p, ds as bf16
 *   rows of A tiles and ds as B tiles. */
#include "kernels/flash/sdpa_flash_bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/arch/isa_targets.h"
#include "kernels/arch/avx512/vexp_avx512.h"

#define AVX_INLINE ATTN_AVX512_BF16_INLINE

enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT };

/* c [16][16] (rows ldc apart) (+)= sum over pairs p < np of bcast(a + r lda
 * + 2p) · b pair row p (at b + (p / 16) bcs + (p % 16) 32): load = 0 starts
 * from 0, 1 from c, 2 from alpha * c (alpha per lane). */
AVX_INLINE void dp16(const uint16_t *a, int64_t lda, const uint16_t *b, int64_t bcs, int np,
                     float *c, int64_t ldc, int load, const float *alpha) {
  __m512 acc[16];
  if (load) {
    const __m512 va = load == 2 ? _mm512_loadu_ps(alpha) : _mm512_set1_ps(1.0f);
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
      acc[r] = _mm512_loadu_ps(c + r * ldc);
      if (load == 2) acc[r] = _mm512_mul_ps(va, acc[r]);
    }
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
      acc[r] = _mm512_setzero_ps();
  }
  for (int p = 0; p < np; p++) {
    const __m512bh bp = (__m512bh)_mm512_loadu_si512(b + (p >> 4) * bcs + (p & 15) * 32);
    const uint16_t *ap = a + 2 * p;
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
      int32_t w;
      __builtin_memcpy(&w, ap + r * lda, sizeof w);
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_set1_epi32(w), bp);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < 16; r++)
    _mm512_storeu_ps(c + r * ldc, acc[r]);
}

ATTN_AVX512_BF16 static void nop(void) {}

ATTN_AVX512_BF16 static void scores_dp(const uint16_t *k, int64_t ldk, int dc, int np,
                                       const uint16_t *qp, float *st) {
  (void)dc;
  for (int rb = 0; rb < BC; rb += 16)
    dp16(k + rb * ldk, ldk, qp, 512, np, st + rb * QT, QT, 0, NULL);
}

ATTN_AVX512_BF16 static void accum_dp(float *ot, int dvt, const float *alpha, const uint16_t *vt,
                                      const uint16_t *p) {
  for (int t = 0; t < dvt; t++)
    dp16(vt + t * 16 * BC, BC, p, 512, BC / 2, ot + t * 256, QT, alpha ? 2 : 1, alpha);
}

ATTN_AVX512_BF16 static void accum_t_dp(float *acc, int ntc, const uint16_t *a, int64_t lda,
                                        const uint16_t *b, int nqc) {
  for (int kt = 0; kt < 4; kt++)
    for (int ct = 0; ct < ntc; ct++)
      dp16(a + kt * 16 * lda, lda, b + ct * 512, (int64_t)ntc * 512, 16 * nqc,
           acc + (kt * ntc + ct) * 256, 16, 1, NULL);
}

/* Lanes of key row j inside [lo, hi). */
AVX_INLINE __mmask16 in_range(int j, __m512i vlo, __m512i vhi) {
  __m512i vj = _mm512_set1_epi32(j);
  return _mm512_cmple_epi32_mask(vlo, vj) & _mm512_cmpgt_epi32_mask(vhi, vj);
}

/* VNNI interleave of two rows of 16 bf16: words e0 o0 e1 o1 ... */
AVX_INLINE __m512i pair_bf16(__m512 e, __m512 o) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(o, e));
}

/* Lanes where 2^x is computed: x >= PMIN_LOG * log2(e) or x NaN (a NaN
 * logit gives p = NaN, so the row's l and out turn NaN, as in the math path,
 * instead of the NaN being dropped like a masked key; the same compare,
 * unordered). -inf and the far tail give 0. */
AVX_INLINE __mmask16 exp2_lanes(__m512 x) {
  return _mm512_cmp_ps_mask(x, _mm512_set1_ps(ATTN_BF16_PMIN_LOG * 1.44269504088896341f),
                            _CMP_NLT_UQ);
}

/* 2^x on the lanes ok, else 0: x = n + r, |r| <= 1/2 exactly; 2^r by a
 * degree-5 polynomial (relative error 2e-7 evaluated in f32, fitted for
 * relative error on [-1/2, 1/2]); 2^n with vscalefps under the mask. x <= 12
 * here (TAU in base 2), so no clamp is needed; NaN gives NaN. */
AVX_INLINE __m512 exp2_masked(__mmask16 ok, __m512 x) {
  __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(x, n);
  __m512 y = _mm512_set1_ps(0.001330882078036666f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.00967151764780283f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.05550582334399223f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.24022242426872253f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.6931470632553101f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(ok, y, n);
}

AVX_INLINE __m512 exp2_or_zero(__m512 x) { return exp2_masked(exp2_lanes(x), x); }

/* (t - m) log2(e) of key row j: s * c - m2 with c = scale log2(e), m2 = m
 * log2(e), where allowed (ranged), else -inf */
AVX_INLINE __m512 shifted2(const float *st, int j, __m512 vc, __m512 m2, int ranged, __m512i vlo,
                           __m512i vhi) {
  __m512 x = _mm512_fmsub_ps(_mm512_loadu_ps(st + j * QT), vc, m2);
  if (!ranged) return x;
  return _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), in_range(j, vlo, vhi), x);
}

/* p of the block into the p tiles, the sums of its even and odd rows, and
 * (track) the largest exponent. */
AVX_INLINE void exp_pass(const float *st, __m512 vc, __m512 m2, int ranged, __m512i vlo,
                         __m512i vhi, uint16_t *p, __m512 *sum, __m512 *xmax, const int track) {
  __m512 se = _mm512_setzero_ps(), so = se, xm = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < BC; j += 2) {
    __m512 xe = shifted2(st, j, vc, m2, ranged, vlo, vhi);
    __m512 xo = shifted2(st, j + 1, vc, m2, ranged, vlo, vhi);
    if (track) xm = _mm512_max_ps(xm, _mm512_max_ps(xe, xo));
    __m512 pe = exp2_or_zero(xe), po = exp2_or_zero(xo);
    se = _mm512_add_ps(se, pe);
    so = _mm512_add_ps(so, po);
    _mm512_storeu_si512(p + (j >> 5) * 512 + ((j & 31) >> 1) * 32, pair_bf16(pe, po));
  }
  *sum = _mm512_add_ps(se, so);
  *xmax = xm;
}

AVX_INLINE int softmax_body(const float *st, float scale, const int *lo, const int *hi, float *m,
                            float *l, float *alpha, uint16_t *p, const int ranged) {
  const float log2e = 1.44269504088896341f;
  const __m512 vs = _mm512_set1_ps(scale), vc = _mm512_set1_ps(scale * log2e);
  const __m512 ninf = _mm512_set1_ps(-INFINITY), vlog2e = _mm512_set1_ps(log2e);
  __m512i vlo = _mm512_setzero_si512(), vhi = _mm512_setzero_si512();
  if (ranged) {
    vlo = _mm512_loadu_si512(lo);
    vhi = _mm512_loadu_si512(hi);
  }
  __m512 mo = _mm512_loadu_ps(m), sum, xmax;
  /* Every lane has a max already: one pass against it, which stands when
   * no exponent exceeds TAU (m stays, alpha = 1: what the two passes below
   * would give, bit for bit); else the two passes. */
  if (!_mm512_cmp_ps_mask(mo, ninf, _CMP_EQ_OQ)) {
    exp_pass(st, vc, _mm512_mul_ps(mo, vlog2e), ranged, vlo, vhi, p, &sum, &xmax, 1);
    if (!_mm512_cmp_ps_mask(xmax, _mm512_set1_ps(ATTN_BF16_TAU * log2e), _CMP_GT_OQ)) {
      _mm512_storeu_ps(alpha, _mm512_set1_ps(1.0f));
      _mm512_storeu_ps(l, _mm512_add_ps(_mm512_loadu_ps(l), sum));
      return 0;
    }
  }
  /* the block max of the raw scores, scaled after (scale > 0), or of the logits */
  __m512 mb0 = ninf, mb1 = ninf, mb;
  if (!ranged && scale > 0.0f) {
    for (int j = 0; j < BC; j += 2) {
      mb0 = _mm512_max_ps(mb0, _mm512_loadu_ps(st + j * QT));
      mb1 = _mm512_max_ps(mb1, _mm512_loadu_ps(st + (j + 1) * QT));
    }
    mb = _mm512_mul_ps(_mm512_max_ps(mb0, mb1), vs);
  } else {
    for (int j = 0; j < BC; j += 2) {
      __m512 x0 = _mm512_mul_ps(_mm512_loadu_ps(st + j * QT), vs);
      __m512 x1 = _mm512_mul_ps(_mm512_loadu_ps(st + (j + 1) * QT), vs);
      if (ranged) {
        x0 = _mm512_mask_mov_ps(ninf, in_range(j, vlo, vhi), x0);
        x1 = _mm512_mask_mov_ps(ninf, in_range(j + 1, vlo, vhi), x1);
      }
      mb0 = _mm512_max_ps(mb0, x0);
      mb1 = _mm512_max_ps(mb1, x1);
    }
    mb = _mm512_max_ps(mb0, mb1);
  }
  __mmask16 up =
      _mm512_cmp_ps_mask(mb, _mm512_add_ps(mo, _mm512_set1_ps(ATTN_BF16_TAU)), _CMP_GT_OQ);
  __m512 mn = _mm512_mask_mov_ps(mo, up, mb);
  __mmask16 moved = _mm512_cmp_ps_mask(mn, mo, _CMP_NEQ_UQ);
  __m512 a =
      _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), moved, attn_vexp16_avx512(_mm512_sub_ps(mo, mn)));
  /* lanes whose max is still -inf subtract 0: -inf gives p = 0, NaN stays NaN */
  __m512 m2 = _mm512_mask_mov_ps(_mm512_mul_ps(mn, vlog2e),
                                 _mm512_cmp_ps_mask(mn, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
  exp_pass(st, vc, m2, ranged, vlo, vhi, p, &sum, &xmax, 0);
  _mm512_storeu_ps(alpha, a);
  _mm512_storeu_ps(m, mn);
  _mm512_storeu_ps(l, _mm512_fmadd_ps(a, _mm512_loadu_ps(l), sum));
  return moved != 0;
}


ATTN_AVX512_BF16 int attn_flash_bf16_softmax_avx512(const float *st, float scale, const int *lo,
                                                    const int *hi, float *m, float *l, float *alpha,
                                                    uint16_t *p) {
  if (lo) return softmax_body(st, scale, lo, hi, m, l, alpha, p, 1);
  return softmax_body(st, scale, lo, hi, m, l, alpha, p, 0);
}

AVX_INLINE void probs_grad_row(const float *st, const float *dpt, int j, __m512 vs, __m512 vlse,
                               __m512 vdi, __m512 vg, int ranged, __m512i vlo, __m512i vhi,
                               __mmask16 nanl, uint16_t *pt, uint16_t *dst, int64_t ldt,
                               __m512 *ds) {
  /* vs, vlse: scale and lse times log2(e); x <= 127 keeps 2^x finite (min
   * with x second: a NaN x stays NaN) */
  __m512 sj = _mm512_loadu_ps(st + j * QT);
  __m512 x = _mm512_fmsub_ps(sj, vs, vlse);
  if (ranged) x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), in_range(j, vlo, vhi), x);
  __mmask16 ok = exp2_lanes(x);
  /* lanes with lse NaN (a NaN logit in the forward): p = NaN at the allowed
   * keys only, not where the logit is -inf (masked) */
  if (nanl) ok &= ~(nanl & _mm512_cmp_ps_mask(sj, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ));
  __m512 p = exp2_masked(ok, _mm512_min_ps(_mm512_set1_ps(127.0f), x));
  /* ds = 0 where p = 0 (as math), even for a NaN dp or D_i */
  *ds = _mm512_maskz_mul_ps(ok, _mm512_mul_ps(p, _mm512_sub_ps(_mm512_loadu_ps(dpt + j * QT), vdi)),
                            vg);
  _mm256_storeu_si256((__m256i *)(void *)(pt + j * ldt), (__m256i)_mm512_cvtneps_pbh(p));
  _mm256_storeu_si256((__m256i *)(void *)(dst + j * ldt), (__m256i)_mm512_cvtneps_pbh(*ds));
}

AVX_INLINE void probs_grad_body(const float *st, const float *dpt, float scale, const int *lo,
                                const int *hi, const float *lse, const float *di, float dscale,
                                uint16_t *pt, uint16_t *dst, int64_t ldt, uint16_t *dsv,
                                const int ranged) {
  const float log2e = 1.44269504088896341f;
  const __m512 vs = _mm512_set1_ps(scale * log2e), vg = _mm512_set1_ps(dscale);
  __m512 vlse = _mm512_loadu_ps(lse), vdi = _mm512_loadu_ps(di);
  /* lse = -inf (no allowed key): +inf makes every x -inf, p = 0 */
  vlse = _mm512_mask_mov_ps(vlse, _mm512_cmp_ps_mask(vlse, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ),
                            _mm512_set1_ps(INFINITY));
  vlse = _mm512_mul_ps(vlse, _mm512_set1_ps(log2e));
  const __mmask16 nanl = _mm512_cmp_ps_mask(vlse, vlse, _CMP_UNORD_Q);
  __m512i vlo = _mm512_setzero_si512(), vhi = _mm512_setzero_si512();
  if (ranged) {
    vlo = _mm512_loadu_si512(lo);
    vhi = _mm512_loadu_si512(hi);
  }
  for (int j = 0; j < BC; j += 2) {
    __m512 de, dodd;
    probs_grad_row(st, dpt, j, vs, vlse, vdi, vg, ranged, vlo, vhi, nanl, pt, dst, ldt, &de);
    probs_grad_row(st, dpt, j + 1, vs, vlse, vdi, vg, ranged, vlo, vhi, nanl, pt, dst, ldt, &dodd);
    _mm512_storeu_si512(dsv + (j >> 5) * 512 + ((j & 31) >> 1) * 32, pair_bf16(de, dodd));
  }
}


ATTN_AVX512_BF16 void attn_flash_bf16_probs_grad_avx512(const float *st, const float *dpt,
                                                        float scale, const int *lo, const int *hi,
                                                        const float *lse, const float *di,
                                                        float dscale, uint16_t *pt, uint16_t *dst,
                                                        int64_t ldt, uint16_t *dsv) {
  if (lo)
    probs_grad_body(st, dpt, scale, lo, hi, lse, di, dscale, pt, dst, ldt, dsv, 1);
  else
    probs_grad_body(st, dpt, scale, lo, hi, lse, di, dscale, pt, dst, ldt, dsv, 0);
}

static const attn_flash_bf16_ops dp_ops = {"avx512_bf16",
                                           nop,
                                           nop,
                                           scores_dp,
                                           attn_flash_bf16_softmax_avx512,
                                           accum_dp,
                                           attn_flash_bf16_probs_grad_avx512,
                                           accum_t_dp};

const attn_flash_bf16_ops *attn_flash_bf16_ops_avx512(void) { return &dp_ops; }
#else
const attn_flash_bf16_ops *attn_flash_bf16_ops_avx512(void) { return 0; }
#endif
