/* Attention sinks as a score-modifier unit (sdpa_stage.h; attn/sdpa.h's
 * sinks and sinks_grad, docs/VARIANTS.md): a learned logit per query head
 * that joins every row's softmax denominator with no value (gpt-oss, ggml's
 * flash_attn_ext sinks). A row unit: it changes only each row's final
 * normalization and lse (attn_stage_row_finish), and its gradient is an
 * O(rows Dv) pass over out, dout and lse after the tiles. */
#include <math.h>

#include "kernels/sdpa/sdpa_stage.h"

static float row_logit(const attn_sdpa_desc *d, int64_t h) { return d->sinks[h]; }

/* d->sinks_grad [Hq] := - sum over (b, i) of e^(sink_h - lse) (dout · out),
 * in double, in (b, i) order (thread-count independent); rows with lse =
 * -inf add nothing. */
static void backward(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, const float *out,
                     const float *lse, const float *dout) {
  if (!d->sinks_grad) return;
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

const attn_score_unit attn_unit_sinks = {
    .name = "sinks",
    .row_logit = row_logit,
    .backward = backward,
};
