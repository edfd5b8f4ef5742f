/* Internal to the nn layer: the bf16 Linear GEMMs of mixed-precision
 * training (ctx.precision = ATTN_PREC_BF16) on activations kept in bf16.
 * Operands are bf16 (converted once, by their producer or attn_nn_bf16_convert);
 * products accumulate in f32 on the low-precision driver (AMX > AVX512_BF16
 * > portable, kernels/lowp/gemm_lowp_internal.h); the epilogue of each output
 * tile adds the bias, applies ReLU or the ReLU-backward mask, writes f32
 * and / or bf16, and keeps per-row-block column sums (the bias gradient)
 * — all in f32. Each tile is finished by one thread, so results do not
 * depend on the thread count. */
#ifndef ATTN_NN_DENSE_BF16_H
#define ATTN_NN_DENSE_BF16_H

#include <stdint.h>

#include "kernels/iface.h"
#include "kernels/iface_lowp.h"

typedef struct {
  attn_lowp_epi base; /* filled by attn_nn_bf16_gemm */
  /* f32 output (or NULL): column j of C goes to C[j / seg] + j % seg (seg =
   * N for one output; 3 outputs for a packed q/k/v projection), row i at
   * i * ldc. First k block: C = v + beta C (beta 0 or 1); later ones add. */
  float *C[3];
  int64_t ldc, seg;
  float beta;
  const float *bias; /* [N], added once (or NULL) */
  int relu;          /* v = max(v, 0) */
  const uint16_t *mask; /* v = 0 where the bf16 mask[i * ldm + j] is 0 (ReLU backward) */
  int64_t ldm;
  uint16_t *H; /* bf16 output (or NULL), row stride ldh */
  int64_t ldh;
  /* column sums of v per block of mr rows: colpart[(i / mr) * N + j] (or NULL) */
  float *colpart;
  int64_t N, mr;
} nn_bf16_epi;

/* C[M, N] (epilogue e) = op(A) · op(B), bf16 operands with the transpose /
 * leading-dimension conventions of attn_gemm_f32. ReLU, mask, bf16 output
 * and column sums need the whole depth in one k block: pass single = 1. */
attn_status attn_nn_bf16_gemm(int transa, int transb, int64_t M, int64_t N, int64_t K,
                         const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                         nn_bf16_epi *e, int single);
/* Rows of the micro-tile of the kernel attn_nn_bf16_gemm runs (for colpart). */
int64_t attn_nn_bf16_tile_rows(void);

/* y[r * ldy + c] = bf16(x[r * ldx + c]), rows split over threads; with db
 * (or NULL) also db[c] += Σ_r x[r * ldx + c] in f32: sums per block of 64
 * rows, then the blocks in order (the same bits for any thread count). */
void attn_nn_bf16_convert(const float *x, int64_t ldx, uint16_t *y, int64_t ldy, int64_t rows,
                     int64_t cols, float *db);
/* The rows of one block: converted, and added into sum[cols] (or NULL) in order. */
void attn_nn_bf16_convert_rows_generic(const float *x, int64_t ldx, uint16_t *y, int64_t ldy,
                                  int64_t rows, int64_t cols, float *sum);
/* A malloc'ed bf16 copy of W [n] (NULL and ATTN_ENOMEM set on failure). */
uint16_t *attn_nn_bf16_copy(const float *W, int64_t n);
/* db[j] += Σ_b colpart[b * cols + j], b in order. */
void attn_nn_colpart_add(const float *colpart, int64_t blocks, int64_t cols, float *db);

void attn_nn_bf16_epi_piece_generic(const attn_bf16_piece *p, int64_t rows, int64_t n);

#endif
