/* Small multiples: all heads of one layer as a grid of heatmaps sharing one
 * colour scale, and the layers x heads overview (one row per layer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz_internal.h"

#define GRID_LABEL_MAX 32 /* tiles carry token labels up to this many per axis */

typedef enum { GRID_HEADS, GRID_MODEL } grid_mode;

static attn_status grid_draw(const char *path, const float *probs, int64_t layers, int64_t heads,
                             int64_t lq, int64_t lk, const char *const *q_labels,
                             const char *const *k_labels, const attn_viz_opts *opts,
                             grid_mode mode) {
  attn_viz_opts o;
  if (opts)
    o = *opts;
  else
    attn_viz_opts_default(&o);
  const char *what = mode == GRID_HEADS ? "head grid" : "model view";
  viz_format fmt;
  attn_status st = viz_format_of(path, &fmt);
  if (st) return st;
  if (layers < 1 || heads < 1 || lq < 1 || lk < 1 || layers > 256 || heads > 256 || lq > 100000 ||
      lk > 100000 || layers * heads * lq * lk > ((int64_t)1 << 31))
    return attn_set_error(ATTN_EINVAL, "%s: shape [%lld, %lld, %lld, %lld] is out of range", what,
                          (long long)layers, (long long)heads, (long long)lq, (long long)lk);
  int64_t ntiles = layers * heads, per = lq * lk;
  if ((st = viz_check_finite(probs, ntiles * per, what))) return st;
  int64_t q0 = o.q0, q1 = o.q1 ? o.q1 : lq, k0 = o.k0, k1 = o.k1 ? o.k1 : lk;
  if (q0 < 0 || q0 >= q1 || q1 > lq || k0 < 0 || k0 >= k1 || k1 > lk)
    return attn_set_error(ATTN_EINVAL,
                          "%s: region [%lld,%lld)x[%lld,%lld) is empty or outside "
                          "%lldx%lld",
                          what, (long long)q0, (long long)q1, (long long)k0, (long long)k1,
                          (long long)lq, (long long)lk);
  if (o.cmap != ATTN_CMAP_BONE && o.cmap != ATTN_CMAP_VIRIDIS)
    return attn_set_error(ATTN_EINVAL, "%s: unknown colormap %d", what, (int)o.cmap);
#ifndef ATTN_HAVE_CAIRO
  (void)q_labels, (void)k_labels;
  return viz_no_cairo(what);
#else
  int64_t nq = q1 - q0, nk = k1 - k0, nmax = nq > nk ? nq : nk;
  double vmin = o.vmin, vmax = o.vmax;
  if (!(vmin < vmax)) { /* one scale for every tile */
    vmin = INFINITY, vmax = -INFINITY;
    for (int64_t t = 0; t < ntiles; t++)
      for (int64_t i = q0; i < q1; i++)
        for (int64_t j = k0; j < k1; j++) {
          double v = probs[t * per + i * lk + j];
          vmin = fmin(vmin, v), vmax = fmax(vmax, v);
        }
  }
  int64_t rows, cols;
  if (mode == GRID_MODEL) {
    rows = layers, cols = heads;
  } else {
    cols = heads <= 4 ? heads : heads <= 8 ? 4 : (int64_t)ceil(sqrt((double)heads));
    rows = (heads + cols - 1) / cols;
  }
  double cell = fmin(mode == GRID_HEADS ? 12.0 : 6.0, (mode == GRID_HEADS ? 180.0 : 100.0) / nmax);
  if (cell * nmax < 24) cell = 24.0 / nmax;
  double tw = cell * nk, th = cell * nq;
  int labels = mode == GRID_HEADS && nmax <= GRID_LABEL_MAX;
  double lfont = fmin(9.0, fmax(5.0, cell * 0.8));

  cairo_surface_t *ms = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *m = cairo_create(ms);
  char buf[160];
  double qw = 0, kw = 0, rw = 0;
  if (labels) {
    viz_font(m, lfont, 0);
    for (int64_t i = q0; i < q1; i++) {
      viz_label_clean(q_labels ? q_labels[i] : NULL, buf, sizeof buf, 12);
      if (!q_labels) snprintf(buf, sizeof buf, "%lld", (long long)i);
      qw = fmax(qw, viz_text_width(m, buf));
    }
    for (int64_t j = k0; j < k1; j++) {
      viz_label_clean(k_labels ? k_labels[j] : NULL, buf, sizeof buf, 12);
      if (!k_labels) snprintf(buf, sizeof buf, "%lld", (long long)j);
      kw = fmax(kw, viz_text_width(m, buf));
    }
  }
  if (mode == GRID_MODEL) {
    viz_font(m, 10, 0);
    snprintf(buf, sizeof buf, "layer %lld", (long long)(layers - 1));
    rw = viz_text_width(m, buf) + 8;
  }
  char title[512] = "";
  if (o.title) viz_label_clean(o.title, title, sizeof title, 120);
  double bar_lw = viz_colorbar_label_width(m, vmin, vmax, 10);
  viz_font(m, 14, 1);
  double title_w = title[0] ? viz_text_width(m, title) : 0;
  cairo_destroy(m);
  cairo_surface_destroy(ms);

  const double pad = 12, gap = 10, caption = 14;
  double left = pad + rw + (labels ? qw + 4 : 0);
  double top = pad + (title[0] ? 24 : 0) + caption + (labels ? kw + 4 : 0);
  double step_x = tw + gap, step_y = th + gap + (mode == GRID_HEADS ? caption : 0);
  double grid_w = cols * step_x - gap, grid_h = rows * step_y - gap;
  double bar_x = left + grid_w + 16, bar_h = fmax(fmin(grid_h, 240), 80);
  double width = fmax(bar_x + 14 + bar_lw + pad, left + title_w + pad);
  double height = top + fmax(grid_h, bar_h) + pad;

  viz_canvas c;
  if ((st = viz_canvas_open(&c, path, width, height))) return st;
  cairo_t *cr = c.cr;
  for (int64_t t = 0; t < ntiles && !st; t++) {
    int64_t r = t / cols, col = t % cols;
    double x = left + col * step_x, y = top + r * step_y + (mode == GRID_HEADS ? caption : 0);
    st = viz_draw_matrix(cr, fmt, probs + t * per, lk, q0, q1, k0, k1, x, y, cell, o.cmap, vmin,
                         vmax);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 0.5);
    cairo_rectangle(cr, x, y, tw, th);
    cairo_stroke(cr);
    viz_font(cr, 10, 0);
    if (mode == GRID_HEADS) {
      snprintf(buf, sizeof buf, "head %lld", (long long)t);
      viz_text(cr, buf, x + tw / 2, y - caption / 2 - 1, 0.5);
    } else {
      if (r == 0) {
        snprintf(buf, sizeof buf, "head %lld", (long long)col);
        viz_text(cr, buf, x + tw / 2, y - caption / 2 - 1, 0.5);
      }
      if (col == 0) {
        snprintf(buf, sizeof buf, "layer %lld", (long long)r);
        viz_text(cr, buf, x - 6, y + th / 2, 1.0);
      }
    }
    if (labels && col == 0) {
      viz_font(cr, lfont, 0);
      for (int64_t i = q0; i < q1; i++) {
        viz_label_clean(q_labels ? q_labels[i] : NULL, buf, sizeof buf, 12);
        if (!q_labels) snprintf(buf, sizeof buf, "%lld", (long long)i);
        viz_text(cr, buf, x - 3, y + (i - q0 + 0.5) * cell, 1.0);
      }
    }
    if (labels && r == 0) {
      viz_font(cr, lfont, 0);
      for (int64_t j = k0; j < k1; j++) {
        viz_label_clean(k_labels ? k_labels[j] : NULL, buf, sizeof buf, 12);
        if (!k_labels) snprintf(buf, sizeof buf, "%lld", (long long)j);
        viz_text_up(cr, buf, x + (j - k0 + 0.5) * cell, y - caption - 2, 0.0);
      }
    }
  }
  if (title[0]) {
    cairo_set_source_rgb(cr, 0, 0, 0);
    viz_font(cr, 14, 1);
    viz_text(cr, title, pad, pad + 10, 0.0);
  }
  viz_draw_colorbar(cr, bar_x, top, 14, bar_h, o.cmap, vmin, vmax, 10);
  attn_status cs = viz_canvas_close(&c, st == ATTN_OK);
  return st ? st : cs;
#endif
}

attn_status attn_viz_heads_f32(const char *path, const float *probs, int64_t heads, int64_t lq,
                               int64_t lk, const char *const *q_labels, const char *const *k_labels,
                               const attn_viz_opts *opts) {
  return grid_draw(path, probs, 1, heads, lq, lk, q_labels, k_labels, opts, GRID_HEADS);
}

attn_status attn_viz_model_f32(const char *path, const float *probs, int64_t layers, int64_t heads,
                               int64_t lq, int64_t lk, const attn_viz_opts *opts) {
  return grid_draw(path, probs, layers, heads, lq, lk, NULL, NULL, opts, GRID_MODEL);
}
