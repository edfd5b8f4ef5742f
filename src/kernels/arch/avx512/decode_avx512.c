/* Decode attention's AVX-512 micro-kernels (decode_ukr.h). A K row is
 * loaded 16 lanes at a time and widened in the register (f16: VCVTPH2PS;
 * bf16: a 16-bit shift; int8: VPMOVSXBD + VCVTDQ2PS), then multiplied into
 * up to 8 query rows' accumulators (one horizontal sum per row and key); a
 * V row likewise into up to 8 rows' output accumulators, which stay in
 * registers across the block's keys. Each row of the cache is thus read
 * and converted once per tile of 8 query rows (once per group for GQA with
 * Hq / Hkv x Lq <= 8). Tails: masked loads. */
#include "kernels/kern.h"

#if defined(__x86_64__)
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/tensor.h"
#include "kernels/arch/avx512/decode_kt_store.h"
#include "kernels/arch/avx512/vexp_avx512.h"
#include "kernels/arch/decode_prefetch.h"
#include "kernels/arch/isa_targets.h"

enum { NB = ATTN_DECODE_NB };

/* elements c..c+15 of a row (lanes of m; others 0), widened to f32 */
ATTN_AVX512_INLINE __m512 load16(int dt, const void *row, int64_t c, __mmask16 m) {
  switch (dt) {
  case ATTN_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + c));
  case ATTN_BF16:
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + c)), 16));
  case ATTN_I8:
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, (const int8_t *)row + c)));
  default: return _mm512_maskz_loadu_ps(m, (const float *)row + c);
  }
}

ATTN_AVX512_INLINE __m512 load16_full(int dt, const void *row, int64_t c) {
  switch (dt) {
  case ATTN_F16:
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + c)));
  case ATTN_BF16:
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + c))),
        16));
  case ATTN_I8:
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const int8_t *)row + c))));
  default: return _mm512_loadu_ps((const float *)row + c);
  }
}

ATTN_AVX512_INLINE int64_t elt_of(int dt) { return dt == ATTN_F32 ? 4 : dt == ATTN_I8 ? 1 : 2; }

/* lanes of vector v of a block of n keys */
ATTN_AVX512_INLINE __mmask16 live16(int n, int v) {
  const int k = n - 16 * v;
  return k >= 16 ? (__mmask16)0xFFFF : k <= 0 ? 0 : (__mmask16)((1u << k) - 1);
}

/* the sums of a, b, c, d's lanes, in that order */
ATTN_AVX512_INLINE __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  /* per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3], the same for c, d */
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  /* per 128-bit lane: [a, b, c, d] partial sums; then the four lanes added */
  const __m512 x = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 y = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
  return _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
}

/* scores of RT query rows (q: their first) against KJ keys j0.. of the
 * block: RT KJ <= 16 accumulators, each q vector loaded once for the KJ
 * keys, each key vector once for the RT rows */
ATTN_AVX512_INLINE void scores_keys(const attn_decode_block *b, const float *q, float *s, int j0,
                                    int dt, int RT, int KJ, int PF, int64_t D) {
  const int64_t Df = D & ~(int64_t)15;
  const __mmask16 tm = (__mmask16)((1u << (D - Df)) - 1);
  __m512 a[16]; /* a[r KJ + k] */
DECODE_UNROLL(16)
  for (int i = 0; i < RT * KJ; i++)
    a[i] = _mm512_setzero_ps();
  if (PF && ATTN_DECODE_KV_SWAP(dt)) /* this block's V rows of these keys */
    for (int k = 0; k < KJ && j0 + k < b->n; k++)
      attn_decode_pf_bytes(b->v[j0 + k], b->Dv * elt_of(dt), b->pf_l2);
  else if (PF) /* the next block's rows of these keys, one burst per KJ rows */
    for (int k = 0; k < KJ && j0 + k < b->pn; k++)
      attn_decode_pf_bytes(b->pk[j0 + k], D * elt_of(dt), b->pf_l2);
  for (int64_t c = 0; c < Df; c += 16) {
    __m512 kv[8];
DECODE_UNROLL(8)
    for (int k = 0; k < KJ; k++)
      kv[k] = load16_full(dt, b->k[j0 + k], c);
DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      const __m512 qv = _mm512_loadu_ps(q + r * D + c);
DECODE_UNROLL(8)
      for (int k = 0; k < KJ; k++)
        a[r * KJ + k] = _mm512_fmadd_ps(qv, kv[k], a[r * KJ + k]);
    }
  }
  if (Df < D) {
    __m512 kv[8];
DECODE_UNROLL(8)
    for (int k = 0; k < KJ; k++)
      kv[k] = load16(dt, b->k[j0 + k], Df, tm);
DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      const __m512 qv = _mm512_maskz_loadu_ps(tm, q + r * D + Df);
DECODE_UNROLL(8)
      for (int k = 0; k < KJ; k++)
        a[r * KJ + k] = _mm512_fmadd_ps(qv, kv[k], a[r * KJ + k]);
    }
  }
  float sum[16];
  int i = 0;
DECODE_UNROLL(4)
  for (; i + 4 <= RT * KJ; i += 4)
    _mm_storeu_ps(sum + i, hsum4(a[i], a[i + 1], a[i + 2], a[i + 3]));
DECODE_UNROLL(4)
  for (; i < RT * KJ; i++)
    sum[i] = _mm512_reduce_add_ps(a[i]);
DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++)
DECODE_UNROLL(8)
    for (int k = 0; k < KJ; k++)
      s[r * NB + j0 + k] = sum[r * KJ + k];
}

/* scores of RT rows against the block: 16 / RT keys at a time (at most
 * 8: registers for their vectors), then one */
ATTN_AVX512_INLINE void scores_tile(const attn_decode_block *b, const float *q, float *s, int dt,
                                    int RT, int PF, int64_t D) {
  const int KJ = RT >= 8 ? 2 : RT >= 4 ? 4 : 8;
  int j = 0;
  for (; j + KJ <= b->n; j += KJ)
    scores_keys(b, q, s, j, dt, RT, KJ, PF, D);
  for (; j < b->n; j++)
    scores_keys(b, q, s, j, dt, RT, 1, PF, D);
}

/* RT rows' output accumulators (acc: their first) += p · the block's
 * values over columns c0 .. c0 + 16 SL (lanes of m[e] in vector e; FULL:
 * all of them, plain loads): RT SL = 16 accumulators stay in registers
 * across the block's keys, and each V row is read in runs of SL 64 bytes */
ATTN_AVX512_INLINE void pv_slab(const attn_decode_block *b, const float *p, const float *corr,
                                float *acc, int64_t c0, const __mmask16 *m, int dt, int RT, int SL,
                                int FULL, int PF, int64_t Dv) {
  __m512 a[16]; /* a[r SL + e] */
DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++) {
    const __m512 cr = _mm512_set1_ps(corr[r]);
    const float *ar = acc + r * Dv + c0;
DECODE_UNROLL(8)
    for (int e = 0; e < SL; e++)
      a[r * SL + e] = _mm512_mul_ps(
          FULL ? _mm512_loadu_ps(ar + 16 * e) : _mm512_maskz_loadu_ps(m[e], ar + 16 * e), cr);
  }
  const int64_t elt = elt_of(dt), c1 = c0 + 16 * SL < Dv ? c0 + 16 * SL : Dv;
  /* swap (ATTN_DECODE_KV_SWAP): the next block's K rows instead, the share
   * of them these columns are of V's */
  const int sw = ATTN_DECODE_KV_SWAP(dt);
  const char *const *pr0 = sw ? (const char *const *)b->pk : (const char *const *)b->pv;
  const int64_t po = sw ? c0 * b->D / Dv * elt : c0 * elt,
                pn = sw ? (c1 * b->D / Dv - c0 * b->D / Dv) * elt : (c1 - c0) * elt;
  for (int j = 0; j < b->n; j++) {
    if (PF && j < b->pn) /* the next block's row j, these columns: spread over the keys */
      attn_decode_pf_bytes(pr0[j] + po, pn, b->pf_l2);
    __m512 vv[8];
    const char *vr = (const char *)b->v[j] + c0 * elt; /* one address, constant offsets */
    /* (vr itself in a register: GCC otherwise kept each vector's offset c0 elt + 64 e as an
     * invariant, spilled them to vector registers and moved them back once per key, a port-0
     * move per load) */
    __asm__("" : "+r"(vr));
    DECODE_UNROLL(8)
    for (int e = 0; e < SL; e++)
      vv[e] = FULL ? load16_full(dt, vr, 16 * e) : load16(dt, vr, 16 * e, m[e]);
DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      const __m512 pr = _mm512_set1_ps(p[r * NB + j]);
DECODE_UNROLL(8)
      for (int e = 0; e < SL; e++)
        a[r * SL + e] = _mm512_fmadd_ps(pr, vv[e], a[r * SL + e]);
    }
  }
  for (int j = b->n; PF && j < b->pn; j++)
    attn_decode_pf_bytes(pr0[j] + po, pn, b->pf_l2);
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++)
DECODE_UNROLL(8)
    for (int e = 0; e < SL; e++) {
      float *ar = acc + r * Dv + c0 + 16 * e;
      if (FULL)
        _mm512_storeu_ps(ar, a[r * SL + e]);
      else
        _mm512_mask_storeu_ps(ar, m[e], a[r * SL + e]);
    }
}

/* slabs of SL = 16 / RT vectors; the last one masked */
ATTN_AVX512_INLINE void pv_tile(const attn_decode_block *b, const float *p, const float *corr,
                                float *acc, int dt, int RT, int PF, int64_t Dv) {
  const int SL = RT >= 8 ? 2 : RT >= 4 ? 4 : 8;
  int64_t c0 = 0;
  for (; c0 + 16 * SL <= Dv; c0 += 16 * SL)
    pv_slab(b, p, corr, acc, c0, NULL, dt, RT, SL, 1, PF, Dv);
  if (c0 < Dv) {
    __mmask16 m[8];
DECODE_UNROLL(8)
    for (int e = 0; e < SL; e++) {
      const int64_t left = Dv - c0 - 16 * e;
      m[e] = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
    }
    pv_slab(b, p, corr, acc, c0, m, dt, RT, SL, 0, PF, Dv);
  }
}

/* The K-tiled layout's scores (scores_kt): a tile's element d of its 16
 * keys is one vector, so RT rows' scores of T tiles are RT T accumulators
 * of FMAs with the rows' q[d] broadcast, and no horizontal sums. The depth
 * is split H ways (accumulators of d = h mod H, added in order at the end)
 * so that RT T H <= 16 chains are in flight; H is a function of RT alone,
 * so a key's sum has the same order in any tile, lane or pass. */
ATTN_AVX512_INLINE __m512 load_kt(int dt, const uint16_t *p) {
  const __m256i x = _mm256_loadu_si256((const __m256i *)p);
  return dt == ATTN_F16 ? _mm512_cvtph_ps(x)
                        : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
}

ATTN_AVX512_INLINE int kt_ways(int RT) { return RT >= 8 ? 1 : RT >= 4 ? 2 : 4; }

/* rows q (RT of them) against tiles i0 .. i0 + T - 1 of the block; PF: the
 * next block's tiles of the same indices prefetched, the lines of depth d
 * as this one reads its own */
ATTN_AVX512_INLINE void kt_pass(const attn_decode_block *b, const float *q, float *s, int i0,
                                int dt, int RT, int T, int PF, int64_t D) {
  const int H = kt_ways(RT);
  __m512 a[16]; /* a[(h RT + r) T + t] */
  DECODE_UNROLL(16)
  for (int i = 0; i < H * RT * T; i++)
    a[i] = _mm512_setzero_ps();
  const uint16_t *kt[2], *pf[2];
  DECODE_UNROLL(2)
  for (int t = 0; t < T; t++) {
    kt[t] = (const uint16_t *)b->kt[i0 + t];
    pf[t] = PF && i0 + t < b->pnt ? (const uint16_t *)b->pkt[i0 + t] : NULL;
  }
  const int64_t Dh = D - D % H;
  for (int64_t d = 0; d < Dh; d += H) {
    /* bytes [32 d, 32 (d + H)) of the next tiles (the hint tested once) */
    if (T == 2 && pf[1] && (d & 1) == 0)
      attn_decode_pf_pair(pf[0] + 16 * d, pf[1] + 16 * d, b->pf_l2);
    else if (pf[0] && (d & 1) == 0)
      attn_decode_pf_line(pf[0] + 16 * d, b->pf_l2);
    DECODE_UNROLL(4)
    for (int h = 0; h < H; h++) {
      __m512 kv[2];
      DECODE_UNROLL(2)
      for (int t = 0; t < T; t++)
        kv[t] = load_kt(dt, kt[t] + 16 * (d + h));
      DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++) {
        const __m512 qb = _mm512_set1_ps(q[r * D + d + h]);
        DECODE_UNROLL(2)
        for (int t = 0; t < T; t++)
          a[(h * RT + r) * T + t] = _mm512_fmadd_ps(qb, kv[t], a[(h * RT + r) * T + t]);
      }
    }
  }
  for (int64_t d = Dh; d < D; d++) {
    DECODE_UNROLL(2)
    for (int t = 0; t < T; t++) {
      const __m512 kv = load_kt(dt, kt[t] + 16 * d);
      DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++)
        a[r * T + t] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * D + d]), kv, a[r * T + t]);
    }
  }
  attn_decode_kt_store(b, a, s, i0, H, RT, T);
}

/* RT rows against the block's tiles, two at a time; the first pass of the
 * call's first row tile prefetches (PF), the next block's tiles beyond this
 * one's at its end */
ATTN_AVX512_INLINE void kt_tile(const attn_decode_block *b, const float *q, float *s, int dt,
                                int RT, int PF, int64_t D) {
  int i = 0;
  for (; i + 2 <= b->nt; i += 2)
    kt_pass(b, q, s, i, dt, RT, 2, PF, D);
  if (i < b->nt) kt_pass(b, q, s, i, dt, RT, 1, PF, D);
  for (int x = b->nt; PF && x < b->pnt; x++)
    attn_decode_pf_bytes(b->pkt[x], 32 * D, b->pf_l2);
}

ATTN_AVX512_INLINE void row_tile(int KT, const attn_decode_block *b, const float *q, float *s,
                                 int dt, int RT, int PF, int64_t D) {
  if (KT)
    kt_tile(b, q, s, dt, RT, PF, D);
  else
    scores_tile(b, q, s, dt, RT, PF, D);
}

/* all R rows in tiles of 8, 4, 2, 1; the first tile prefetches; KT:
 * the K-tiled layout's tiles (kt_tile), else rows (scores_tile) */
ATTN_AVX512_INLINE void scores_rows(const attn_decode_block *b, const float *q, int64_t R, float *s,
                                    int dt, int64_t D, int KT) {
  int64_t r = 0;
  int pf = 1;
  for (; R - r >= 8; r += 8, pf = 0)
    row_tile(KT, b, q + r * D, s + r * NB, dt, 8, pf, D);
  if (R - r >= 4) row_tile(KT, b, q + r * D, s + r * NB, dt, 4, pf, D), r += 4, pf = 0;
  if (R - r >= 2) row_tile(KT, b, q + r * D, s + r * NB, dt, 2, pf, D), r += 2, pf = 0;
  if (R - r >= 1) row_tile(KT, b, q + r * D, s + r * NB, dt, 1, pf, D);
}

ATTN_AVX512_INLINE void pv_rows(const attn_decode_block *b, const float *p, const float *corr,
                                int64_t R, float *acc, int dt, int64_t Dv) {
  int64_t r = 0;
  int pf = 1;
  for (; R - r >= 8; r += 8, pf = 0)
    pv_tile(b, p + r * NB, corr + r, acc + r * Dv, dt, 8, pf, Dv);
  if (R - r >= 4) pv_tile(b, p + r * NB, corr + r, acc + r * Dv, dt, 4, pf, Dv), r += 4, pf = 0;
  if (R - r >= 2) pv_tile(b, p + r * NB, corr + r, acc + r * Dv, dt, 2, pf, Dv), r += 2, pf = 0;
  if (R - r >= 1) pv_tile(b, p + r * NB, corr + r, acc + r * Dv, dt, 1, pf, Dv);
}

/* one instance per dtype (the constant makes the compiler drop the others' loads) */
ATTN_AVX512_INLINE void scores_dt(const attn_decode_block *b, const float *q, int64_t R, float *s,
                                  int64_t D) {
  switch (b->dtype) {
  case ATTN_F16: scores_rows(b, q, R, s, ATTN_F16, D, 0); break;
  case ATTN_BF16: scores_rows(b, q, R, s, ATTN_BF16, D, 0); break;
  case ATTN_I8: scores_rows(b, q, R, s, ATTN_I8, D, 0); break;
  default: scores_rows(b, q, R, s, ATTN_F32, D, 0);
  }
}

ATTN_AVX512_INLINE void pv_dt(const attn_decode_block *b, const float *p, const float *corr,
                              int64_t R, float *acc, int64_t Dv) {
  switch (b->dtype) {
  case ATTN_F16: pv_rows(b, p, corr, R, acc, ATTN_F16, Dv); break;
  case ATTN_BF16: pv_rows(b, p, corr, R, acc, ATTN_BF16, Dv); break;
  case ATTN_I8: pv_rows(b, p, corr, R, acc, ATTN_I8, Dv); break;
  default: pv_rows(b, p, corr, R, acc, ATTN_F32, Dv);
  }
}

/* and one for head dim 128 (the common one) with its loop counts and offsets
 * constant; not for int8, which comes here only where the level has no
 * integer kernels or P·V falls back to f32 */
ATTN_AVX512 static void scores_avx512(const attn_decode_block *b, const float *q, int64_t R,
                                      float *s) {
  if (b->D == 128 && b->dtype != ATTN_I8)
    scores_dt(b, q, R, s, 128);
  else
    scores_dt(b, q, R, s, b->D);
}

ATTN_AVX512 static void pv_avx512(const attn_decode_block *b, const float *p, const float *corr,
                                  int64_t R, float *acc) {
  if (b->Dv == 128 && b->dtype != ATTN_I8)
    pv_dt(b, p, corr, R, acc, 128);
  else
    pv_dt(b, p, corr, R, acc, b->Dv);
}

/* decode_ukr.h's plain-block softmax, a row in NB / 16 vectors: the block
 * max and the sum each one reduction per row; four rows at a time, their
 * maxima and sums reduced together (hmax4, hsum4) and their exponentials
 * independent of each other (one row at a time, each row's chain of
 * reduction, exp and reduction ran ~70 cycles per row of 32 keys) */
enum { NV = NB / 16 };

/* the maxima of a, b, c, d's lanes, in that order */
ATTN_AVX512_INLINE __m128 hmax4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_max_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_max_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 x = _mm512_max_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 y = _mm256_max_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
  return _mm_max_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
}

/* the maxima of a .. h's lanes, in that order: hmax4's network on eight
 * vectors (24 instructions against 64 for eight reductions; a max is a max
 * in any order, so the same values) */
ATTN_AVX512_INLINE __m256 hmax8(__m512 a, __m512 b, __m512 c, __m512 d, __m512 e, __m512 f,
                                __m512 g, __m512 h) {
  const __m512 ab = _mm512_max_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_max_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 ef = _mm512_max_ps(_mm512_unpacklo_ps(e, f), _mm512_unpackhi_ps(e, f));
  const __m512 gh = _mm512_max_ps(_mm512_unpacklo_ps(g, h), _mm512_unpackhi_ps(g, h));
  /* per 128-bit lane: a .. d's partial maxima; e .. h's */
  const __m512 x = _mm512_max_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 y = _mm512_max_ps(_mm512_shuffle_ps(ef, gh, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(ef, gh, _MM_SHUFFLE(3, 2, 3, 2)));
  /* lanes: x0|x2, x1|x3, y0|y2, y1|y3; then x's two, y's two */
  const __m512 z = _mm512_max_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 u = _mm512_shuffle_f32x4(z, z, _MM_SHUFFLE(3, 1, 2, 0));
  return _mm256_max_ps(_mm512_castps512_ps256(u), _mm512_extractf32x8_ps(u, 1));
}

/* rows r .. r + RT - 1 (RT 1 or 4) of the softmax; 1 if any changed. The
 * rows' state (block maxima, new maxima, corrections, sums) goes from one
 * step to the next in vector and mask registers (built from scalars on the
 * stack, the vector of the new maxima waited on stores it could not be
 * forwarded from, in the chain the rest of the block waits for) */
ATTN_AVX512_INLINE int softmax_rows(float *s, float *p, int64_t r, float *m, float *l, float *corr,
                                    const __mmask16 *live, const __m512 *ks, const __m512 *vs,
                                    int i8, int RT) {
  __m512 x[4][NV], mx[4];
  unsigned nan = 0; /* bit i: row i has a NaN */
  DECODE_UNROLL(4)
  for (int i = 0; i < RT; i++) {
    mx[i] = _mm512_set1_ps(-INFINITY);
    DECODE_UNROLL(4)
    for (int v = 0; v < NV; v++) {
      x[i][v] = _mm512_maskz_loadu_ps(live[v], s + (r + i) * NB + 16 * v);
      if (i8) x[i][v] = _mm512_mul_ps(x[i][v], ks[v]);
      const __mmask16 ok = _mm512_mask_cmp_ps_mask(live[v], x[i][v], x[i][v], _CMP_ORD_Q);
      nan |= (unsigned)(ok != live[v]) << i;
      mx[i] = _mm512_mask_max_ps(mx[i], ok, mx[i], x[i][v]);
    }
  }
  /* each row's block max over its finite keys (-inf if none) and old max
   * (lanes past RT: 0, as their new one) */
  const __mmask8 rows = (__mmask8)((1u << RT) - 1);
  const __m128 bm =
      RT == 4 ? hmax4(mx[0], mx[1], mx[2], mx[3]) : _mm_set_ss(_mm512_reduce_max_ps(mx[0]));
  const __m128 mo = RT == 4 ? _mm_loadu_ps(m + r) : _mm_load_ss(m + r);
  /* on: the rows with a finite key or a NaN here (the others left alone:
   * they keep m, corr 1, p 0); their new maxima max(m, bm) */
  const __mmask8 ninf = _mm_cmp_ps_mask(bm, _mm_set1_ps(-INFINITY), _CMP_EQ_OQ);
  const __mmask8 on = rows & (__mmask8) ~(ninf & ~nan);
  const __m128 mn = _mm_mask_mov_ps(mo, _mm_mask_cmp_ps_mask(on, bm, mo, _CMP_GT_OQ), bm);
  /* e^(m - m'), 1 where m' = m */
  const __m128 ex =
      _mm512_castps512_ps128(attn_vexp16_avx512(_mm512_zextps128_ps512(_mm_sub_ps(mo, mn))));
  const __m128 cr = _mm_mask_mov_ps(ex, _mm_cmp_ps_mask(mn, mo, _CMP_EQ_OQ), _mm_set1_ps(1.0f));
  if (RT == 4)
    _mm_storeu_ps(corr + r, cr), _mm_storeu_ps(m + r, mn);
  else
    _mm_store_ss(corr + r, cr), _mm_store_ss(m + r, mn);
  __m512 sum[4];
  DECODE_UNROLL(4)
  for (int i = 0; i < RT; i++) {
    float *pr = p + (r + i) * NB;
    sum[i] = _mm512_setzero_ps();
    if (!(on >> i & 1)) { /* nothing allowed here: the row unchanged */
      DECODE_UNROLL(4)
      for (int v = 0; v < NV; v++)
        _mm512_storeu_ps(pr + 16 * v, _mm512_setzero_ps());
      continue;
    }
    const __m512 vm = _mm512_permutexvar_ps(_mm512_set1_epi32(i), _mm512_castps128_ps512(mn));
    DECODE_UNROLL(4)
    for (int v = 0; v < NV; v++) {
      __m512 e = _mm512_maskz_mov_ps(live[v], attn_vexp16_avx512(_mm512_sub_ps(x[i][v], vm)));
      sum[i] = _mm512_add_ps(sum[i], e);
      if (i8) e = _mm512_mul_ps(e, vs[v]);
      _mm512_storeu_ps(pr + 16 * v, e);
    }
  }
  /* l' = l corr + the sum (a product, then a sum: as the portable loop) */
  if (RT == 4) {
    const __m128 lo = _mm_loadu_ps(l + r);
    const __m128 ln = _mm_add_ps(_mm_mul_ps(lo, cr), hsum4(sum[0], sum[1], sum[2], sum[3]));
    _mm_storeu_ps(l + r, _mm_mask_mov_ps(lo, on, ln));
  } else if (on) {
    l[r] = l[r] * corr[r] + _mm512_reduce_add_ps(sum[0]);
  }
  return on != 0;
}

ATTN_AVX512 static int softmax_avx512(const attn_decode_block *b, float *s, float *p, int64_t R,
                                      float *m, float *l, float *corr) {
  __mmask16 live[NV];
  __m512 ks[NV], vs[NV];
  const int i8 = b->dtype == ATTN_I8;
  for (int v = 0; v < NV; v++) {
    live[v] = live16(b->n, v);
    ks[v] = i8 ? _mm512_maskz_loadu_ps(live[v], b->ks + 16 * v) : _mm512_set1_ps(1.0f);
    vs[v] = i8 ? _mm512_maskz_loadu_ps(live[v], b->vs + 16 * v) : _mm512_set1_ps(1.0f);
  }
  int any = 0;
  int64_t r = 0;
  for (; r + 4 <= R; r += 4)
    any |= softmax_rows(s, p, r, m, l, corr, live, ks, vs, i8, 4);
  for (; r < R; r++)
    any |= softmax_rows(s, p, r, m, l, corr, live, ks, vs, i8, 1);
  return any;
}

/* AVX512_VNNI int8 scores (decode_ukr.h's scores_i8): VPDPBUSD multiplies
 * u8 x s8, so the key bytes go in as k + 128 (xor 0x80) and the query rows
 * as s8; 128 sum(q8) (the caller's qsum) is taken off each row's sum. The
 * block's keys are transposed first, 64 bytes of depth at a time (a 16 x 16
 * transpose of dwords: lane j of vector i = bytes 4 i .. 4 i + 3 of key j),
 * so that one VPDPBUSD with a query row's dword broadcast adds 4 depths to
 * the row's 16 scores at once: no horizontal sums, one vector of scores per
 * row. */
#define VNNI_TARGET                                                                                \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni")))
#define VNNI_INLINE static inline __attribute__((always_inline)) VNNI_TARGET

enum { I8_MAXQ = ATTN_DECODE_I8DOT_MAX_D / 4 }; /* dwords of a transposed block */

/* 16 vectors of 16 dwords transposed in place: x[i] lane j <- x[j] lane i */
VNNI_INLINE void transpose16_epi32(__m512i *x) {
  __m512i t[16], u[16];
  DECODE_UNROLL(8)
  for (int k = 0; k < 8; k++) {
    t[2 * k] = _mm512_unpacklo_epi32(x[2 * k], x[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(x[2 * k], x[2 * k + 1]);
  }
  DECODE_UNROLL(4)
  for (int k = 0; k < 4; k++) {
    u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  /* u[4 q + m] lane l: dword 4 l + m of keys 4 q .. 4 q + 3; lanes across */
  DECODE_UNROLL(4)
  for (int m = 0; m < 4; m++) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[m], u[4 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i x1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i x2 = _mm512_shuffle_i32x4(u[m], u[4 + m], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i x3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], _MM_SHUFFLE(3, 2, 3, 2));
    x[m] = _mm512_shuffle_i32x4(x0, x1, _MM_SHUFFLE(2, 0, 2, 0));
    x[4 + m] = _mm512_shuffle_i32x4(x0, x1, _MM_SHUFFLE(3, 1, 3, 1));
    x[8 + m] = _mm512_shuffle_i32x4(x2, x3, _MM_SHUFFLE(2, 0, 2, 0));
    x[12 + m] = _mm512_shuffle_i32x4(x2, x3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

/* keys j0 .. j0 + 15 of the block, flipped to u8 and transposed: kt[i]
 * lane j = bytes 4 i .. 4 i + 3 of key j0 + j (a missing key: key j0 again;
 * depth past D: 0x80) */
VNNI_INLINE void i8_transpose_keys(const attn_decode_block *b, int j0, __m512i *kt, int64_t ldq) {
  const int64_t D = b->D;
  const int n = b->n - j0;
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  for (int64_t c = 0; c < ldq; c += 64) {
    const __mmask64 m = D - c >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (D - c)) - 1);
    __m512i x[16];
    DECODE_UNROLL(16)
    for (int j = 0; j < 16; j++)
      x[j] = _mm512_xor_si512(
          _mm512_maskz_loadu_epi8(m, (const int8_t *)b->k[j0 + (j < n ? j : 0)] + c), flip);
    for (int j = j0; j < j0 + 16 && j < b->pn; j++) /* the next block's keys, these depths */
      attn_decode_pf_line((const char *)b->pk[j] + c, b->pf_l2);
    transpose16_epi32(x);
    DECODE_UNROLL(16)
    for (int i = 0; i < 16; i++)
      kt[c / 4 + i] = x[i];
  }
}

/* RT rows' scores x[r] against 16 keys transposed as a tile is (kt: nq
 * vectors of 64 bytes, vector i = dword i of the 16 keys, flipped to u8;
 * the cache's tiles, or a block's rows transposed on the stack); two chains
 * per row. pf: a tile whose lines are prefetched on the way (kt itself when
 * there is none to fetch: no branch in the loop) */
VNNI_INLINE void i8t_rows(const uint8_t *kt, int64_t nq, const int8_t *q8, int64_t ldq,
                          const float *qsum, const float *qscale, __m512 *x, const char *pf, int l2,
                          int RT) {
  __m512i a[8], a2[8];
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++)
    a[r] = a2[r] = _mm512_setzero_si512();
  int64_t i = 0;
  DECODE_UNROLL(4)
  for (; i + 2 <= nq; i += 2) {
    attn_decode_pf_line(pf + 64 * i, l2), attn_decode_pf_line(pf + 64 * i + 64, l2);
    const __m512i k = _mm512_loadu_si512(kt + 64 * i), k2 = _mm512_loadu_si512(kt + 64 * i + 64);
    DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      int32_t qd, qd2;
      memcpy(&qd, q8 + r * ldq + 4 * i, sizeof qd);
      memcpy(&qd2, q8 + r * ldq + 4 * i + 4, sizeof qd2);
      a[r] = _mm512_dpbusd_epi32(a[r], k, _mm512_set1_epi32(qd));
      a2[r] = _mm512_dpbusd_epi32(a2[r], k2, _mm512_set1_epi32(qd2));
    }
  }
  if (i < nq) {
    attn_decode_pf_line(pf + 64 * i, l2);
    const __m512i k = _mm512_loadu_si512(kt + 64 * i);
    DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      int32_t qd;
      memcpy(&qd, q8 + r * ldq + 4 * i, sizeof qd);
      a[r] = _mm512_dpbusd_epi32(a[r], k, _mm512_set1_epi32(qd));
    }
  }
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++) {
    const __m512 y = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a[r], a2[r])),
                                   _mm512_set1_ps(128.0f * qsum[r]));
    x[r] = _mm512_mul_ps(y, _mm512_set1_ps(qscale[r]));
  }
}

/* RT rows' scores against the transposed block, into s (their first row) */
VNNI_INLINE void i8_rows_t(const __m512i *kt, int64_t nq, const int8_t *q8, int64_t ldq,
                           const float *qsum, const float *qscale, float *s, __mmask16 live,
                           int RT) {
  __m512 x[8];
  i8t_rows((const uint8_t *)kt, nq, q8, ldq, qsum, qscale, x, (const char *)kt, 0, RT);
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++)
    _mm512_mask_storeu_ps(s + r * NB, live, x[r]);
}

VNNI_TARGET static void scores_i8_vnni(const attn_decode_block *b, const int8_t *q8, int64_t ldq,
                                       const float *qsum, const float *qscale, int64_t R,
                                       float *s) {
  __m512i kt[I8_MAXQ];
  const int64_t nq = ldq / 4;
  for (int j0 = 0; j0 < b->n; j0 += 16) { /* 16 keys at a time */
    i8_transpose_keys(b, j0, kt, ldq);
    const __mmask16 live = live16(b->n, j0 / 16);
    float *sj = s + j0;
    int64_t r = 0;
    for (; R - r >= 8; r += 8)
      i8_rows_t(kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, sj + r * NB, live, 8);
    if (R - r >= 4)
      i8_rows_t(kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, sj + r * NB, live, 4), r += 4;
    if (R - r >= 2)
      i8_rows_t(kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, sj + r * NB, live, 2), r += 2;
    if (R - r >= 1)
      i8_rows_t(kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, sj + r * NB, live, 1);
  }
}

/* AVX512_VNNI int8 P·V (decode_ukr.h's pv_i8). Each row's weights of a
 * group of 16 keys are quantised to u8 (w32[r * 4 + g]: keys 4 g .. 4 g + 3
 * of the group, a byte each, the lowest first); V is taken four keys at a
 * time, its bytes interleaved so that a 32-bit lane holds one column of the
 * four keys (VPUNPCKLBW / HBW, then WD), into VPDPBUSD with the row's four
 * weights broadcast: 8 instructions per key and 64 columns for 4 rows, where
 * the f32 path widens V (2 per 16 columns) and runs 4 FMAs per row. The
 * unpacks work within 128-bit lanes, so each V row's 16 dwords are permuted
 * first (one VPERMD: dword 4 a + b <- 4 b + a), which leaves accumulator k
 * with columns 16 k .. 16 k + 15 in order; they are scaled into acc once per
 * group. (Until 2026-12-05 the accumulators were put in order instead, a
 * 4 x 4 transpose of 128-bit lanes per row and group: 8 shuffles per row
 * against 4 permutes per 4 keys, all rows.) */

/* every row's weights checked without a reduction: per group of 16 keys,
 * none NaN, negative or above FLT_MAX, and the largest 0 or >= the minimum
 * (not: all below the minimum with one above 0); 0 if a row fails */
VNNI_INLINE int i8pv_check(const attn_decode_block *b, const float *p, int64_t R) {
  const __m512 z = _mm512_setzero_ps(), lo = _mm512_set1_ps(ATTN_DECODE_I8PV_MIN_W);
  const __m512 hi = _mm512_set1_ps(3.4028235e38f);
  for (int64_t r = 0; r < R; r++)
    for (int v = 0; 16 * v < b->n; v++) {
      const __mmask16 live = live16(b->n, v);
      const __m512 x = _mm512_maskz_loadu_ps(live, p + r * NB + 16 * v);
      if (_mm512_mask_cmp_ps_mask(live, x, z, _CMP_NGE_UQ) || /* negative or NaN */
          _mm512_mask_cmp_ps_mask(live, x, hi, _CMP_NLE_UQ))  /* inf */
        return 0;
      if (_mm512_mask_cmp_ps_mask(live, x, lo, _CMP_LT_OQ) == live &&
          _mm512_mask_cmp_ps_mask(live, x, z, _CMP_GT_OQ))
        return 0;
    }
  return 1;
}

/* row r's weights of group v as u8 (4 words of 4 bytes) and its scale w / 255 */
VNNI_INLINE float i8pv_quantize(const attn_decode_block *b, const float *pr, int v, uint32_t *w32) {
  const __m512 x = _mm512_maskz_loadu_ps(live16(b->n, v), pr + 16 * v);
  const float w = _mm512_reduce_max_ps(x);
  if (w == 0.0f) {
    w32[0] = w32[1] = w32[2] = w32[3] = 0;
    return 0.0f;
  }
  const __m512i u = _mm512_cvt_roundps_epi32(_mm512_mul_ps(x, _mm512_set1_ps(255.0f / w)),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128((__m128i *)w32, _mm512_cvtepi32_epi8(u));
  return w / 255.0f;
}

enum { NG = ATTN_DECODE_NB / 16 }; /* groups of 16 keys in a block */

/* RT rows' weights of every group of the block quantised at once (their
 * maxima, quotients and conversions independent, before any group's P·V:
 * one group's after another left each group's chain of reduction, division
 * and conversion in front of its dot products): row r's u8 weights of group
 * v at w32[v][5 r ..] (4 words, the lowest key first), its scale at
 * ws[v][r]; i8pv_quantize's values (the RT rows' quotients in one
 * vector division). Returns 0, with nothing
 * quantised, where i8pv_check refuses these rows (a weight NaN, negative or
 * infinite, a group's largest in (0, the minimum)): the check from the
 * vectors and maxima the quantisation has. */
VNNI_INLINE int i8pv_quantize_all(const attn_decode_block *b, const float *p,
                                  uint32_t (*w32)[4 * 5], float (*ws)[4], int RT) {
  _Static_assert(NG == 2, "the maxima's network takes the 2 groups of a block of 32 keys");
  __m512 x[NG][4];
  __mmask16 bad = 0;
  DECODE_UNROLL(2)
  for (int v = 0; v < NG; v++) { /* (a group past n: zeros, its maxima 0) */
    const __mmask16 live = live16(b->n, v);
    DECODE_UNROLL(4)
    for (int r = 0; r < 4; r++) { /* (rows past RT: zeros, not used) */
      x[v][r] = r < RT ? _mm512_maskz_loadu_ps(live, p + r * NB + 16 * v) : _mm512_setzero_ps();
      if (r < RT) bad |= _mm512_mask_cmp_ps_mask(live, x[v][r], _mm512_setzero_ps(), _CMP_NGE_UQ);
    }
  }
  if (bad) return 0; /* a weight NaN or negative: the maxima are then not used */
  /* the 8 maxima at once (hmax8, row r of group v at 4 v + r), checked in one vector */
  const __m256 W = hmax8(x[0][0], x[0][1], x[0][2], x[0][3], x[1][0], x[1][1], x[1][2], x[1][3]);
  if (_mm256_cmp_ps_mask(W, _mm256_set1_ps(3.4028235e38f), _CMP_GT_OQ) |
      (_mm256_cmp_ps_mask(W, _mm256_setzero_ps(), _CMP_GT_OQ) &
       _mm256_cmp_ps_mask(W, _mm256_set1_ps(ATTN_DECODE_I8PV_MIN_W), _CMP_LT_OQ)))
    return 0;
  float w[8], inv[8], sc[8];
  _mm256_storeu_ps(w, W);
  _mm256_storeu_ps(inv, _mm256_div_ps(_mm256_set1_ps(255.0f), W));
  _mm256_storeu_ps(sc, _mm256_div_ps(W, _mm256_set1_ps(255.0f)));
  DECODE_UNROLL(2)
  for (int v = 0; v < NG; v++) {
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      if (w[4 * v + r] == 0.0f) {
        memset(w32[v] + 5 * r, 0, 4 * sizeof(uint32_t));
        ws[v][r] = 0.0f;
        continue;
      }
      const __m512i u =
          _mm512_cvt_roundps_epi32(_mm512_mul_ps(x[v][r], _mm512_set1_ps(inv[4 * v + r])),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128((__m128i *)(w32[v] + 5 * r), _mm512_cvtepi32_epi8(u));
      ws[v][r] = sc[4 * v + r];
    }
  }
  return 1;
}

/* RT rows (acc, corr, ws, w32: their first) += keys j0 .. j0 + 15 of the
 * block over columns c0 .. c0 + 63 (bytes of cm); PF: the next block's rows
 * of these keys, these columns, prefetched */
VNNI_INLINE void i8pv_slab(const attn_decode_block *b, int j0, const uint32_t *w32, const float *ws,
                           const float *corr, float *acc, int64_t c0, __mmask64 cm, int RT,
                           int PF) {
  const int64_t Dv = b->Dv;
  const int n = b->n - j0 < 16 ? b->n - j0 : 16;
  __m512i a[16]; /* a[r 4 + k]: row r's columns 16 k .. 16 k + 15 */
  DECODE_UNROLL(16)
  for (int i = 0; i < 4 * RT; i++)
    a[i] = _mm512_setzero_si512();
  const __m512i perm = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  for (int j = 0; j < n; j += 4) { /* a missing key: row j again, its weight 0 */
    for (int i = j0 + j; PF && i < j0 + j + 4 && i < b->pn; i++)
      attn_decode_pf_line((const char *)b->pv[i] + c0, b->pf_l2);
    const int8_t *v0 = (const int8_t *)b->v[j0 + j] + c0;
    const int8_t *v1 = j + 1 < n ? (const int8_t *)b->v[j0 + j + 1] + c0 : v0;
    const int8_t *v2 = j + 2 < n ? (const int8_t *)b->v[j0 + j + 2] + c0 : v0;
    const int8_t *v3 = j + 3 < n ? (const int8_t *)b->v[j0 + j + 3] + c0 : v0;
    /* each row's dwords permuted (dword 4 a + b <- 4 b + a) so that the
     * in-lane unpacks below leave accumulator k with columns 16 k .. 16 k + 15
     * in order */
    const __m512i x0 = _mm512_permutexvar_epi32(perm, _mm512_maskz_loadu_epi8(cm, v0));
    const __m512i x1 = _mm512_permutexvar_epi32(perm, _mm512_maskz_loadu_epi8(cm, v1));
    const __m512i x2 = _mm512_permutexvar_epi32(perm, _mm512_maskz_loadu_epi8(cm, v2));
    const __m512i x3 = _mm512_permutexvar_epi32(perm, _mm512_maskz_loadu_epi8(cm, v3));
    const __m512i lo01 = _mm512_unpacklo_epi8(x0, x1), hi01 = _mm512_unpackhi_epi8(x0, x1);
    const __m512i lo23 = _mm512_unpacklo_epi8(x2, x3), hi23 = _mm512_unpackhi_epi8(x2, x3);
    __m512i y[4]; /* y[k]: a dword per column of 16 k .. 16 k + 15, its 4 keys' bytes */
    y[0] = _mm512_unpacklo_epi16(lo01, lo23);
    y[1] = _mm512_unpackhi_epi16(lo01, lo23);
    y[2] = _mm512_unpacklo_epi16(hi01, hi23);
    y[3] = _mm512_unpackhi_epi16(hi01, hi23);
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      const __m512i wr = _mm512_set1_epi32((int)w32[r * 4 + j / 4]);
      DECODE_UNROLL(4)
      for (int k = 0; k < 4; k++)
        a[r * 4 + k] = _mm512_dpbusd_epi32(a[r * 4 + k], wr, y[k]);
    }
  }
  for (int i = j0 + ((n + 3) & ~3); PF && i < j0 + 16 && i < b->pn; i++)
    attn_decode_pf_line((const char *)b->pv[i] + c0, b->pf_l2);
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++) {
    const __m512 sr = _mm512_set1_ps(ws[r]);
    float *ar = acc + r * Dv + c0;
    DECODE_UNROLL(4)
    for (int l = 0; l < 4; l++) {
      const __mmask16 m = (__mmask16)(cm >> (16 * l));
      if (!m) break;
      __m512 x = _mm512_maskz_loadu_ps(m, ar + 16 * l);
      if (corr) x = _mm512_mul_ps(x, _mm512_set1_ps(corr[r])); /* the block's first group */
      _mm512_mask_storeu_ps(ar + 16 * l, m,
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[r * 4 + l]), sr, x));
    }
  }
}

/* the block's groups of 16 keys one after the other, each with its own
 * scales; corr on the first (the others' x 1 left out: the same bits) */
VNNI_INLINE void i8pv_tile(const attn_decode_block *b, const float *p, const float *corr,
                           float *acc, int RT, int PF) {
  for (int v = 0; 16 * v < b->n; v++) {
    uint32_t w32[16];
    float ws[4];
    /* one row at a time (here the rows' divisions in one vector ran 1.1x slower) */
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++)
      ws[r] = i8pv_quantize(b, p + r * NB, v, w32 + 4 * r);
    for (int64_t c0 = 0; c0 < b->Dv; c0 += 64) {
      const int64_t left = b->Dv - c0;
      const __mmask64 cm = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
      i8pv_slab(b, 16 * v, w32, ws, v ? NULL : corr, acc, c0, cm, RT, PF);
    }
  }
}

/* The int8 tiled layout (attn/decode.h): the same two kernels without the
 * transposes and unpacks. A K tile is [D / 4][16 keys][4 bytes] of k + 128:
 * its vector i is what i8_transpose_keys makes of 16 rows' dword i, loaded
 * as it lies; a V quad is [Dv][4 keys]: its 64 bytes at column c are what
 * the permute and unpacks of i8pv_slab make of 4 rows' columns c .. c + 15.
 * The integer sums are the same, and every float operation after them, so
 * the results are the rows' bits. Measured on a Zen 5 with the data in L2
 * (a scratch loop, per key row of 4 query rows, D = Dv = 128): scores 17.5
 * -> ~6 cycles, P·V (without its weights' quantisation) ~20 -> ~11. */

/* the scores of tile i (x[r], RT rows) stored into s (their first row) */
VNNI_INLINE void i8t_store(const attn_decode_block *b, int i, const __m512 *x, float *s, int RT) {
  const int j0 = 16 * i - b->toff; /* the block's key in lane 0 */
  if (b->toff == 0) {
    const __mmask16 live = live16(b->n, i);
    DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++)
      _mm512_mask_storeu_ps(s + r * NB + j0, live, x[r]);
    return;
  }
  for (int r = 0; r < RT; r++) { /* a block from mid-tile (a window's start) */
    float t[16];
    _mm512_storeu_ps(t, x[r]);
    for (int l = 0; l < 16; l++)
      if (j0 + l >= 0 && j0 + l < b->n) s[r * NB + j0 + l] = t[l];
  }
}

/* RT rows' scores against tile i of the block into s (their first row) */
VNNI_INLINE void i8t_tile(const attn_decode_block *b, int i, const int8_t *q8, int64_t ldq,
                          const float *qsum, const float *qscale, float *s, const char *pf,
                          int RT) {
  __m512 x[8];
  i8t_rows((const uint8_t *)b->kt[i], b->D / 4, q8, ldq, qsum, qscale, x, pf, b->pf_l2, RT);
  i8t_store(b, i, x, s, RT);
}

/* RT rows' scores against tiles i and i + 1 at once: each query dword
 * broadcast once for both (the broadcasts, one load each, were the most of
 * the kernel's loads: 8 per key against 2 of the key bytes) */
VNNI_INLINE void i8t_pair(const attn_decode_block *b, int i, const int8_t *q8, int64_t ldq,
                          const float *qsum, const float *qscale, float *s, const char *pf0,
                          const char *pf1, int RT, int64_t D) {
  const uint8_t *k0 = (const uint8_t *)b->kt[i], *k1 = (const uint8_t *)b->kt[i + 1];
  const int64_t nq = D / 4;
  __m512i a[8], a2[8];
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++)
    a[r] = a2[r] = _mm512_setzero_si512();
  DECODE_UNROLL(2)
  for (int64_t d = 0; d < nq; d++) {
    attn_decode_pf_pair(pf0 + 64 * d, pf1 + 64 * d, b->pf_l2);
    const __m512i x0 = _mm512_loadu_si512(k0 + 64 * d), x1 = _mm512_loadu_si512(k1 + 64 * d);
    DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      int32_t qd;
      memcpy(&qd, q8 + r * ldq + 4 * d, sizeof qd);
      const __m512i qb = _mm512_set1_epi32(qd);
      a[r] = _mm512_dpbusd_epi32(a[r], x0, qb);
      a2[r] = _mm512_dpbusd_epi32(a2[r], x1, qb);
    }
  }
  __m512 x0[8], x1[8];
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++) {
    const __m512 off = _mm512_set1_ps(128.0f * qsum[r]), sc = _mm512_set1_ps(qscale[r]);
    x0[r] = _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(a[r]), off), sc);
    x1[r] = _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(a2[r]), off), sc);
  }
  i8t_store(b, i, x0, s, RT);
  i8t_store(b, i + 1, x1, s, RT);
}

VNNI_INLINE void i8t_blocks(const attn_decode_block *b, const int8_t *q8, int64_t ldq,
                            const float *qsum, const float *qscale, int64_t R, float *s,
                            int64_t D) {
  int i = 0;
  for (; i + 2 <= b->nt; i += 2) { /* tiles in pairs */
    const char *k0 = (const char *)b->kt[i], *k1 = (const char *)b->kt[i + 1];
    const char *pf0 = i < b->pnt ? (const char *)b->pkt[i] : k0; /* by the first rows */
    const char *pf1 = i + 1 < b->pnt ? (const char *)b->pkt[i + 1] : k1;
    int64_t r = 0;
    for (; R - r >= 8; r += 8, pf0 = k0, pf1 = k1)
      i8t_pair(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf0, pf1, 8, D);
    if (R - r >= 4)
      i8t_pair(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf0, pf1, 4, D), r += 4,
          pf0 = k0, pf1 = k1;
    if (R - r >= 2)
      i8t_pair(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf0, pf1, 2, D), r += 2,
          pf0 = k0, pf1 = k1;
    if (R - r >= 1)
      i8t_pair(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf0, pf1, 1, D);
  }
  for (; i < b->nt; i++) {
    const char *kt = (const char *)b->kt[i];
    const char *pf = i < b->pnt ? (const char *)b->pkt[i] : kt; /* by the first rows */
    int64_t r = 0;
    for (; R - r >= 8; r += 8, pf = kt)
      i8t_tile(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf, 8);
    if (R - r >= 4)
      i8t_tile(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf, 4), r += 4, pf = kt;
    if (R - r >= 2)
      i8t_tile(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf, 2), r += 2, pf = kt;
    if (R - r >= 1) i8t_tile(b, i, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, pf, 1);
  }
  for (i = b->nt; i < b->pnt; i++)
    attn_decode_pf_bytes(b->pkt[i], 16 * D, b->pf_l2);
}

VNNI_TARGET static void scores_i8t_vnni(const attn_decode_block *b, const int8_t *q8, int64_t ldq,
                                        const float *qsum, const float *qscale, int64_t R,
                                        float *s) {
  if (b->D == 128) /* the common head dim with its loop counts constant */
    i8t_blocks(b, q8, ldq, qsum, qscale, R, s, 128);
  else
    i8t_blocks(b, q8, ldq, qsum, qscale, R, s, b->D);
}

/* RT rows (acc, corr, ws: their first; w32[r * 5 + q]: row r's weights of
 * quad q) += nquad quads of V (vq[q]: the quad's bytes) over columns c0 ..
 * c0 + 16 nv; pf (or NULL): the next block's tile of this group, these
 * columns of its quads prefetched */
VNNI_INLINE void i8pvt_slab(const uint8_t *const *vq, int nquad, const uint32_t *w32,
                            const float *ws, const float *corr, float *acc, int64_t Dv, int64_t c0,
                            int nv, const char *pf, int l2, int RT) {
  __m512i a[16]; /* a[r 4 + k]: row r's columns c0 + 16 k .. + 15 */
  DECODE_UNROLL(16)
  for (int i = 0; i < 4 * RT; i++)
    a[i] = _mm512_setzero_si512();
  DECODE_UNROLL(5)
  for (int q = 0; q < nquad; q++) {
    if (pf && q < 4) attn_decode_pf_lines_disp(pf + q * 4 * Dv + 4 * c0, nv, 64, l2);
    __m512i y[4];
    DECODE_UNROLL(4)
    for (int k = 0; k < 4; k++)
      y[k] = k < nv ? _mm512_loadu_si512(vq[q] + 4 * c0 + 64 * k) : _mm512_setzero_si512();
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      const __m512i wr = _mm512_set1_epi32((int)w32[r * 5 + q]);
      DECODE_UNROLL(4)
      for (int k = 0; k < 4; k++)
        a[r * 4 + k] = _mm512_dpbusd_epi32(a[r * 4 + k], wr, y[k]);
    }
  }
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++) {
    const __m512 sr = _mm512_set1_ps(ws[r]);
    float *ar = acc + r * Dv + c0;
    DECODE_UNROLL(4)
    for (int k = 0; k < 4; k++) {
      if (k >= nv) break;
      __m512 x = _mm512_loadu_ps(ar + 16 * k);
      if (corr) x = _mm512_mul_ps(x, _mm512_set1_ps(corr[r])); /* the block's first group */
      _mm512_storeu_ps(ar + 16 * k, _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[r * 4 + k]), sr, x));
    }
  }
}

/* the block's groups of 16 keys, as i8pv_tile: each row's weights of a group
 * quantised, then laid on the quads the group's keys lie in (4, or 5 from a
 * lane not a multiple of 4; the other keys' weights 0) */
VNNI_INLINE int i8pvt_tile(const attn_decode_block *b, const float *p, const float *corr,
                           float *acc, int RT, int PF, int64_t Dv) {
  uint32_t w32a[NG][4 * 5];
  float wsa[NG][4];
  if (!i8pv_quantize_all(b, p, w32a, wsa, RT)) return 0;
  /* corrections all 1 (the running maxima unchanged, the common block):
   * acc's products with them left out (x 1: the same bits) */
  int unit = 1;
  for (int r = 0; r < RT; r++)
    unit &= corr[r] == 1.0f;
  const float *cr0 = unit ? NULL : corr;
  int v = 0;
  for (; 16 * v < b->n; v++) {
    uint32_t *w32 = w32a[v];
    const float *ws = wsa[v];
    const int first = b->toff + 16 * v, sh = first & 3, L0 = first - sh;
    const int nk = b->n - 16 * v < 16 ? b->n - 16 * v : 16;
    const int nquad = (sh + nk + 3) >> 2;
    if (sh) /* the weights moved up by sh bytes onto the quads */
      for (int r = 0; r < RT; r++) {
        uint8_t wb[24] = {0};
        memcpy(wb + sh, w32 + 5 * r, 4 * sizeof(uint32_t));
        memcpy(w32 + 5 * r, wb, 5 * sizeof(uint32_t));
      }
    const uint8_t *vq[5];
    for (int q = 0; q < nquad; q++) {
      const int L = L0 + 4 * q;
      vq[q] = (const uint8_t *)b->vt[L >> 4] + ((L >> 2) & 3) * 4 * Dv;
    }
    const char *pf = PF && v < b->pnt ? (const char *)b->pvt[v] : NULL;
    const float *cr = v ? NULL : cr0;
    int64_t c0 = 0;
    if (nquad == 4) /* a whole group on whole quads: the loops' counts constants */
      for (; c0 + 64 <= Dv; c0 += 64)
        i8pvt_slab(vq, 4, w32, ws, cr, acc, Dv, c0, 4, pf, b->pf_l2, RT);
    for (; c0 + 64 <= Dv; c0 += 64)
      i8pvt_slab(vq, nquad, w32, ws, cr, acc, Dv, c0, 4, pf, b->pf_l2, RT);
    if (c0 < Dv)
      i8pvt_slab(vq, nquad, w32, ws, cr, acc, Dv, c0, (int)((Dv - c0) / 16), pf, b->pf_l2, RT);
  }
  for (; PF && v < b->pnt; v++)
    attn_decode_pf_bytes(b->pvt[v], 16 * Dv, b->pf_l2);
  return 1;
}

/* pv_i8 (TILED 0) or pv_i8t (1): the weights checked, then the rows in tiles
 * of 4 (then 3, 2 or 1), the first tile prefetching. Tiled, up to 4 rows
 * (one tile): the tile's quantisation checks them, before any acc is
 * written. */
VNNI_INLINE int i8pv_rows(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
                          float *acc, int TILED, int64_t Dv) {
  if (TILED && R <= 4) {
    const int RT = (int)R;
    if (RT == 4) return i8pvt_tile(b, p, corr, acc, 4, 1, Dv);
    if (RT == 3) return i8pvt_tile(b, p, corr, acc, 3, 1, Dv);
    if (RT == 2) return i8pvt_tile(b, p, corr, acc, 2, 1, Dv);
    return i8pvt_tile(b, p, corr, acc, 1, 1, Dv);
  }
  if (!i8pv_check(b, p, R)) return 0;
  int64_t r = 0;
  int pf = 1;
  for (; R - r > 0; r += 4, pf = 0) {
    const int RT = R - r >= 4 ? 4 : (int)(R - r);
    const float *pr = p + r * NB, *cr = corr + r;
    float *ar = acc + r * Dv;
    if (RT == 4 && TILED) (void)i8pvt_tile(b, pr, cr, ar, 4, pf, Dv); /* (checked above) */
    if (RT == 4 && !TILED) i8pv_tile(b, pr, cr, ar, 4, pf);
    if (RT == 3 && TILED) (void)i8pvt_tile(b, pr, cr, ar, 3, pf, Dv);
    if (RT == 3 && !TILED) i8pv_tile(b, pr, cr, ar, 3, pf);
    if (RT == 2 && TILED) (void)i8pvt_tile(b, pr, cr, ar, 2, pf, Dv);
    if (RT == 2 && !TILED) i8pv_tile(b, pr, cr, ar, 2, pf);
    if (RT == 1 && TILED) (void)i8pvt_tile(b, pr, cr, ar, 1, pf, Dv);
    if (RT == 1 && !TILED) i8pv_tile(b, pr, cr, ar, 1, pf);
  }
  return 1;
}

VNNI_TARGET static int pv_i8_vnni(const attn_decode_block *b, const float *p, const float *corr,
                                  int64_t R, float *acc) {
  return i8pv_rows(b, p, corr, R, acc, 0, b->Dv);
}

VNNI_TARGET static int pv_i8t_vnni(const attn_decode_block *b, const float *p, const float *corr,
                                   int64_t R, float *acc) {
  return b->Dv == 128 ? i8pv_rows(b, p, corr, R, acc, 1, 128) /* as scores_i8t_vnni */
                      : i8pv_rows(b, p, corr, R, acc, 1, b->Dv);
}

ATTN_AVX512 static void scores_kt_avx512(const attn_decode_block *b, const float *q, int64_t R,
                                         float *s) {
  const int f16 = b->dtype == ATTN_F16;
  if (b->D == 128)
    f16 ? scores_rows(b, q, R, s, ATTN_F16, 128, 1) : scores_rows(b, q, R, s, ATTN_BF16, 128, 1);
  else
    f16 ? scores_rows(b, q, R, s, ATTN_F16, b->D, 1) : scores_rows(b, q, R, s, ATTN_BF16, b->D, 1);
}

/* attn_decode_quantize_q8's bits: the same products, an exact max, the
 * conversion to nearest even (the default rounding mode, as the portable
 * loop's 1.5 x 2^23 shift), the same clamp */
ATTN_AVX512 static int quantize_q8_avx512(const float *x, int64_t rows, int64_t D, float sc,
                                          int8_t *y, int64_t ldy, float *scale, float *sum) {
  const __m512 vsc = _mm512_set1_ps(sc), big = _mm512_set1_ps(FLT_MAX);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * D;
    int8_t *yr = y + r * ldy;
    __m512 mx = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (int64_t e = 0; e < D; e += 16) {
      const __mmask16 k = D - e >= 16 ? 0xffff : (__mmask16)((1u << (D - e)) - 1);
      const __m512 a = _mm512_abs_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, xr + e), vsc));
      bad |= _mm512_cmp_ps_mask(a, big, _CMP_NLE_UQ); /* inf or NaN */
      mx = _mm512_max_ps(mx, a);
    }
    if (bad) return 1;
    const float amax = _mm512_reduce_max_ps(mx);
    const __m512 vinv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m512i vs = _mm512_setzero_si512();
    for (int64_t e = 0; e < D; e += 16) {
      const __mmask16 k = D - e >= 16 ? 0xffff : (__mmask16)((1u << (D - e)) - 1);
      const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, xr + e), vsc), vinv);
      const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(v), lo), hi);
      vs = _mm512_add_epi32(vs, q);
      _mm_mask_storeu_epi8(yr + e, k, _mm512_cvtepi32_epi8(q));
    }
    memset(yr + D, 0, (size_t)(ldy - D));
    scale[r] = amax / 127.0f;
    sum[r] = (float)_mm512_reduce_add_epi32(vs);
  }
  return 0;
}

static const attn_decode_ops ops = {"avx512",
                                    1,
                                    scores_avx512,
                                    pv_avx512,
                                    softmax_avx512,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL,
                                    scores_kt_avx512,
                                    NULL,
                                    NULL,
                                    quantize_q8_avx512};
static const attn_decode_ops ops_vnni = {
    "avx512_vnni",  1,          scores_avx512,     pv_avx512,   softmax_avx512,
    scores_i8_vnni, pv_i8_vnni, scores_i8t_vnni,   pv_i8t_vnni, scores_kt_avx512,
    NULL,           NULL,       quantize_q8_avx512};

const attn_decode_ops *attn_decode_ops_avx512(void) { return &ops; }
const attn_decode_ops *attn_decode_ops_avx512_vnni(void) { return &ops_vnni; }
#else
const attn_decode_ops *attn_decode_ops_avx512(void) { return 0; }
const attn_decode_ops *attn_decode_ops_avx512_vnni(void) { return 0; }
#endif
