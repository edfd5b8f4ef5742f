/* Split SDPA calls (sdpa_batched.c): a call run as pieces, each one
 * (batch element, or packed sequence) an ordinary B = 1 call of a backend
 * on pointer offsets. Used for per-batch alignment (q_offsets) and per-batch
 * ALiBi slopes combined with the position schemes (whose tables are built
 * per call for one alignment), and for the packed variable-length API
 * (sdpa_varlen.c). Internal. */
#ifndef ATTN_SDPA_BATCHED_H
#define ATTN_SDPA_BATCHED_H

#include "kernels/sdpa/sdpa_internal.h"

/* The tensors of one call: forward reads q, k, v and writes out, lse (and
 * probs); backward reads q, k, v, out, lse, dout and writes dq, dk, dv. */
typedef struct {
  const float *q, *k, *v, *out_in, *lse_in, *dout;
  float *out, *lse, *probs, *dq, *dk, *dv;
} attn_sdpa_io;

/* One backend call on a piece (descriptor with B = 1). */
typedef attn_status (*attn_sdpa_run_fn)(const attn_sdpa_desc *d, const attn_sdpa_io *io,
                                        void *user);

/* One piece: its descriptor (B = 1, strides set) and the element offsets of
 * its tensors (q, k, v, out: the descriptor's layout; lse and probs
 * contiguous). alibi_row: which row of [B, Hq] slopes (gradient) it owns. */
typedef struct {
  attn_sdpa_desc d;
  int64_t q, k, v, o, lse, probs, alibi_row;
} attn_sdpa_piece;

/* Does a call with these fields need to run as per-batch pieces? (q_offsets
 * with a position scheme or block layout, whose tables are built for one
 * alignment, even at B = 1; per-batch slopes at B > 1. q_offsets alone are
 * handled in every backend's key range.) */
int attn_sdpa_batched_needed(const attn_sdpa_desc *d);

/* The piece of batch element b of d (resolved strides rs). */
void attn_sdpa_batch_piece(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, int64_t b,
                           attn_sdpa_piece *p);

/* Runs the n pieces in order through fn (backward: 1). Table gradients of d
 * (rel_bias, shaw_k, shaw_v, shared ALiBi slopes, sinks) are the sums over the
 * pieces; per-batch slopes' gradient rows are each piece's own. */
attn_status attn_sdpa_run_pieces(const attn_sdpa_desc *d, const attn_sdpa_piece *pieces, int64_t n,
                                 int backward, const attn_sdpa_io *io, attn_sdpa_run_fn fn,
                                 void *user);

/* d split per batch element (attn_sdpa_batched_needed): validated, run. */
attn_status attn_sdpa_run_batched(const attn_sdpa_desc *d, int backward, const attn_sdpa_io *io,
                                  attn_sdpa_run_fn fn, void *user);

#endif
