/* AMX + AVX-512 tile kernels of the bf16 flash attention (selected at run
 * time when the CPU has AMX-BF16 and AVX512_BF16 and the tile permission).
 *
 * scores: sᵀ [64 keys, 16 queries] in four accumulator tiles (0..3), per 32
 *   depth steps one Q tile (4) and four K tiles (5, 6 alternating): 4
 *   TDPBF16PS per chunk.
 * softmax: one zmm per key row (16 query lanes). When every lane has a
 *   running max, one pass against it (p = 2^((t - m) log2 e), exp2_or_zero),
 *   kept unless some exponent exceeds TAU; else a max pass and the exp pass
 *   against the moved max. Two running sums; each pair of key rows rounded
 *   to bf16 and interleaved (VCVTNE2PS2BF16 + VPERMW) into the VNNI rows of
 *   the p tiles.
 * accum: oᵀ [Dv, 16] rescaled by alpha with AVX-512 only when some alpha
 *   != 1, then four oᵀ tiles at a time loaded as accumulators (0..3), += vᵀ
 *   tiles (4, 5) times the two p tiles (6, 7).
 * Backward: probs_grad recomputes p from lse the same way and writes p, ds
 *   as bf16 rows of A tiles and ds as B tiles; accum_t adds A·B over query
 *   chunks into accumulator tiles loaded from and stored to memory. */
#include "kernels/sdpa_flash_bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/amx.h"
#include "kernels/vexp_avx512.h"

#define AMX_TARGET                                                                                 \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define AVX_INLINE                                                                                 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c"),                      \
                 always_inline)) static inline

enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT };

/* GCC's _tile_loadd is an asm without a memory operand or clobber: without
 * this barrier, vector stores before a tile load of the same memory may be
 * moved after it. */
#define MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

AMX_TARGET static void scores_amx(const uint16_t *k, int64_t ldk, int dc, const uint16_t *qp,
                                  float *st) {
  const int64_t s = ldk * 2; /* bytes */
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int c = 0; c < dc; c++) {
    const uint16_t *kc = k + 32 * c;
    _tile_loadd(4, qp + 512 * c, 64);
    _tile_loadd(5, kc, s);
    _tile_loadd(6, kc + 16 * ldk, s);
    _tile_dpbf16ps(0, 5, 4);
    _tile_loadd(5, kc + 32 * ldk, s);
    _tile_dpbf16ps(1, 6, 4);
    _tile_loadd(6, kc + 48 * ldk, s);
    _tile_dpbf16ps(2, 5, 4);
    _tile_dpbf16ps(3, 6, 4);
  }
  _tile_stored(0, st, 64);
  _tile_stored(1, st + 256, 64);
  _tile_stored(2, st + 512, 64);
  _tile_stored(3, st + 768, 64);
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

AMX_TARGET static int softmax_amx(const float *st, float scale, const int *lo, const int *hi,
                                  float *m, float *l, float *alpha, uint16_t *p) {
  if (lo) return softmax_body(st, scale, lo, hi, m, l, alpha, p, 1);
  return softmax_body(st, scale, lo, hi, m, l, alpha, p, 0);
}

AMX_TARGET static void accum_amx(float *ot, int dvt, const float *alpha, const uint16_t *vt,
                                 const uint16_t *p) {
  if (alpha) {
    __m512 a = _mm512_loadu_ps(alpha);
    for (int r = 0; r < dvt * 16; r++)
      _mm512_storeu_ps(ot + r * QT, _mm512_mul_ps(a, _mm512_loadu_ps(ot + r * QT)));
  }
  MEMORY_BARRIER();
  _tile_loadd(6, p, 64);
  _tile_loadd(7, p + 512, 64);
  int dt = 0;
  for (; dt + 4 <= dvt; dt += 4) {
    float *o = ot + dt * 256;
    const uint16_t *v = vt + dt * 16 * BC;
    _tile_loadd(0, o, 64);
    _tile_loadd(1, o + 256, 64);
    _tile_loadd(2, o + 512, 64);
    _tile_loadd(3, o + 768, 64);
    _tile_loadd(4, v, 128);
    _tile_loadd(5, v + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(4, v + 16 * BC, 128);
    _tile_dpbf16ps(0, 5, 7);
    _tile_loadd(5, v + 16 * BC + 32, 128);
    _tile_dpbf16ps(1, 4, 6);
    _tile_loadd(4, v + 32 * BC, 128);
    _tile_dpbf16ps(1, 5, 7);
    _tile_loadd(5, v + 32 * BC + 32, 128);
    _tile_dpbf16ps(2, 4, 6);
    _tile_loadd(4, v + 48 * BC, 128);
    _tile_dpbf16ps(2, 5, 7);
    _tile_loadd(5, v + 48 * BC + 32, 128);
    _tile_dpbf16ps(3, 4, 6);
    _tile_dpbf16ps(3, 5, 7);
    _tile_stored(0, o, 64);
    _tile_stored(1, o + 256, 64);
    _tile_stored(2, o + 512, 64);
    _tile_stored(3, o + 768, 64);
  }
  for (; dt < dvt; dt++) {
    float *o = ot + dt * 256;
    const uint16_t *v = vt + dt * 16 * BC;
    _tile_loadd(0, o, 64);
    _tile_loadd(4, v, 128);
    _tile_loadd(5, v + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(0, 5, 7);
    _tile_stored(0, o, 64);
  }
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

AMX_TARGET static void probs_grad_amx(const float *st, const float *dpt, float scale, const int *lo,
                                      const int *hi, const float *lse, const float *di,
                                      float dscale, uint16_t *pt, uint16_t *dst, int64_t ldt,
                                      uint16_t *dsv) {
  if (lo)
    probs_grad_body(st, dpt, scale, lo, hi, lse, di, dscale, pt, dst, ldt, dsv, 1);
  else
    probs_grad_body(st, dpt, scale, lo, hi, lse, di, dscale, pt, dst, ldt, dsv, 0);
}

AMX_TARGET static void accum_t_amx(float *acc, int ntc, const uint16_t *a, int64_t lda,
                                   const uint16_t *b, int nqc) {
  const int64_t sa = lda * 2;
  for (int kt = 0; kt < 4; kt++) {
    int ct = 0;
    for (; ct + 4 <= ntc; ct += 4) {
      float *c = acc + (kt * ntc + ct) * 256;
      _tile_loadd(0, c, 64);
      _tile_loadd(1, c + 256, 64);
      _tile_loadd(2, c + 512, 64);
      _tile_loadd(3, c + 768, 64);
      for (int qc = 0; qc < nqc; qc++) {
        const uint16_t *bt = b + (qc * ntc + ct) * 512;
        _tile_loadd(4, a + kt * 16 * lda + qc * 32, sa);
        _tile_loadd(5, bt, 64);
        _tile_loadd(6, bt + 512, 64);
        _tile_dpbf16ps(0, 4, 5);
        _tile_loadd(5, bt + 1024, 64);
        _tile_dpbf16ps(1, 4, 6);
        _tile_loadd(6, bt + 1536, 64);
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 6);
      }
      _tile_stored(0, c, 64);
      _tile_stored(1, c + 256, 64);
      _tile_stored(2, c + 512, 64);
      _tile_stored(3, c + 768, 64);
    }
    for (; ct < ntc; ct++) {
      float *c = acc + (kt * ntc + ct) * 256;
      _tile_loadd(0, c, 64);
      for (int qc = 0; qc < nqc; qc++) {
        _tile_loadd(4, a + kt * 16 * lda + qc * 32, sa);
        _tile_loadd(5, b + (qc * ntc + ct) * 512, 64);
        _tile_dpbf16ps(0, 4, 5);
      }
      _tile_stored(0, c, 64);
    }
  }
}

static const attn_flash_bf16_ops amx_ops = {"amx",
                                            attn_amx_config_tiles,
                                            attn_amx_release_tiles,
                                            scores_amx,
                                            softmax_amx,
                                            accum_amx,
                                            probs_grad_amx,
                                            accum_t_amx};

const attn_flash_bf16_ops *attn_flash_bf16_ops_amx(void) { return &amx_ops; }
#else
const attn_flash_bf16_ops *attn_flash_bf16_ops_amx(void) { return 0; }
#endif
