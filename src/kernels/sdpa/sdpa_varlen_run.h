/* The packed variable-length runner shared by the f32 entry points
 * (sdpa_varlen.c) and the bf16 / fp16 / int8 ones (sdpa_varlen_lowp.c):
 * validation of the descriptor and cu_seqlens, one B = 1 piece per
 * sequence, run in sequence order by attn_sdpa_run_pieces (table gradients
 * summed over the pieces). Internal. */
#ifndef ATTN_SDPA_VARLEN_RUN_H
#define ATTN_SDPA_VARLEN_RUN_H

#include "attn/lowp.h"
#include "attn/sdpa_varlen.h"
#include "kernels/sdpa/sdpa_batched.h"

/* One sequence: its descriptor (B = 1), its tensors (io's f32 pointers
 * moved to the sequence; a NULL pointer of io stays NULL) and the piece
 * (element offsets, for tensors of other types that the caller holds). */
typedef attn_status (*attn_varlen_piece_fn)(const attn_sdpa_desc *d, const attn_sdpa_io *x,
                                            const attn_sdpa_piece *p, void *user);

/* Validates d and vl (ATTN_EINVAL with a message) and runs fn on each
 * sequence in order (backward: 1, for the table gradients). */
attn_status attn_sdpa_varlen_run(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                 int backward, const attn_sdpa_io *io, attn_varlen_piece_fn fn,
                                 void *user);

/* One tensor's (0, head, row) element strides in the packed layout [total,
 * H, last]: given (the descriptor's, [0] must be 0), or all zero for the
 * contiguous rows. ATTN_EINVAL naming the tensor otherwise. */
attn_status attn_sdpa_varlen_strides(const char *name, const int64_t given[3], int64_t H,
                                     int64_t last, int64_t out[3]);

/* The bf16 / fp16 (forward and backward) and int8 (forward: f32 q, k, v)
 * varlen kernels with their path (sdpa_varlen_lowp.c); dtype an attn_dtype. */
attn_status attn_sdpa_varlen_lowp_forward(int dtype, attn_lowp_path path, const attn_sdpa_desc *d,
                                          const attn_sdpa_varlen *vl, const void *q, const void *k,
                                          const void *v, float *out, float *lse);
attn_status attn_sdpa_varlen_lowp_backward(int dtype, attn_lowp_path path, const attn_sdpa_desc *d,
                                           const attn_sdpa_varlen *vl, const void *q, const void *k,
                                           const void *v, const float *out, const float *lse,
                                           const float *dout, float *dq, float *dk, float *dv);

/* The f32 backward's head-major scratch (sdpa_varlen_dense.c): q, out,
 * dout and dq of the longest sequence ([Hq, len, D] / [Hq, len, Dv]). */
typedef struct {
  float *q, *dq, *o, *g;
} attn_varlen_dense;

/* Allocates the scratch for maxlen query rows: 1, or 0 with s zeroed when
 * it cannot (the sequences then run in place; no error is set). */
int attn_varlen_dense_init(attn_varlen_dense *s, const attn_sdpa_desc *d, int64_t maxlen);
void attn_varlen_dense_free(attn_varlen_dense *s);

/* fn on one sequence (descriptor d, f32 tensors x) with its q, out and
 * dout gathered into s head-major and its dq computed there, then written
 * to x->dq: the same values as fn(d, x, p, user). */
attn_status attn_varlen_dense_call(const attn_varlen_dense *s, const attn_sdpa_desc *d,
                                   const attn_sdpa_io *x, const attn_sdpa_piece *p,
                                   attn_varlen_piece_fn fn, void *user);

#endif
