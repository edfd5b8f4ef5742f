/* attn_row_ops.gemv_nt on arm64 NEON: gemv_avx512.c's scheme with 4 outputs
 * a vector (lane l: output j0 + l), 4 B rows' next 4 values loaded as they
 * lie and transposed in the registers (8 permutes for 16 values), 16
 * outputs at a time (four chains of adds); the same bits as the small GEMM
 * path (vmulq then vaddq, two roundings under -std=c11's
 * -ffp-contract=off, in the order of p). Before it arm64 ran the portable
 * loop, one output's strided products at a time. */
#include "kernels/rows/elementwise_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <stdint.h>

#include "kernels/arch/neon/transpose4_neon.h"

/* the first np (1..4) values at p, the rest 0 */
static inline float32x4_t load4(const float *p, int np) {
  if (np == 4) return vld1q_f32(p);
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < np; i++)
    t[i] = p[i];
  return vld1q_f32(t);
}

/* outputs j0 .. j0 + n - 1 (n <= 16: B's rows from B, c from c), in groups of 4 */
static void gemv_block(int64_t K, float alpha, const float *a, int64_t inca, const float *B,
                       int64_t ldb, float beta, float *c, int n) {
  const int G = (n + 3) / 4;
  float32x4_t s[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  for (int64_t p0 = 0; p0 < K; p0 += 4) {
    const int np = K - p0 < 4 ? (int)(K - p0) : 4;
    for (int g = 0; g < G; g++) {
      float32x4_t x[4];
      for (int l = 0; l < 4; l++) { /* rows past n: 0 (not read) */
        const int row = 4 * g + l;
        x[l] = row < n ? load4(B + row * ldb + p0, np) : vdupq_n_f32(0.0f);
      }
      float32x4_t xt[4]; /* xt[q]: the group's values at p0 + q */
      attn_transpose4_neon(x[0], x[1], x[2], x[3], xt);
      for (int q = 0; q < np; q++)
        s[g] = vaddq_f32(s[g], vmulq_n_f32(xt[q], a[(p0 + q) * inca]));
    }
  }
  for (int g = 0; g < G; g++) {
    float32x4_t y = vmulq_n_f32(s[g], alpha);
    const int m = n - 4 * g < 4 ? n - 4 * g : 4;
    float *cg = c + 4 * g;
    if (beta != 0.0f) y = vaddq_f32(y, vmulq_n_f32(load4(cg, m), beta));
    if (m == 4) {
      vst1q_f32(cg, y);
    } else {
      float t[4];
      vst1q_f32(t, y);
      for (int i = 0; i < m; i++)
        cg[i] = t[i];
    }
  }
}

void attn_gemv_nt_neon(int64_t N, int64_t K, float alpha, const float *a, int64_t inca,
                       const float *B, int64_t ldb, float beta, float *c) {
  for (int64_t j = 0; j < N; j += 16)
    gemv_block(K, alpha, a, inca, B + j * ldb, ldb, beta, c + j, N - j < 16 ? (int)(N - j) : 16);
}
#endif
