/* AVX2 pieces of the low-precision GEMM driver (gemm_lowp.c): the f32
 * alpha/beta epilogue, the interleave of depth pairs / quads that packs a
 * row-contiguous operand, and the packer of the f32 6x16's panels that
 * widens bf16 / fp16 (or rounds f32 to bf16) in registers. Same results as
 * the portable code (the epilogue's multiplies and add are not fused, as
 * there; the packer writes the same bytes). */
#include <string.h>

#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include "kernels/arch/avx2/avx2_internal.h"

/* c = alpha * t + beta * c (beta == 0: c = alpha * t), as the scalar
 * epilogue. The driver's next tile is most often the next ldt columns of
 * the same rows: their lines of C are fetched now, while the next
 * micro-kernel runs (the f32 GEMM's micro-kernel prefetches its own C). */
AVX2_TARGET void attn_lowp_epi_f32_avx2(const attn_lowp_epi *e, const void *t, int ldt,
                                        int64_t i0, int64_t j0, int64_t rows, int64_t cols,
                                        int first) {
  const float *tile = t;
  const float beta = first ? e->beta : 1.0f;
  const __m256 va = _mm256_set1_ps(e->alpha), vb = _mm256_set1_ps(beta);
  for (int64_t r = 0; r < rows; r++) {
    float *c = (float *)e->C + (i0 + r) * e->ldc + j0;
    _mm_prefetch((const char *)(c + ldt), _MM_HINT_T1);
    _mm_prefetch((const char *)(c + 2 * ldt - 1), _MM_HINT_T1);
    const float *tr = tile + r * ldt;
    for (int64_t j = 0; j < cols; j += 8) {
      __m256 v = _mm256_mul_ps(va, attn_load8(tr + j, cols - j));
      if (beta != 0.0f) v = _mm256_add_ps(v, _mm256_mul_ps(vb, attn_load8(c + j, cols - j)));
      attn_store8(c + j, cols - j, v);
    }
  }
}

/* out[r] = the g runs at t (run i at t + i*w elements) interleaved: g = 2
 * runs of 16-bit values or g = 4 runs of bytes, element r of run i in bits
 * [i*32/g, (i+1)*32/g) of word r */
AVX2_TARGET void attn_lowp_interleave_avx2(const void *t, int g, int64_t w, int64_t n,
                                           uint32_t *out) {
  int64_t r = 0;
  if (g == 2) {
    const uint16_t *a = t, *b = a + w;
    for (; r + 16 <= n; r += 16) {
      __m256i lo = _mm256_loadu_si256((const __m256i *)(a + r));
      __m256i hi = _mm256_loadu_si256((const __m256i *)(b + r));
      __m256i x = _mm256_permute4x64_epi64(lo, 0xD8), y = _mm256_permute4x64_epi64(hi, 0xD8);
      _mm256_storeu_si256((__m256i *)(out + r), _mm256_unpacklo_epi16(x, y));
      _mm256_storeu_si256((__m256i *)(out + r + 8), _mm256_unpackhi_epi16(x, y));
    }
    for (; r < n; r++) out[r] = (uint32_t)a[r] | (uint32_t)b[r] << 16;
  } else {
    const uint8_t *a = t, *b = a + w, *c = b + w, *d = c + w;
    for (; r + 16 <= n; r += 16) {
      __m128i va = _mm_loadu_si128((const __m128i *)(a + r));
      __m128i vb = _mm_loadu_si128((const __m128i *)(b + r));
      __m128i vc = _mm_loadu_si128((const __m128i *)(c + r));
      __m128i vd = _mm_loadu_si128((const __m128i *)(d + r));
      __m128i ab0 = _mm_unpacklo_epi8(va, vb), ab1 = _mm_unpackhi_epi8(va, vb);
      __m128i cd0 = _mm_unpacklo_epi8(vc, vd), cd1 = _mm_unpackhi_epi8(vc, vd);
      _mm_storeu_si128((__m128i *)(out + r), _mm_unpacklo_epi16(ab0, cd0));
      _mm_storeu_si128((__m128i *)(out + r + 4), _mm_unpackhi_epi16(ab0, cd0));
      _mm_storeu_si128((__m128i *)(out + r + 8), _mm_unpacklo_epi16(ab1, cd1));
      _mm_storeu_si128((__m128i *)(out + r + 12), _mm_unpackhi_epi16(ab1, cd1));
    }
    for (; r < n; r++)
      out[r] = (uint32_t)a[r] | (uint32_t)b[r] << 8 | (uint32_t)c[r] << 16 | (uint32_t)d[r] << 24;
  }
}

/* ---- f32 panels (g = 1) converted while packing ----------------------------
 * Panel layout (gemm_lowp_internal.h): element (r, p) of a panel of w rows
 * at dst[p * w + r]. Eight rows of a panel (a "group"; w = 6: one group of
 * 6, w = 16: two of 8) are stored with one 8-wide store per depth step.
 * A group narrower than 8 stores 8 lanes anyway: the extra lanes land on
 * the next depth step's first rows, which are stored after it; only the
 * last depth step (p = kc - 1) is stored exactly, so nothing lands on the
 * zero padding or past the panel. */

#define INLINE_AVX2 AVX2_TARGET static inline __attribute__((always_inline))

/* f32 -> (float)bf16(x), as attn_f32_round_bf16: round to nearest even on
 * the low 16 bits, a NaN keeps its top half with the quiet bit set */
INLINE_AVX2 __m256 round_bf16_8(__m256 x) {
  __m256i u = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                   _mm256_set1_epi32(0x7f800000));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
  return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

/* 8 consecutive elements of type t at p, as f32 (t is a constant where
 * this is inlined: one load and at most a few integer operations) */
INLINE_AVX2 __m256 load_cvt8(const char *p, attn_lowp_type t) {
  if (t == LOWP_F32) return _mm256_loadu_ps((const float *)p);
  if (t == LOWP_F32R) return round_bf16_8(_mm256_loadu_ps((const float *)p));
  __m128i h = _mm_loadu_si128((const __m128i *)p);
  if (t == LOWP_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); /* bf16 */
}

/* the first n (0 <= n <= 8) elements at p, zeros after; reads nothing past
 * them (a zeroed copy: see attn_load8 on masked loads under qemu) */
INLINE_AVX2 __m256 load_cvt_n(const char *p, int64_t n, attn_lowp_type t, size_t es) {
  if (n >= 8) return load_cvt8(p, t);
  char buf[32] __attribute__((aligned(32))) = {0};
  if (n > 0) memcpy(buf, p, (size_t)n * es);
  return load_cvt8(buf, t);
}

/* rows [0, n) of a group at d (n < 8): lanes past n not written */
INLINE_AVX2 void store_exact(float *d, int n, __m256 v) {
  if (n == 6) {
    _mm_storeu_ps(d, _mm256_castps256_ps128(v));
    _mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(v, 1));
  } else {
    _mm256_maskstore_ps(d, attn_tail_mask8(n), v);
  }
}

/* row group [rg, rg + gw) of depth step p of a panel (gw = min(8, w - rg)) */
INLINE_AVX2 void store_group(float *d, int gw, int64_t p, int64_t kc, __m256 v) {
  if (gw == 8 || p + 1 < kc)
    _mm256_storeu_ps(d, v);
  else
    store_exact(d, gw, v);
}

enum { PF_BYTES = 256 }; /* prefetch distance along a source row */

/* Depth contiguous (op(X) row r at x + r * sr elements): per panel and
 * group, 8 source rows x 8 depth steps converted and transposed in
 * registers. Groups narrower than 8 go first, so the full groups' stores
 * overwrite what their extra lanes put on the next depth step. */
INLINE_AVX2 void pack_depth_contig(const char *x, attn_lowp_type t, size_t es, int64_t sr,
                                   int64_t nrows, int64_t kc, int64_t kcp, int w, float *dst) {
  for (int64_t rr = 0; rr < nrows; rr += w, dst += (size_t)w * (size_t)kcp) {
    const int64_t n = nrows - rr < w ? nrows - rr : w;
    const int last = (w - 1) / 8 * 8; /* the group that may be narrower than 8 */
    for (int gi = 0; gi * 8 < w; gi++) {
      const int rg = gi == 0 ? last : (gi - 1) * 8; /* narrow group first */
      const int gw = w - rg < 8 ? w - rg : 8;
      const int64_t valid = n - rg; /* source rows of this group (may be <= 0) */
      const char *src = x + (size_t)((rr + rg) * sr) * es;
      float *d = dst + rg;
      int64_t p = 0;
      for (; p + 8 <= kc; p += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
          if (i < valid) {
            const char *q = src + (size_t)(i * sr + p) * es;
            _mm_prefetch(q + PF_BYTES, _MM_HINT_T0);
            r[i] = load_cvt8(q, t);
          } else {
            r[i] = _mm256_setzero_ps();
          }
        }
        attn_transpose8_ps(r);
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) store_group(d + (p + q) * w, gw, p + q, kc, r[q]);
      }
      if (p < kc) { /* the last kc % 8 depth steps */
        __m256 r[8];
        for (int i = 0; i < 8; i++)
          r[i] = i < valid ? load_cvt_n(src + (size_t)(i * sr + p) * es, kc - p, t, es)
                           : _mm256_setzero_ps();
        attn_transpose8_ps(r);
        for (int64_t q = 0; q < kc - p; q++) store_group(d + (p + q) * w, gw, p + q, kc, r[q]);
      }
    }
    if (kcp > kc) memset(dst + kc * w, 0, sizeof(float) * (size_t)((kcp - kc) * w));
  }
}

/* Rows contiguous (depth step p at x + p * sp elements): a few panels at a
 * time, depth step by depth step, each group one converted 8-wide load.
 * Groups narrower than 8 only occur alone (w < 8), where the next depth
 * step's store of the same panel covers the extra lanes. */
enum { ROW_GROUP_ELEMS = 64 }; /* panel rows read per depth step: 128-256 contiguous bytes */
INLINE_AVX2 void pack_rows_contig(const char *x, attn_lowp_type t, size_t es, int64_t sp,
                                  int64_t nrows, int64_t kc, int64_t kcp, int w, float *dst) {
  const int64_t npanels = (nrows + w - 1) / w;
  const int64_t pgroup = ROW_GROUP_ELEMS / w > 0 ? ROW_GROUP_ELEMS / w : 1;
  for (int64_t pg = 0; pg < npanels; pg += pgroup) {
    const int64_t pend = pg + pgroup < npanels ? pg + pgroup : npanels;
    for (int64_t p = 0; p < kc; p++) {
      const char *src = x + (size_t)(p * sp) * es;
      for (int64_t pi = pg; pi < pend; pi++) {
        float *d = dst + (size_t)pi * (size_t)w * (size_t)kcp + p * w;
        for (int rg = 0; rg < w; rg += 8) {
          const int64_t r = pi * w + rg, valid = nrows - r;
          const int gw = w - rg < 8 ? w - rg : 8;
          __m256 v = valid >= 8 ? load_cvt8(src + (size_t)r * es, t)
                                : load_cvt_n(src + (size_t)r * es, valid, t, es);
          store_group(d + rg, gw, p, kc, v);
        }
      }
    }
  }
  if (kcp > kc)
    for (int64_t pi = 0; pi < npanels; pi++)
      memset(dst + (size_t)pi * (size_t)w * (size_t)kcp + kc * w, 0,
             sizeof(float) * (size_t)((kcp - kc) * w));
}

INLINE_AVX2 void pack_typed(const attn_lowp_src *s, attn_lowp_type t, size_t es, int64_t r0,
                            int64_t nrows, int64_t p0, int64_t kc, int64_t kcp, int w, float *d) {
  const char *x = s->x;
  if (s->sp == 1)
    pack_depth_contig(x + (size_t)(r0 * s->sr + p0) * es, t, es, s->sr, nrows, kc, kcp, w, d);
  else
    pack_rows_contig(x + (size_t)(p0 * s->sp + r0) * es, t, es, s->sp, nrows, kc, kcp, w, d);
}

/* one inlined instance per source type, so that load_cvt8's tests fold */
AVX2_TARGET int attn_lowp_pack_f32_avx2(const attn_lowp_src *s, int64_t r0, int64_t nrows,
                                        int64_t p0, int64_t kc, int64_t kcp, int w, void *dst) {
  if (s->packed || (s->sp != 1 && s->sr != 1) || w < 1) return 0;
  switch (s->type) {
    case LOWP_F32: pack_typed(s, LOWP_F32, 4, r0, nrows, p0, kc, kcp, w, dst); return 1;
    case LOWP_F32R: pack_typed(s, LOWP_F32R, 4, r0, nrows, p0, kc, kcp, w, dst); return 1;
    case LOWP_BF16: pack_typed(s, LOWP_BF16, 2, r0, nrows, p0, kc, kcp, w, dst); return 1;
    case LOWP_F16: pack_typed(s, LOWP_F16, 2, r0, nrows, p0, kc, kcp, w, dst); return 1;
    default: return 0;
  }
}
#endif
