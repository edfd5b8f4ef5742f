/* The Linear GEMM in a chosen precision (include/attn/amp.h): f32 operands
 * rounded to bf16 / fp16, products accumulated in f32. */
#include <stdlib.h>
#include <string.h>

#include "attn/amp.h"
#include "attn/kernels.h"
#include "attn/lowp.h"
#include "kernels/iface.h"


attn_status attn_precision_from_name(const char *name, attn_precision *out) {
  if (!name || !out) return attn_set_error(ATTN_EINVAL, "precision: NULL argument");
  if (!strcmp(name, "f32") || !strcmp(name, "fp32")) *out = ATTN_PREC_F32;
  else if (!strcmp(name, "bf16")) *out = ATTN_PREC_BF16;
  else if (!strcmp(name, "fp16") || !strcmp(name, "f16")) *out = ATTN_PREC_F16;
  else return attn_set_error(ATTN_EINVAL, "precision '%s': expected f32, bf16 or fp16", name);
  return ATTN_OK;
}

const char *attn_precision_name(attn_precision p) {
  return p == ATTN_PREC_BF16 ? "bf16" : p == ATTN_PREC_F16 ? "fp16" : "f32";
}

/* op(X) is rows x cols stored with leading dimension ld: a contiguous fp16
 * copy [rows, cols]. Rows are split over the threads (elementwise: the same
 * bits for any thread count). */
static uint16_t *to_f16(const float *X, int64_t rows, int64_t cols, int64_t ld) {
  uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(rows * cols > 0 ? rows * cols : 1));
  if (!h) return NULL;
  int nt = rows * cols >= (1 << 16) ? attn_get_num_threads() : 1;
  void (*cvt)(const float *, uint16_t *, int64_t) = attn_kernels_f32_to_f16();
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) cvt(X + r * ld, h + r * cols, cols);
  return h;
}

attn_status attn_gemm_prec_f32in(attn_precision prec, int transa, int transb, int64_t M,
                                 int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (prec == ATTN_PREC_F32)
    return attn_gemm_f32(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (prec == ATTN_PREC_BF16)
    return attn_gemm_bf16_f32in(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (prec != ATTN_PREC_F16)
    return attn_set_error(ATTN_EINVAL, "gemm_prec: unknown precision %d", (int)prec);
  if (M < 0 || N < 0 || K < 0 || !A || !B || !C)
    return attn_set_error(ATTN_EINVAL, "gemm_prec: bad sizes or NULL operand");
  // A stored [M, K] (transa 0) or [K, M]; B stored [K, N] (transb 0) or [N, K]
  int64_t ar = transa ? K : M, ac = transa ? M : K;
  int64_t br = transb ? N : K, bc = transb ? K : N;
  if (lda < ac || ldb < bc)
    return attn_set_error(ATTN_EINVAL, "gemm_prec: lda=%lld or ldb=%lld too small",
                          (long long)lda, (long long)ldb);
  uint16_t *ah = to_f16(A, ar, ac, lda), *bh = to_f16(B, br, bc, ldb);
  attn_status st;
  if (!ah || !bh)
    st = attn_set_error(ATTN_ENOMEM, "gemm_prec: cannot allocate fp16 operands [%lld, %lld]",
                        (long long)M, (long long)K);
  else
    st = attn_gemm_f16(transa, transb, M, N, K, alpha, ah, ac, bh, bc, beta, C, ldc);
  free(ah);
  free(bh);
  return st;
}
