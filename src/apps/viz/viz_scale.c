/* The colour scale of a picture: its range (autoscaled, fixed, or 0..1 for
 * rows scaled to their maximum), the caption that says which, and nice
 * ticks for the colour bar. */
#include <math.h>
#include <stdio.h>

#include "apps/viz/viz_internal.h"

int viz_ticks(double vmin, double vmax, double *ticks, int max, int *decimals) {
  *decimals = 0;
  if (max < 1) return 0;
  if (!(vmax > vmin)) {
    double mag = vmin != 0 ? floor(log10(fabs(vmin))) : 0;
    *decimals = mag < 0 ? (int)-mag + 2 : 0;
    ticks[0] = vmin;
    return 1;
  }
  double raw = (vmax - vmin) / 4, mag = pow(10, floor(log10(raw))), f = raw / mag;
  double m = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10, step = m * mag;
  int e = (int)-floor(log10(step) + 1e-9);
  *decimals = (e > 0 ? e : 0) + (m == 2.5 && e >= 0);
  int n = 0;
  for (double k = ceil(vmin / step - 1e-9); n < max; k++) {
    double t = k * step;
    if (t > vmax + 1e-9 * step) break;
    ticks[n++] = fabs(t) < 1e-6 * step ? 0 : t;
  }
  return n;
}

void viz_tick_label(char *buf, size_t n, double v, int decimals) {
  if (decimals > 4 || (v != 0 && fabs(v) >= 1e5))
    snprintf(buf, n, "%.3g", v);
  else
    snprintf(buf, n, "%.*f", decimals, v);
}

void viz_autoscale(const attn_viz_opts *o, const float *probs, int64_t tiles, int64_t per,
                   int64_t ld, int64_t q0, int64_t q1, int64_t k0, int64_t k1, double *vmin,
                   double *vmax) {
  *vmin = o->vmin, *vmax = o->vmax;
  if (*vmin < *vmax) return;
  if (o->row_norm) {
    *vmin = 0, *vmax = 1;
    return;
  }
  *vmin = INFINITY, *vmax = -INFINITY;
  for (int64_t t = 0; t < tiles; t++)
    for (int64_t i = q0; i < q1; i++)
      for (int64_t j = k0; j < k1; j++) {
        double v = probs[t * per + i * ld + j];
        *vmin = fmin(*vmin, v), *vmax = fmax(*vmax, v);
      }
}

const char *viz_bar_caption(const attn_viz_opts *o) {
  if (o->bar_name) return o->bar_name;
  return o->row_norm ? "weight / row max" : "weight";
}
