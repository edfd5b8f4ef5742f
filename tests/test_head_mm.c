/* attn_nn_head_mm (src/nn/head_mm.c), the attention's per-head products in
 * training: the very bits of attn_gemm_f32 for every transposition, alpha,
 * beta, leading dimensions wider than the matrices, row counts that are
 * not a multiple of its row block, shapes on its own path (attn_gemm_f32's
 * small one) and beyond it (handed to attn_gemm_f32), and bad sizes refused
 * as attn_gemm_f32 refuses them. */
#include <stdint.h>

#include "harness.h"
#include "nn/nn_internal.h"

static void one(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
  const int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
  float *a = malloc(na * sizeof(float)), *b = malloc(nb * sizeof(float));
  float *want = malloc(nc * sizeof(float)), *got = malloc(nc * sizeof(float));
  fill_uniform(a, na, 11 + (unsigned)M, -1, 1);
  fill_uniform(b, nb, 12 + (unsigned)N, -1, 1);
  fill_uniform(want, nc, 13, -1, 1);
  memcpy(got, want, nc * sizeof(float));
  CHECK_OK(attn_gemm_f32(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, want, ldc));
  CHECK_OK(attn_nn_head_mm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, got, ldc));
  int same = !memcmp(want, got, nc * sizeof(float));
  if (!same)
    printf("# differs: ta %d tb %d M %lld N %lld K %lld alpha %g beta %g\n", ta, tb, (long long)M,
           (long long)N, (long long)K, (double)alpha, (double)beta);
  CHECK(same);
  free(a), free(b), free(want), free(got);
}

static void test_same_bits_as_gemm(void) {
  /* head shapes (Lq, Lk ~ 1..40, head_dim 8..64) and beyond the small path */
  const int64_t shapes[][3] = {{1, 7, 32},  {7, 7, 32},   {9, 32, 11},  {13, 5, 64}, {4, 33, 9},
                               {40, 40, 16}, {40, 32, 40}, {3, 256, 2}, {5, 300, 3}, {2, 1, 1},
                               {64, 64, 64}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        one(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f);
        one(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 0.17677669f, 1.0f);
        one(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], -0.5f, 0.25f);
      }
}

static void test_bad_sizes_refused(void) {
  float a[16] = {0}, b[16] = {0}, c[16] = {0};
  CHECK_ERR(attn_nn_head_mm(0, 0, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2), ATTN_EINVAL); /* lda */
  CHECK_ERR(attn_nn_head_mm(0, 1, 2, 2, 2, 1.0f, a, 2, b, 1, 0.0f, c, 2), ATTN_EINVAL); /* ldb */
  CHECK_ERR(attn_nn_head_mm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 1), ATTN_EINVAL); /* ldc */
  CHECK_ERR(attn_nn_head_mm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, NULL, 2), ATTN_EINVAL);
  CHECK_ERR(attn_nn_head_mm(0, 0, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2), ATTN_EINVAL);
}

int main(void) {
  RUN(test_same_bits_as_gemm);
  RUN(test_bad_sizes_refused);
  HARNESS_END();
}
