/* `attn bench sdpa --plot`: two log-log panels (median time, peak memory)
 * against N, one line per backend, drawn with cairo (text by Pango, as in
 * every picture) into a PNG, SVG or PDF by the file's extension. */
#include "apps/viz/bench_sdpa_plot.h"

#include <math.h>
#include <stdio.h>

#include "apps/viz/viz_internal.h"

#ifdef ATTN_HAVE_CAIRO

enum { W = 1060, H = 440, PANEL_W = 440, PANEL_H = 320, LEFT = 70, TOP = 60 };

static const double colour[2][3] = {{0.85, 0.33, 0.10}, {0.00, 0.45, 0.74}};

/* a panel's data ranges: x in log2 N, y in log10 of the value */
typedef struct {
  double x0, xlo, xhi, ylo, yhi;
} axes;

static double px(const axes *a, double lx) {
  return a->x0 + (lx - a->xlo) / (a->xhi - a->xlo) * PANEL_W;
}
static double py(const axes *a, double ly) {
  return TOP + PANEL_H - (ly - a->ylo) / (a->yhi - a->ylo) * PANEL_H;
}

/* One panel at x0: values v[i][b] (<= 0 skipped) against log2 N. */
static void panel(cairo_t *cr, double x0, const char *ylabel, const attn_sdpa_plot_point *p, int n,
                  int mem, const char *const names[2]) {
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < n; i++)
    for (int b = 0; b < 2; b++) {
      double v = mem ? p[i].mib[b] : p[i].ms[b];
      if (v > 0) lo = fmin(lo, v), hi = fmax(hi, v);
    }
  if (!(lo <= hi)) lo = 1, hi = 10;
  double ylo = floor(log10(lo)), yhi = ceil(log10(hi));
  if (yhi <= ylo) yhi = ylo + 1;
  double xlo = log2((double)p[0].n), xhi = log2((double)p[n - 1].n);
  if (xhi <= xlo) xlo -= 1, xhi += 1;
  const axes ax = {x0, xlo, xhi, ylo, yhi}, *a = &ax;
  cairo_set_line_width(cr, 1);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, x0, TOP, PANEL_W, PANEL_H);
  cairo_stroke(cr);
  viz_font(cr, 11, 0);
  char buf[64];
  for (double e = ylo; e <= yhi; e++) { /* decades */
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_move_to(cr, x0, py(a, e));
    cairo_line_to(cr, x0 + PANEL_W, py(a, e));
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    snprintf(buf, sizeof buf, "%g", pow(10, e));
    viz_text(cr, buf, x0 - 8, py(a, e), 1.0);
  }
  for (int i = 0; i < n; i++) {
    snprintf(buf, sizeof buf, "%lld", p[i].n);
    viz_text(cr, buf, px(a, log2((double)p[i].n)), TOP + PANEL_H + 12, 0.5);
  }
  viz_text(cr, "sequence length N", x0 + PANEL_W / 2, TOP + PANEL_H + 32, 0.5);
  viz_font(cr, 13, 0);
  viz_text(cr, ylabel, x0, TOP - 14, 0);
  for (int b = 0; b < 2; b++) {
    cairo_set_source_rgb(cr, colour[b][0], colour[b][1], colour[b][2]);
    cairo_set_line_width(cr, 2);
    int started = 0;
    for (int i = 0; i < n; i++) {
      double v = mem ? p[i].mib[b] : p[i].ms[b];
      if (v <= 0) continue;
      double x = px(a, log2((double)p[i].n)), y = py(a, log10(v));
      if (started)
        cairo_line_to(cr, x, y);
      else
        cairo_move_to(cr, x, y);
      started = 1;
    }
    cairo_stroke(cr);
    for (int i = 0; i < n; i++) {
      double v = mem ? p[i].mib[b] : p[i].ms[b];
      if (v <= 0) continue;
      cairo_arc(cr, px(a, log2((double)p[i].n)), py(a, log10(v)), 3.5, 0, 2 * M_PI);
      cairo_fill(cr);
    }
    cairo_rectangle(cr, x0 + 12, TOP + 12 + 18 * b, 14, 4);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    viz_font(cr, 12, 0);
    viz_text(cr, names[b], x0 + 32, TOP + 14 + 18 * b, 0);
  }
}

int attn_bench_sdpa_plot(const char *path, const char *title, const char *name0,
                         const attn_sdpa_plot_point *p, int n) {
  if (n < 1) {
    fprintf(stderr, "attn bench sdpa: nothing to plot\n");
    return 1;
  }
  viz_canvas c;
  if (viz_canvas_open(&c, path, W, H)) {
    fprintf(stderr, "attn bench sdpa: %s\n", attn_last_error());
    return 1;
  }
  cairo_t *cr = c.cr;
  cairo_set_source_rgb(cr, 0, 0, 0);
  viz_font(cr, 14, 0);
  viz_text(cr, title, LEFT, 20, 0);
  const char *names[2] = {name0, "math"};
  panel(cr, LEFT, "median time (ms)", p, n, 0, names);
  panel(cr, LEFT + PANEL_W + 60, "peak resident memory (MiB)", p, n, 1, names);
  if (viz_canvas_close(&c, 1)) {
    fprintf(stderr, "attn bench sdpa: %s\n", attn_last_error());
    return 1;
  }
  return 0;
}
#else
int attn_bench_sdpa_plot(const char *path, const char *title, const char *name0,
                         const attn_sdpa_plot_point *p, int n) {
  (void)title, (void)name0, (void)p, (void)n;
  fprintf(stderr, "attn bench sdpa: cannot draw %s: built without cairo\n", path);
  return 1;
}
#endif
