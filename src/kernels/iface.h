/* The kernels' interface to the layers above them (nn/, train/): the few
 * kernels of the active ISA level they call directly, each got by a plain
 * function (iface.c) rather than through the table of kern.h, which stays
 * private to kernels/, and the types of their arguments. A getter returns
 * the active level's kernel, the same pointer the table holds (fetch it
 * once per call of a loop, as from the table); NULL where the comment says
 * so. */
#ifndef ATTN_KERNELS_IFACE_H
#define ATTN_KERNELS_IFACE_H

#include <stdint.h>

/* Per-step Adam/AdamW scalars, pre-rounded to float as ATen rounds them.
 * decay = 0 parameters get wd = 0 and decay_mul = 1. */
typedef struct {
  int adamw;
  float wd, decay_mul, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, bc2_sqrt,
      eps;
} attn_adam_scalars;

/* A piece of a bf16 Linear's output tile for its fused epilogue: rows x n
 * values, row r of each array at its stride: v = t (+ bias), ReLU, mask,
 * then C (+)= v, H = bf16(v), sum[c] += v over the rows (NULL pointers skip). */
typedef struct {
  const float *t, *bias;
  int64_t ldt;
  int relu;
  const uint16_t *mask;
  int64_t ldm;
  float *C;
  int64_t ldc;
  int add; /* C += v (else C = v) */
  uint16_t *H;
  int64_t ldh;
  float *sum;
} attn_bf16_piece;

/* One Adam/AdamW update of n values in place (p, g, m, v), bit-identical on
 * every level (the row op adam, kern.h). Never NULL. */
typedef void (*attn_adam_fn)(const attn_adam_scalars *k, float *p, const float *g, float *m,
                             float *v, int64_t n);
attn_adam_fn attn_kernels_adam(void);

/* y[i] = fp16(x[i]), i < n, round to nearest even (the row op f32_to_f16).
 * Never NULL. */
typedef void (*attn_f32_to_f16_fn)(const float *x, uint16_t *y, int64_t n);
attn_f32_to_f16_fn attn_kernels_f32_to_f16(void);

/* One row of an int8 GEMM's output dequantized: y[j] = (sx * sw[j]) *
 * (float)(acc[j] - zx * cs[j]) (+ b[j]) (the row op dequant_row). Never
 * NULL. */
typedef void (*attn_dequant_row_fn)(const int32_t *acc, int64_t n, float sx, int32_t zx,
                                    const float *sw, const int32_t *cs, const float *b, float *y);
attn_dequant_row_fn attn_kernels_dequant_row(void);

/* The bf16 Linear's fused epilogue piece and its row conversion with column
 * sums (attn_lowp_ops.bf16_epi_piece / bf16_convert_rows, kern.h); NULL
 * where the level has none (the caller runs its portable code). */
typedef void (*attn_bf16_epi_piece_fn)(const attn_bf16_piece *p, int64_t rows, int64_t n);
attn_bf16_epi_piece_fn attn_kernels_bf16_epi_piece(void);
typedef void (*attn_bf16_convert_rows_fn)(const float *x, int64_t ldx, uint16_t *y, int64_t ldy,
                                          int64_t rows, int64_t cols, float *sum);
attn_bf16_convert_rows_fn attn_kernels_bf16_convert_rows(void);

#endif
