/* Per-batch alignment and ALiBi slopes: split calls
 * (sdpa_batched.h) that run a descriptor as B = 1 pieces on pointer
 * offsets. Each piece is an ordinary backend call (threads over its heads
 * and tiles); pieces run in order, so results never depend on the thread
 * count. Table gradients are summed over the pieces in piece order. */
#include <stdlib.h>
#include <string.h>

#include "kernels/sdpa/sdpa_batched.h"
#include "kernels/sdpa/sdpa_positions.h"

int attn_sdpa_batched_needed(const attn_sdpa_desc *d) {
  return (d->q_offsets && attn_sdpa_has_positions(d)) ||
         (d->B > 1 && d->alibi_slopes && d->alibi_slopes_bstride);
}

void attn_sdpa_batch_piece(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, int64_t b,
                           attn_sdpa_piece *p) {
  memset(p, 0, sizeof *p);
  attn_sdpa_desc *s = &p->d;
  *s = *d;
  s->B = 1;
  s->dropout_batch0 = d->dropout_batch0 + b; /* the piece draws batch b's mask */
  if (d->q_offsets) s->q_offset = d->q_offsets[b];
  s->q_offsets = NULL;
  if (d->key_lens) s->key_lens = d->key_lens + b;
  if (d->prefix_lens) s->prefix_lens = d->prefix_lens + b;
  if (d->bool_mask) s->bool_mask = d->bool_mask + b * d->bool_mask_stride[0];
  if (d->add_mask) s->add_mask = d->add_mask + b * d->add_mask_stride[0];
  if (d->alibi_slopes) s->alibi_slopes = d->alibi_slopes + b * d->alibi_slopes_bstride;
  s->alibi_slopes_bstride = 0;
  memcpy(s->q_stride, rs->q, sizeof rs->q);
  memcpy(s->k_stride, rs->k, sizeof rs->k);
  memcpy(s->v_stride, rs->v, sizeof rs->v);
  memcpy(s->o_stride, rs->o, sizeof rs->o);
  p->q = b * rs->q[0];
  p->k = b * rs->k[0];
  p->v = b * rs->v[0];
  p->o = b * rs->o[0];
  p->lse = b * d->Hq * d->Lq;
  p->probs = p->lse * d->Lk;
  p->alibi_row = b;
}

/* The table gradients a call writes: where, and how many floats. */
enum { NTAB = 5 };
static void table_grads(const attn_sdpa_desc *d, float *dst[NTAB], int64_t n[NTAB]) {
  const int64_t nr = attn_pos_shaw_rows(d);
  dst[0] = d->rel_bias ? d->rel_bias_grad : NULL;
  n[0] = d->Hq * d->rel_buckets;
  dst[1] = d->shaw_k ? d->shaw_k_grad : NULL;
  n[1] = nr * d->D;
  dst[2] = d->shaw_v ? d->shaw_v_grad : NULL;
  n[2] = nr * d->Dv;
  dst[3] = d->alibi_slopes && !d->alibi_slopes_bstride ? d->alibi_slopes_grad : NULL;
  n[3] = d->Hq;
  dst[4] = d->sinks ? d->sinks_grad : NULL;
  n[4] = d->Hq;
}

static void piece_io(const attn_sdpa_io *io, const attn_sdpa_piece *p, attn_sdpa_io *x) {
#define AT(ptr, off) ((ptr) ? (ptr) + (off) : NULL)
  x->q = AT(io->q, p->q);
  x->k = AT(io->k, p->k);
  x->v = AT(io->v, p->v);
  x->out_in = AT(io->out_in, p->o);
  x->dout = AT(io->dout, p->o);
  x->lse_in = AT(io->lse_in, p->lse);
  x->out = AT(io->out, p->o);
  x->lse = AT(io->lse, p->lse);
  x->probs = AT(io->probs, p->probs);
  x->dq = AT(io->dq, p->q);
  x->dk = AT(io->dk, p->k);
  x->dv = AT(io->dv, p->v);
#undef AT
}

attn_status attn_sdpa_run_pieces(const attn_sdpa_desc *d, const attn_sdpa_piece *pieces, int64_t n,
                                 int backward, const attn_sdpa_io *io, attn_sdpa_run_fn fn,
                                 void *user) {
  float *dst[NTAB];
  int64_t cnt[NTAB], total = 0;
  table_grads(d, dst, cnt);
  for (int t = 0; t < NTAB; t++)
    if (backward && dst[t]) {
      memset(dst[t], 0, (size_t)cnt[t] * sizeof(float));
      total += cnt[t];
    }
  float *tmp = NULL;
  if (total && !(tmp = malloc((size_t)total * sizeof(float))))
    return attn_set_error(ATTN_ENOMEM, "sdpa: cannot allocate table gradients of a split call");
  attn_status st = ATTN_OK;
  for (int64_t e = 0; e < n && !st; e++) {
    attn_sdpa_piece p = pieces[e];
    attn_sdpa_io x;
    piece_io(io, &p, &x);
    float *part[NTAB] = {NULL};
    if (backward) { /* the piece's table gradients into tmp, summed below */
      float *at = tmp;
      for (int t = 0; t < NTAB; t++)
        if (dst[t]) part[t] = at, at += cnt[t];
      p.d.rel_bias_grad = part[0];
      p.d.shaw_k_grad = part[1];
      p.d.shaw_v_grad = part[2];
      p.d.sinks_grad = part[4];
      p.d.alibi_slopes_grad =
          part[3] ? part[3]
          : d->alibi_slopes_grad && d->alibi_slopes_bstride
              ? d->alibi_slopes_grad + p.alibi_row * d->alibi_slopes_bstride
              : NULL;
    }
    st = fn(&p.d, &x, user);
    for (int t = 0; t < NTAB && !st; t++)
      for (int64_t i = 0; part[t] && i < cnt[t]; i++)
        dst[t][i] += part[t][i];
  }
  free(tmp);
  return st;
}

attn_status attn_sdpa_run_batched(const attn_sdpa_desc *d, int backward, const attn_sdpa_io *io,
                                  attn_sdpa_run_fn fn, void *user) {
  attn_sdpa_resolved rs;
  attn_status st = attn_sdpa_validate(d, io->q, io->k, io->v, &rs);
  if (st) return st;
  attn_sdpa_piece *pieces = malloc((size_t)d->B * sizeof *pieces);
  if (!pieces) return attn_set_error(ATTN_ENOMEM, "sdpa: cannot allocate %lld pieces", (long long)d->B);
  for (int64_t b = 0; b < d->B; b++)
    attn_sdpa_batch_piece(d, &rs, b, &pieces[b]);
  st = attn_sdpa_run_pieces(d, pieces, d->B, backward, io, fn, user);
  free(pieces);
  return st;
}
