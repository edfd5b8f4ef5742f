/* AVX-512 tile kernels of the flash backend (selected at run time).
 *
 * gemm: c [R, n] (=|+=) A·B with R <= 6 rows and n <= 64 columns held in at
 * most 6 x 4 zmm accumulators; per k step up to 4 loads of B (the last one
 * masked for n % 16) and R broadcasts of A feed R x 4 FMAs. Every (R, number
 * of vectors) pair is its own fully unrolled instance.
 * The softmax kernels work on 64-column score tiles, 4 zmm per row, with the
 * vectorised exp of vexp_avx512.h. */
#include "kernels/flash/flash_tiles.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>
#include <math.h>

#include "kernels/arch/avx512/scoremod_avx512.h"
#include "kernels/arch/avx512/vexp_avx512.h"

enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR, NV = ATTN_FLASH_NC / 16 };

/* The body every gemm instance inlines, with R and V (vectors) constants. */
ATTN_AVX512_INLINE void gemm_body(const int R, const int V, __mmask16 last, int64_t K, const float *a,
                             int64_t ars, int64_t acs, const float *b, int64_t ldb, float *c,
                             int64_t ldc, const float *cs, int acc) {
  __m512 t[MR][NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++)
      t[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m512 bv[NV];
    const float *bk = b + k * ldb;
#pragma GCC unroll 4
    for (int v = 0; v < V; v++)
      bv[v] = v == V - 1 ? _mm512_maskz_loadu_ps(last, bk + 16 * v) : _mm512_loadu_ps(bk + 16 * v);
    const float *ak = a + k * acs;
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m512 ar = _mm512_set1_ps(ak[r * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < V; v++)
        t[r][v] = _mm512_fmadd_ps(ar, bv[v], t[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *cr = c + r * ldc;
    __m512 f = _mm512_set1_ps(cs ? cs[r] : 1.0f);
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      __mmask16 mk = v == V - 1 ? last : (__mmask16)0xffff;
      __m512 y = t[r][v];
      if (acc) y = _mm512_fmadd_ps(f, _mm512_maskz_loadu_ps(mk, cr + 16 * v), y);
      _mm512_mask_storeu_ps(cr + 16 * v, mk, y);
    }
  }
}

/* Dispatches to the body inlined with constant (R, V): one fully unrolled
 * copy per case. */
ATTN_AVX512 static void gemm_avx512(int R, int n, int64_t K, const float *a, int64_t ars,
                                      int64_t acs, const float *b, int64_t ldb, float *c,
                                      int64_t ldc, const float *cs, int acc) {
  int V = (n + 15) / 16, rem = n - 16 * (V - 1);
  __mmask16 last = (__mmask16)(rem == 16 ? 0xffff : (1u << rem) - 1);
  switch (R * 8 + V) {
  case 9: gemm_body(1, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 10: gemm_body(1, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 11: gemm_body(1, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 12: gemm_body(1, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 17: gemm_body(2, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 18: gemm_body(2, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 19: gemm_body(2, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 20: gemm_body(2, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 25: gemm_body(3, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 26: gemm_body(3, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 27: gemm_body(3, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 28: gemm_body(3, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 33: gemm_body(4, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 34: gemm_body(4, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 35: gemm_body(4, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 36: gemm_body(4, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 41: gemm_body(5, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 42: gemm_body(5, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 43: gemm_body(5, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 44: gemm_body(5, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 49: gemm_body(6, 1, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 50: gemm_body(6, 2, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 51: gemm_body(6, 3, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 52: gemm_body(6, 4, last, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  default: break;
  }
}

/* Columns lo <= j < hi of a 16-column slice v of a row. */
ATTN_AVX512_INLINE __mmask16 allowed_cols(int v, int lo, int hi) {
  __m512i j =
      _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                       _mm512_set1_epi32(16 * v));
  return _mm512_cmpge_epi32_mask(j, _mm512_set1_epi32(lo)) &
         _mm512_cmplt_epi32_mask(j, _mm512_set1_epi32(hi));
}

/* Lanes with x >= ATTN_FLASH_PMIN_LOG or x NaN: the others give p = 0 (no
 * denormal reaches the GEMMs; see sdpa_flash.h). A NaN logit gives p = NaN,
 * so the row's sum l and its output turn NaN (as in the math path) instead
 * of the NaN being dropped like a masked key; the same compare, unordered. */
ATTN_AVX512_INLINE __mmask16 normal_exp(__m512 x) {
  return _mm512_cmp_ps_mask(x, _mm512_set1_ps(ATTN_FLASH_PMIN_LOG), _CMP_NLT_UQ);
}

ATTN_AVX512 static void logits_avx512(int R, float *s, float scale, const int *lo,
                                        const int *hi) {
  __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC;
#pragma GCC unroll 4
    for (int v = 0; v < BC / 16; v++)
      _mm512_storeu_ps(sr + 16 * v, _mm512_mask_mul_ps(ninf, allowed_cols(v, lo[r], hi[r]), vs,
                                                       _mm512_loadu_ps(sr + 16 * v)));
  }
}

/* Per-row reductions of 6 rows at once (rows past R padded by the caller):
 * v[r] holds 16 partial values of row r; out[r] = their max (sum). Pairs of
 * rows share vectors after each step (9 + 6 + 8 operations for all six, not
 * 6 x 8); each row's lanes only ever meet their own, so a row's result does
 * not depend on the other rows. */
ATTN_AVX512_INLINE void rows6_reduce(const int is_max, const __m512 v[MR], float out[MR]) {
  __m512 h[3], w[2];
#pragma GCC unroll 3
  for (int i = 0; i < 3; i++) {
    __m512 lo = _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44);
    __m512 hi = _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE);
    h[i] = is_max ? _mm512_max_ps(lo, hi) : _mm512_add_ps(lo, hi);
  } /* h[i]: 8 lanes of row 2i, then 8 of row 2i+1 */
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) {
    __m512 b = i ? h[2] : h[1];
    __m512 ev = _mm512_shuffle_f32x4(h[2 * i], b, 0x88), od = _mm512_shuffle_f32x4(h[2 * i], b, 0xDD);
    w[i] = is_max ? _mm512_max_ps(ev, od) : _mm512_add_ps(ev, od);
  } /* w[0]: 4 lanes each of rows 0, 1, 2, 3; w[1]: rows 4, 5, 4, 5 */
  float buf[2][16];
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) {
    __m512 x = w[i], y = _mm512_permute_ps(x, 0x4E);
    x = is_max ? _mm512_max_ps(x, y) : _mm512_add_ps(x, y);
    y = _mm512_permute_ps(x, 0xB1);
    _mm512_storeu_ps(buf[i], is_max ? _mm512_max_ps(x, y) : _mm512_add_ps(x, y));
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
    out[r] = buf[r / 4][4 * (r % 4)];
}

/* Online softmax of R rows of logits x (4 zmm per row, -inf where not
 * allowed): row maxima, p = e^(x - m_new) stored to s (0 below
 * ATTN_FLASH_PMIN_LOG; NaN for a NaN logit, which the max skips), row sums;
 * m, l, alpha as attn_flash_ops.softmax_update. A row whose max is still
 * -inf subtracts 0 instead (-inf stays -inf, p = 0; NaN stays NaN). */
ATTN_AVX512_INLINE void softmax_rows(const int R, __m512 x[MR][4], float *s, float *m, float *l,
                                float *alpha) {
  __m512 v[MR];
  float mx[MR], sm[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
    v[r] = r < R ? _mm512_max_ps(_mm512_max_ps(x[r][0], x[r][1]), _mm512_max_ps(x[r][2], x[r][3]))
                 : _mm512_set1_ps(-INFINITY);
  rows6_reduce(1, v, mx);
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    if (r >= R) {
      v[r] = _mm512_setzero_ps();
      continue;
    }
    float mn = mx[r] > m[r] ? mx[r] : m[r];
    mx[r] = mn;
    __m512 vm = _mm512_set1_ps(mn == -INFINITY ? 0.0f : mn), p[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      __m512 d = _mm512_sub_ps(x[r][c], vm);
      p[c] = attn_vexp16_maskz_avx512(normal_exp(d), d);
      _mm512_storeu_ps(s + r * BC + 16 * c, p[c]);
    }
    v[r] = _mm512_add_ps(_mm512_add_ps(p[0], p[1]), _mm512_add_ps(p[2], p[3]));
  }
  rows6_reduce(0, v, sm);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float mo = m[r], mn = mx[r];
    float a = mo == mn ? 1.0f : mo == -INFINITY ? 0.0f : expf(mo - mn);
    alpha[r] = a;
    l[r] = l[r] * a + sm[r];
    m[r] = mn;
  }
}

ATTN_AVX512_INLINE void softmax_update_body(const int R, float *s, float scale, const int *lo,
                                       const int *hi, float *m, float *l, float *alpha) {
  __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY), x[MR][4];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      x[r][c] = _mm512_mask_mul_ps(ninf, allowed_cols(c, lo[r], hi[r]), vs,
                                   _mm512_loadu_ps(s + r * BC + 16 * c));
  softmax_rows(R, x, s, m, l, alpha);
}

ATTN_AVX512 static void softmax_update_avx512(int R, float *s, float scale, const int *lo,
                                                const int *hi, float *m, float *l, float *alpha) {
  switch (R) {
  case 1: softmax_update_body(1, s, scale, lo, hi, m, l, alpha); break;
  case 2: softmax_update_body(2, s, scale, lo, hi, m, l, alpha); break;
  case 3: softmax_update_body(3, s, scale, lo, hi, m, l, alpha); break;
  case 4: softmax_update_body(4, s, scale, lo, hi, m, l, alpha); break;
  case 5: softmax_update_body(5, s, scale, lo, hi, m, l, alpha); break;
  case 6: softmax_update_body(6, s, scale, lo, hi, m, l, alpha); break;
  default: break;
  }
}

ATTN_AVX512 static void probs_grad_avx512(int R, const float *s, float scale, const int *lo,
                                            const int *hi, const float *dp, const float *lse,
                                            const float *di, float dscale, float *p, float *ds,
                                            int64_t ldp) {
  __m512 vs = _mm512_set1_ps(scale), vg = _mm512_set1_ps(dscale);
  for (int r = 0; r < R; r++) {
    const float *sr = s + r * BC, *dpr = dp + r * BC;
    float *pr = p + r * ldp, *dsr = ds + r * ldp;
    if (lse[r] != lse[r]) { /* NaN row: p = ds = NaN at its allowed keys, else 0 */
      const __m512 nan = _mm512_set1_ps(NAN);
      for (int v = 0; v < BC / 16; v++) {
        __m512 t = _mm512_mul_ps(_mm512_loadu_ps(sr + 16 * v), vs);
        __mmask16 ok = allowed_cols(v, lo[r], hi[r]) &
                       _mm512_cmp_ps_mask(t, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ);
        _mm512_storeu_ps(pr + 16 * v, _mm512_maskz_mov_ps(ok, nan));
        _mm512_storeu_ps(dsr + 16 * v, _mm512_maskz_mov_ps(ok, nan));
      }
      continue;
    }
    int dead = lse[r] == -INFINITY;
    __m512 vl = _mm512_set1_ps(dead ? 0.0f : lse[r]), vd = _mm512_set1_ps(di[r]);
#pragma GCC unroll 4
    for (int v = 0; v < BC / 16; v++) {
      __mmask16 ok = dead ? 0 : allowed_cols(v, lo[r], hi[r]);
      __m512 t = _mm512_fmsub_ps(_mm512_loadu_ps(sr + 16 * v), vs, vl);
      ok &= normal_exp(t);
      __m512 pv = _mm512_maskz_mov_ps(ok, attn_vexp16_avx512(t));
      _mm512_storeu_ps(pr + 16 * v, pv);
      /* ds = 0 where p = 0 (as math), even for a NaN dp or D_i */
      __m512 g = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(dpr + 16 * v), vd), vg);
      _mm512_storeu_ps(dsr + 16 * v, _mm512_maskz_mul_ps(ok, pv, g));
    }
  }
}

/* 16 columns at a time; the reversed band (bcs = -1) is a masked load of
 * the 16 floats ending at b[-c0] and a lane reversal. */
ATTN_AVX512 static void add_rows_avx512(int R, int n, float *s, int64_t lds, const float *b,
                                          int64_t brs, int bcs, int skip) {
  const __m512i rev = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * lds;
    const float *br = b + r * brs;
    for (int c0 = 0; c0 < n; c0 += 16) {
      int cnt = n - c0 < 16 ? n - c0 : 16;
      __mmask16 m = (__mmask16)(cnt == 16 ? 0xffff : (1u << cnt) - 1);
      __m512 x = _mm512_maskz_loadu_ps(m, sr + c0), y;
      if (bcs == 1)
        y = _mm512_maskz_loadu_ps(m, br + c0);
      else if (bcs == 0)
        y = _mm512_set1_ps(br[0]);
      else /* lanes l' = 15 - l of br - c0 - 15 */
        y = _mm512_permutexvar_ps(
            rev, _mm512_maskz_loadu_ps((__mmask16)(m << (16 - cnt)), br - c0 - 15));
      __mmask16 ok = skip ? _mm512_mask_cmp_ps_mask(m, x, ninf, _CMP_NEQ_UQ) : m;
      _mm512_mask_storeu_ps(sr + c0, ok, _mm512_add_ps(x, y));
    }
  }
}

ATTN_AVX512 static float sum_avx512(int n, const float *x) {
  __m512 acc = _mm512_setzero_ps();
  for (int c0 = 0; c0 < n; c0 += 16) {
    int cnt = n - c0 < 16 ? n - c0 : 16;
    __mmask16 m = (__mmask16)(cnt == 16 ? 0xffff : (1u << cnt) - 1);
    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, x + c0));
  }
  return _mm512_reduce_add_ps(acc);
}

/* Whole tiles: the scores stay in the 24 accumulators through the softmax
 * (max, exp, sum in registers; p stored once, for the broadcasts of p·v),
 * then o = alpha o + p·v. The arithmetic is that of gemm_body +
 * softmax_update_avx512 + gemm_body step for step, so the result is the same
 * to the bit; what goes is the calls, the dispatch, the store and two
 * reloads of the scores and the masks. */
ATTN_AVX512_INLINE void tile_scores(const int kinds, const attn_flash_mod *mod, float rel, int row0,
                                    int64_t D, const float *q, int64_t ldq, const float *kt,
                                    float scale, float *s, float *m, float *l, float *alpha) {
  __m512 t[MR][4];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      t[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < D; k++) {
    const float *bk = kt + k * BC;
    __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16), b2 = _mm512_loadu_ps(bk + 32),
           b3 = _mm512_loadu_ps(bk + 48);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      __m512 ar = _mm512_set1_ps(q[r * ldq + k]);
      t[r][0] = _mm512_fmadd_ps(ar, b0, t[r][0]);
      t[r][1] = _mm512_fmadd_ps(ar, b1, t[r][1]);
      t[r][2] = _mm512_fmadd_ps(ar, b2, t[r][2]);
      t[r][3] = _mm512_fmadd_ps(ar, b3, t[r][3]);
    }
  }
  /* softmax_update_avx512 with every column allowed */
  const __m512 vs = _mm512_set1_ps(scale);
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
      t[r][c] = _mm512_mul_ps(vs, t[r][c]);
  if (!kinds && mod && mod->user) { /* the hook on the logits, in memory */
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        _mm512_storeu_ps(s + r * BC + 16 * c, t[r][c]);
    mod->user(mod, row0, s);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        t[r][c] = _mm512_loadu_ps(s + r * BC + 16 * c);
  }
  attn_scoremod_tile_avx512(kinds, mod, rel, t); /* the fused units, as the steps run them */
  softmax_rows(MR, t, s, m, l, alpha);
}

/* o = alpha o + p·v, 64 columns at a time */
ATTN_AVX512_INLINE void tile_values(int64_t Dv, const float *s, const float *alpha, const float *v,
                               int64_t ldv, float *o, int64_t ldo) {
  __m512 t[MR][4];
  int64_t c0 = 0;
  for (; c0 + 64 <= Dv; c0 += 64) {
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        t[r][c] = _mm512_setzero_ps();
    for (int j = 0; j < BC; j++) {
      const float *bj = v + j * ldv + c0;
      __m512 b0 = _mm512_loadu_ps(bj), b1 = _mm512_loadu_ps(bj + 16),
             b2 = _mm512_loadu_ps(bj + 32), b3 = _mm512_loadu_ps(bj + 48);
#pragma GCC unroll 6
      for (int r = 0; r < MR; r++) {
        __m512 ar = _mm512_set1_ps(s[r * BC + j]);
        t[r][0] = _mm512_fmadd_ps(ar, b0, t[r][0]);
        t[r][1] = _mm512_fmadd_ps(ar, b1, t[r][1]);
        t[r][2] = _mm512_fmadd_ps(ar, b2, t[r][2]);
        t[r][3] = _mm512_fmadd_ps(ar, b3, t[r][3]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      float *orow = o + r * ldo + c0;
      __m512 f = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        _mm512_storeu_ps(orow + 16 * c,
                         _mm512_fmadd_ps(f, _mm512_loadu_ps(orow + 16 * c), t[r][c]));
    }
  }
  if (c0 < Dv) /* the last columns, fewer than 64 */
    gemm_avx512(MR, (int)(Dv - c0), BC, s, BC, 1, v + c0, ldv, o + c0, ldo, alpha, 1);
}

/* G row groups, software-pipelined: the scores and softmax of group g are
 * issued before the p·v of group g - 1 (two p buffers), so the softmax's
 * dependency chain overlaps independent FMA work. The lines of the next key
 * block (ktn, vn) go to L2 a few per group. */
ATTN_AVX512_INLINE void tile_forward_rows(const int kinds, const attn_flash_mod *mod, int G,
                                          int64_t D, int64_t Dv, const float *q, int64_t ldq,
                                          const float *kt, const float *v, int64_t ldv, float scale,
                                          float *s, float *o, int64_t ldo, float *m, float *l,
                                          const float *ktn, const float *vn, int64_t ldvn) {
  float alpha[2][MR];
  const int64_t klines = ktn ? D * BC / 16 : 0, vlpr = (Dv + 15) / 16, vrows = vn ? BC : 0;
  const int64_t step = G > 0 ? (klines + vrows * vlpr + G - 1) / G : 0;
  int64_t kn = 0, vr = 0, vc = 0;
  for (int g = 0; g <= G; g++) {
    int64_t n = step;
    for (; n > 0 && kn < klines; n--, kn++)
      _mm_prefetch((const char *)(ktn + 16 * kn), _MM_HINT_T1);
    for (; n > 0 && vr < vrows; n--) {
      _mm_prefetch((const char *)(vn + vr * ldvn + 16 * vc), _MM_HINT_T1);
      if (++vc == vlpr) vc = 0, vr++;
    }
    if (g < G)
      tile_scores(kinds, mod, kinds & ATTN_FMOD_ALIBI ? mod->rel0 + (float)(g * MR) : 0.0f, g * MR,
                  D, q + g * MR * ldq, ldq, kt, scale, s + (g & 1) * MR * BC, m + g * MR,
                  l + g * MR, alpha[g & 1]);
    if (g > 0)
      tile_values(Dv, s + ((g - 1) & 1) * MR * BC, alpha[(g - 1) & 1], v, ldv,
                  o + (g - 1) * MR * ldo, ldo);
  }
}

ATTN_AVX512 static void tile_forward_avx512(int G, int64_t D, int64_t Dv, const float *q,
                                            int64_t ldq, const float *kt, const float *v,
                                            int64_t ldv, float scale, float *s, float *o,
                                            int64_t ldo, float *m, float *l, const float *ktn,
                                            const float *vn, int64_t ldvn) {
  tile_forward_rows(0, NULL, G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn, vn, ldvn);
}

/* One instance per set of fused units (ATTN_FMOD_*), and the user's hook. */
ATTN_AVX512 static void tile_forward_mod_avx512(const attn_flash_mod *mod, int G, int64_t D,
                                                int64_t Dv, const float *q, int64_t ldq,
                                                const float *kt, const float *v, int64_t ldv,
                                                float scale, float *s, float *o, int64_t ldo,
                                                float *m, float *l, const float *ktn,
                                                const float *vn, int64_t ldvn) {
  const int kinds = attn_flash_mod_kinds(mod);
  if (kinds == (ATTN_FMOD_CAP | ATTN_FMOD_ALIBI))
    tile_forward_rows(ATTN_FMOD_CAP | ATTN_FMOD_ALIBI, mod, G, D, Dv, q, ldq, kt, v, ldv, scale, s,
                      o, ldo, m, l, ktn, vn, ldvn);
  else if (kinds == ATTN_FMOD_ALIBI)
    tile_forward_rows(ATTN_FMOD_ALIBI, mod, G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l,
                      ktn, vn, ldvn);
  else if (kinds == ATTN_FMOD_CAP)
    tile_forward_rows(ATTN_FMOD_CAP, mod, G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn,
                      vn, ldvn);
  else if (mod->user)
    tile_forward_rows(0, mod, G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn, vn, ldvn);
  else
    tile_forward_avx512(G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn, vn, ldvn);
}

static const attn_flash_ops avx512_ops = {
    "avx512",          gemm_avx512,   logits_avx512,   softmax_update_avx512,
    probs_grad_avx512, attn_flash_pack_t_avx2, add_rows_avx512, sum_avx512,
    tile_forward_avx512, tile_forward_mod_avx512};

const attn_flash_ops *attn_flash_ops_avx512(void) { return &avx512_ops; }
#else
const attn_flash_ops *attn_flash_ops_avx512(void) { return 0; }
#endif
