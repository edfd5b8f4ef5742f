/* bf16 / fp16 attention on the f32 math path (attn_sdpa_args path math):
 * q, k, v widened exactly to f32 copies laid out at the same element
 * offsets as the caller's (so the gradients, written through the strides of
 * q, k, v, land where the caller's strides say), then the f32 math call,
 * dense or varlen. */
#include <stdlib.h>

#include "attn/sdpa_deprecated.h"
#include "attn/tensor.h"
#include "core/checked.h"
#include "kernels/sdpa/sdpa_entry.h"
#include "kernels/sdpa/sdpa_internal.h"
#include "kernels/sdpa/sdpa_varlen_run.h"

/* One tensor: n0 x n1 x n2 rows of `last` elements at strides s[3]. */
typedef struct {
  int64_t n[3], s[3], last;
} view;

/* Elements from the first to one past the last (0 when empty). */
static int64_t extent(const view *w) {
  if (!w->n[0] || !w->n[1] || !w->n[2] || !w->last) return 0;
  return (w->n[0] - 1) * w->s[0] + (w->n[1] - 1) * w->s[1] + (w->n[2] - 1) * w->s[2] + w->last;
}

static float *widen(const view *w, const uint16_t *x, int bf16, const char *name) {
  const int64_t n = extent(w);
  float *y = calloc((size_t)(n > 0 ? n : 1), sizeof *y);
  if (!y) {
    attn_set_error(ATTN_ENOMEM, "sdpa math (%s widened to f32): cannot allocate %s",
                   bf16 ? "bf16" : "fp16", name);
    return NULL;
  }
  for (int64_t a = 0; a < w->n[0]; a++)
    for (int64_t b = 0; b < w->n[1]; b++)
      for (int64_t c = 0; c < w->n[2]; c++) {
        const int64_t o = a * w->s[0] + b * w->s[1] + c * w->s[2];
        for (int64_t e = 0; e < w->last; e++)
          y[o + e] = bf16 ? attn_bf16_to_f32(x[o + e]) : attn_f16_to_f32(x[o + e]);
      }
  return y;
}

/* Views of q, k, v for the call (ATTN_EINVAL on a bad descriptor). */
static attn_status views(const attn_sdpa_desc *d, const attn_sdpa_args *a, view w[3]) {
  if (a->varlen) {
    const attn_sdpa_varlen *vl = a->varlen;
    if (vl->total_q < 0 || vl->total_k < 0 || d->Hq < 1 || d->Hkv < 1 || d->D < 1 || d->Dv < 1)
      return attn_set_error(ATTN_EINVAL,
                            "sdpa varlen: bad sizes Hq=%lld Hkv=%lld D=%lld Dv=%lld "
                            "totals %lld, %lld",
                            (long long)d->Hq, (long long)d->Hkv, (long long)d->D, (long long)d->Dv,
                            (long long)vl->total_q, (long long)vl->total_k);
    w[0] = (view){{1, d->Hq, vl->total_q}, {0}, d->D};
    w[1] = (view){{1, d->Hkv, vl->total_k}, {0}, d->D};
    w[2] = (view){{1, d->Hkv, vl->total_k}, {0}, d->Dv};
    attn_status st;
    if ((st = attn_sdpa_varlen_strides("q", d->q_stride, d->Hq, d->D, w[0].s)) ||
        (st = attn_sdpa_varlen_strides("k", d->k_stride, d->Hkv, d->D, w[1].s)) ||
        (st = attn_sdpa_varlen_strides("v", d->v_stride, d->Hkv, d->Dv, w[2].s)))
      return st;
    for (int i = 0; i < 3; i++) {
      int64_t e1, e2, e;
      if (w[i].s[1] < 0 || w[i].s[2] < 0 || attn_ck_mul(w[i].n[2], w[i].s[2], &e2) ||
          attn_ck_mul(w[i].n[1], w[i].s[1], &e1) || attn_ck_add(e1, e2, &e) ||
          attn_ck_add(e, w[i].last, &e))
        return attn_set_error(ATTN_EINVAL,
                              "sdpa varlen: %s strides (%lld, %lld) negative or too "
                              "large",
                              i == 0   ? "q"
                              : i == 1 ? "k"
                                       : "v",
                              (long long)w[i].s[1], (long long)w[i].s[2]);
    }
    return ATTN_OK;
  }
  attn_sdpa_resolved r;
  attn_status st = attn_sdpa_validate(d, a->q, a->k, a->v, &r);
  if (st) return st;
  w[0] = (view){{d->B, d->Hq, d->Lq}, {r.q[0], r.q[1], r.q[2]}, d->D};
  w[1] = (view){{d->B, d->Hkv, d->Lk}, {r.k[0], r.k[1], r.k[2]}, d->D};
  w[2] = (view){{d->B, d->Hkv, d->Lk}, {r.v[0], r.v[1], r.v[2]}, d->Dv};
  return ATTN_OK;
}

attn_status attn_sdpa_widened_run(const attn_sdpa_desc *d, const attn_sdpa_args *a, int backward) {
  view w[3];
  attn_status st = views(d, a, w);
  if (st) return st;
  const int bf16 = a->dtype == ATTN_BF16;
  const void *src[3] = {a->q, a->k, a->v};
  static const char *const names[3] = {"q", "k", "v"};
  float *x[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3 && !st; i++)
    if (src[i] && !(x[i] = widen(&w[i], src[i], bf16, names[i]))) st = ATTN_ENOMEM;
  if (!st) {
    if (a->varlen)
      st = backward ? attn_sdpa_varlen_backward(d, a->varlen, ATTN_BACKEND_MATH, x[0], x[1], x[2],
                                                a->out, a->lse, a->dout, a->dq, a->dk, a->dv)
                    : attn_sdpa_varlen_forward(d, a->varlen, ATTN_BACKEND_MATH, x[0], x[1], x[2],
                                               a->out, a->lse);
    else
      st = backward ? attn_sdpa_backward_f32(d, ATTN_BACKEND_MATH, x[0], x[1], x[2], a->out, a->lse,
                                             a->dout, a->dq, a->dk, a->dv)
                    : attn_sdpa_forward_f32(d, ATTN_BACKEND_MATH, x[0], x[1], x[2], a->out, a->lse,
                                            a->probs);
  }
  for (int i = 0; i < 3; i++)
    free(x[i]);
  return st;
}
