/* AVX-512 GELU, forward and backward, 16 floats at a time with glibc's
 * libmvec vector erfcf/expf (glibc >= 2.35; see elementwise_internal.h). */
#include "kernels/rows/elementwise_internal.h"

#if ATTN_HAVE_LIBMVEC
#include <immintrin.h>

#include "kernels/arch/isa_targets.h"

/* libmvec's AVX-512 variants of erfcf and expf (x86-64 vector function ABI) */
ATTN_AVX512 __m512 _ZGVeN16v_erfcf(__m512 x);
ATTN_AVX512 __m512 _ZGVeN16v_expf(__m512 x);

#define SQRT1_2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

// y [16] = 0.5 x erfc(-x / sqrt 2), the portable loop's steps
ATTN_AVX512 static inline __m512 gelu16(__m512 v) {
  __m512 c = _ZGVeN16v_erfcf(_mm512_mul_ps(v, _mm512_set1_ps(-SQRT1_2)));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), c);
}

// dx [16] = dy (Phi(x) + x phi(x))
ATTN_AVX512 static inline __m512 gelu_grad16(__m512 v, __m512 g) {
  __m512 cdf = _mm512_mul_ps(_mm512_set1_ps(0.5f),
                             _ZGVeN16v_erfcf(_mm512_mul_ps(v, _mm512_set1_ps(-SQRT1_2))));
  __m512 e = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), v), v);
  __m512 pdf = _mm512_mul_ps(_mm512_set1_ps(INV_SQRT_2PI), _ZGVeN16v_expf(e));
  return _mm512_mul_ps(g, _mm512_add_ps(cdf, _mm512_mul_ps(v, pdf)));
}

ATTN_AVX512 void attn_gelu_f32_avx512(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, gelu16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

ATTN_AVX512 void attn_gelu_backward_f32_avx512(const float *x, const float *dy, float *dx,
                                                int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dx + i, gelu_grad16(_mm512_loadu_ps(x + i), _mm512_loadu_ps(dy + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    __m512 r = gelu_grad16(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, dy + i));
    _mm512_mask_storeu_ps(dx + i, m, r);
  }
}

#endif
