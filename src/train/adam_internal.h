/* Adam update kernel shared by the portable and AVX-512 paths (both give the
 * same bits: only IEEE-exact operations, fma, sqrt and division, are used). */
#ifndef ATTN_TRAIN_ADAM_INTERNAL_H
#define ATTN_TRAIN_ADAM_INTERNAL_H

#include <stdint.h>

/* Per-step scalars, pre-rounded to float as ATen rounds them. decay = 0
 * parameters get wd = 0 and decay_mul = 1. */
typedef struct {
  int adamw;
  float wd, decay_mul, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, bc2_sqrt,
      eps;
} adam_scalars;

/* p, g, m, v [n]: one Adam/AdamW update in place. Returns 0 if this build has
 * no AVX-512 path (the caller then uses the portable one). */
int attn_adam_chunk_f32_avx512(const adam_scalars *k, float *p, const float *g, float *m, float *v,
                               int64_t n);

#endif
