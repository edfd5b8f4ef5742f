/* Logit softcap and attention sinks (attn/sdpa.h, docs/VARIANTS.md): the
 * per-tile and per-row operations that every SDPA backend calls through a
 * few hook lines (math rows in sdpa_math.c; flash tiles in sdpa_flash.c,
 * sdpa_flash_backward.c and the bf16 / int8 loops). Nothing of size
 * Lq x Lk is stored: softcap works on a tile of logits (and, in the
 * backward, keeps its derivative for that tile only); a sink only changes
 * each row's final normalization and lse, and its gradient is an O(rows Dv)
 * pass over out, dout and lse.
 *
 * Where softcap sits: t = cap * tanh(scale q·k / cap), then the additive mask
 * and the position bias (ALiBi) are added, as FlashAttention (softcap on the
 * scaled scores before alibi / mask) and ggml's flash_attn_ext (scale / cap,
 * tanh, times cap, then slope * mask). */
#ifndef ATTN_SDPA_SOFTCAP_SINKS_H
#define ATTN_SDPA_SOFTCAP_SINKS_H

#include <math.h>
#include <stdint.h>

#include "kernels/sdpa/sdpa_internal.h"

/* Softcap or sinks set? */
static inline int attn_sdpa_has_capsink(const attn_sdpa_desc *d) {
  return d->softcap != 0.0f || d->sinks != NULL;
}

/* The descriptor's softcap / sinks fields: softcap 0 or finite > 0, and not
 * with T5 or Shaw positions. Called by attn_sdpa_validate. */
attn_status attn_capsink_validate(const attn_sdpa_desc *d);

/* Tiles: s [R, n] (rows lds apart) := cap * tanh(s / cap) where s != -inf
 * (-inf stays; NaN stays NaN; +inf -> cap); g [R, n] (rows ldg apart, may
 * be NULL) := the derivative 1 - tanh^2 (0 at -inf). tanh: the rational
 * of softcap_tanh.h (within 6 ulp), as the active level's row op
 * (attn_row_ops.softcap: softcap_avx2.h's form on 8, 16 or 4 lanes) where it
 * has one, else a portable loop; the derivative from e^(-2|y|) (the
 * level's vexp). The fused forward tiles (tile_forward_mod) run the same
 * vector code, so fused and step-by-step tiles agree to the bit. */
void attn_softcap_tile(float cap, int R, int n, float *s, int64_t lds, float *g, int64_t ldg);
/* ds [R, n] *= g (the softcap factor of the backward, after ds = p (dp - D)). */
void attn_softcap_grad_tile(int64_t R, int64_t n, float *ds, int64_t lds, const float *g, int64_t ldg);
/* The math path's reference: one row of n logits in double precision. */
void attn_softcap_row_exact(float cap, float *s, int64_t n, float *g);

/* Head h's sink logit, -inf when there are none. */
static inline float attn_sink_of(const attn_sdpa_desc *d, int64_t h) {
  return d->sinks ? d->sinks[h] : -INFINITY;
}

/* A flash row's end: from its running max m and sum l (l = 0: no allowed
 * key), *inv := the factor for its accumulated output and *lse := its
 * log-sum-exp, the sink (if any) joining the denominator. Returns 0 when the
 * output row is exactly 0 (no allowed key). NaN in l (or the sink) gives NaN. */
static inline int attn_sdpa_row_finish(const attn_sdpa_desc *d, int64_t h, float m, float l,
                                       float *inv, float *lse) {
  if (!d->sinks) {
    if (l == 0.0f) {
      *lse = -INFINITY;
      return 0;
    }
    *inv = 1.0f / l;
    *lse = m + logf(l);
    return 1;
  }
  const float sink = d->sinks[h];
  if (l == 0.0f) {
    *lse = sink;
    return 0;
  }
  const float m2 = sink > m ? sink : m; /* a NaN sink does not win, but poisons l2 */
  const float a = expf(m - m2), l2 = l * a + expf(sink - m2);
  *inv = a / l2;
  *lse = m2 + logf(l2);
  return 1;
}

/* d->sinks_grad [Hq] := - sum over (b, i) of e^(sink_h - lse) (dout · out),
 * in double, in (b, i) order (thread-count independent); rows with lse = -inf
 * add nothing. Nothing to do without sinks or sinks_grad. out/dout use the
 * resolved out strides; lse is [B, Hq, Lq]. */
void attn_sinks_backward(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, const float *out,
                         const float *lse, const float *dout);

#endif
