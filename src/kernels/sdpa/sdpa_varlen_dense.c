/* The f32 varlen backward on head-major rows (sdpa_varlen_run.h).
 *
 * A packed sequence's q, out, dout and dq rows are H·D floats apart, so the
 * flash backward, run on them in place, makes dense copies of q and dout and
 * accumulates dq in a dense partial buffer, each allocated per call: per
 * sequence, three fresh buffers of len·Hq·D floats whose pages are faulted in
 * and zeroed by the kernel every time (about 3 µs a 4 KB page on the Zen 3:
 * ~30 ms of CPU a call for `attn bench varlen`'s 5,964 tokens at H = 8,
 * D = 64, and at 2 threads the wall time was ~12% above half the CPU time,
 * the threads waiting on those faults and unmaps). Here the runner gathers each sequence's q, out and dout
 * once into head-major scratch [Hq, len, D] sized for the longest sequence and
 * reused by all of them, runs the sequence on it (dense rows: the kernel copies
 * nothing and writes dq in place) and scatters dq back. The values and the
 * order of every sum are those of the in-place run, so the results are bit for
 * bit the same, for any thread count. */
#include <stdlib.h>
#include <string.h>

#include "kernels/sdpa/sdpa_varlen_run.h"
#include "kernels/util.h"

int attn_varlen_dense_init(attn_varlen_dense *s, const attn_sdpa_desc *d, int64_t maxlen) {
  memset(s, 0, sizeof *s);
  int64_t nq, no;
  if (maxlen <= 0 || __builtin_mul_overflow(maxlen * d->Hq, d->D, &nq) ||
      __builtin_mul_overflow(maxlen * d->Hq, d->Dv, &no))
    return 0;
  float *buf = malloc((size_t)(2 * nq + 2 * no) * sizeof(float));
  if (!buf) return 0; /* the sequences run in place instead */
  s->q = buf;
  s->dq = buf + nq;
  s->o = buf + 2 * nq;
  s->g = buf + 2 * nq + no;
  return 1;
}

void attn_varlen_dense_free(attn_varlen_dense *s) {
  free(s->q);
  memset(s, 0, sizeof *s);
}

/* rows [H, L] of w floats: head-major dense <-> strided st (head, row) */
static void move_rows(float *dense, float *strided, const int64_t st[3], int64_t H, int64_t L,
                      int64_t w, int to_dense) {
  const int64_t n = H * L;
  const int nt = n * w >= ((int64_t)1 << 16) ? attn_kernel_threads((double)n * w * 16, n) : 1;
  (void)nt; /* built without OpenMP */
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < n; t++) {
    float *a = dense + t * w, *b = strided + (t / L) * st[1] + (t % L) * st[2];
    memcpy(to_dense ? a : b, to_dense ? b : a, (size_t)w * sizeof(float));
  }
}

attn_status attn_varlen_dense_call(const attn_varlen_dense *s, const attn_sdpa_desc *d,
                                   const attn_sdpa_io *x, const attn_sdpa_piece *p,
                                   attn_varlen_piece_fn fn, void *user) {
  const int64_t H = d->Hq, L = d->Lq, D = d->D, Dv = d->Dv;
  if (L == 0) return fn(d, x, p, user); /* no rows to move */
  attn_sdpa_desc e = *d;
  const int64_t sq[3] = {0, L * D, D}, so[3] = {0, L * Dv, Dv};
  memcpy(e.q_stride, sq, sizeof sq);
  memcpy(e.o_stride, so, sizeof so);
  move_rows(s->q, (float *)x->q, d->q_stride, H, L, D, 1);
  move_rows(s->o, (float *)x->out_in, d->o_stride, H, L, Dv, 1);
  move_rows(s->g, (float *)x->dout, d->o_stride, H, L, Dv, 1);
  attn_sdpa_io y = *x;
  y.q = s->q;
  y.out_in = s->o;
  y.dout = s->g;
  y.dq = s->dq;
  attn_status st = fn(&e, &y, p, user);
  if (!st) move_rows(s->dq, x->dq, d->q_stride, H, L, D, 0);
  return st;
}
