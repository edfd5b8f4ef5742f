/* AVX2 + FMA tile kernels of the flash backend (selected at run time; no
 * AVX-512 instruction, so they run on any x86-64 with AVX2 and FMA).
 *
 * gemm: c [R, n] (=|+=) A·B, R <= 6, n <= 64, in 16-column slices. A slice
 * holds R x 2 ymm accumulators (12 at R = 6); per k step 2 loads of B and R
 * broadcasts of A (straight from memory) feed 2R FMAs: 12 + 2 + 1 of the 16
 * ymm registers, and 12 independent chains cover the FMA latency times the
 * two FMA pipes (4 x 2 on Zen 4, 5 x 2 on Haswell). 6 x 16 rather than the
 * 6 x 64 of the AVX-512 kernels because 48 ymm accumulators do not exist;
 * re-reading A once per slice costs broadcasts, which are load-port work
 * only. What the slices do cost is memory order: a pass walks one line per
 * row of B and reads A twice as fast per FMA, which the hardware
 * prefetchers follow badly from L2, hence the software prefetches (A's
 * lines up front, the next slice's line of each B row along the way). A
 * slice whose width is not a multiple of 8 masks its last vector
 * (vmaskmovps). Every (R, slice shape) is its own fully unrolled instance.
 *
 * The softmax kernels work on 64-column score rows, 8 ymm per row, with the
 * vectorised exp of vexp_avx2.h, phase by phase over the rows (see
 * softmax_state). Maxima skip NaN: every max takes the running value as
 * its second operand (maxps returns the second operand when either is NaN,
 * and the running value never is).
 *
 * tile_forward: the scores cannot stay in registers (6 x 64 floats are 48
 * ymm), so it is the same gemm and softmax code as the ops, inlined: the
 * same numbers to the bit by construction. What it saves is the calls and
 * the dispatch per group; and it runs the exps of group g between the
 * slices of group g - 1's p·v, so that the out-of-order core has
 * independent FMA work beside the exps' long dependency chains. */
#include "kernels/flash/sdpa_flash.h"

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>
#include <math.h>

#include "kernels/arch/avx2/scoremod_avx2.h"
#include "kernels/arch/avx2/vexp_avx2.h"


enum { BC = ATTN_FLASH_BC, MR = ATTN_FLASH_MR, NC = ATTN_FLASH_NC };

/* Lanes l < n of a vector (n <= 8) as a vmaskmovps mask. */
ATTN_AVX2_INLINE __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One slice of V (1 or 2) vectors: c [R, 8V] (=|+=) A·B[:, 8V]; with tail,
 * the last vector only on the lanes of last. R, V and tail are constants of
 * each inlined instance. Each step also fetches B's row k at column pfo: 16
 * when another slice follows (one pass walks one 64-byte line per row of
 * B, a stride the hardware prefetchers follow late, so the next pass finds
 * its lines in L1), 0 (the line just read, a no-op) for the last. */
ATTN_AVX2_INLINE void gemm_step(const int R, const int V, const int tail, __m256i last, int pfo,
                                 int64_t k, const float *a, int64_t ars, int64_t acs,
                                 const float *b, int64_t ldb, __m256 t[MR][2]) {
  __m256 bv[2];
  const float *bk = b + k * ldb;
  _mm_prefetch((const char *)(bk + pfo), _MM_HINT_T0);
#pragma GCC unroll 2
  for (int v = 0; v < V; v++)
    bv[v] = tail && v == V - 1 ? _mm256_maskload_ps(bk + 8 * v, last) : _mm256_loadu_ps(bk + 8 * v);
  const float *ak = a + k * acs;
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    __m256 ar = _mm256_broadcast_ss(ak + r * ars);
#pragma GCC unroll 2
    for (int v = 0; v < V; v++)
      t[r][v] = _mm256_fmadd_ps(ar, bv[v], t[r][v]);
  }
}

/* gemm_slice with ku: the k loop unrolled 4 times (the ops gemm, whose
 * calls have constant strides: fewer loop and address instructions per
 * FMA; the same operations in the same order, so the same bits). */
ATTN_AVX2_INLINE void gemm_slice_u(const int ku, const int R, const int V, const int tail,
                                   __m256i last, int pfo, int64_t K, const float *a, int64_t ars,
                                   int64_t acs, const float *b, int64_t ldb, float *c,
                                   int64_t ldc, const float *cs, int acc) {
  __m256 t[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 2
    for (int v = 0; v < V; v++)
      t[r][v] = _mm256_setzero_ps();
  if (ku) {
#pragma GCC unroll 4
    for (int64_t k = 0; k < K; k++)
      gemm_step(R, V, tail, last, pfo, k, a, ars, acs, b, ldb, t);
  } else {
    for (int64_t k = 0; k < K; k++)
      gemm_step(R, V, tail, last, pfo, k, a, ars, acs, b, ldb, t);
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *cr = c + r * ldc;
    __m256 f = _mm256_set1_ps(cs ? cs[r] : 1.0f);
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
      __m256 y = t[r][v];
      if (tail && v == V - 1) {
        if (acc) y = _mm256_fmadd_ps(f, _mm256_maskload_ps(cr + 8 * v, last), y);
        _mm256_maskstore_ps(cr + 8 * v, last, y);
      } else {
        if (acc) y = _mm256_fmadd_ps(f, _mm256_loadu_ps(cr + 8 * v), y);
        _mm256_storeu_ps(cr + 8 * v, y);
      }
    }
  }
}

ATTN_AVX2_INLINE void gemm_slice(const int R, const int V, const int tail, __m256i last, int pfo,
                            int64_t K, const float *a, int64_t ars, int64_t acs, const float *b,
                            int64_t ldb, float *c, int64_t ldc, const float *cs, int acc) {
  gemm_slice_u(0, R, V, tail, last, pfo, K, a, ars, acs, b, ldb, c, ldc, cs, acc);
}

/* All n columns of R rows (R constant): whole 16-column slices, then the
 * rest (8: one vector; 1..7: one masked; 9..15: one plus one masked). */
ATTN_AVX2_INLINE void gemm_rows_u(const int ku, const int R, int n, int64_t K, const float *a,
                                  int64_t ars, int64_t acs, const float *b, int64_t ldb, float *c,
                                  int64_t ldc, const float *cs, int acc) {
  const __m256i all = _mm256_set1_epi32(-1);
  int c0 = 0;
  for (; c0 + 16 <= n; c0 += 16)
    gemm_slice_u(ku, R, 2, 0, all, c0 + 16 < n ? 16 : 0, K, a, ars, acs, b + c0, ldb, c + c0,
                 ldc, cs, acc);
  int rem = n - c0;
  if (rem == 0) return;
  __m256i last = first_lanes(rem & 7);
  if (rem == 8)
    gemm_slice_u(ku, R, 1, 0, all, 0, K, a, ars, acs, b + c0, ldb, c + c0, ldc, cs, acc);
  else if (rem < 8)
    gemm_slice_u(ku, R, 1, 1, last, 0, K, a, ars, acs, b + c0, ldb, c + c0, ldc, cs, acc);
  else
    gemm_slice_u(ku, R, 2, 1, last, 0, K, a, ars, acs, b + c0, ldb, c + c0, ldc, cs, acc);
}

ATTN_AVX2_INLINE void gemm_rows(const int R, int n, int64_t K, const float *a, int64_t ars,
                                int64_t acs, const float *b, int64_t ldb, float *c, int64_t ldc,
                                const float *cs, int acc) {
  gemm_rows_u(0, R, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc);
}

/* A's lines, all at once: the first slice reads A at twice the rate of the
 * AVX-512 kernel (half the FMAs per broadcast), too fast for lines that
 * come from L2 or further one after another. */
ATTN_AVX2_INLINE void prefetch_a(int R, int64_t K, const float *a, int64_t ars, int64_t acs) {
  if (acs == 1) {
    for (int r = 0; r < R; r++)
      for (int64_t k = 0; k < K; k += 16)
        _mm_prefetch((const char *)(a + r * ars + k), _MM_HINT_T0);
  } else if (ars == 1) {
    for (int64_t k = 0; k < K; k++)
      _mm_prefetch((const char *)(a + k * acs), _MM_HINT_T0);
  }
}

/* One instance per R (ars, acs as given: constants in the instances below). */
ATTN_AVX2_INLINE void gemm_any_r(int R, int n, int64_t K, const float *a, int64_t ars,
                                 int64_t acs, const float *b, int64_t ldb, float *c, int64_t ldc,
                                 const float *cs, int acc) {
  switch (R) {
  case 1: gemm_rows_u(1, 1, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 2: gemm_rows_u(1, 2, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 3: gemm_rows_u(1, 3, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 4: gemm_rows_u(1, 4, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 5: gemm_rows_u(1, 5, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  case 6: gemm_rows_u(1, 6, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc); break;
  default: break;
  }
}

/* The backward's strides as constants (A's rows, acs 1: the s, dp and dq
 * products; A's columns of a score tile, ars 1, acs BC: dv and dk): the
 * broadcasts then take immediate offsets, and the k loop, which otherwise
 * spends about as many instructions on addresses as on FMAs, fits the
 * front end. The same operations in the same order: the same bits. */
ATTN_AVX2 static void gemm_avx2(int R, int n, int64_t K, const float *a, int64_t ars, int64_t acs,
                                  const float *b, int64_t ldb, float *c, int64_t ldc,
                                  const float *cs, int acc) {
  prefetch_a(R, K, a, ars, acs);
  if (acs == 1)
    gemm_any_r(R, n, K, a, ars, 1, b, ldb, c, ldc, cs, acc);
  else if (ars == 1 && acs == BC)
    gemm_any_r(R, n, K, a, 1, BC, b, ldb, c, ldc, cs, acc);
  else
    gemm_any_r(R, n, K, a, ars, acs, b, ldb, c, ldc, cs, acc);
}

/* Columns lo <= j < hi of the 8-column vector v of a row (all-ones lanes). */
ATTN_AVX2_INLINE __m256 allowed_cols(int v, int lo, int hi) {
  __m256i j = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * v));
  __m256i ge = _mm256_cmpgt_epi32(j, _mm256_set1_epi32(lo - 1));
  __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), j);
  return _mm256_castsi256_ps(_mm256_and_si256(ge, lt));
}

/* Lanes with x >= ATTN_FLASH_PMIN_LOG or x NaN: the others give p = 0 (no
 * denormal reaches the GEMMs; see sdpa_flash.h). A NaN logit gives p = NaN,
 * so the row's sum l and its output turn NaN (as in the math path) instead
 * of the NaN being dropped like a masked key; the same compare, unordered. */
ATTN_AVX2_INLINE __m256 normal_exp(__m256 x) {
  return _mm256_cmp_ps(x, _mm256_set1_ps(ATTN_FLASH_PMIN_LOG), _CMP_NLT_UQ);
}

ATTN_AVX2_INLINE float hmax(__m256 x) {
  __m128 y = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  y = _mm_max_ps(y, _mm_movehl_ps(y, y));
  y = _mm_max_ss(y, _mm_movehdup_ps(y));
  return _mm_cvtss_f32(y);
}

ATTN_AVX2_INLINE float hsum(__m256 x) {
  __m128 y = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  y = _mm_add_ps(y, _mm_movehl_ps(y, y));
  y = _mm_add_ss(y, _mm_movehdup_ps(y));
  return _mm_cvtss_f32(y);
}

ATTN_AVX2 static void logits_avx2(int R, float *s, float scale, const int *lo, const int *hi) {
  const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * BC;
#pragma GCC unroll 8
    for (int v = 0; v < BC / 8; v++)
      _mm256_storeu_ps(sr + 8 * v,
                       _mm256_blendv_ps(ninf, _mm256_mul_ps(vs, _mm256_loadu_ps(sr + 8 * v)),
                                        allowed_cols(v, lo[r], hi[r])));
  }
}

/* Logits of 8 columns of a row: scale * s, -inf outside [lo, hi) (every_key:
 * all allowed, lo and hi unread; the same values as lo 0, hi 64). */
ATTN_AVX2_INLINE __m256 logits8(const int every_key, const float *s, int c, __m256 vs, int lo, int hi) {
  __m256 x = _mm256_mul_ps(vs, _mm256_loadu_ps(s + 8 * c));
  return every_key ? x : _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), x, allowed_cols(c, lo, hi));
}

/* The online softmax of R rows of raw scores s (as
 * attn_flash_ops.softmax_update) in three phases, each over all rows: the
 * logits (stored back into s) and maxima, then p and the sums, then m, l,
 * alpha. One row alone is a chain of dependent steps (max, horizontal max,
 * exp, sum) longer than the out-of-order window; independent rows side by
 * side are not (and tile_forward slips the second phase's rows in between
 * the slices of an independent gemm). The state between the phases: */
typedef struct {
  float mo[8], mn[8], sm[MR]; /* m before and after, sums of p */
} softmax_state;

/* Phase 1: logits, maxima (the running max second: a NaN x is skipped).
 * kinds: the fused score-modifier units of mod on the logits
 * (scoremod_avx2.h; ATTN_FMOD_*, 0: none); rel: row 0's p_i - j0. */
ATTN_AVX2_INLINE void softmax_max(const int R, const int every_key, const int kinds,
                                  const attn_flash_mod *mod, float rel, float *s, float scale,
                                  const int *lo, const int *hi, const float *m, softmax_state *st) {
  const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
  const attn_scoremod_avx2 sm = attn_scoremod_init_avx2(kinds, mod);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    const int lr = every_key ? 0 : lo[r], hr = every_key ? BC : hi[r];
    const __m256 vrel = _mm256_set1_ps(kinds & ATTN_FMOD_ALIBI ? rel + (float)r : 0.0f);
    float *sr = s + r * BC;
    __m256 m0 = ninf, m1 = ninf;
#pragma GCC unroll 8
    for (int c = 0; c < BC / 8; c += 2) {
      __m256 x0 = logits8(every_key, sr, c, vs, lr, hr),
             x1 = logits8(every_key, sr, c + 1, vs, lr, hr);
      x0 = attn_scoremod8_avx2(kinds, &sm, x0, vrel, c);
      x1 = attn_scoremod8_avx2(kinds, &sm, x1, vrel, c + 1);
      _mm256_storeu_ps(sr + 8 * c, x0);
      _mm256_storeu_ps(sr + 8 * c + 8, x1);
      m0 = _mm256_max_ps(x0, m0);
      m1 = _mm256_max_ps(x1, m1);
    }
    float mx = hmax(_mm256_max_ps(m0, m1));
    st->mo[r] = m[r];
    st->mn[r] = mx > m[r] ? mx : m[r];
  }
}

/* Phase 2, row r: p = e^(x - m_new), 0 below ATTN_FLASH_PMIN_LOG; the sum
 * in two running vectors (even, odd columns: the exp needs a dozen
 * constants, so the rest holds few registers). */
ATTN_AVX2_INLINE void softmax_exp_row(float *s, int r, softmax_state *st) {
  float *sr = s + r * BC;
  /* max still -inf (nothing allowed yet): subtract 0, so -inf gives p = 0
   * and NaN stays NaN */
  const __m256 vm = _mm256_set1_ps(st->mn[r] == -INFINITY ? 0.0f : st->mn[r]);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
#pragma GCC unroll 8
  for (int c = 0; c < BC / 8; c++) {
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(sr + 8 * c), vm);
    __m256 p = attn_vexp8_mask_avx2(normal_exp(d), d);
    _mm256_storeu_ps(sr + 8 * c, p);
    acc[c & 1] = _mm256_add_ps(acc[c & 1], p);
  }
  st->sm[r] = hsum(_mm256_add_ps(acc[0], acc[1]));
}

/* Phase 3: alpha = e^(mo - mn), 1 where the max stayed (also -inf or +inf),
 * 0 from -inf (the clamped exp gives 0 for -inf; inf - inf cannot occur);
 * l = l alpha + sum, m = mn. */
ATTN_AVX2_INLINE void softmax_finish(const int R, softmax_state *st, float *m, float *l, float *alpha) {
#pragma GCC unroll 8
  for (int r = R; r < 8; r++)
    st->mo[r] = st->mn[r] = 0.0f;
  const __m256 vo = _mm256_loadu_ps(st->mo), vn = _mm256_loadu_ps(st->mn);
  float a[8];
  _mm256_storeu_ps(a, _mm256_blendv_ps(attn_vexp8_avx2(_mm256_sub_ps(vo, vn)), _mm256_set1_ps(1.0f),
                                       _mm256_cmp_ps(vo, vn, _CMP_EQ_OQ)));
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    alpha[r] = a[r];
    l[r] = l[r] * a[r] + st->sm[r];
    m[r] = st->mn[r];
  }
}

ATTN_AVX2_INLINE void softmax_rows(const int R, const int every_key, float *s, float scale,
                              const int *lo, const int *hi, float *m, float *l, float *alpha) {
  softmax_state st;
  softmax_max(R, every_key, 0, NULL, 0.0f, s, scale, lo, hi, m, &st);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
    softmax_exp_row(s, r, &st);
  softmax_finish(R, &st, m, l, alpha);
}

ATTN_AVX2 static void softmax_update_avx2(int R, float *s, float scale, const int *lo,
                                            const int *hi, float *m, float *l, float *alpha) {
  switch (R) {
  case 1: softmax_rows(1, 0, s, scale, lo, hi, m, l, alpha); break;
  case 2: softmax_rows(2, 0, s, scale, lo, hi, m, l, alpha); break;
  case 3: softmax_rows(3, 0, s, scale, lo, hi, m, l, alpha); break;
  case 4: softmax_rows(4, 0, s, scale, lo, hi, m, l, alpha); break;
  case 5: softmax_rows(5, 0, s, scale, lo, hi, m, l, alpha); break;
  case 6: softmax_rows(6, 0, s, scale, lo, hi, m, l, alpha); break;
  default: break;
  }
}

/* e^x where x >= -86 (lanes below give e^-86, for the caller to mask), NaN
 * and anything above too (to inf): the bounds of attn_vexp8_avx2 that
 * matter for p = e^(t - lse) >= e^-64, with 2^n as 2^(n-1) * 2 instead of
 * two halves (n - 1 in [-125, 127]: both products exact up to the final
 * rounding into inf). The same bits as attn_vexp8_avx2 on those x. */
ATTN_AVX2_INLINE __m256 exp_upper(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-86.0f), x); /* max, min keep a NaN x */
  x = _mm256_min_ps(_mm256_set1_ps(88.8f), x);
  __m256 k;
  __m256 y = attn_vexp8_reduce_avx2(x, &k);
  /* k's bits are 0x4B400000 + n: (n - 1 + 127) << 23 is 2^(n-1) */
  __m256 s = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(126)), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, s), _mm256_set1_ps(2.0f));
}

/* One row of probs_grad, lse finite or +inf; every: all 64 columns allowed
 * (lo, hi unread). */
ATTN_AVX2_INLINE void probs_grad_row(const int every, const float *sr, __m256 vs, int lo, int hi,
                                const float *dpr, float lse, float di, __m256 vg, float *pr,
                                float *dsr) {
  const __m256 vl = _mm256_set1_ps(lse), vd = _mm256_set1_ps(di);
#pragma GCC unroll 8
  for (int v = 0; v < BC / 8; v++) {
    __m256 t = _mm256_fmsub_ps(_mm256_loadu_ps(sr + 8 * v), vs, vl);
    __m256 ok = normal_exp(t);
    if (!every) ok = _mm256_and_ps(allowed_cols(v, lo, hi), ok);
    __m256 pv = _mm256_and_ps(ok, exp_upper(t));
    _mm256_storeu_ps(pr + 8 * v, pv);
    /* ds = 0 where p = 0 (as math), even for a NaN dp or D_i */
    __m256 g = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(dpr + 8 * v), vd), vg);
    _mm256_storeu_ps(dsr + 8 * v, _mm256_and_ps(ok, _mm256_mul_ps(pv, g)));
  }
}

ATTN_AVX2 static void probs_grad_avx2(int R, const float *s, float scale, const int *lo,
                                        const int *hi, const float *dp, const float *lse,
                                        const float *di, float dscale, float *p, float *ds,
                                        int64_t ldp) {
  const __m256 vs = _mm256_set1_ps(scale), vg = _mm256_set1_ps(dscale);
  for (int r = 0; r < R; r++) {
    const float *sr = s + r * BC, *dpr = dp + r * BC;
    float *pr = p + r * ldp, *dsr = ds + r * ldp;
    if (lse[r] != lse[r]) { /* NaN row: p = ds = NaN at its allowed keys, else 0 */
      const __m256 nan = _mm256_set1_ps(NAN), ninf = _mm256_set1_ps(-INFINITY);
      for (int v = 0; v < BC / 8; v++) {
        __m256 t = _mm256_mul_ps(_mm256_loadu_ps(sr + 8 * v), vs);
        __m256 ok =
            _mm256_and_ps(allowed_cols(v, lo[r], hi[r]), _mm256_cmp_ps(t, ninf, _CMP_NEQ_UQ));
        _mm256_storeu_ps(pr + 8 * v, _mm256_and_ps(ok, nan));
        _mm256_storeu_ps(dsr + 8 * v, _mm256_and_ps(ok, nan));
      }
    } else if (lse[r] == -INFINITY) { /* no allowed key: p = ds = 0 */
      probs_grad_row(0, sr, vs, 0, 0, dpr, 0.0f, di[r], vg, pr, dsr);
    } else if (lo[r] == 0 && hi[r] == BC) {
      probs_grad_row(1, sr, vs, 0, BC, dpr, lse[r], di[r], vg, pr, dsr);
    } else {
      probs_grad_row(0, sr, vs, lo[r], hi[r], dpr, lse[r], di[r], vg, pr, dsr);
    }
  }
}

/* 8 columns at a time; the reversed band (bcs = -1) is a masked load of the
 * 8 floats ending at b[-c0] and a lane reversal. Masked-off lanes of
 * vmaskmovps never fault. */
ATTN_AVX2 static void add_rows_avx2(int R, int n, float *s, int64_t lds, const float *b,
                                      int64_t brs, int bcs, int skip) {
  const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  for (int r = 0; r < R; r++) {
    float *sr = s + r * lds;
    const float *br = b + r * brs;
    for (int c0 = 0; c0 < n; c0 += 8) {
      int cnt = n - c0 < 8 ? n - c0 : 8;
      __m256i m = first_lanes(cnt);
      __m256 x = _mm256_maskload_ps(sr + c0, m), y;
      if (bcs == 1)
        y = _mm256_maskload_ps(br + c0, m);
      else if (bcs == 0)
        y = _mm256_set1_ps(br[0]);
      else /* lanes l' = 7 - l of br - c0 - 7, l < cnt */
        y = _mm256_permutevar8x32_ps(
            _mm256_maskload_ps(br - c0 - 7, _mm256_permutevar8x32_epi32(m, rev)), rev);
      __m256i ok = m;
      if (skip) ok = _mm256_and_si256(m, _mm256_castps_si256(_mm256_cmp_ps(x, ninf, _CMP_NEQ_UQ)));
      _mm256_maskstore_ps(sr + c0, ok, _mm256_add_ps(x, y));
    }
  }
}

ATTN_AVX2 static float sum_avx2(int n, const float *x) {
  __m256 acc = _mm256_setzero_ps();
  for (int c0 = 0; c0 < n; c0 += 8) {
    int cnt = n - c0 < 8 ? n - c0 : 8;
    acc = _mm256_add_ps(acc, _mm256_maskload_ps(x + c0, first_lanes(cnt)));
  }
  return hsum(acc);
}

/* Prefetches of the next key block (kᵀ lines, then v rows) spread evenly
 * over the G + 1 steps of tile_forward. */
typedef struct {
  const float *kt, *v;
  int64_t ldv, klines, vlpr, vrows, step, kn, vr, vc;
} next_block;

ATTN_AVX2_INLINE void prefetch_some(next_block *nb) {
  int64_t n = nb->step;
  for (; n > 0 && nb->kn < nb->klines; n--, nb->kn++)
    _mm_prefetch((const char *)(nb->kt + 16 * nb->kn), _MM_HINT_T1);
  for (; n > 0 && nb->vr < nb->vrows; n--) {
    _mm_prefetch((const char *)(nb->v + nb->vr * nb->ldv + 16 * nb->vc), _MM_HINT_T1);
    if (++nb->vc == nb->vlpr) nb->vc = 0, nb->vr++;
  }
}

/* G row groups of MR rows; the scores and softmax of group g are issued
 * before the p·v of group g - 1 (two p buffers, s [2, MR, BC]). Each step is
 * gemm_avx2 / softmax_update_avx2 inlined with R = MR and every key allowed,
 * so the numbers are theirs to the bit (kinds: with the fused units of the
 * score-modifier stage between the logits and the softmax, the same vector
 * code as the units' steps: scoremod_avx2.h). */
ATTN_AVX2_INLINE void tile_forward_rows(const int kinds, const attn_flash_mod *mod, int G,
                                        int64_t D, int64_t Dv, const float *q, int64_t ldq,
                                        const float *kt, const float *v, int64_t ldv, float scale,
                                        float *s, float *o, int64_t ldo, float *m, float *l,
                                        const float *ktn, const float *vn, int64_t ldvn) {
  const __m256i all = _mm256_set1_epi32(-1);
  const int nsl = (int)(Dv / 16); /* whole 16-column slices of o */
  float alpha[2][MR];
  softmax_state st;
  next_block nb = {ktn, vn, ldvn, ktn ? D * BC / 16 : 0, (Dv + 15) / 16, vn ? BC : 0, 0, 0, 0, 0};
  nb.step = G > 0 ? (nb.klines + nb.vrows * nb.vlpr + G) / (G + 1) : 0;
  for (int g = 0; g <= G; g++) {
    prefetch_some(&nb);
    float *sg = s + (g & 1) * MR * BC;
    int rows = g < G ? 0 : MR; /* rows of group g with p done */
    if (g < G) {
      prefetch_a(MR, D, q + g * MR * ldq, ldq, 1);
      gemm_rows(MR, BC, D, q + g * MR * ldq, ldq, 1, kt, BC, sg, BC, NULL, 0);
      const int user = !kinds && mod && mod->user; /* logits_avx2, then the hook */
      if (user) {
        for (int e = 0; e < MR * BC; e += 8)
          _mm256_storeu_ps(sg + e, _mm256_mul_ps(_mm256_set1_ps(scale), _mm256_loadu_ps(sg + e)));
        mod->user(mod, g * MR, sg);
      }
      softmax_max(MR, 1, kinds, mod, kinds & ATTN_FMOD_ALIBI ? mod->rel0 + (float)(g * MR) : 0.0f,
                  sg, user ? 1.0f : scale, NULL, NULL, m + g * MR, &st);
    }
    if (g > 0) { /* o = alpha o + p·v of group g - 1, p of group g in between */
      const int h = g - 1;
      const float *sh = s + (h & 1) * MR * BC;
      float *oh = o + h * MR * ldo;
      for (int i = 0; i < nsl; i++) {
        gemm_slice(MR, 2, 0, all, 16 * (i + 1) < Dv ? 16 : 0, BC, sh, BC, 1, v + 16 * i, ldv,
                   oh + 16 * i, ldo, alpha[h & 1], 1);
        for (; rows < MR && rows * nsl < (i + 1) * MR; rows++)
          softmax_exp_row(sg, rows, &st);
      }
      if (Dv % 16)
        gemm_rows(MR, (int)(Dv % 16), BC, sh, BC, 1, v + 16 * nsl, ldv, oh + 16 * nsl, ldo,
                  alpha[h & 1], 1);
    }
    if (g < G) {
      for (; rows < MR; rows++)
        softmax_exp_row(sg, rows, &st);
      softmax_finish(MR, &st, m + g * MR, l + g * MR, alpha[g & 1]);
    }
  }
  prefetch_some(&nb); /* (rounding leftovers) */
}

ATTN_AVX2 static void tile_forward_avx2(int G, int64_t D, int64_t Dv, const float *q, int64_t ldq,
                                        const float *kt, const float *v, int64_t ldv, float scale,
                                        float *s, float *o, int64_t ldo, float *m, float *l,
                                        const float *ktn, const float *vn, int64_t ldvn) {
  tile_forward_rows(0, NULL, G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn, vn, ldvn);
}

/* One instance per set of fused units (ATTN_FMOD_*), and the user's hook. */
ATTN_AVX2 static void tile_forward_mod_avx2(const attn_flash_mod *mod, int G, int64_t D,
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
    tile_forward_avx2(G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn, vn, ldvn);
}

/* pack_t (flash_tiles.h): 8 keys x 8 dims at a time through an 8x8 register
 * transpose (rows of x read and rows of kt written 32 bytes at a time); the
 * dims past a multiple of 8 and the keys past one element by element. The
 * AVX-512 set shares it (a once-per-key-block copy). */
ATTN_AVX2 void attn_flash_pack_t_avx2(int64_t n, int64_t D, const float *x, int64_t ldx,
                                      float *kt) {
  const int64_t D8 = D & ~(int64_t)7;
  int64_t j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    const float *xr = x + j0 * ldx;
    for (int64_t dd = 0; dd < D8; dd += 8) {
      __m256 r[8], t[8];
      for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(xr + i * ldx + dd);
      for (int i = 0; i < 8; i += 2) { /* pairs of rows interleaved */
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) { /* then pairs of pairs */
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
      }
      /* r[0..3]: dims {0,4} {1,5} {2,6} {3,7} of keys 0-3 | 0-3 per lane half;
       * r[4..7] the same of keys 4-7: the 128-bit halves swap into place */
      for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(kt + (dd + i) * BC + j0, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(kt + (dd + i + 4) * BC + j0, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
      }
    }
    for (int64_t dd = D8; dd < D; dd++)
      for (int i = 0; i < 8; i++) kt[dd * BC + j0 + i] = xr[i * ldx + dd];
  }
  const int64_t pad = attn_flash_cols8(n);
  for (int64_t dd = 0; dd < D; dd++) {
    float *row = kt + dd * BC;
    for (int64_t j = j0; j < n; j++) row[j] = x[j * ldx + dd];
    for (int64_t j = n; j < pad; j++) row[j] = 0.0f;
  }
}

static const attn_flash_ops avx2_ops = {
    "avx2",      gemm_avx2,     logits_avx2, softmax_update_avx2, probs_grad_avx2,
    attn_flash_pack_t_avx2, add_rows_avx2, sum_avx2,    tile_forward_avx2,
    tile_forward_mod_avx2};

const attn_flash_ops *attn_flash_ops_avx2(void) { return &avx2_ops; }
#else
const attn_flash_ops *attn_flash_ops_avx2(void) { return 0; }
#endif
