/* The diagnosis as a chart: one row per head with its pattern, bars for the
 * normalised entropy and the diagonal / previous / next / local / max-key
 * masses, and the distance profile as small columns. Uniform heads in red. */
#include <math.h>
#include <stdio.h>

#include "apps/viz/diagnose.h"
#include "apps/viz/viz_internal.h"

attn_status attn_diagnose_chart(const char *path, const attn_head_diag *d, int64_t layers,
                                int64_t heads) {
  viz_format fmt;
  attn_status st = viz_format_of(path, &fmt);
  if (st) return st;
  if (!d || layers < 1 || heads < 1 || layers * heads > 4096)
    return attn_set_error(ATTN_EINVAL, "diagnose chart: need 1..4096 heads (got %lld x %lld)",
                          (long long)layers, (long long)heads);
#ifndef ATTN_HAVE_CAIRO
  return viz_no_cairo("diagnose chart");
#else
  enum { NBAR = 6 };
  static const char *const bar_names[NBAR] = {"entropy", "diag",  "prev",
                                              "next",    "local", "max key"};
  const double pad = 12, row_h = 20, head_w = 70, pat_w = 110, bar_w = 64, bar_gap = 10,
               prof_w = 96, header = 40;
  int64_t n = layers * heads;
  double width = pad + head_w + pat_w + NBAR * (bar_w + bar_gap) + prof_w + pad;
  double height = pad + header + n * row_h + pad;
  viz_canvas c;
  if ((st = viz_canvas_open(&c, path, width, height))) return st;
  cairo_t *cr = c.cr;
  cairo_set_source_rgb(cr, 0, 0, 0);
  viz_font(cr, 13, 1);
  viz_text(cr, "attention heads: diagnosis", pad, pad + 8, 0);
  viz_font(cr, 10, 1);
  double hy = pad + header - 9, x0 = pad + head_w + pat_w;
  viz_text(cr, "head", pad, hy, 0);
  viz_text(cr, "pattern", pad + head_w, hy, 0);
  for (int b = 0; b < NBAR; b++)
    viz_text(cr, bar_names[b], x0 + b * (bar_w + bar_gap), hy, 0);
  viz_text(cr, "distance |i-j|", x0 + NBAR * (bar_w + bar_gap), hy, 0);
  char buf[64];
  for (int64_t t = 0; t < n; t++) {
    const attn_head_diag *x = &d[t];
    double y = pad + header + t * row_h, cy = y + row_h / 2;
    if (t % 2 == 0) {
      cairo_set_source_rgb(cr, 0.95, 0.95, 0.97);
      cairo_rectangle(cr, pad, y, width - 2 * pad, row_h);
      cairo_fill(cr);
    }
    int warn = x->pattern == ATTN_PATTERN_UNIFORM;
    cairo_set_source_rgb(cr, 0, 0, 0);
    viz_font(cr, 10, 0);
    snprintf(buf, sizeof buf, "L%lld H%lld", (long long)(t / heads), (long long)(t % heads));
    viz_text(cr, buf, pad, cy, 0);
    if (warn) cairo_set_source_rgb(cr, 0.8, 0.1, 0.1);
    viz_font(cr, 10, warn);
    viz_text(cr, attn_pattern_name(x->pattern), pad + head_w, cy, 0);
    double v[NBAR] = {x->entropy,   x->diag_mass,  x->prev_mass,
                      x->next_mass, x->local_mass, x->max_col_mass};
    for (int b = 0; b < NBAR; b++) {
      double bx = x0 + b * (bar_w + bar_gap), val = fmin(fmax(v[b], 0), 1);
      cairo_set_source_rgb(cr, 0.85, 0.85, 0.88);
      cairo_rectangle(cr, bx, y + 4, bar_w, row_h - 8);
      cairo_fill(cr);
      if (b == 0 && x->uniform_flag)
        cairo_set_source_rgb(cr, 0.8, 0.1, 0.1);
      else
        cairo_set_source_rgb(cr, 0.16, 0.35, 0.6);
      cairo_rectangle(cr, bx, y + 4, bar_w * val, row_h - 8);
      cairo_fill(cr);
      /* marker at the classification threshold */
      double thr = b == 0   ? ATTN_DIAG_UNIFORM_MIN
                   : b == 4 ? ATTN_DIAG_LOCAL_MIN
                            : ATTN_DIAG_MASS_MIN;
      cairo_set_source_rgb(cr, 0, 0, 0);
      cairo_set_line_width(cr, 1);
      cairo_move_to(cr, bx + bar_w * thr, y + 2);
      cairo_line_to(cr, bx + bar_w * thr, y + row_h - 2);
      cairo_stroke(cr);
      viz_font(cr, 8, 0);
      snprintf(buf, sizeof buf, "%.2f", v[b]);
      if (val > 0.6) { /* inside a long bar in white, else after the bar in black */
        cairo_set_source_rgb(cr, 1, 1, 1);
        viz_text(cr, buf, bx + 2, cy, 0);
      } else {
        cairo_set_source_rgb(cr, 0, 0, 0);
        viz_text(cr, buf, bx + bar_w * val + 2, cy, 0);
      }
    }
    double px = x0 + NBAR * (bar_w + bar_gap), col = (prof_w - 8) / ATTN_DIAG_DIST_BINS;
    cairo_set_source_rgb(cr, 0.3, 0.5, 0.3);
    for (int b = 0; b < ATTN_DIAG_DIST_BINS; b++) {
      double hgt = (row_h - 6) * fmin(fmax(x->dist_profile[b], 0), 1);
      cairo_rectangle(cr, px + b * col, y + row_h - 3 - hgt, col - 1, hgt);
      cairo_fill(cr);
    }
  }
  viz_font(cr, 8, 0);
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  viz_text(cr, "bins 0,1,2,3-4,5-8,9-16,17-32,>32; ticks: thresholds",
           x0 + NBAR * (bar_w + bar_gap) - 140, pad + 8, 0);
  return viz_canvas_close(&c, 1);
#endif
}
