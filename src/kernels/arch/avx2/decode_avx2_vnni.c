/* Decode attention's int8 micro-kernels through AVX-VNNI (the VEX VPDPBUSD
 * of Alder Lake and later Intel cores, Zen 5): decode_ukr.h's scores_i8 and
 * pv_i8 for the avx2 level, on 8 lanes, as decode_avx512.c's AVX512_VNNI
 * ones do them on 16. The avx2 level takes them where the CPU has AVX-VNNI
 * (kernels/dispatch.c); the other micro-kernels are decode_avx2.c's.
 *
 * Scores: the block's keys, 8 at a time, flipped to u8 (xor 0x80) and
 * transposed 32 bytes of depth at a time (an 8 x 8 transpose of dwords:
 * lane j of vector i = bytes 4 i .. 4 i + 3 of key j), so that one VPDPBUSD
 * with a query row's dword broadcast adds 4 depths to the row's 8 scores;
 * 128 sum(q8) is taken off. P·V: per row and group of 16 keys the weights
 * quantised to u8 (the group's largest as 255), V four keys at a time with
 * its bytes interleaved into 32-bit lanes (VPUNPCKLBW / HBW, then WD) into
 * VPDPBUSD with the row's four weights broadcast, 32 columns per slab; the
 * int32 sums put back in column order (the unpacks work within 128-bit
 * lanes) and scaled into acc once per group. AVX2 has no masked byte
 * loads: a row's last partial 32 bytes go through a zero-padded copy.
 * And the same two on the int8 tiled layout (below). */
#include "kernels/kern.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/tensor.h"
#include "kernels/arch/decode_prefetch.h"

enum { NB = ATTN_DECODE_NB };

#define AVNNI_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define AVNNI_INLINE static inline __attribute__((always_inline)) AVNNI_TARGET

/* acc + the u8 x s8 dot products of u's and s's dwords (VPDPBUSD, VEX), in
 * place: GCC 12 kept the loops' accumulators in other registers than the
 * instruction writes and copied them to and fro around each one (as
 * decode_avx512.c's vnni_acc) */
AVNNI_INLINE __m256i avnni_acc(__m256i acc, __m256i u, __m256i s) {
#if defined(__GNUC__) && !defined(__clang__)
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
  return acc;
#else
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}

enum { MAXQ = ATTN_DECODE_I8DOT_MAX_D / 4 }; /* dwords of a transposed group of keys */

/* bytes c .. c + 31 of row p (n of them there, n <= 32; the rest 0) */
AVNNI_INLINE __m256i load32_bytes(const int8_t *p, int64_t c, int64_t n) {
  if (n >= 32) return _mm256_loadu_si256((const __m256i *)(p + c));
  unsigned char tmp[32] = {0};
  memcpy(tmp, p + c, (size_t)n);
  return _mm256_loadu_si256((const __m256i *)tmp);
}

/* 8 vectors of 8 dwords transposed in place: x[i] lane j <- x[j] lane i */
AVNNI_INLINE void transpose8_epi32(__m256i *x) {
  __m256i t[8], u[8];
  DECODE_UNROLL(4)
  for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm256_unpacklo_epi32(x[2 * k], x[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi32(x[2 * k], x[2 * k + 1]);
  }
  DECODE_UNROLL(2)
  for (int k = 0; k < 2; k++) {
    u[4 * k] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  /* u[4 h + m] 128-bit lane l: dword 4 l + m of keys 4 h .. 4 h + 3 */
  DECODE_UNROLL(4)
  for (int m = 0; m < 4; m++) {
    x[m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x20);
    x[4 + m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x31);
  }
}

/* keys j0 .. j0 + 7 of the block, flipped to u8 and transposed: kt[i] lane
 * j = bytes 4 i .. 4 i + 3 of key j0 + j (a missing key: key j0 again; depth
 * past D: 0, which meets q8's zeros) */
AVNNI_INLINE void transpose_keys(const attn_decode_block *b, int j0, __m256i *kt, int64_t ldq) {
  const int64_t D = b->D;
  const int n = b->n - j0;
  const __m256i flip = _mm256_set1_epi8((char)0x80);
  for (int j = j0; j < j0 + 8 && j < b->pn; j++) /* the next block's keys */
    attn_decode_pf_bytes(b->pk[j], D, b->pf_l2);
  for (int64_t c = 0; c < ldq; c += 32) {
    const int64_t left = D - c > 0 ? D - c : 0;
    __m256i x[8];
    DECODE_UNROLL(8)
    for (int j = 0; j < 8; j++)
      x[j] =
          _mm256_xor_si256(load32_bytes((const int8_t *)b->k[j0 + (j < n ? j : 0)], c, left), flip);
    transpose8_epi32(x);
    DECODE_UNROLL(8)
    for (int i = 0; i < 8; i++)
      kt[c / 4 + i] = x[i];
  }
}

/* RT rows' 8 scores against a transposed group (n live keys) */
AVNNI_INLINE void rows_t(const __m256i *kt, int64_t nq, const int8_t *q8, int64_t ldq,
                         const float *qsum, const float *qscale, float *s, int n, int RT) {
  __m256i a[4];
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++)
    a[r] = _mm256_setzero_si256();
  for (int64_t i = 0; i < nq; i++) {
    const __m256i k = kt[i];
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      int32_t qd;
      memcpy(&qd, q8 + r * ldq + 4 * i, sizeof qd);
      a[r] = avnni_acc(a[r], k, _mm256_set1_epi32(qd));
    }
  }
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++) {
    const __m256 x = _mm256_sub_ps(_mm256_cvtepi32_ps(a[r]), _mm256_set1_ps(128.0f * qsum[r]));
    float out[8];
    _mm256_storeu_ps(out, _mm256_mul_ps(x, _mm256_set1_ps(qscale[r])));
    memcpy(s + r * NB, out, (size_t)n * sizeof(float));
  }
}

AVNNI_TARGET static void scores_i8_avxvnni(const attn_decode_block *b, const int8_t *q8,
                                           int64_t ldq, const float *qsum, const float *qscale,
                                           int64_t R, float *s) {
  __m256i kt[MAXQ];
  const int64_t nq = ldq / 4;
  for (int j0 = 0; j0 < b->n; j0 += 8) {
    transpose_keys(b, j0, kt, ldq);
    const int n = b->n - j0 < 8 ? b->n - j0 : 8;
    float *sj = s + j0;
    int64_t r = 0;
    for (; R - r >= 4; r += 4)
      rows_t(kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, sj + r * NB, n, 4);
    if (R - r >= 2)
      rows_t(kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, sj + r * NB, n, 2), r += 2;
    if (R - r >= 1) rows_t(kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, sj + r * NB, n, 1);
  }
}

/* lanes 8 h .. 8 h + 7 of a row below n: all ones */
AVNNI_INLINE __m256 live8(int n, int h) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * h), idx));
}

/* every row's weights checked, per group of 16 keys: none NaN, negative or
 * above FLT_MAX, and not all below the minimum with one above 0; 0 if a row
 * fails */
AVNNI_INLINE int pv_check(const attn_decode_block *b, const float *p, int64_t R) {
  const __m256 z = _mm256_setzero_ps(), lo = _mm256_set1_ps(ATTN_DECODE_I8PV_MIN_W);
  const __m256 hi = _mm256_set1_ps(3.4028235e38f);
  for (int64_t r = 0; r < R; r++)
    for (int g = 0; 16 * g < b->n; g++) {
      int small = 1, pos = 0;
      for (int h = 2 * g; h < 2 * g + 2; h++) {
        const __m256 live = live8(b->n, h);
        const int lm = _mm256_movemask_ps(live);
        const __m256 x = _mm256_blendv_ps(z, _mm256_loadu_ps(p + r * NB + 8 * h), live);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, z, _CMP_NGE_UQ)) || /* negative or NaN */
            _mm256_movemask_ps(_mm256_cmp_ps(x, hi, _CMP_NLE_UQ)))  /* inf */
          return 0;
        small &= (_mm256_movemask_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ)) & lm) == lm;
        pos |= _mm256_movemask_ps(_mm256_cmp_ps(x, z, _CMP_GT_OQ)) != 0;
      }
      if (small && pos) return 0;
    }
  return 1;
}

/* row r's weights of group g as u8 (4 words of 4 bytes) and its scale w / 255 */
AVNNI_INLINE float pv_quantize(const attn_decode_block *b, const float *pr, int g, uint32_t *w32) {
  const __m256 z = _mm256_setzero_ps();
  const __m256 x0 = _mm256_blendv_ps(z, _mm256_loadu_ps(pr + 16 * g), live8(b->n, 2 * g));
  const __m256 x1 = _mm256_blendv_ps(z, _mm256_loadu_ps(pr + 16 * g + 8), live8(b->n, 2 * g + 1));
  __m256 m = _mm256_max_ps(x0, x1);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float w = _mm_cvtss_f32(m4);
  if (w == 0.0f) {
    w32[0] = w32[1] = w32[2] = w32[3] = 0;
    return 0.0f;
  }
  const __m256 f = _mm256_set1_ps(255.0f / w);
  /* rounded to nearest even whatever MXCSR says, 0..255 */
  const __m256i u0 = _mm256_cvttps_epi32(
      _mm256_round_ps(_mm256_mul_ps(x0, f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i u1 = _mm256_cvttps_epi32(
      _mm256_round_ps(_mm256_mul_ps(x1, f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(u0, u1), 0xD8); /* 16 words */
  const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  _mm_storeu_si128((__m128i *)w32, bytes);
  return w / 255.0f;
}

/* RT rows (acc, corr, ws, w32: their first) += keys j0 .. j0 + 15 of the
 * block over columns c0 .. c0 + cn - 1 (cn <= 32); PF: the next block's rows
 * of these keys, these columns, prefetched */
AVNNI_INLINE void pv_slab(const attn_decode_block *b, int j0, const uint32_t *w32, const float *ws,
                          const float *corr, float *acc, int64_t c0, int64_t cn, int RT, int PF) {
  const int64_t Dv = b->Dv;
  const int n = b->n - j0 < 16 ? b->n - j0 : 16;
  __m256i a[8]; /* a[r 4 + k] */
  DECODE_UNROLL(8)
  for (int i = 0; i < 4 * RT; i++)
    a[i] = _mm256_setzero_si256();
  for (int j = 0; j < n; j += 4) { /* a missing key: row j again, its weight 0 */
    for (int i = j0 + j; PF && i < j0 + j + 4 && i < b->pn; i++)
      attn_decode_pf_line((const char *)b->pv[i] + c0, b->pf_l2);
    const int8_t *v0 = (const int8_t *)b->v[j0 + j];
    const int8_t *v1 = j + 1 < n ? (const int8_t *)b->v[j0 + j + 1] : v0;
    const int8_t *v2 = j + 2 < n ? (const int8_t *)b->v[j0 + j + 2] : v0;
    const int8_t *v3 = j + 3 < n ? (const int8_t *)b->v[j0 + j + 3] : v0;
    const __m256i x0 = load32_bytes(v0, c0, cn), x1 = load32_bytes(v1, c0, cn);
    const __m256i x2 = load32_bytes(v2, c0, cn), x3 = load32_bytes(v3, c0, cn);
    const __m256i lo01 = _mm256_unpacklo_epi8(x0, x1), hi01 = _mm256_unpackhi_epi8(x0, x1);
    const __m256i lo23 = _mm256_unpacklo_epi8(x2, x3), hi23 = _mm256_unpackhi_epi8(x2, x3);
    __m256i y[4];
    y[0] = _mm256_unpacklo_epi16(lo01, lo23); /* 128-bit lane l: columns 16 l + 0..3 */
    y[1] = _mm256_unpackhi_epi16(lo01, lo23); /* 4..7 */
    y[2] = _mm256_unpacklo_epi16(hi01, hi23); /* 8..11 */
    y[3] = _mm256_unpackhi_epi16(hi01, hi23); /* 12..15 */
    DECODE_UNROLL(2)
    for (int r = 0; r < RT; r++) {
      const __m256i wr = _mm256_set1_epi32((int)w32[r * 4 + j / 4]);
      DECODE_UNROLL(4)
      for (int k = 0; k < 4; k++)
        a[r * 4 + k] = avnni_acc(a[r * 4 + k], wr, y[k]);
    }
  }
  for (int i = j0 + ((n + 3) & ~3); PF && i < j0 + 16 && i < b->pn; i++)
    attn_decode_pf_line((const char *)b->pv[i] + c0, b->pf_l2);
  DECODE_UNROLL(2)
  for (int r = 0; r < RT; r++) {
    /* cv[e]: columns 8 e .. 8 e + 7 (128-bit lane e / 2 of a[r 4 + 2 (e % 2)] and of the next) */
    __m256i cv[4];
    cv[0] = _mm256_permute2x128_si256(a[r * 4], a[r * 4 + 1], 0x20);
    cv[1] = _mm256_permute2x128_si256(a[r * 4 + 2], a[r * 4 + 3], 0x20);
    cv[2] = _mm256_permute2x128_si256(a[r * 4], a[r * 4 + 1], 0x31);
    cv[3] = _mm256_permute2x128_si256(a[r * 4 + 2], a[r * 4 + 3], 0x31);
    const __m256 sr = _mm256_set1_ps(ws[r]);
    float *ar = acc + r * Dv + c0;
    DECODE_UNROLL(4)
    for (int e = 0; e < 4; e++) {
      const int64_t left = cn - 8 * e;
      if (left <= 0) break;
      if (left >= 8) {
        __m256 x = _mm256_loadu_ps(ar + 8 * e);
        if (corr) x = _mm256_mul_ps(x, _mm256_set1_ps(corr[r])); /* the block's first group */
        _mm256_storeu_ps(ar + 8 * e, _mm256_fmadd_ps(_mm256_cvtepi32_ps(cv[e]), sr, x));
      } else { /* the last columns through a copy */
        float t[8] = {0};
        memcpy(t, ar + 8 * e, (size_t)left * sizeof(float));
        __m256 x = _mm256_loadu_ps(t);
        if (corr) x = _mm256_mul_ps(x, _mm256_set1_ps(corr[r]));
        _mm256_storeu_ps(t, _mm256_fmadd_ps(_mm256_cvtepi32_ps(cv[e]), sr, x));
        memcpy(ar + 8 * e, t, (size_t)left * sizeof(float));
      }
    }
  }
}

/* the block's groups of 16 keys one after the other, each with its own
 * scales; corr on the first (the others' x 1 left out: the same bits) */
AVNNI_INLINE void pv_tile(const attn_decode_block *b, const float *p, const float *corr, float *acc,
                          int RT, int PF) {
  for (int g = 0; 16 * g < b->n; g++) {
    uint32_t w32[8];
    float ws[2];
    DECODE_UNROLL(2)
    for (int r = 0; r < RT; r++)
      ws[r] = pv_quantize(b, p + r * NB, g, w32 + 4 * r);
    for (int64_t c0 = 0; c0 < b->Dv; c0 += 32) {
      const int64_t cn = b->Dv - c0 < 32 ? b->Dv - c0 : 32;
      pv_slab(b, 16 * g, w32, ws, g ? NULL : corr, acc, c0, cn, RT, PF);
    }
  }
}

/* The int8 tiled layout (attn/decode.h), as decode_avx512.c's tiled kernels:
 * a K tile's dword i of 16 keys is two vectors of 8 keys (bytes 64 i .. +31
 * and +32 .. +63), loaded as they lie; a V quad's 32 bytes at column c are 8
 * columns of 4 keys, already in column order. The same integer sums and
 * float operations as the row kernels above: the same bits. */

/* RT rows' scores against keys 8 h .. 8 h + 7 of one tile (nq dwords of
 * depth) into s (their first row; the block's key of lane 0 is j0; toff 0:
 * the keys in order, else those inside the block one at a time) */
AVNNI_INLINE void rows_tiled(const attn_decode_block *b, const uint8_t *kt, int h, int64_t nq,
                             const int8_t *q8, int64_t ldq, const float *qsum, const float *qscale,
                             float *s, int j0, int RT) {
  __m256i a[4];
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++)
    a[r] = _mm256_setzero_si256();
  for (int64_t i = 0; i < nq; i++) {
    const __m256i k = _mm256_loadu_si256((const __m256i *)(kt + 64 * i + 32 * h));
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      int32_t qd;
      memcpy(&qd, q8 + r * ldq + 4 * i, sizeof qd);
      a[r] = avnni_acc(a[r], k, _mm256_set1_epi32(qd));
    }
  }
  const int first = j0 + 8 * h; /* the block's key in this half's lane 0 */
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++) {
    const __m256 x = _mm256_sub_ps(_mm256_cvtepi32_ps(a[r]), _mm256_set1_ps(128.0f * qsum[r]));
    float out[8];
    _mm256_storeu_ps(out, _mm256_mul_ps(x, _mm256_set1_ps(qscale[r])));
    if (b->toff == 0) /* the keys in order from first (>= 0) */
      memcpy(s + r * NB + first, out, (size_t)(b->n - first < 8 ? b->n - first : 8) * 4);
    else /* a block from mid-tile (a window's start) */
      for (int l = 0; l < 8; l++)
        if (first + l >= 0 && first + l < b->n) s[r * NB + first + l] = out[l];
  }
}

/* rows_tiled for both halves of the tile at once (h 0 and 1: 2 RT chains
 * of VPDPBUSD, not RT, against its latency of ~6 cycles; each query dword
 * broadcast once for both): the same sums, the same stores */
AVNNI_INLINE void rows_tiled2(const attn_decode_block *b, const uint8_t *kt, int64_t nq,
                              const int8_t *q8, int64_t ldq, const float *qsum, const float *qscale,
                              float *s, int j0, int RT) {
  __m256i a[2][4];
  DECODE_UNROLL(4)
  for (int r = 0; r < RT; r++)
    a[0][r] = a[1][r] = _mm256_setzero_si256();
  for (int64_t i = 0; i < nq; i++) {
    const __m256i k0 = _mm256_loadu_si256((const __m256i *)(kt + 64 * i));
    const __m256i k1 = _mm256_loadu_si256((const __m256i *)(kt + 64 * i + 32));
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      int32_t qd;
      memcpy(&qd, q8 + r * ldq + 4 * i, sizeof qd);
      const __m256i qb = _mm256_set1_epi32(qd);
      a[0][r] = avnni_acc(a[0][r], k0, qb);
      a[1][r] = avnni_acc(a[1][r], k1, qb);
    }
  }
  DECODE_UNROLL(2)
  for (int h = 0; h < 2; h++) {
    const int first = j0 + 8 * h; /* the block's key in this half's lane 0 (>= 0) */
    DECODE_UNROLL(4)
    for (int r = 0; r < RT; r++) {
      const __m256 x = _mm256_sub_ps(_mm256_cvtepi32_ps(a[h][r]), _mm256_set1_ps(128.0f * qsum[r]));
      _mm256_storeu_ps(s + r * NB + first, _mm256_mul_ps(x, _mm256_set1_ps(qscale[r])));
    }
  }
}

AVNNI_TARGET static void scores_i8t_avxvnni(const attn_decode_block *b, const int8_t *q8,
                                            int64_t ldq, const float *qsum, const float *qscale,
                                            int64_t R, float *s) {
  const int64_t nq = b->D / 4;
  for (int i = 0; i < b->nt; i++) {
    const uint8_t *kt = (const uint8_t *)b->kt[i];
    if (i < b->pnt) /* the next block's tile */
      attn_decode_pf_bytes(b->pkt[i], 16 * b->D, b->pf_l2);
    const int j0 = 16 * i - b->toff;
    if (j0 >= 0 && j0 + 16 <= b->n) { /* all 16 keys in the block: both halves at once */
      int64_t r = 0;
      for (; R - r >= 4; r += 4)
        rows_tiled2(b, kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, j0, 4);
      if (R - r >= 2)
        rows_tiled2(b, kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, j0, 2), r += 2;
      if (R - r >= 1)
        rows_tiled2(b, kt, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, j0, 1);
      continue;
    }
    for (int h = 0; h < 2; h++) {
      if (j0 + 8 * h >= b->n || j0 + 8 * h + 8 <= 0) continue; /* no key of the block there */
      int64_t r = 0;
      for (; R - r >= 4; r += 4)
        rows_tiled(b, kt, h, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, j0, 4);
      if (R - r >= 2)
        rows_tiled(b, kt, h, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, j0, 2),
            r += 2;
      if (R - r >= 1)
        rows_tiled(b, kt, h, nq, q8 + r * ldq, ldq, qsum + r, qscale + r, s + r * NB, j0, 1);
    }
  }
  for (int i = b->nt; i < b->pnt; i++)
    attn_decode_pf_bytes(b->pkt[i], 16 * b->D, b->pf_l2);
}

/* RT rows += nquad quads (vq[q]; w32[r * 5 + q]: row r's weights) over
 * columns c0 .. c0 + cn - 1 (cn 16 or 32); pf (or NULL): the next block's
 * tile of this group, these columns of its quads prefetched with the hint l2
 * (attn_decode_block.pf_l2; a constant in the calls of whole groups: tested
 * per quad at run time, the level's int8 decode ran ~4 % slower in cache) */
AVNNI_INLINE void pv_slab_tiled(const uint8_t *const *vq, int nquad, const uint32_t *w32,
                                const float *ws, const float *corr, float *acc, int64_t Dv,
                                int64_t c0, int64_t cn, const char *pf, int l2, int RT) {
  __m256i a[8]; /* a[r 4 + k]: row r's columns c0 + 8 k .. + 7 */
  DECODE_UNROLL(8)
  for (int i = 0; i < 4 * RT; i++)
    a[i] = _mm256_setzero_si256();
  const int nv = (int)(cn / 8);
  for (int q = 0; q < nquad; q++) {
    if (pf && q < 4) attn_decode_pf_lines(pf + q * 4 * Dv + 4 * c0, cn > 16 ? 2 : 1, 64, l2);
    __m256i y[4];
    DECODE_UNROLL(4)
    for (int k = 0; k < 4; k++)
      y[k] = k < nv ? _mm256_loadu_si256((const __m256i *)(vq[q] + 4 * c0 + 32 * k))
                    : _mm256_setzero_si256();
    DECODE_UNROLL(2)
    for (int r = 0; r < RT; r++) {
      const __m256i wr = _mm256_set1_epi32((int)w32[r * 5 + q]);
      DECODE_UNROLL(4)
      for (int k = 0; k < 4; k++)
        a[r * 4 + k] = avnni_acc(a[r * 4 + k], wr, y[k]);
    }
  }
  DECODE_UNROLL(2)
  for (int r = 0; r < RT; r++) {
    const __m256 sr = _mm256_set1_ps(ws[r]);
    float *ar = acc + r * Dv + c0;
    DECODE_UNROLL(4)
    for (int k = 0; k < 4; k++) {
      if (k >= nv) break;
      __m256 x = _mm256_loadu_ps(ar + 8 * k);
      if (corr) x = _mm256_mul_ps(x, _mm256_set1_ps(corr[r])); /* the block's first group */
      _mm256_storeu_ps(ar + 8 * k, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r * 4 + k]), sr, x));
    }
  }
}

/* the quads group g's keys lie in (4, or 5 from a lane not a multiple of 4):
 * vq[q] their bytes; returns how many */
AVNNI_INLINE int group_quads(const attn_decode_block *b, int g, const uint8_t **vq) {
  const int first = b->toff + 16 * g, sh = first & 3, L0 = first - sh;
  const int nk = b->n - 16 * g < 16 ? b->n - 16 * g : 16;
  const int nquad = (sh + nk + 3) >> 2;
  for (int q = 0; q < nquad; q++) {
    const int L = L0 + 4 * q;
    vq[q] = (const uint8_t *)b->vt[L >> 4] + ((L >> 2) & 3) * 4 * b->Dv;
  }
  return nquad;
}

/* a row's 16 u8 weights of a group (q4) laid on its quads: moved up by the
 * group's first lane within its quad (sh), 5 words, the rest 0 */
AVNNI_INLINE void put_quads(uint32_t *wr, const uint32_t *q4, int sh) {
  uint8_t wb[24] = {0};
  memcpy(wb + sh, q4, 4 * sizeof(uint32_t));
  memcpy(wr, wb, 5 * sizeof(uint32_t));
}

/* RT rows (acc, corr: their first) += the block's groups of 16 keys of V,
 * group g's weights of row r at w32 + g gw + 5 r (on its quads), its scale
 * at ws[g gs + r], the correction on the first; PF: the next block's V tiles
 * prefetched. Whole groups on whole quads of 32 columns go through a call
 * with its counts constant (at run time the column loop's branches kept the
 * accumulators moving between registers). */
AVNNI_INLINE void pv_apply_tiled(const attn_decode_block *b, const uint32_t *w32, int gw,
                                 const float *ws, int gs, const float *corr, float *acc, int RT,
                                 int PF) {
  const int64_t Dv = b->Dv;
  int g = 0;
  for (; 16 * g < b->n; g++) {
    const uint8_t *vq[5];
    const int nquad = group_quads(b, g, vq);
    const char *pf = PF && g < b->pnt ? (const char *)b->pvt[g] : NULL;
    const uint32_t *wg = w32 + g * gw;
    const float *sg = ws + g * gs, *cr = g ? NULL : corr;
    for (int64_t c0 = 0; c0 < Dv; c0 += 32) {
      const int64_t cn = Dv - c0 < 32 ? Dv - c0 : 32;
      if (nquad == 4 && cn == 32 && b->pf_l2) /* the hint a constant too */
        pv_slab_tiled(vq, 4, wg, sg, cr, acc, Dv, c0, 32, pf, 1, RT);
      else if (nquad == 4 && cn == 32)
        pv_slab_tiled(vq, 4, wg, sg, cr, acc, Dv, c0, 32, pf, 0, RT);
      else
        pv_slab_tiled(vq, nquad, wg, sg, cr, acc, Dv, c0, cn, pf, b->pf_l2, RT);
    }
  }
  for (; PF && g < b->pnt; g++)
    attn_decode_pf_bytes(b->pvt[g], 16 * Dv, b->pf_l2);
}

/* the block's groups of 16 keys as pv_tile, their weights laid on the quads
 * the group's keys lie in (4, or 5 from a lane not a multiple of 4) */
AVNNI_INLINE void pv_tile_tiled(const attn_decode_block *b, const float *p, const float *corr,
                                float *acc, int RT, int PF) {
  enum { NG = ATTN_DECODE_NB / 16 };
  uint32_t w32a[NG][2 * 5];
  float wsa[NG][2];
  /* every group's weights first (one group's after another left each
   * group's chain of reduction, division and conversion in front of its dot
   * products) */
  for (int g = 0; 16 * g < b->n; g++) {
    const int sh = (b->toff + 16 * g) & 3;
    DECODE_UNROLL(2)
    for (int r = 0; r < RT; r++) {
      uint32_t q4[4];
      wsa[g][r] = pv_quantize(b, p + r * NB, g, q4);
      put_quads(w32a[g] + 5 * r, q4, sh);
    }
  }
  pv_apply_tiled(b, w32a[0], 2 * 5, wsa[0], 2, corr, acc, RT, PF);
}

/* the maxima of a, b, c, d's lanes, in that order (a shuffle network: 9
 * instructions against 4 reductions of 6) */
AVNNI_INLINE __m128 hmax4_256(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_max_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
  const __m256 cd = _mm256_max_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
  const __m256 x = _mm256_max_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
}

/* The tiled P·V of up to 4 rows (R: the common GQA group of one query
 * token), every row's weights of both groups checked and quantised at once
 * before any acc is written (pv_check's refusals and pv_quantize's values:
 * the same bits), their maxima in one network and one division for all,
 * the check from the vectors the quantisation loads (pv_check read every
 * weight once more, with a branch per vector); then the rows two at a time
 * as pv_tile_tiled */
AVNNI_INLINE int pv_rows_tiled4(const attn_decode_block *b, const float *p, const float *corr,
                                int64_t R, float *acc) {
  enum { NG = ATTN_DECODE_NB / 16 };
  const __m256 z = _mm256_setzero_ps();
  __m256 x[NG][4][2], mx[NG][4];
  int bad = 0;
  for (int g = 0; g < NG; g++) { /* (a group past n, a row past R: zeros, its maxima 0) */
    const __m256 l0 = live8(b->n, 2 * g), l1 = live8(b->n, 2 * g + 1);
    DECODE_UNROLL(4)
    for (int r = 0; r < 4; r++) {
      const float *pr = p + r * NB + 16 * g;
      x[g][r][0] = r < R ? _mm256_blendv_ps(z, _mm256_loadu_ps(pr), l0) : z;
      x[g][r][1] = r < R ? _mm256_blendv_ps(z, _mm256_loadu_ps(pr + 8), l1) : z;
      bad |= _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(x[g][r][0], z, _CMP_NGE_UQ),
                                             _mm256_cmp_ps(x[g][r][1], z, _CMP_NGE_UQ)));
      mx[g][r] = _mm256_max_ps(x[g][r][0], x[g][r][1]);
    }
  }
  if (bad) return 0; /* a weight NaN or negative */
  float w[NG * 4], inv[NG * 4], sc[NG * 4];
  for (int g = 0; g < NG; g++) { /* row r's largest of group g at w[4 g + r] */
    const __m128 W = hmax4_256(mx[g][0], mx[g][1], mx[g][2], mx[g][3]);
    if (_mm_movemask_ps(_mm_cmpgt_ps(W, _mm_set1_ps(3.4028235e38f))) ||
        _mm_movemask_ps(_mm_and_ps(_mm_cmpgt_ps(W, _mm_setzero_ps()),
                                   _mm_cmplt_ps(W, _mm_set1_ps(ATTN_DECODE_I8PV_MIN_W)))))
      return 0; /* infinite, or a group's largest in (0, the minimum) */
    _mm_storeu_ps(w + 4 * g, W);
    _mm_storeu_ps(inv + 4 * g, _mm_div_ps(_mm_set1_ps(255.0f), W));
    _mm_storeu_ps(sc + 4 * g, _mm_div_ps(W, _mm_set1_ps(255.0f)));
  }
  uint32_t w32a[NG][4 * 5];
  float wsa[NG][4];
  for (int g = 0; 16 * g < b->n; g++) {
    const int sh = (b->toff + 16 * g) & 3;
    DECODE_UNROLL(4)
    for (int r = 0; r < 4; r++) {
      if (r >= R) continue;
      uint32_t q4[4] = {0, 0, 0, 0};
      wsa[g][r] = 0.0f;
      if (w[4 * g + r] != 0.0f) { /* pv_quantize's conversion */
        const __m256 f = _mm256_set1_ps(inv[4 * g + r]);
        const __m256i u0 = _mm256_cvttps_epi32(_mm256_round_ps(
            _mm256_mul_ps(x[g][r][0], f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i u1 = _mm256_cvttps_epi32(_mm256_round_ps(
            _mm256_mul_ps(x[g][r][1], f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(u0, u1), 0xD8);
        _mm_storeu_si128((__m128i *)q4, _mm_packus_epi16(_mm256_castsi256_si128(h),
                                                         _mm256_extracti128_si256(h, 1)));
        wsa[g][r] = sc[4 * g + r];
      }
      uint32_t *wr = w32a[g] + 5 * r;
      if (!sh)
        memcpy(wr, q4, sizeof q4), wr[4] = 0;
      else
        put_quads(wr, q4, sh);
    }
  }
  for (int64_t r = 0; r < R; r += 2) /* two rows at a time, the first two prefetching */
    if (R - r >= 2)
      pv_apply_tiled(b, w32a[0] + 5 * r, 4 * 5, wsa[0] + r, 4, corr + r, acc + r * b->Dv, 2, r == 0);
    else
      pv_apply_tiled(b, w32a[0] + 5 * r, 4 * 5, wsa[0] + r, 4, corr + r, acc + r * b->Dv, 1, r == 0);
  return 1;
}

/* pv_i8 (TILED 0) or pv_i8t (1): the weights checked, then the rows two at
 * a time (the last one alone), the first tile prefetching */
AVNNI_INLINE int pv_rows(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
                         float *acc, int TILED) {
  if (!pv_check(b, p, R)) return 0;
  const int64_t Dv = b->Dv;
  int pf = 1;
  for (int64_t r = 0; r < R; r += 2, pf = 0) {
    const float *pr = p + r * NB, *cr = corr + r;
    float *ar = acc + r * Dv;
    if (R - r >= 2)
      TILED ? pv_tile_tiled(b, pr, cr, ar, 2, pf) : pv_tile(b, pr, cr, ar, 2, pf);
    else
      TILED ? pv_tile_tiled(b, pr, cr, ar, 1, pf) : pv_tile(b, pr, cr, ar, 1, pf);
  }
  return 1;
}

AVNNI_TARGET static int pv_i8_avxvnni(const attn_decode_block *b, const float *p, const float *corr,
                                      int64_t R, float *acc) {
  return pv_rows(b, p, corr, R, acc, 0);
}

AVNNI_TARGET static int pv_i8t_avxvnni(const attn_decode_block *b, const float *p,
                                       const float *corr, int64_t R, float *acc) {
  return R <= 4 ? pv_rows_tiled4(b, p, corr, R, acc) : pv_rows(b, p, corr, R, acc, 1);
}

const attn_decode_ops *attn_decode_ops_avx2_vnni(void) {
  static attn_decode_ops ops; /* set once, under the dispatch's pthread_once */
  const attn_decode_ops *base = attn_decode_ops_avx2();
  if (!base) return 0;
  ops = *base;
  ops.name = "avx2_vnni";
  ops.scores_i8 = scores_i8_avxvnni;
  ops.pv_i8 = pv_i8_avxvnni;
  ops.scores_i8t = scores_i8t_avxvnni;
  ops.pv_i8t = pv_i8t_avxvnni;
  return &ops;
}
#else
const attn_decode_ops *attn_decode_ops_avx2_vnni(void) { return 0; }
#endif
