/* AVX512_BF16 micro-kernel: a 14x32 f32 block of C in 28 zmm accumulators;
 * per pair of depth steps two loads of packed b~ (32 columns x 2 bf16 each
 * 16 columns) and 14 broadcasts of an a~ pair feed 28 VDPBF16PS
 * (acc += a0*b0 + a1*b1 per lane). Packed layouts: a~ and b~ in depth pairs
 * (g = 2, gemm_lowp_internal.h). */
#include "kernels/lowp/gemm_lowp_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define BF16_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))

enum { MR = 14, NR = 32 };

/* tile[14, 32] = a~[kcp/2][14][2] · b~[kcp/2][32][2] */
BF16_TARGET static void ukr_bf16_14x32(int64_t kcp, const void *av, const void *bv, void *tv) {
  const uint16_t *a = av, *b = bv;
  float *t = tv;
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kcp; p += 2) {
    __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 32);
    _mm_prefetch((const char *)(b + 8 * 2 * NR), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
      int32_t pair;
      memcpy(&pair, a + 2 * i, 4);
      __m512bh ai = (__m512bh)_mm512_set1_epi32(pair);
      acc0[i] = _mm512_dpbf16_ps(acc0[i], ai, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], ai, b1);
    }
    a += 2 * MR;
    b += 2 * NR;
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; i++) {
    _mm512_store_ps(t + i * NR, acc0[i]);
    _mm512_store_ps(t + i * NR + 16, acc1[i]);
  }
}

static const attn_lowp_kernel kernel = {
    .name = "avx512_bf16 14x32", .path = "avx512_bf16",
    .mr = MR, .nr = NR, .ga = 2, .gb = 2, .kgroup = 2,
    .mc = 14 * 72, .kc = 512, .nc = 960,
    .pa = LOWP_BF16, .pb = LOWP_BF16, .int_acc = 0,
    .ukr = ukr_bf16_14x32,
};

const attn_lowp_kernel *attn_lowp_kernel_bf16_avx512(void) { return &kernel; }
#else
const attn_lowp_kernel *attn_lowp_kernel_bf16_avx512(void) { return NULL; }
#endif
