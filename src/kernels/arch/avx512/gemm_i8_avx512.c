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

static const attn_lowp_kernel kernel = {
    .name = "avx512_vnni 14x32", .path = "avx512_vnni",
    .mr = MR, .nr = NR, .ga = 4, .gb = 4, .kgroup = 4,
    .mc = 14 * 72, .kc = 1024, .nc = 960,
    .pa = LOWP_U8, .pb = LOWP_S8, .int_acc = 1,
    .ukr = ukr_vnni_14x32,
};

const attn_lowp_kernel *attn_lowp_kernel_i8_vnni(void) { return &kernel; }
#else
const attn_lowp_kernel *attn_lowp_kernel_i8_vnni(void) { return NULL; }
#endif
