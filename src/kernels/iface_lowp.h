/* The low-precision GEMM driver as the layers above the kernels use it (nn's
 * quantized and bf16 Linears run it with their own fused epilogues): operand
 * descriptions, the epilogue hook, the kernel choice, the run and B's
 * prepacking. The kernel itself stays opaque here (its panels and
 * micro-kernels: kernels/lowp/gemm_lowp_internal.h, private to kernels/). */
#ifndef ATTN_KERNELS_IFACE_LOWP_H
#define ATTN_KERNELS_IFACE_LOWP_H

#include <stdint.h>

#include "attn/lowp.h"
#include "attn/status.h"

typedef enum { LOWP_F32, LOWP_F32R, LOWP_BF16, LOWP_F16, LOWP_U8, LOWP_S8 } attn_lowp_type;

/* An operand as panels see it: element (r, p) — r a row of op(A) or a column
 * of op(B), p the depth — is at x + r*sr + p*sp (in elements of `type`). */
typedef struct {
  const void *x;
  attn_lowp_type type;
  int64_t sr, sp;
  /* or, for B only: all of op(B) already packed (attn_lowp_prepack_b) in
   * panels of pnr columns, depth groups pg, depth padded to kp */
  const void *packed;
  int pnr, pg;
  int64_t kp;
} attn_lowp_src;

/* A GEMM kernel of the active level (opaque above kernels/). */
typedef struct attn_lowp_kernel attn_lowp_kernel;
/* Rows of C one of its tiles covers (the epilogue's row blocks). */
int attn_lowp_kernel_mr(const attn_lowp_kernel *kr);

/* What to do with a finished tile t (row stride ldt, 32-bit elements) for
 * rows [i0, i0+rows) x columns [j0, j0+cols) of C; first: the first k block
 * (C is overwritten / scaled by beta), later blocks accumulate. */
typedef struct attn_lowp_epi attn_lowp_epi;
struct attn_lowp_epi {
  void (*fn)(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
             int64_t rows, int64_t cols, int first);
  void *C;
  int64_t ldc;
  float alpha, beta;
  const void *ctx;
  int f32_direct; /* fn is C = alpha * t + beta * C on f32 C: ukr_c may do it */
};
void attn_lowp_epi_f32(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
                       int64_t rows, int64_t cols, int first);
void attn_lowp_epi_s32(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
                       int64_t rows, int64_t cols, int first);

/* The kernel `path` selects for dtype ("bf16", "f16", "i8"), resolving AUTO;
 * ATTN_EUNSUPPORTED when the path is not available here. */
attn_status attn_lowp_select(attn_lowp_path path, const char *dtype,
                             const attn_lowp_kernel **out);

/* Operand descriptions of op(A) (rows = rows of C) and op(B) (rows = columns of C). */
attn_lowp_src attn_lowp_src_a(const void *A, attn_lowp_type t, int transa, int64_t lda);
attn_lowp_src attn_lowp_src_b(const void *B, attn_lowp_type t, int transb, int64_t ldb);

/* Runs the packed driver. single_block: the whole depth in one k block (the
 * epilogue then sees each tile once; used by the quantized Linear). M, N,
 * K > 0, arguments validated. */
attn_status attn_lowp_gemm_run(const attn_lowp_kernel *kr, const attn_lowp_src *A,
                               const attn_lowp_src *B, int64_t M, int64_t N, int64_t K,
                               const attn_lowp_epi *epi, int single_block);

/* Packs all of op(B) (N columns, depth K) into dst as panels of nr columns,
 * depth groups of g, depth padded with zeros to kp: dst holds
 * ceil(N / nr) * nr * kp elements of type out. A GEMM run with single_block
 * and a kernel of the same nr / gb (and kgroup dividing kp) then reads its
 * b~ panels from there. ATTN_ENOMEM if the scratch row cannot be allocated. */
attn_status attn_lowp_prepack_b(const attn_lowp_src *B, int64_t N, int64_t K, int nr, int g,
                                int64_t kp, attn_lowp_type out, void *dst);

#endif
