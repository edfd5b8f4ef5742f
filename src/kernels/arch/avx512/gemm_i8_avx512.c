/* AVX512_VNNI int8 micro-kernel: a 14x32 s32 block of C in 28 zmm
 * accumulators; per depth quad two loads of packed b~ (16 columns x 4 s8
 * each) and 14 broadcasts of an a~ quad (4 u8) feed 28 VPDPBUSD (acc +=
 * sum of 4 u8*s8 products per lane, no saturation). */
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

enum { MR = 14, NR = 32 };

/* tile[14, 32] = a~[kcp/4][14][4] · b~[kcp/4][32][4] */
VNNI_TARGET static void ukr_vnni_14x32(int64_t kcp, const void *av, const void *bv, void *tv) {
  const uint8_t *a = av;
  const int8_t *b = bv;
  int32_t *t = tv;
  __m512i acc0[MR], acc1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) {
    acc0[i] = _mm512_setzero_si512();
    acc1[i] = _mm512_setzero_si512();
  }
  for (int64_t p = 0; p < kcp; p += 4) {
    __m512i b0 = _mm512_load_si512(b), b1 = _mm512_load_si512(b + 64);
    _mm_prefetch((const char *)(b + 8 * 4 * NR), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
      int32_t quad;
      memcpy(&quad, a + 4 * i, 4);
      __m512i ai = _mm512_set1_epi32(quad);
      acc0[i] = _mm512_dpbusd_epi32(acc0[i], ai, b0);
      acc1[i] = _mm512_dpbusd_epi32(acc1[i], ai, b1);
    }
    a += 4 * MR;
    b += 4 * NR;
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) {
    _mm512_store_si512(t + i * NR, acc0[i]);
    _mm512_store_si512(t + i * NR + 16, acc1[i]);
  }
}

/* Row 0 of the tile: four depth quads at a time into four pairs of
 * accumulators (VPDPBUSD's latency), summed at the end; integer sums, so
 * the same values as ukr_vnni_14x32's row 0. */
VNNI_TARGET static void ukr_vnni_1x32(int64_t kcp, const void *av, const void *bv, void *tv) {
  const uint8_t *a = av;
  const int8_t *b = bv;
  int32_t *t = tv;
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0,
          s7 = s0;
  int64_t p = 0;
  for (; p + 16 <= kcp; p += 16) {
    int32_t q[4];
    for (int u = 0; u < 4; u++)
      memcpy(&q[u], a + 4 * MR * u, 4);
    __m512i a0 = _mm512_set1_epi32(q[0]), a1 = _mm512_set1_epi32(q[1]);
    __m512i a2 = _mm512_set1_epi32(q[2]), a3 = _mm512_set1_epi32(q[3]);
    s0 = _mm512_dpbusd_epi32(s0, a0, _mm512_load_si512(b));
    s1 = _mm512_dpbusd_epi32(s1, a0, _mm512_load_si512(b + 64));
    s2 = _mm512_dpbusd_epi32(s2, a1, _mm512_load_si512(b + 128));
    s3 = _mm512_dpbusd_epi32(s3, a1, _mm512_load_si512(b + 192));
    s4 = _mm512_dpbusd_epi32(s4, a2, _mm512_load_si512(b + 256));
    s5 = _mm512_dpbusd_epi32(s5, a2, _mm512_load_si512(b + 320));
    s6 = _mm512_dpbusd_epi32(s6, a3, _mm512_load_si512(b + 384));
    s7 = _mm512_dpbusd_epi32(s7, a3, _mm512_load_si512(b + 448));
    a += 16 * MR;
    b += 16 * NR;
  }
  for (; p < kcp; p += 4) {
    int32_t quad;
    memcpy(&quad, a, 4);
    __m512i ai = _mm512_set1_epi32(quad);
    s0 = _mm512_dpbusd_epi32(s0, ai, _mm512_load_si512(b));
    s1 = _mm512_dpbusd_epi32(s1, ai, _mm512_load_si512(b + 64));
    a += 4 * MR;
    b += 4 * NR;
  }
  s0 = _mm512_add_epi32(_mm512_add_epi32(s0, s2), _mm512_add_epi32(s4, s6));
  s1 = _mm512_add_epi32(_mm512_add_epi32(s1, s3), _mm512_add_epi32(s5, s7));
  _mm512_store_si512(t, s0);
  _mm512_store_si512(t + 16, s1);
}

static const attn_lowp_kernel kernel = {
    .name = "avx512_vnni 14x32",
    .path = "avx512_vnni",
    .mr = MR,
    .nr = NR,
    .ga = 4,
    .gb = 4,
    .kgroup = 4,
    .mc = 14 * 72,
    .kc = 1024,
    .nc = 960,
    .pa = LOWP_U8,
    .pb = LOWP_S8,
    .int_acc = 1,
    .ukr = ukr_vnni_14x32,
    .ukr_row = ukr_vnni_1x32,
};

const attn_lowp_kernel *attn_lowp_kernel_i8_vnni(void) { return &kernel; }
#else
const attn_lowp_kernel *attn_lowp_kernel_i8_vnni(void) { return NULL; }
#endif
