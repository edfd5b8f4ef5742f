/* Logit softcap and attention sinks: see sdpa_softcap_sinks.h. */
#include <math.h>
#include <string.h>

#include "kernels/flash/flash_tiles.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_softcap_sinks.h"
#include "kernels/sdpa/softcap_tanh.h"

enum { BC = ATTN_FLASH_BC };

attn_status attn_capsink_validate(const attn_sdpa_desc *d) {
  if (d->softcap != 0.0f && !(d->softcap > 0.0f && isfinite(d->softcap)))
    return attn_set_error(ATTN_EINVAL,
                          "sdpa: softcap = %g: must be 0 (off) or a finite value > 0",
                          (double)d->softcap);
  if (d->softcap != 0.0f && (d->rel_bias || d->shaw_k || d->shaw_v))
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa: softcap with T5 rel_bias or Shaw positions is not supported "
                          "(ALiBi, masks, causal and windows are)");
  return ATTN_OK;
}

void attn_softcap_tile(float cap, int R, int n, float *s, int64_t lds, float *g, int64_t ldg) {
  const attn_row_ops *ro = &attn_kern_get()->row;
  if (ro->softcap) { /* the level's vector form (same formula) */
    for (int r = 0; r < R; r++)
      ro->softcap(cap, s + r * lds, g ? g + r * ldg : NULL, n);
    return;
  }
  const float inv = 1.0f / cap;
  float e[BC];
  for (int r = 0; r < R; r++) {
    float *sr = s + r * lds, *gr = g ? g + r * ldg : NULL;
    for (int c0 = 0; c0 < n; c0 += BC) {
      const int m = n - c0 < BC ? n - c0 : BC;
      float *x = sr + c0;
      if (gr) { /* 1 - tanh^2 = 4e / (1 + e)^2, e = e^(-2|y|): no cancellation near |tanh| = 1 */
        for (int c = 0; c < m; c++)
          e[c] = -2.0f * fabsf(x[c] * inv); /* -inf for +-inf, NaN for NaN */
        ro->vexp(e, e, m);
        for (int c = 0; c < m; c++)
          gr[c0 + c] = x[c] == -INFINITY ? 0.0f : 4.0f * e[c] / ((1.0f + e[c]) * (1.0f + e[c]));
      }
      for (int c = 0; c < m; c++)
        if (x[c] != -INFINITY) x[c] = cap * attn_softcap_tanh(x[c] * inv);
    }
  }
}

void attn_softcap_grad_tile(int64_t R, int64_t n, float *ds, int64_t lds, const float *g, int64_t ldg) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < n; c++)
      ds[r * lds + c] *= g[r * ldg + c];
}

void attn_softcap_row_exact(float cap, float *s, int64_t n, float *g) {
  for (int64_t j = 0; j < n; j++) {
    if (s[j] == -INFINITY) {
      if (g) g[j] = 0.0f;
      continue;
    }
    const double t = tanh((double)s[j] / cap);
    s[j] = (float)(cap * t);
    if (g) g[j] = (float)(1.0 - t * t);
  }
}

void attn_sinks_backward(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, const float *out,
                         const float *lse, const float *dout) {
  if (!d->sinks || !d->sinks_grad) return;
  for (int64_t h = 0; h < d->Hq; h++) {
    const double sink = d->sinks[h];
    double acc = 0.0;
    for (int64_t b = 0; b < d->B; b++)
      for (int64_t i = 0; i < d->Lq; i++) {
        const float li = lse[(b * d->Hq + h) * d->Lq + i];
        if (li == -INFINITY) continue;
        const float *o = out + b * rs->o[0] + h * rs->o[1] + i * rs->o[2];
        const float *g = dout + b * rs->o[0] + h * rs->o[1] + i * rs->o[2];
        double di = 0.0;
        for (int64_t c = 0; c < d->Dv; c++)
          di += (double)o[c] * g[c];
        acc -= exp(sink - li) * di;
      }
    d->sinks_grad[h] = (float)acc;
  }
}
