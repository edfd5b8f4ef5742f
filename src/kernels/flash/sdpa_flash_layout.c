/* Operand blocks of the flash tile loops in a dense layout (sdpa_flash.h).
 *
 * A tile loop reads a block of k, v, q or dout rows many times (once per
 * row group or per 16-column slice). Read in place from a strided tensor,
 * the rows are a whole number of 4 KB pages apart or nearly (d_model 512:
 * 2 KB; q, k, v as views of one [B, L, 3, H, D] projection: 6 KB), so
 * every row of the block falls into the same few sets of the 8-way L1 and
 * the block thrashes it: measured at N=1024, D=64 on a Zen 3, the backward
 * ran 35% slower on [B, L, H, D] views than on contiguous heads. A copy
 * into per-thread rows that are exactly `cols` apart costs O(rows cols)
 * once per block against the tiles' O(rows cols BC); the values are the
 * same, so the results are bit for bit those of the in-place reads. */
#include <stdlib.h>
#include <string.h>

#include "kernels/flash/sdpa_flash.h"

const float *attn_flash_dense_rows(const float *x, int64_t ld, int64_t n, int64_t cols,
                                   float *buf, int64_t *ldo) {
  if (ld == cols) {
    *ldo = ld;
    return x;
  }
  for (int64_t r = 0; r < n; r++)
    memcpy(buf + r * cols, x + r * ld, (size_t)cols * sizeof(float));
  *ldo = cols;
  return buf;
}

int attn_flash_dense_io_init(attn_flash_dense_io *x, const attn_sdpa_desc *d,
                             const attn_sdpa_resolved *rs, const attn_flash_in *in,
                             const float *dout) {
  const int64_t n = d->B * d->Hq * d->Lq;
  x->rs = x->rs0 = *rs;
  x->in = *in;
  x->dout = x->dout0 = dout;
  x->q0 = in->q;
  x->qd = x->dd = NULL;
  if (in->q && !in->q16 && rs->q[2] != d->D && n > 0) {
    if (!(x->qd = attn_flash_alloc(n * d->D, 1, "dense q"))) return 0;
    x->in.q = x->qd;
    x->rs.q[0] = d->Hq * d->Lq * d->D;
    x->rs.q[1] = d->Lq * d->D;
    x->rs.q[2] = d->D;
  }
  if (dout && rs->o[2] != d->Dv && n > 0) {
    if (!(x->dd = attn_flash_alloc(n * d->Dv, 1, "dense dout"))) return 0;
    x->dout = x->dd;
    x->rs.o[0] = d->Hq * d->Lq * d->Dv;
    x->rs.o[1] = d->Lq * d->Dv;
    x->rs.o[2] = d->Dv;
  }
  return 1;
}

void attn_flash_dense_io_row(const attn_flash_dense_io *x, int64_t t, int64_t b, int64_t h,
                             int64_t i) {
  const attn_sdpa_resolved *r = &x->rs0;
  const int64_t D = x->rs.q[2], Dv = x->rs.o[2]; /* the copies' row strides */
  if (x->qd)
    memcpy(x->qd + t * D, x->q0 + b * r->q[0] + h * r->q[1] + i * r->q[2], (size_t)D * sizeof(float));
  if (x->dd)
    memcpy(x->dd + t * Dv, x->dout0 + b * r->o[0] + h * r->o[1] + i * r->o[2],
           (size_t)Dv * sizeof(float));
}

void attn_flash_dense_io_free(attn_flash_dense_io *x) {
  free(x->qd);
  free(x->dd);
  x->qd = x->dd = NULL;
}
