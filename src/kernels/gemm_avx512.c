/* AVX-512 GEMM micro-kernel: a 14x32 block of C held in 28 zmm
 * accumulators; per k step two 16-wide loads from packed B and 14
 * broadcasts from packed A feed 28 FMAs. Selected at run time by gemm.c. */
#include "kernels/gemm_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

enum { AVX_MR = 14, AVX_NR = 32 };

/* c[14, 32] = alpha * a~[kc, 14] · b~[kc, 32] + beta * c */
AVX512_TARGET static void ukr_avx512_14x32(int64_t kc, const float *a, const float *b, float *c,
                                           int64_t ldc, float alpha, float beta) {
  __m512 acc0[AVX_MR], acc1[AVX_MR];
#pragma GCC unroll 14
  for (int i = 0; i < AVX_MR; i++) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kc; p++) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    _mm_prefetch((const char *)(b + 8 * AVX_NR), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < AVX_MR; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
    a += AVX_MR;
    b += AVX_NR;
  }
  __m512 va = _mm512_set1_ps(alpha);
  if (beta == 0.0f) {
#pragma GCC unroll 14
    for (int i = 0; i < AVX_MR; i++) {
      _mm512_storeu_ps(c + i * ldc, _mm512_mul_ps(va, acc0[i]));
      _mm512_storeu_ps(c + i * ldc + 16, _mm512_mul_ps(va, acc1[i]));
    }
  } else {
    __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 14
    for (int i = 0; i < AVX_MR; i++) {
      float *ci = c + i * ldc;
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, acc0[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci))));
      _mm512_storeu_ps(ci + 16,
                       _mm512_fmadd_ps(va, acc1[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci + 16))));
    }
  }
}

static const attn_gemm_kernel_f32 avx512_kernel = {
    .name = "avx512 14x32",
    .mr = AVX_MR,
    .nr = AVX_NR,
    .mc = 14 * 64,
    .kc = 384,
    .nc = 480,
    .ukr = ukr_avx512_14x32,
};

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx512_f32(void) { return &avx512_kernel; }

#else

const attn_gemm_kernel_f32 *attn_gemm_kernel_avx512_f32(void) { return 0; }

#endif
