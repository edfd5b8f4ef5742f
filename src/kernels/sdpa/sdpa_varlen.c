/* Packed variable-length SDPA (attn/sdpa_varlen.h): validation of the
 * cu_seqlens, then one B = 1 piece per sequence on pointer offsets, run by
 * the split-call runner (sdpa_batched.c) through the chosen backend (f32
 * here; the bf16, fp16 and int8 kernels in sdpa_varlen_lowp.c). The f32
 * flash / auto backward runs each sequence on head-major scratch reused
 * across the sequences (sdpa_varlen_dense.c). */
#include <stdlib.h>
#include <string.h>

#include "attn/sdpa_varlen.h"
#include "core/checked.h"
#include "kernels/sdpa/sdpa_dropout.h"
#include "kernels/sdpa/sdpa_varlen_run.h"

attn_status attn_sdpa_varlen_strides(const char *name, const int64_t given[3], int64_t H,
                                     int64_t last, int64_t out[3]) {
  if (given[0] != 0)
    return attn_set_error(ATTN_EINVAL, "sdpa varlen: %s_stride[0] = %lld must be 0 (packed rows)",
                          name, (long long)given[0]);
  out[0] = 0;
  if (given[1] == 0 && given[2] == 0) {
    out[1] = last;
    if (attn_ck_mul(H, last, &out[2]))
      return attn_set_error(ATTN_EINVAL, "sdpa varlen: %s is too large", name);
  } else {
    out[1] = given[1];
    out[2] = given[2];
  }
  return ATTN_OK;
}

/* cu [B + 1]: 0, non-decreasing, ending at total, each length <= max. */
static attn_status check_cu(const char *name, const int32_t *cu, int64_t B, int64_t total,
                            int64_t max) {
  if (!cu) return attn_set_error(ATTN_EINVAL, "sdpa varlen: %s is NULL", name);
  if (cu[0] != 0)
    return attn_set_error(ATTN_EINVAL, "sdpa varlen: %s[0] = %d (must start at 0)", name,
                          (int)cu[0]);
  for (int64_t s = 0; s < B; s++) {
    if (cu[s + 1] < cu[s])
      return attn_set_error(ATTN_EINVAL, "sdpa varlen: %s decreases at %lld (%d then %d)", name,
                            (long long)(s + 1), (int)cu[s], (int)cu[s + 1]);
    if ((int64_t)cu[s + 1] - cu[s] > max)
      return attn_set_error(ATTN_EINVAL,
                            "sdpa varlen: sequence %lld has %lld rows in %s, more than the maximum "
                            "%lld (the descriptor's %s)",
                            (long long)s, (long long)cu[s + 1] - cu[s], name, (long long)max,
                            name[11] == 'q' ? "Lq" : "Lk");
  }
  if (cu[B] != total)
    return attn_set_error(ATTN_EINVAL, "sdpa varlen: %s[B = %lld] = %d but the tensor has %lld rows",
                          name, (long long)B, (int)cu[B], (long long)total);
  return ATTN_OK;
}

/* Validates d and vl and fills one piece per sequence (*pieces, malloc'ed). */
static attn_status make_pieces(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                               attn_sdpa_piece **pieces) {
  *pieces = NULL;
  if (!d || !vl) return attn_set_error(ATTN_EINVAL, "sdpa varlen: NULL descriptor");
  if (d->B < 1 || d->Hq < 1 || d->Hkv < 1 || d->D < 1 || d->Dv < 1 || d->Lq < 0 || d->Lk < 0 ||
      vl->total_q < 0 || vl->total_k < 0 || d->B > INT32_MAX)
    return attn_set_error(ATTN_EINVAL,
                          "sdpa varlen: bad sizes B=%lld Hq=%lld Hkv=%lld D=%lld Dv=%lld max "
                          "lengths %lld, %lld, totals %lld, %lld",
                          (long long)d->B, (long long)d->Hq, (long long)d->Hkv, (long long)d->D,
                          (long long)d->Dv, (long long)d->Lq, (long long)d->Lk,
                          (long long)vl->total_q, (long long)vl->total_k);
  if (d->key_lens || d->bool_mask || d->add_mask || d->q_offset)
    return attn_set_error(ATTN_EINVAL, "sdpa varlen: %s is not supported (lengths and alignment "
                                       "come from cu_seqlens; use q_offsets to override)",
                          d->key_lens    ? "key_lens"
                          : d->bool_mask ? "bool_mask"
                          : d->add_mask  ? "add_mask"
                                         : "q_offset");
  attn_status st;
  if ((st = check_cu("cu_seqlens_q", vl->cu_seqlens_q, d->B, vl->total_q, d->Lq)) ||
      (st = check_cu("cu_seqlens_k", vl->cu_seqlens_k, d->B, vl->total_k, d->Lk)))
    return st;
  int64_t sq[3], sk[3], sv[3], so[3], end;
  if ((st = attn_sdpa_varlen_strides("q", d->q_stride, d->Hq, d->D, sq)) ||
      (st = attn_sdpa_varlen_strides("k", d->k_stride, d->Hkv, d->D, sk)) ||
      (st = attn_sdpa_varlen_strides("v", d->v_stride, d->Hkv, d->Dv, sv)) ||
      (st = attn_sdpa_varlen_strides("o", d->o_stride, d->Hq, d->Dv, so)))
    return st;
  if (attn_ck_mul(vl->total_q, sq[2], &end) || attn_ck_mul(vl->total_q, so[2], &end) ||
      attn_ck_mul(vl->total_k, sk[2], &end) || attn_ck_mul(vl->total_k, sv[2], &end) ||
      attn_ck_mul(vl->total_q, d->Hq, &end))
    return attn_set_error(ATTN_EINVAL, "sdpa varlen: tensors too large");
  attn_sdpa_piece *p = malloc((size_t)d->B * sizeof *p);
  if (!p) return attn_set_error(ATTN_ENOMEM, "sdpa varlen: cannot allocate %lld pieces", (long long)d->B);
  for (int64_t s = 0; s < d->B; s++) {
    const int64_t q0 = vl->cu_seqlens_q[s], k0 = vl->cu_seqlens_k[s];
    attn_sdpa_desc *x = &p[s].d;
    *x = *d;
    x->B = 1;
    x->Lq = vl->cu_seqlens_q[s + 1] - q0;
    x->Lk = vl->cu_seqlens_k[s + 1] - k0;
    x->q_offset = d->q_offsets ? d->q_offsets[s] : x->Lk - x->Lq; /* bottom-right */
    x->q_offsets = NULL;
    if (d->prefix_lens) x->prefix_lens = d->prefix_lens + s; /* in the sequence's key positions */
    if (d->alibi_slopes) x->alibi_slopes = d->alibi_slopes + s * d->alibi_slopes_bstride;
    x->alibi_slopes_bstride = 0;
    memcpy(x->q_stride, sq, sizeof sq);
    memcpy(x->k_stride, sk, sizeof sk);
    memcpy(x->v_stride, sv, sizeof sv);
    memcpy(x->o_stride, so, sizeof so);
    p[s].q = q0 * sq[2];
    p[s].k = k0 * sk[2];
    p[s].v = k0 * sv[2];
    p[s].o = q0 * so[2];
    p[s].lse = q0 * d->Hq;
    p[s].probs = 0; /* no probs output here */
    p[s].alibi_row = s;
  }
  *pieces = p;
  return ATTN_OK;
}

static attn_status forward_piece(const attn_sdpa_desc *d, const attn_sdpa_io *x,
                                 const attn_sdpa_piece *p, void *user) {
  (void)p;
  return attn_sdpa_forward_f32(d, *(const attn_backend *)user, x->q, x->k, x->v, x->out, x->lse,
                               NULL);
}

static attn_status backward_piece(const attn_sdpa_desc *d, const attn_sdpa_io *x,
                                  const attn_sdpa_piece *p, void *user) {
  (void)p;
  return attn_sdpa_backward_f32(d, *(const attn_backend *)user, x->q, x->k, x->v, x->out_in,
                                x->lse_in, x->dout, x->dq, x->dk, x->dv);
}

/* The whole descriptor's own rules for the variants (slopes stride, ...),
 * checked once on a stand-in with the maximum lengths and no tensors. */
static attn_status check_variants(const attn_sdpa_desc *d) {
  attn_status st = attn_sdpa_dropout_refuse(d, "sdpa varlen");
  if (st) return st;
  attn_sdpa_desc x = *d;
  memset(x.q_stride, 0, sizeof x.q_stride);
  memset(x.k_stride, 0, sizeof x.k_stride);
  memset(x.v_stride, 0, sizeof x.v_stride);
  memset(x.o_stride, 0, sizeof x.o_stride);
  x.Lq = x.Lk = 0; /* no tensors are read */
  x.prefix_lens = NULL; /* each sequence's own Lk bounds its prefix: checked per piece */
  if (d->prefix_lens && !d->causal)
    return attn_set_error(ATTN_EINVAL, "sdpa varlen: prefix_lens (prefix-LM) needs causal");
  attn_sdpa_resolved rs;
  return attn_sdpa_validate(&x, NULL, NULL, NULL, &rs);
}

/* run_pieces calls its function with the piece's descriptor and tensors;
 * this passes the piece itself along (the pieces run in order). */
typedef struct {
  const attn_sdpa_piece *pieces;
  int64_t next;
  attn_varlen_piece_fn fn;
  void *user;
  attn_varlen_dense dense; /* f32 backward: head-major scratch, or all NULL */
} piece_walk;

static attn_status walk_piece(const attn_sdpa_desc *d, const attn_sdpa_io *x, void *user) {
  piece_walk *w = user;
  const attn_sdpa_piece *p = &w->pieces[w->next++];
  if (w->dense.q) return attn_varlen_dense_call(&w->dense, d, x, p, w->fn, w->user);
  return w->fn(d, x, p, w->user);
}

/* dense: run a backward with f32 q, out, dout, dq on head-major scratch
 * (sdpa_varlen_dense.c) */
static attn_status run_walk(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl, int backward,
                            const attn_sdpa_io *io, attn_varlen_piece_fn fn, void *user,
                            int dense) {
  attn_sdpa_piece *pieces;
  attn_status st = make_pieces(d, vl, &pieces);
  if (st) return st;
  if (!(st = check_variants(d))) {
    piece_walk w = {pieces, 0, fn, user, {0}};
    if (dense && backward && io->q && io->out_in && io->dout && io->dq) {
      int64_t maxlen = 0;
      for (int64_t s = 0; s < d->B; s++)
        if (pieces[s].d.Lq > maxlen) maxlen = pieces[s].d.Lq;
      attn_varlen_dense_init(&w.dense, d, maxlen);
    }
    st = attn_sdpa_run_pieces(d, pieces, d->B, backward, io, walk_piece, &w);
    attn_varlen_dense_free(&w.dense);
  }
  free(pieces);
  return st;
}

attn_status attn_sdpa_varlen_run(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                 int backward, const attn_sdpa_io *io, attn_varlen_piece_fn fn,
                                 void *user) {
  return run_walk(d, vl, backward, io, fn, user, 0);
}

static attn_status run(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl, int backward,
                       attn_backend be, const attn_sdpa_io *io) {
  if (be != ATTN_BACKEND_AUTO && be != ATTN_BACKEND_MATH && be != ATTN_BACKEND_FLASH)
    return attn_set_error(ATTN_EINVAL, "sdpa varlen: unknown backend %d", (int)be);
  /* flash (and auto) on head-major rows: the math backend keeps the caller's */
  return run_walk(d, vl, backward, io, backward ? backward_piece : forward_piece, &be,
                  be != ATTN_BACKEND_MATH);
}

attn_status attn_sdpa_varlen_forward(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                     attn_backend backend, const float *q, const float *k,
                                     const float *v, float *out, float *lse) {
  const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out = out, .lse = lse};
  return run(d, vl, 0, backend, &io);
}

attn_status attn_sdpa_varlen_backward(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                      attn_backend backend, const float *q, const float *k,
                                      const float *v, const float *out, const float *lse,
                                      const float *dout, float *dq, float *dk, float *dv) {
  const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out_in = out, .lse_in = lse, .dout = dout,
                           .dq = dq, .dk = dk, .dv = dv};
  return run(d, vl, 1, backend, &io);
}
