/* Decode attention's bf16 dot products (decode_ukr.h's scores_kt_bf16 and
 * pv_bf16) on AVX512_BF16: VDPBF16PS multiplies 16 pairs of bf16 into 16
 * f32 sums, two products per lane, half the instructions of widening the
 * cache to f32 and FMAs (docs/DECODE.md, "bf16 dot products").
 *
 * Scores, on the K-tiled layout (a tile's depth d of its 16 keys is 32
 * bytes, depth d + 1 the next 32): one 64-byte load and one VPERMW give the
 * 16 keys' depth pairs, dotted with each query row's pair broadcast.
 * P·V, on V rows: two keys' rows interleaved by VPUNPCK{L,H}WD give 32
 * columns of key pairs in two vectors (columns 0-3, 8-11, 16-19, 24-27 and
 * 4-7, 12-15, 20-23, 28-31), dotted with the rows' weight pairs; the
 * accumulators are permuted into that order at a block's start and back at
 * its end. */
#include "kernels/kern.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "attn/tensor.h"
#include "kernels/arch/avx512/decode_kt_store.h"
#include "kernels/arch/decode_prefetch.h"
#include "kernels/arch/isa_targets.h"

enum { NB = ATTN_DECODE_NB };

#define BF_INLINE ATTN_AVX512_BF16_INLINE

BF_INLINE __m512 dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

/* chains of depth pairs per row: at least ~16 sums in flight (a function of
 * RT alone, so a key's sum has one order in every tile, lane and pass) */
BF_INLINE int ways(int RT) { return RT >= 8 ? 1 : RT >= 4 ? 2 : 4; }

/* row r's depths 2 i and 2 i + 1 (qb: the row) broadcast as a pair */
BF_INLINE __m512i qpair(const uint16_t *qb, int64_t i) {
  uint32_t x;
  memcpy(&x, qb + 2 * i, sizeof x);
  return _mm512_set1_epi32((int)x);
}

/* RT rows (qb: their first, ldq apart) against tiles i0 .. i0 + T - 1 of
 * the block; PF: the next block's tiles of the same indices prefetched, a
 * line per depth pair as this one reads its own */
BF_INLINE void kt_pass(const attn_decode_block *b, const uint16_t *qb, int64_t ldq, float *s,
                       int i0, int RT, int T, int PF, int64_t D) {
  const int H = ways(RT);
  /* word 2 l of a pair vector: key l's depth d (word l of the load), word
   * 2 l + 1: its depth d + 1 (word 16 + l) */
  const __m512i perm = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                        8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
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
  const int64_t D2 = D / 2, Dh = D2 - D2 % H; /* depth pairs; those in the H chains */
  for (int64_t i = 0; i < Dh; i += H) {
    DECODE_UNROLL(4)
    for (int h = 0; h < H; h++) {
      __m512i kv[2];
      DECODE_UNROLL(2)
      for (int t = 0; t < T; t++) {
        if (pf[t]) attn_decode_pf_line(pf[t] + 32 * (i + h), b->pf_l2);
        kv[t] = _mm512_permutexvar_epi16(perm, _mm512_loadu_si512(kt[t] + 32 * (i + h)));
      }
      DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++) {
        const __m512i qv = qpair(qb + r * ldq, i + h);
        DECODE_UNROLL(2)
        for (int t = 0; t < T; t++)
          a[(h * RT + r) * T + t] = dot(a[(h * RT + r) * T + t], kv[t], qv);
      }
    }
  }
  for (int64_t i = Dh; i < (D + 1) / 2; i++) { /* the pairs left, and an odd depth alone */
    DECODE_UNROLL(2)
    for (int t = 0; t < T; t++) {
      const uint16_t *k = kt[t] + 32 * i;
      const __m512i kv =
          2 * i + 1 < D
              ? _mm512_permutexvar_epi16(perm, _mm512_loadu_si512(k))
              : _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)k)); /* (k, 0) */
      DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++)
        a[r * T + t] = dot(a[r * T + t], kv, qpair(qb + r * ldq, i));
    }
  }
  attn_decode_kt_store(b, a, s, i0, H, RT, T);
}

/* RT rows against the block's tiles, two at a time; PF: the next block's
 * tiles, those beyond this one's at the end */
BF_INLINE void kt_tile(const attn_decode_block *b, const uint16_t *qb, int64_t ldq, float *s,
                       int RT, int PF, int64_t D) {
  int i = 0;
  for (; i + 2 <= b->nt; i += 2)
    kt_pass(b, qb, ldq, s, i, RT, 2, PF, D);
  if (i < b->nt) kt_pass(b, qb, ldq, s, i, RT, 1, PF, D);
  for (int x = b->nt; PF && x < b->pnt; x++)
    attn_decode_pf_bytes(b->pkt[x], 32 * D, b->pf_l2);
}

/* all R rows in tiles of 8, 4, 2, 1; the first tile prefetches */
BF_INLINE void scores_rows(const attn_decode_block *b, const uint16_t *qb, int64_t ldq, int64_t R,
                           float *s, int64_t D) {
  int64_t r = 0;
  int pf = 1;
  for (; R - r >= 8; r += 8, pf = 0)
    kt_tile(b, qb + r * ldq, ldq, s + r * NB, 8, pf, D);
  if (R - r >= 4) kt_tile(b, qb + r * ldq, ldq, s + r * NB, 4, pf, D), r += 4, pf = 0;
  if (R - r >= 2) kt_tile(b, qb + r * ldq, ldq, s + r * NB, 2, pf, D), r += 2, pf = 0;
  if (R - r >= 1) kt_tile(b, qb + r * ldq, ldq, s + r * NB, 1, pf, D);
}

ATTN_AVX512_BF16 static void scores_kt_bf16(const attn_decode_block *b, const uint16_t *qb,
                                            int64_t ldq, int64_t R, float *s) {
  if (b->D == 128)
    scores_rows(b, qb, ldq, R, s, 128);
  else
    scores_rows(b, qb, ldq, R, s, b->D);
}

/* RT rows' accumulators (acc: their first) += the block's weights (as bf16
 * pairs, wp[r * NB / 2 + jp]: keys 2 jp, 2 jp + 1) times its V rows, over
 * columns c0 .. c0 + 32 SL (vm[e]: the live columns of chunk e, FULL: all):
 * 2 RT SL accumulators in registers across the block's keys. PF: the next
 * block's V rows, these columns, spread over the key pairs. */
BF_INLINE void pv_slab(const attn_decode_block *b, const uint32_t *wp, const float *corr,
                       float *acc, int64_t c0, const __mmask32 *vm, int RT, int SL, int FULL,
                       int PF, int64_t Dv) {
  /* lanes of the pair vectors: lo = columns {0-3, 8-11, 16-19, 24-27} of
   * 32, hi = {4-7, ...}; x (columns 0-15) and y (16-31) back from them */
  const __m512i to_lo = _mm512_set_epi32(27, 26, 25, 24, 19, 18, 17, 16, 11, 10, 9, 8, 3, 2, 1, 0);
  const __m512i to_hi =
      _mm512_set_epi32(31, 30, 29, 28, 23, 22, 21, 20, 15, 14, 13, 12, 7, 6, 5, 4);
  const __m512i to_x = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i to_y =
      _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  __m512 lo[16], hi[16]; /* [r SL + e] */
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++) {
    const __m512 cr = _mm512_set1_ps(corr[r]);
    DECODE_UNROLL(4)
    for (int e = 0; e < SL; e++) {
      const float *ar = acc + r * Dv + c0 + 32 * e;
      const __m512 x = FULL ? _mm512_loadu_ps(ar) : _mm512_maskz_loadu_ps((__mmask16)vm[e], ar);
      const __m512 y = FULL ? _mm512_loadu_ps(ar + 16)
                            : _mm512_maskz_loadu_ps((__mmask16)(vm[e] >> 16), ar + 16);
      lo[r * SL + e] = _mm512_mul_ps(_mm512_permutex2var_ps(x, to_lo, y), cr);
      hi[r * SL + e] = _mm512_mul_ps(_mm512_permutex2var_ps(x, to_hi, y), cr);
    }
  }
  const int64_t c1 = c0 + 32 * SL < Dv ? c0 + 32 * SL : Dv;
  const int n = b->n, np = (n + 1) / 2;
  for (int jp = 0; jp < np; jp++) {
    const int j = 2 * jp;
    if (PF && j < b->pn)
      attn_decode_pf_bytes((const uint16_t *)b->pv[j] + c0, 2 * (c1 - c0), b->pf_l2);
    if (PF && j + 1 < b->pn)
      attn_decode_pf_bytes((const uint16_t *)b->pv[j + 1] + c0, 2 * (c1 - c0), b->pf_l2);
    const uint16_t *v0 = (const uint16_t *)b->v[j] + c0;
    const uint16_t *v1 = j + 1 < n ? (const uint16_t *)b->v[j + 1] + c0 : NULL;
    __m512i pl[4], ph[4];
    DECODE_UNROLL(4)
    for (int e = 0; e < SL; e++) {
      const __m512i x =
          FULL ? _mm512_loadu_si512(v0 + 32 * e) : _mm512_maskz_loadu_epi16(vm[e], v0 + 32 * e);
      const __m512i y = !v1    ? _mm512_setzero_si512()
                        : FULL ? _mm512_loadu_si512(v1 + 32 * e)
                               : _mm512_maskz_loadu_epi16(vm[e], v1 + 32 * e);
      pl[e] = _mm512_unpacklo_epi16(x, y);
      ph[e] = _mm512_unpackhi_epi16(x, y);
    }
    DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      const __m512i w = _mm512_set1_epi32((int)wp[r * (NB / 2) + jp]);
      DECODE_UNROLL(4)
      for (int e = 0; e < SL; e++) {
        lo[r * SL + e] = dot(lo[r * SL + e], pl[e], w);
        hi[r * SL + e] = dot(hi[r * SL + e], ph[e], w);
      }
    }
  }
  for (int j = 2 * np; PF && j < b->pn; j++)
    attn_decode_pf_bytes((const uint16_t *)b->pv[j] + c0, 2 * (c1 - c0), b->pf_l2);
  DECODE_UNROLL(8)
  for (int r = 0; r < RT; r++) {
    DECODE_UNROLL(4)
    for (int e = 0; e < SL; e++) {
      float *ar = acc + r * Dv + c0 + 32 * e;
      const __m512 x = _mm512_permutex2var_ps(lo[r * SL + e], to_x, hi[r * SL + e]);
      const __m512 y = _mm512_permutex2var_ps(lo[r * SL + e], to_y, hi[r * SL + e]);
      if (FULL) {
        _mm512_storeu_ps(ar, x);
        _mm512_storeu_ps(ar + 16, y);
      } else {
        _mm512_mask_storeu_ps(ar, (__mmask16)vm[e], x);
        _mm512_mask_storeu_ps(ar + 16, (__mmask16)(vm[e] >> 16), y);
      }
    }
  }
}

/* slabs of SL chunks of 32 columns (2 RT SL <= 16 accumulators); the last
 * one masked */
BF_INLINE void pv_tile(const attn_decode_block *b, const uint32_t *wp, const float *corr,
                       float *acc, int RT, int PF, int64_t Dv) {
  const int SL = RT >= 8 ? 1 : RT >= 4 ? 2 : 4;
  int64_t c0 = 0;
  for (; c0 + 32 * SL <= Dv; c0 += 32 * SL)
    pv_slab(b, wp, corr, acc, c0, NULL, RT, SL, 1, PF, Dv);
  if (c0 < Dv) {
    __mmask32 m[4];
    DECODE_UNROLL(4)
    for (int e = 0; e < SL; e++) {
      const int64_t left = Dv - c0 - 32 * e;
      m[e] = left >= 32 ? (__mmask32)0xFFFFFFFFu : left <= 0 ? 0 : (__mmask32)((1u << left) - 1);
    }
    pv_slab(b, wp, corr, acc, c0, m, RT, SL, 0, PF, Dv);
  }
}

/* the weights of R rows as bf16 pairs (those at j >= n as 0) */
BF_INLINE void weight_pairs(const attn_decode_block *b, const float *p, int64_t R, uint32_t *wp) {
  const __mmask16 m0 = b->n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << b->n) - 1);
  const __mmask16 m1 = b->n >= 32   ? (__mmask16)0xFFFF
                       : b->n <= 16 ? 0
                                    : (__mmask16)((1u << (b->n - 16)) - 1);
  for (int64_t r = 0; r < R; r++) {
    const __m512 x = _mm512_maskz_loadu_ps(m0, p + r * NB);
    const __m512 y = _mm512_maskz_loadu_ps(m1, p + r * NB + 16);
    _mm512_storeu_si512(wp + r * (NB / 2), (__m512i)_mm512_cvtne2ps_pbh(y, x));
  }
}

BF_INLINE void pv_rows(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
                       float *acc, int64_t Dv) {
  _Static_assert(NB == 32, "a row's weights are two vectors");
  uint32_t wp[16 * (NB / 2)]; /* a tile of 8 rows at a time */
  int64_t r = 0;
  int pf = 1;
  for (; R - r >= 8; r += 8, pf = 0) {
    weight_pairs(b, p + r * NB, 8, wp);
    pv_tile(b, wp, corr + r, acc + r * Dv, 8, pf, Dv);
  }
  const int64_t left = R - r;
  if (left) weight_pairs(b, p + r * NB, left, wp);
  int64_t o = 0;
  if (left - o >= 4) pv_tile(b, wp, corr + r + o, acc + (r + o) * Dv, 4, pf, Dv), o += 4, pf = 0;
  if (left - o >= 2)
    pv_tile(b, wp + o * (NB / 2), corr + r + o, acc + (r + o) * Dv, 2, pf, Dv), o += 2, pf = 0;
  if (left - o >= 1) pv_tile(b, wp + o * (NB / 2), corr + r + o, acc + (r + o) * Dv, 1, pf, Dv);
}

ATTN_AVX512_BF16 static void pv_bf16(const attn_decode_block *b, const float *p, const float *corr,
                                     int64_t R, float *acc) {
  if (b->Dv == 128)
    pv_rows(b, p, corr, R, acc, 128);
  else
    pv_rows(b, p, corr, R, acc, b->Dv);
}

const attn_decode_ops *attn_decode_ops_avx512_bf16(const attn_decode_ops *base) {
  static attn_decode_ops ops; /* set once, under the dispatch's pthread_once */
  if (!base) return 0;
  ops = *base;
  ops.name = base->scores_i8 ? "avx512_vnni_bf16" : "avx512_bf16";
  ops.scores_kt_bf16 = scores_kt_bf16;
  ops.pv_bf16 = pv_bf16;
  return &ops;
}
#else
const attn_decode_ops *attn_decode_ops_avx512_bf16(const attn_decode_ops *base) {
  (void)base;
  return 0;
}
#endif
