/* Attention probabilities recomputed from q, k and the saved log-sum-exp:
 * attn_sdpa_forward with args.probs_rows (sdpa_entry.c routes here; the
 * deprecated attn_sdpa_probs_f32 is a wrapper there). */
#include <math.h>

#include "kernels/sdpa/sdpa_internal.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/sdpa_usermod.h"

attn_status attn_sdpa_probs_rows_f32(const attn_sdpa_desc *d, const float *q, const float *k,
                                     const float *lse, const attn_sdpa_rows *rows, float *probs) {
  const int64_t b = rows->b, h = rows->h, row0 = rows->row0, nrows = rows->nrows;
  attn_sdpa_resolved r;
  attn_status st = attn_sdpa_validate(d, q, k, k, &r); /* v is not read here */
  if (st) return st;
  if (attn_sdpa_has_positions(d))
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa probs: position schemes and block-sparse layouts are not "
                          "supported here; use the math backend's probs output");
  if ((st = attn_usermod_refuse(d, "sdpa probs"))) return st;
  if (b < 0 || b >= d->B || h < 0 || h >= d->Hq)
    return attn_set_error(ATTN_EINVAL, "sdpa probs: batch %lld / head %lld out of range [%lld, %lld)",
                          (long long)b, (long long)h, (long long)d->B, (long long)d->Hq);
  if (row0 < 0 || nrows < 0 || row0 > d->Lq - nrows)
    return attn_set_error(ATTN_EINVAL, "sdpa probs: rows [%lld, %lld) outside [0, %lld)",
                          (long long)row0, (long long)(row0 + nrows), (long long)d->Lq);
  if (nrows == 0 || d->Lk == 0) return ATTN_OK;
  if (!lse || !probs) return attn_set_error(ATTN_EINVAL, "sdpa probs: NULL lse or probs");

  const int64_t hk = h / r.group;
  const float *qh = q + b * r.q[0] + h * r.q[1];
  const float *kh = k + b * r.k[0] + hk * r.k[1];
  const float *lh = lse + (b * d->Hq + h) * d->Lq;
  const int staged = attn_stage_has_tile(d);
  for (int64_t n = 0; n < nrows; n++) {
    const int64_t i = row0 + n;
    float *p = probs + n * d->Lk;
    const float li = lh[i];
    int64_t lo, hi;
    attn_sdpa_key_range(d, b, i, &lo, &hi);
    for (int64_t j = 0; j < d->Lk; j++)
      p[j] = -INFINITY;
    if (isinf(li) && li < 0) { /* no allowed key: zeros */
      for (int64_t j = 0; j < d->Lk; j++)
        p[j] = 0.0f;
      continue;
    }
    const float *qi = qh + i * r.q[2];
    for (int64_t j = lo; j < hi; j++) { /* the scaled logits of the keys in range */
      const float *kj = kh + j * r.k[2];
      float s = 0.0f;
      for (int64_t c = 0; c < d->D; c++) s += qi[c] * kj[c];
      p[j] = r.scale * s;
    }
    /* the score-modifier stage's tile units, then the element masks, as the
     * flash tiles run them */
    for (int64_t j = lo; j < hi; j += 1 << 20) {
      const int nj = (int)(hi - j < (1 << 20) ? hi - j : 1 << 20);
      if (staged) attn_stage_tile(d, h, 1, nj, p + j, 0, NULL, 0);
      attn_sdpa_elem_masks(d, b, h, i, 1, j, nj, p + j, 0, 1);
    }
    for (int64_t j = 0; j < d->Lk; j++)
      p[j] = isinf(p[j]) && p[j] < 0 ? 0.0f : expf(p[j] - li);
  }
  return ATTN_OK;
}
