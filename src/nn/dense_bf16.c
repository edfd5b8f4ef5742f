/* bf16 Linear GEMMs with fused epilogues for mixed-precision training
 * (dense_bf16.h): the driver glue, the portable epilogue row, conversions
 * and bias-gradient column sums. */
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "nn/dense_bf16.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum { PAR_MIN = 1 << 15 };

void attn_nn_bf16_epi_piece_generic(const attn_bf16_piece *p, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < n; c++) {
      float v = p->t[r * p->ldt + c];
      if (p->bias) v += p->bias[c];
      if (p->relu) v = v > 0.0f ? v : 0.0f;
      if (p->mask && !(p->mask[r * p->ldm + c] & 0x7fffu)) v = 0.0f;
      if (p->C) {
        float *o = p->C + r * p->ldc + c;
        *o = p->add ? *o + v : v;
      }
      if (p->H) p->H[r * p->ldh + c] = attn_f32_to_bf16(v);
      if (p->sum) p->sum[c] += v;
    }
}

static void epi(const attn_lowp_epi *base, const void *tv, int ldt, int64_t i0, int64_t j0,
                int64_t rows, int64_t cols, int first) {
  const nn_bf16_epi *e = base->ctx;
  const float *t = tv;
  void (*piece)(const attn_bf16_piece *, int64_t, int64_t) = attn_kernels_bf16_epi_piece();
  if (!piece) piece = attn_nn_bf16_epi_piece_generic;
  float *colsum = NULL;
  if (e->colpart) {
    colsum = e->colpart + (i0 / e->mr) * e->N + j0;
    memset(colsum, 0, sizeof(float) * (size_t)cols);
  }
  for (int64_t c0 = 0; c0 < cols;) { /* pieces inside one output segment */
    int64_t j = j0 + c0, seg = j / e->seg, jc = j % e->seg;
    int64_t n = cols - c0 < e->seg - jc ? cols - c0 : e->seg - jc;
    attn_bf16_piece w = {.t = t + c0,
                       .ldt = ldt,
                       .bias = first && e->bias ? e->bias + j : NULL,
                       .relu = e->relu,
                       .mask = e->mask ? e->mask + i0 * e->ldm + j : NULL,
                       .ldm = e->ldm,
                       .C = e->C[seg] ? e->C[seg] + i0 * e->ldc + jc : NULL,
                       .ldc = e->ldc,
                       .add = !first || e->beta != 0.0f,
                       .H = e->H ? e->H + i0 * e->ldh + j : NULL,
                       .ldh = e->ldh,
                       .sum = colsum ? colsum + c0 : NULL};
    piece(&w, rows, n);
    c0 += n;
  }
}

static attn_status select_kernel(const attn_lowp_kernel **kr) {
  return attn_lowp_select(ATTN_LOWP_AUTO, "bf16", kr);
}

int64_t attn_nn_bf16_tile_rows(void) {
  const attn_lowp_kernel *kr;
  return select_kernel(&kr) ? 1 : attn_lowp_kernel_mr(kr);
}

attn_status attn_nn_bf16_gemm(int transa, int transb, int64_t M, int64_t N, int64_t K,
                         const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                         nn_bf16_epi *e, int single) {
  if (M <= 0 || N <= 0 || K <= 0 || !A || !B || !e)
    return attn_set_error(ATTN_EINVAL, "bf16 linear: bad GEMM M=%lld N=%lld K=%lld",
                          (long long)M, (long long)N, (long long)K);
  const attn_lowp_kernel *kr;
  attn_status st = select_kernel(&kr);
  if (st) return st;
  if (e->seg <= 0) e->seg = N;
  e->N = N;
  e->mr = attn_lowp_kernel_mr(kr);
  attn_lowp_epi b = {epi, NULL, 0, 1.0f, e->beta, e, 0};
  e->base = b;
  attn_lowp_src sa = attn_lowp_src_a(A, LOWP_BF16, transa, lda);
  attn_lowp_src sb = attn_lowp_src_b(B, LOWP_BF16, transb, ldb);
  return attn_lowp_gemm_run(kr, &sa, &sb, M, N, K, &e->base, single);
}

void attn_nn_bf16_convert_rows_generic(const float *x, int64_t ldx, uint16_t *y, int64_t ldy,
                                  int64_t rows, int64_t cols, float *sum) {
  for (int64_t r = 0; r < rows; r++) {
    attn_f32_to_bf16_n(x + r * ldx, y + r * ldy, cols);
    if (sum)
      for (int64_t c = 0; c < cols; c++) sum[c] += x[r * ldx + c];
  }
}

enum { SUM_ROWS = 64 }; /* rows per partial column sum */

void attn_nn_bf16_convert(const float *x, int64_t ldx, uint16_t *y, int64_t ldy, int64_t rows,
                     int64_t cols, float *db) {
  void (*conv)(const float *, int64_t, uint16_t *, int64_t, int64_t, int64_t, float *) =
      attn_kernels_bf16_convert_rows();
  if (!conv) conv = attn_nn_bf16_convert_rows_generic;
  int64_t nb = (rows + SUM_ROWS - 1) / SUM_ROWS;
  float *part = db ? calloc((size_t)(nb * cols), sizeof(float)) : NULL;
  if (db && !part) { /* no memory for the partial sums: one block, in order */
    conv(x, ldx, y, ldy, rows, cols, db);
    return;
  }
  int nt = rows * cols >= PAR_MIN ? attn_get_num_threads() : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t b = 0; b < nb; b++) {
    int64_t r0 = b * SUM_ROWS, n = rows - r0 < SUM_ROWS ? rows - r0 : SUM_ROWS;
    conv(x + r0 * ldx, ldx, y + r0 * ldy, ldy, n, cols, part ? part + b * cols : NULL);
  }
  if (part) attn_nn_colpart_add(part, nb, cols, db);
  free(part);
}

uint16_t *attn_nn_bf16_copy(const float *W, int64_t n) {
  uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
  if (!h) {
    attn_set_error(ATTN_ENOMEM, "bf16 linear: cannot allocate %lld bf16 weights", (long long)n);
    return NULL;
  }
  attn_nn_bf16_convert(W, n, h, n, 1, n, NULL);
  return h;
}

void attn_nn_colpart_add(const float *colpart, int64_t blocks, int64_t cols, float *db) {
  for (int64_t b = 0; b < blocks; b++)
    for (int64_t c = 0; c < cols; c++) db[c] += colpart[b * cols + c];
}
