/* Decode attention's AVX2 micro-kernels (decode_ukr.h): decode_avx512.c's
 * loops on 8 lanes (F16C for f16), query-row tiles of 4, 2, 1 and at most
 * 8 accumulators (AVX2 has 16 registers); the tail of a row through a
 * zero-padded copy. */
#include "kernels/kern.h"

#if defined(__x86_64__)
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/tensor.h"
#include "kernels/arch/avx2/vexp_avx2.h"
#include "kernels/arch/decode_prefetch.h"
#include "kernels/arch/isa_targets.h"

enum { NB = ATTN_DECODE_NB };

ATTN_AVX2_INLINE __m256 load8(int dt, const void *row, int64_t c) {
  switch (dt) {
  case ATTN_F16:
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + c)));
  case ATTN_BF16:
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + c))), 16));
  case ATTN_I8:
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)row + c))));
  default: return _mm256_loadu_ps((const float *)row + c);
  }
}

ATTN_AVX2_INLINE int64_t elt_of(int dt) { return dt == ATTN_F32 ? 4 : dt == ATTN_I8 ? 1 : 2; }

/* elements c..c+n-1 (n < 8) of a row, the rest 0 */
ATTN_AVX2_INLINE __m256 load8_tail(int dt, const void *row, int64_t c, int64_t n) {
  const int64_t elt = elt_of(dt);
  unsigned char tmp[32] = {0};
  memcpy(tmp, (const char *)row + c * elt, (size_t)(n * elt));
  return load8(dt, tmp, 0);
}

ATTN_AVX2_INLINE float hsum8(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Step g of a loop of st steps: lines g lt / st .. (g + 1) lt / st - 1 of
 * the rows' lt lines in address order (line i: row i / lpr, its bytes 64 (i
 * % lpr) on), those of rows below nrows: the next block's K or V rows as
 * one stream of lines, row after row, spread over the loop that reads this
 * block, not in bursts and not column slab by column slab across the rows.
 * On an AMD EPYC Zen 3 (32 KiB L1D), Lk 32k, 2 threads, f32 read 58-77 %
 * of the bandwidth this way against 50-64 % with ATTN_DECODE_KV_SWAP's
 * order (this block's V in scores, the next block's K by column slabs in
 * P·V), which the AVX-512 level keeps for Zen 5's 48 KiB L1D: this memory
 * reads whole rows in order ~1.25x faster than column slabs across them
 * (docs/DECODE.md, "Zen 3"). With constant shapes (head dim
 * 128) the divisions are shifts. */
ATTN_AVX2_INLINE void pf_spread(const void *const *rows, int nrows, int64_t lpr, int64_t lt,
                                int64_t g, int64_t st, int l2) {
  if (lt <= st) { /* at most one line a step: no loop */
    const int64_t x = g * lt, i = x / st;
    if (x % st < lt && i / lpr < nrows)
      attn_decode_pf_line((const char *)rows[i / lpr] + 64 * (i % lpr), l2);
    return;
  }
  for (int64_t i = g * lt / st; i < (g + 1) * lt / st; i++)
    if (i / lpr < nrows) attn_decode_pf_line((const char *)rows[i / lpr] + 64 * (i % lpr), l2);
}

/* Without constant shapes: the next block's row j, columns [c0, c1) */
ATTN_AVX2_INLINE void prefetch_row(const attn_decode_block *b, int j, int64_t c0, int64_t c1,
                                   int dt) {
  const int64_t elt = elt_of(dt);
  attn_decode_pf_bytes((const char *)b->pv[j] + c0 * elt, (c1 - c0) * elt, b->pf_l2);
}

/* the sums of a, b, c, d's lanes, in that order */
ATTN_AVX2_INLINE __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* scores of RT query rows (q: their first) against KJ keys j0.. of the
 * block: RT KJ <= 8 accumulators, each q vector loaded once for the KJ
 * keys (into a register: GCC otherwise folded it into each of the KJ FMAs,
 * 1.3x slower on Zen 3, whose loads then bound the loop), each key vector
 * once for the RT rows; the row's tail through a zero-padded copy; PF: the
 * next block's rows of these keys prefetched, spread over the steps */
ATTN_AVX2_INLINE void scores_keys(const attn_decode_block *b, const float *q, float *s, int j0,
                                  int dt, int RT, int KJ, int PF, int64_t D) {
  const int64_t Df = D & ~(int64_t)7;
  __m256 a[8]; /* a[r KJ + k] */
  const int pn = b->pn - j0 < KJ ? b->pn - j0 : KJ;     /* the next block's rows of these keys */
  const int64_t lpr = (D * elt_of(dt) + 63) / 64;      /* lines per row */
  const int spread = __builtin_constant_p(D) && Df > 0; /* else a burst */
  if (PF && !spread)
    for (int k = 0; k < pn; k++)
      attn_decode_pf_bytes(b->pk[j0 + k], D * elt_of(dt), b->pf_l2);
  DECODE_UNROLL(8)
  for (int i = 0; i < RT * KJ; i++)
    a[i] = _mm256_setzero_ps();
  /* at head dim 128 the 16 steps unrolled: pf_spread's lines then constants
   * (its divisions and tests gone; on a Zen 3, scores of a resident block
   * 1.15-1.3x faster) */
  DECODE_UNROLL(16)
  for (int64_t c = 0; c < Df; c += 8) {
    __m256 kv[4];
    if (PF && spread) pf_spread(b->pk + j0, pn, lpr, KJ * lpr, c / 8, Df / 8, b->pf_l2);
DECODE_UNROLL(4)
    for (int k = 0; k < KJ; k++)
      kv[k] = load8(dt, b->k[j0 + k], c);
DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      __m256 qv = _mm256_loadu_ps(q + r * D + c);
      __asm__("" : "+x"(qv));
DECODE_UNROLL(4)
      for (int k = 0; k < KJ; k++)
        a[r * KJ + k] = _mm256_fmadd_ps(qv, kv[k], a[r * KJ + k]);
    }
  }
  if (Df < D) {
    __m256 kv[4];
DECODE_UNROLL(4)
    for (int k = 0; k < KJ; k++)
      kv[k] = load8_tail(dt, b->k[j0 + k], Df, D - Df);
DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      const __m256 qv = load8_tail(ATTN_F32, q + r * D, Df, D - Df);
DECODE_UNROLL(4)
      for (int k = 0; k < KJ; k++)
        a[r * KJ + k] = _mm256_fmadd_ps(qv, kv[k], a[r * KJ + k]);
    }
  }
  float sum[8];
  int i = 0;
DECODE_UNROLL(4)
  for (; i + 4 <= RT * KJ; i += 4)
    _mm_storeu_ps(sum + i, hsum4(a[i], a[i + 1], a[i + 2], a[i + 3]));
DECODE_UNROLL(4)
  for (; i < RT * KJ; i++)
    sum[i] = hsum8(a[i]);
DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++)
DECODE_UNROLL(4)
    for (int k = 0; k < KJ; k++)
      s[r * NB + j0 + k] = sum[r * KJ + k];
}

/* scores of RT rows against the block: 8 / RT keys at a time (at most 4:
 * registers), then one */
ATTN_AVX2_INLINE void scores_tile(const attn_decode_block *b, const float *q, float *s, int dt,
                                  int RT, int PF, int64_t D) {
  const int KJ = RT >= 4 ? 2 : 4;
  int j = 0;
  for (; j + KJ <= b->n; j += KJ)
    scores_keys(b, q, s, j, dt, RT, KJ, PF, D);
  for (; j < b->n; j++)
    scores_keys(b, q, s, j, dt, RT, 1, PF, D);
}

/* RT rows' output accumulators (acc: their first) += p · the block's
 * values over columns c0 .. c0 + 8 SL, all present: RT SL = 8 accumulators
 * in registers across the block's keys; PF: the next block's V rows
 * prefetched, spread over the keys */
ATTN_AVX2_INLINE void pv_slab(const attn_decode_block *b, const float *p, const float *corr,
                              float *acc, int64_t c0, int dt, int RT, int SL, int PF,
                              int64_t Dv) {
  /* constant shapes: the next block's V lines in address order over the
   * slabs' steps (slab si, key j: step si NB + j); else per key its row's
   * columns of this slab */
  const int spread = __builtin_constant_p(Dv);
  const int64_t lpr = (Dv * elt_of(dt) + 63) / 64, g0 = c0 / (8 * SL) * NB;
  const void *const *pvr = b->pv; /* (locals: GCC reloaded them from b at every key) */
  const int pn = b->pn, l2 = b->pf_l2;
  __m256 a[8]; /* a[r SL + e] */
DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++) {
    const __m256 cr = _mm256_set1_ps(corr[r]);
DECODE_UNROLL(4)
    for (int e = 0; e < SL; e++)
      a[r * SL + e] = _mm256_mul_ps(_mm256_loadu_ps(acc + r * Dv + c0 + 8 * e), cr);
  }
  DECODE_UNROLL(8) /* (f16's P·V 1.2x on a Zen 3; f32, int8 the same) */
  for (int j = 0; j < b->n; j++) {
    if (PF && spread)
      pf_spread(pvr, pn, lpr, NB * lpr, g0 + j, Dv / (8 * SL) * NB, l2);
    else if (PF && j < pn)
      prefetch_row(b, j, c0, c0 + 8 * SL, dt);
    __m256 vv[4];
DECODE_UNROLL(4)
    for (int e = 0; e < SL; e++)
      vv[e] = load8(dt, b->v[j], c0 + 8 * e);
DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      const __m256 pr = _mm256_set1_ps(p[r * NB + j]);
DECODE_UNROLL(4)
      for (int e = 0; e < SL; e++)
        a[r * SL + e] = _mm256_fmadd_ps(pr, vv[e], a[r * SL + e]);
    }
  }
  for (int j = b->n; PF && j < NB; j++) /* the steps of keys this block lacks */
    if (spread)
      pf_spread(pvr, pn, lpr, NB * lpr, g0 + j, Dv / (8 * SL) * NB, l2);
    else if (j < pn)
      prefetch_row(b, j, c0, c0 + 8 * SL, dt);
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++)
DECODE_UNROLL(4)
    for (int e = 0; e < SL; e++)
      _mm256_storeu_ps(acc + r * Dv + c0 + 8 * e, a[r * SL + e]);
}

/* the last w < 8 columns from c, through zero-padded copies */
ATTN_AVX2_INLINE void pv_tail(const attn_decode_block *b, const float *p, const float *corr,
                              float *acc, int64_t c, int64_t w, int dt, int RT, int64_t Dv) {
  __m256 a[4];
DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++)
    a[r] = _mm256_mul_ps(load8_tail(ATTN_F32, acc + r * Dv, c, w), _mm256_set1_ps(corr[r]));
  for (int j = 0; j < b->n; j++) {
    const __m256 vv = load8_tail(dt, b->v[j], c, w);
DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++)
      a[r] = _mm256_fmadd_ps(_mm256_set1_ps(p[r * NB + j]), vv, a[r]);
  }
  float tmp[8];
DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++) {
    _mm256_storeu_ps(tmp, a[r]);
    memcpy(acc + r * Dv + c, tmp, (size_t)w * sizeof(float));
  }
}

/* slabs of SL = 8 / RT vectors (at most 4), then single vectors, then the
 * tail; PF: the next block's V rows prefetched over the slabs' keys, the
 * lines in address order (pf_spread) where Dv is a constant */
ATTN_AVX2_INLINE void pv_tile(const attn_decode_block *b, const float *p, const float *corr,
                              float *acc, int dt, int RT, int PF, int64_t Dv) {
  const int SL = RT >= 4 ? 2 : 4;
  int64_t c = 0;
  for (; c + 8 * SL <= Dv; c += 8 * SL)
    pv_slab(b, p, corr, acc, c, dt, RT, SL, PF, Dv);
  for (int j = 0; PF && c < Dv && j < b->pn; j++) /* the columns no slab took */
    prefetch_row(b, j, c, Dv, dt);
  for (; c + 8 <= Dv; c += 8)
    pv_slab(b, p, corr, acc, c, dt, RT, 1, 0, Dv);
  if (c < Dv) pv_tail(b, p, corr, acc, c, Dv - c, dt, RT, Dv);
}

/* The K-tiled layout's scores (scores_kt), decode_avx512.c's on 8 lanes: a
 * tile's element d of its 16 keys is two vectors, RT rows' scores of one
 * tile 2 RT accumulators of FMAs with q[d] broadcast, the depth split H
 * ways so that 8 chains are in flight (H a function of RT alone: a key's
 * sum has the same order in any tile or lane). */
ATTN_AVX2_INLINE __m256 load_kt8(int dt, const uint16_t *p) {
  const __m128i x = _mm_loadu_si128((const __m128i *)p);
  return dt == ATTN_F16 ? _mm256_cvtph_ps(x)
                        : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
}

ATTN_AVX2_INLINE int kt_ways(int RT) { return RT >= 4 ? 1 : RT == 2 ? 2 : 4; }

/* rows q (RT of them) against tile i of the block; PF: the next block's
 * tile i prefetched as this one is read */
ATTN_AVX2_INLINE void kt_pass(const attn_decode_block *b, const float *q, float *s, int i, int dt,
                              int RT, int PF, int64_t D) {
  const int H = kt_ways(RT);
  __m256 a[8]; /* a[(h RT + r) 2 + e] */
  DECODE_UNROLL(8)
  for (int x = 0; x < 2 * H * RT; x++)
    a[x] = _mm256_setzero_ps();
  const uint16_t *kt = (const uint16_t *)b->kt[i];
  const uint16_t *pf = PF && i < b->pnt ? (const uint16_t *)b->pkt[i] : NULL;
  const int64_t Dh = D - D % H;
  const int l2 = b->pf_l2; /* (a local: GCC reloaded it from b at every step) */
  /* unrolled 4 steps: which steps prefetch, constant (f16 scores 1.1x on a
   * Zen 3) */
  DECODE_UNROLL(4)
  for (int64_t d = 0; d < Dh; d += H) {
    if (pf && (d & 1) == 0) attn_decode_pf_line(pf + 16 * d, l2);
    DECODE_UNROLL(4)
    for (int h = 0; h < H; h++) {
      const __m256 k0 = load_kt8(dt, kt + 16 * (d + h)), k1 = load_kt8(dt, kt + 16 * (d + h) + 8);
      DECODE_UNROLL(4)
      for (int r = 0; r < RT; r++) {
        const __m256 qb = _mm256_broadcast_ss(q + r * D + d + h);
        a[(h * RT + r) * 2] = _mm256_fmadd_ps(qb, k0, a[(h * RT + r) * 2]);
        a[(h * RT + r) * 2 + 1] = _mm256_fmadd_ps(qb, k1, a[(h * RT + r) * 2 + 1]);
      }
    }
  }
  for (int64_t d = Dh; d < D; d++) {
    const __m256 k0 = load_kt8(dt, kt + 16 * d), k1 = load_kt8(dt, kt + 16 * d + 8);
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      const __m256 qb = _mm256_broadcast_ss(q + r * D + d);
      a[r * 2] = _mm256_fmadd_ps(qb, k0, a[r * 2]);
      a[r * 2 + 1] = _mm256_fmadd_ps(qb, k1, a[r * 2 + 1]);
    }
  }
  DECODE_UNROLL(4)
  for (int h = 1; h < H; h++) {
    DECODE_UNROLL(8)
    for (int x = 0; x < 2 * RT; x++)
      a[x] = _mm256_add_ps(a[x], a[2 * h * RT + x]);
  }
  const int j0 = 16 * i - b->toff; /* the block's key at lane 0 of this tile */
  if (j0 >= 0 && j0 + 16 <= b->n) {
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      _mm256_storeu_ps(s + r * NB + j0, a[r * 2]);
      _mm256_storeu_ps(s + r * NB + j0 + 8, a[r * 2 + 1]);
    }
  } else { /* lanes of keys in [0, n) */
    const int lo = j0 < 0 ? -j0 : 0, hi = b->n - j0 < 16 ? b->n - j0 : 16;
    float tmp[16];
    /* (unrolled: a row index at run time here kept a[] in memory, stored at
     * every step of the loop above) */
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      _mm256_storeu_ps(tmp, a[r * 2]);
      _mm256_storeu_ps(tmp + 8, a[r * 2 + 1]);
      for (int l = lo; l < hi; l++)
        s[r * NB + j0 + l] = tmp[l];
    }
  }
}

ATTN_AVX2_INLINE void kt_tile(const attn_decode_block *b, const float *q, float *s, int dt, int RT,
                              int PF, int64_t D) {
  for (int i = 0; i < b->nt; i++)
    kt_pass(b, q, s, i, dt, RT, PF, D);
  for (int x = b->nt; PF && x < b->pnt; x++)
    attn_decode_pf_bytes(b->pkt[x], 32 * D, b->pf_l2);
}

ATTN_AVX2_INLINE void row_tile(int KT, const attn_decode_block *b, const float *q, float *s, int dt,
                               int RT, int PF, int64_t D) {
  if (KT)
    kt_tile(b, q, s, dt, RT, PF, D);
  else
    scores_tile(b, q, s, dt, RT, PF, D);
}

/* all R rows in tiles of 4, 2, 1; the first tile prefetches; KT:
 * the K-tiled layout's tiles (kt_tile), else rows (scores_tile) */
ATTN_AVX2_INLINE void scores_rows(const attn_decode_block *b, const float *q, int64_t R, float *s,
                                  int dt, int64_t D, int KT) {
  int64_t r = 0;
  int pf = 1;
  for (; R - r >= 4; r += 4, pf = 0)
    row_tile(KT, b, q + r * D, s + r * NB, dt, 4, pf, D);
  if (R - r >= 2) row_tile(KT, b, q + r * D, s + r * NB, dt, 2, pf, D), r += 2, pf = 0;
  if (R - r >= 1) row_tile(KT, b, q + r * D, s + r * NB, dt, 1, pf, D);
}

ATTN_AVX2_INLINE void pv_rows(const attn_decode_block *b, const float *p, const float *corr,
                              int64_t R, float *acc, int dt, int64_t Dv) {
  int64_t r = 0;
  int pf = 1;
  for (; R - r >= 4; r += 4, pf = 0)
    pv_tile(b, p + r * NB, corr + r, acc + r * Dv, dt, 4, pf, Dv);
  if (R - r >= 2) pv_tile(b, p + r * NB, corr + r, acc + r * Dv, dt, 2, pf, Dv), r += 2, pf = 0;
  if (R - r >= 1) pv_tile(b, p + r * NB, corr + r, acc + r * Dv, dt, 1, pf, Dv);
}

/* one instance per dtype (the constant makes the compiler drop the others' loads) */
ATTN_AVX2_INLINE void scores_dt(const attn_decode_block *b, const float *q, int64_t R, float *s,
                                int64_t D) {
  switch (b->dtype) {
  case ATTN_F16: scores_rows(b, q, R, s, ATTN_F16, D, 0); break;
  case ATTN_BF16: scores_rows(b, q, R, s, ATTN_BF16, D, 0); break;
  case ATTN_I8: scores_rows(b, q, R, s, ATTN_I8, D, 0); break;
  default: scores_rows(b, q, R, s, ATTN_F32, D, 0);
  }
}

ATTN_AVX2_INLINE void pv_dt(const attn_decode_block *b, const float *p, const float *corr,
                            int64_t R, float *acc, int64_t Dv) {
  switch (b->dtype) {
  case ATTN_F16: pv_rows(b, p, corr, R, acc, ATTN_F16, Dv); break;
  case ATTN_BF16: pv_rows(b, p, corr, R, acc, ATTN_BF16, Dv); break;
  case ATTN_I8: pv_rows(b, p, corr, R, acc, ATTN_I8, Dv); break;
  default: pv_rows(b, p, corr, R, acc, ATTN_F32, Dv);
  }
}

/* and one for head dim 128 (the common one) with its loop counts and offsets
 * constant; int8 too, which comes here on CPUs without AVX-VNNI (Zen 2 and
 * 3, Intel before Alder Lake: every int8 block) */
ATTN_AVX2 static void scores_avx2(const attn_decode_block *b, const float *q, int64_t R, float *s) {
  if (b->D == 128)
    scores_dt(b, q, R, s, 128);
  else
    scores_dt(b, q, R, s, b->D);
}

ATTN_AVX2 static void pv_avx2(const attn_decode_block *b, const float *p, const float *corr,
                              int64_t R, float *acc) {
  if (b->Dv == 128)
    pv_dt(b, p, corr, R, acc, 128);
  else
    pv_dt(b, p, corr, R, acc, b->Dv);
}

ATTN_AVX2 static void scores_kt_avx2(const attn_decode_block *b, const float *q, int64_t R,
                                     float *s) {
  const int f16 = b->dtype == ATTN_F16;
  if (b->D == 128)
    f16 ? scores_rows(b, q, R, s, ATTN_F16, 128, 1) : scores_rows(b, q, R, s, ATTN_BF16, 128, 1);
  else
    f16 ? scores_rows(b, q, R, s, ATTN_F16, b->D, 1) : scores_rows(b, q, R, s, ATTN_BF16, b->D, 1);
}

/* decode_ukr.h's scores_i8 without AVX-VNNI: 32 products of a query row
 * and a key in one VPMADDUBSW, the key's sign moved onto the query (VPSIGNB:
 * q8 is in [-127, 127], its negation exact) and the key's magnitude unsigned
 * (VPABSB: -128 as 128): a pair of products is at most 2 x 128 x 127 =
 * 32,512 in magnitude, so the 16-bit pair sums never saturate; VPMADDWD by
 * ones widens them to 32 bits. The integer sums exact, as the contract asks
 * (the same bits as the VNNI kernels). RT rows x KJ keys from j0, RT KJ <= 8
 * accumulators (with the keys, their magnitudes, a query vector and the
 * ones: 14 registers); a row's tail (D % 32) through a zero-padded copy of
 * the key (q8 is zero past D, up to ldq); PF as scores_keys. */
ATTN_AVX2_INLINE __m256i i8_dot32(__m256i acc, __m256i q, __m256i k, __m256i ka, __m256i ones) {
  const __m256i t = _mm256_maddubs_epi16(ka, _mm256_sign_epi8(q, k));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(t, ones));
}

/* the sums of RT rows x KJ keys' accumulators (a[r KJ + k]) as floats times
 * their row's scale, into s */
ATTN_AVX2_INLINE void i8_store(const __m256i *a, const float *qscale, float *s, int j0, int RT,
                               int KJ) {
  if (KJ == 2 && RT % 2 == 0) { /* two rows' two keys a vector: r, r + 1 x k 0, 1 */
    DECODE_UNROLL(2)
    for (int r = 0; r < RT; r += 2) {
      const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a[2 * r], a[2 * r + 1]),
                                          _mm256_hadd_epi32(a[2 * r + 2], a[2 * r + 3]));
      const __m128i x = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
      const __m128 f = _mm_mul_ps(_mm_cvtepi32_ps(x), _mm_setr_ps(qscale[r], qscale[r], qscale[r + 1],
                                                                  qscale[r + 1]));
      _mm_storel_pi((__m64 *)(s + r * NB + j0), f);
      _mm_storeh_pi((__m64 *)(s + (r + 1) * NB + j0), f);
    }
    return;
  }
  int32_t sum[8];
  int i = 0;
  DECODE_UNROLL(2)
  for (; i + 4 <= RT * KJ; i += 4) {
    const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a[i], a[i + 1]),
                                        _mm256_hadd_epi32(a[i + 2], a[i + 3]));
    _mm_storeu_si128((__m128i *)(sum + i),
                     _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
  }
  DECODE_UNROLL(2)
  for (; i < RT * KJ; i++) {
    int32_t v[8];
    _mm256_storeu_si256((__m256i *)v, a[i]);
    sum[i] = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  }
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++)
    DECODE_UNROLL(2)
    for (int k = 0; k < KJ; k++)
      s[r * NB + j0 + k] = (float)sum[r * KJ + k] * qscale[r];
}

ATTN_AVX2_INLINE void i8_keys(const attn_decode_block *b, const int8_t *q8, int64_t ldq,
                              const float *qscale, float *s, int j0, int RT, int KJ, int PF,
                              int64_t D) {
  const int64_t D32 = D & ~(int64_t)31;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a[8]; /* a[r KJ + k] */
  const int pn = b->pn - j0 < KJ ? b->pn - j0 : KJ;
  const int64_t lpr = (D + 63) / 64;
  const int spread = __builtin_constant_p(D) && D32 > 0;
  if (PF && !spread)
    for (int k = 0; k < pn; k++)
      attn_decode_pf_bytes(b->pk[j0 + k], D, b->pf_l2);
  DECODE_UNROLL(8)
  for (int i = 0; i < RT * KJ; i++)
    a[i] = _mm256_setzero_si256();
  DECODE_UNROLL(8)
  for (int64_t c = 0; c < D; c += 32) {
    __m256i kv[2], ka[2];
    if (PF && spread && c < D32)
      pf_spread(b->pk + j0, pn, lpr, KJ * lpr, c / 32, D32 / 32, b->pf_l2);
    DECODE_UNROLL(2)
    for (int k = 0; k < KJ; k++) {
      const int8_t *kr = (const int8_t *)b->k[j0 + k] + c;
      if (c < D32)
        kv[k] = _mm256_loadu_si256((const __m256i *)kr);
      else {
        int8_t tmp[32] = {0};
        memcpy(tmp, kr, (size_t)(D - D32));
        kv[k] = _mm256_loadu_si256((const __m256i *)tmp);
      }
      ka[k] = _mm256_abs_epi8(kv[k]);
    }
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      const __m256i qv = _mm256_loadu_si256((const __m256i *)(q8 + r * ldq + c));
      DECODE_UNROLL(2)
      for (int k = 0; k < KJ; k++)
        a[r * KJ + k] = i8_dot32(a[r * KJ + k], qv, kv[k], ka[k], ones);
    }
    /* one step's registers at a time: GCC otherwise hoisted the next steps'
     * loads above this one's products and spilled accumulators (1.2x) */
    if (RT * KJ == 8)
      __asm__("" : "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]),
              "+x"(a[6]), "+x"(a[7]));
  }
  i8_store(a, qscale, s, j0, RT, KJ);
}

/* RT rows against the block: pairs of keys, then one */
ATTN_AVX2_INLINE void i8_tile(const attn_decode_block *b, const int8_t *q8, int64_t ldq,
                              const float *qscale, float *s, int RT, int PF, int64_t D) {
  int j = 0;
  for (; j + 2 <= b->n; j += 2)
    i8_keys(b, q8, ldq, qscale, s, j, RT, 2, PF, D);
  if (j < b->n) i8_keys(b, q8, ldq, qscale, s, j, RT, 1, PF, D);
}

ATTN_AVX2_INLINE void i8_rows(const attn_decode_block *b, const int8_t *q8, int64_t ldq,
                              const float *qscale, int64_t R, float *s, int64_t D) {
  int64_t r = 0;
  int pf = 1;
  for (; R - r >= 4; r += 4, pf = 0)
    i8_tile(b, q8 + r * ldq, ldq, qscale + r, s + r * NB, 4, pf, D);
  if (R - r >= 2) i8_tile(b, q8 + r * ldq, ldq, qscale + r, s + r * NB, 2, pf, D), r += 2, pf = 0;
  if (R - r >= 1) i8_tile(b, q8 + r * ldq, ldq, qscale + r, s + r * NB, 1, pf, D);
}

ATTN_AVX2 static void scores_i8_avx2(const attn_decode_block *b, const int8_t *q8, int64_t ldq,
                                     const float *qsum, const float *qscale, int64_t R, float *s) {
  if (b->D == 128)
    i8_rows(b, q8, ldq, qscale, R, s, 128);
  else
    i8_rows(b, q8, ldq, qscale, R, s, b->D);
}

/* lanes 8 h .. 8 h + 7 of a row below n: all ones */
ATTN_AVX2_INLINE __m256 live8(int n, int h) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * h), idx));
}

/* decode_ukr.h's plain-block softmax, a row in NB / 8 vectors: the block
 * max and the sum each one reduction per row */
enum { NV = NB / 8 };

ATTN_AVX2 static int softmax_avx2(const attn_decode_block *b, float *s, float *p, int64_t R,
                                  float *m, float *l, float *corr) {
  const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY);
  __m256 live[NV], ks[NV], vs[NV];
  const int i8 = b->dtype == ATTN_I8;
  for (int h = 0; h < NV; h++) {
    live[h] = live8(b->n, h);
    ks[h] = i8 ? _mm256_blendv_ps(zero, _mm256_loadu_ps(b->ks + 8 * h), live[h]) : zero;
    vs[h] = i8 ? _mm256_blendv_ps(zero, _mm256_loadu_ps(b->vs + 8 * h), live[h]) : zero;
  }
  int any = 0;
  /* rows in groups of 8, each pass over a group's rows independent from row
   * to row (the out-of-order core overlaps them): the block maxima (the
   * scaled, masked scores written back to s), the new maxima and
   * corrections, the exponentials */
  for (int64_t r0 = 0; r0 < R; r0 += 8) {
    const int rn = R - r0 < 8 ? (int)(R - r0) : 8;
    float bm[8], mn[8];
    int alone[8]; /* no key of the row here (all -inf, none NaN) */
    for (int i = 0; i < rn; i++) {
      float *sr = s + (r0 + i) * NB;
      __m256 mx = ninf, un = zero;
      DECODE_UNROLL(8)
      for (int h = 0; h < NV; h++) {
        /* keys past n: 0 in s, -inf for the max; a NaN: noted in un, passed
         * over by the max (vmaxps gives its second operand then) */
        __m256 x = _mm256_blendv_ps(zero, _mm256_loadu_ps(sr + 8 * h), live[h]);
        if (i8) x = _mm256_mul_ps(x, ks[h]);
        un = _mm256_or_ps(un, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
        mx = _mm256_max_ps(_mm256_blendv_ps(ninf, x, live[h]), mx);
        _mm256_storeu_ps(sr + 8 * h, x);
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      bm[i] = _mm_cvtss_f32(m4);
      alone[i] = bm[i] == -INFINITY && !_mm256_movemask_ps(un);
    }
    for (int i = 0; i < rn; i++) {
      const int64_t r = r0 + i;
      if (alone[i]) {
        corr[r] = 1.0f;
        continue;
      }
      any = 1;
      mn[i] = bm[i] > m[r] ? bm[i] : m[r];
      corr[r] = mn[i] == m[r] ? 1.0f : expf(m[r] - mn[i]);
    }
    for (int i = 0; i < rn; i++) {
      const int64_t r = r0 + i;
      float *sr = s + r * NB, *pr = p + r * NB;
      if (alone[i]) {
        DECODE_UNROLL(8)
        for (int h = 0; h < NV; h++)
          _mm256_storeu_ps(pr + 8 * h, zero);
        continue;
      }
      const __m256 vm = _mm256_set1_ps(mn[i]);
      __m256 sum = zero;
      DECODE_UNROLL(8)
      for (int h = 0; h < NV; h++) {
        const __m256 e =
            _mm256_and_ps(attn_vexp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(sr + 8 * h), vm)), live[h]);
        sum = _mm256_add_ps(sum, e);
        _mm256_storeu_ps(pr + 8 * h, i8 ? _mm256_mul_ps(e, vs[h]) : e);
      }
      l[r] = l[r] * corr[r] + hsum8(sum);
      m[r] = mn[i];
    }
  }
  return any;
}

/* attn_decode_quantize_q8's bits (as the AVX-512 one: the same products,
 * an exact max, the conversion to nearest even, the same clamp); a row's
 * tail of D % 8 values through a buffer */
ATTN_AVX2 static int quantize_q8_avx2(const float *x, int64_t rows, int64_t D, float sc, int8_t *y,
                                      int64_t ldy, float *scale, float *sum) {
  const __m256 vsc = _mm256_set1_ps(sc), big = _mm256_set1_ps(FLT_MAX);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  const int64_t D8 = D / 8 * 8;
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * D;
    int8_t *yr = y + r * ldy;
    float tail[8] = {0};
    memcpy(tail, xr + D8, (size_t)(D - D8) * sizeof(float));
    __m256 mx = _mm256_setzero_ps();
    int bad = 0;
    for (int64_t e = 0; e < D; e += 8) {
      const __m256 xv = e < D8 ? _mm256_loadu_ps(xr + e) : _mm256_loadu_ps(tail);
      const __m256 a = _mm256_andnot_ps(sign, _mm256_mul_ps(xv, vsc));
      bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* inf or NaN */
      mx = _mm256_max_ps(mx, a);
    }
    if (bad) return 1;
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const __m256 vinv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m256i vs = _mm256_setzero_si256();
    for (int64_t e = 0; e < D; e += 8) {
      const __m256 xv = e < D8 ? _mm256_loadu_ps(xr + e) : _mm256_loadu_ps(tail);
      const __m256 v = _mm256_mul_ps(_mm256_mul_ps(xv, vsc), vinv);
      const __m256i q = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(v), lo), hi);
      vs = _mm256_add_epi32(vs, q);
      const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      const __m128i b8 = _mm_packs_epi16(w, w);
      if (e < D8)
        _mm_storel_epi64((__m128i *)(yr + e), b8);
      else {
        int8_t t8[16];
        _mm_storeu_si128((__m128i *)t8, b8);
        memcpy(yr + e, t8, (size_t)(D - D8));
      }
    }
    memset(yr + D, 0, (size_t)(ldy - D));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(vs), _mm256_extracti128_si256(vs, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    scale[r] = amax / 127.0f;
    sum[r] = (float)_mm_cvtsi128_si32(s4);
  }
  return 0;
}

static const attn_decode_ops ops = {
    "avx2",         1,    scores_avx2, pv_avx2,         softmax_avx2, scores_i8_avx2, NULL, NULL,
    NULL,           scores_kt_avx2, NULL, NULL,        quantize_q8_avx2};

const attn_decode_ops *attn_decode_ops_avx2(void) { return &ops; }
#else
const attn_decode_ops *attn_decode_ops_avx2(void) { return 0; }
#endif
