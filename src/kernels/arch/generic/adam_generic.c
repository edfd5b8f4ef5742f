/* Adam/AdamW update of one chunk, portable: the ATen formulas step for step
 * (the vector versions, adam_*.c, use the same IEEE-exact operations and give
 * the same bits). p, g, m, v [n]. */
#include <math.h>

#include "kernels/rows/elementwise_internal.h"

void attn_adam_f32_generic(const attn_adam_scalars *k, float *p, const float *g, float *m, float *v,
                           int64_t n) {
  float wd = k->wd, decay_mul = k->decay_mul;
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i], pi = p[i];
    if (k->adamw) pi = pi * decay_mul;       /* param.mul_(1 - lr*wd) */
    else if (wd != 0.0f) gi = fmaf(wd, pi, gi); /* grad.add(param, alpha=wd) */
    float mi = m[i] * k->beta1;
    mi = fmaf(k->one_minus_beta1, gi, mi); /* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
    float vi = v[i] * k->beta2;
    vi = fmaf(k->one_minus_beta2 * gi, gi, vi); /* addcmul_(g, g, value=1-b2) */
    float denom = sqrtf(vi) / k->bc2_sqrt + k->eps;
    p[i] = pi + k->neg_step_size * mi / denom; /* addcdiv_(m, denom, value=-step_size) */
    m[i] = mi;
    v[i] = vi;
  }
}
