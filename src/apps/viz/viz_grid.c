/* Small multiples: all heads of one layer as a grid of heatmaps sharing one
 * colour scale, and the layers x heads overview (one row per layer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz_internal.h"

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
  double vmin, vmax; /* one scale for every tile */
  viz_autoscale(&o, probs, ntiles, per, lk, q0, q1, k0, k1, &vmin, &vmax);
  int64_t rows, cols;
  if (mode == GRID_MODEL) {
    rows = layers, cols = heads;
  } else {
    cols = heads <= 4 ? heads : heads <= 8 ? 4 : (int64_t)ceil(sqrt((double)heads));
    rows = (heads + cols - 1) / cols;
  }
  int labels = mode == GRID_HEADS && nmax <= GRID_LABEL_MAX;
  /* tiles with labels are larger: 32 tokens get 7.5 px cells and every
   * second label (VIZ_LABEL_ROOM) */
  double span = mode == GRID_MODEL ? 100.0 : labels ? 240.0 : 180.0;
  double cell = fmin(mode == GRID_HEADS ? 16.0 : 6.0, span / (double)nmax);
  if (cell * (double)nmax < 24) cell = 24.0 / (double)nmax;
  double tw = cell * (double)nk, th = cell * (double)nq;

  char sub[512], buf[64];
  viz_subtitle(sub, sizeof sub, &o, q0, q1, lq, k0, k1, lk);
  const char *bar_caption = viz_bar_caption(&o);
  cairo_surface_t *ms = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *m = cairo_create(ms);
  viz_axis qa = {0}, ka = {0};
  if (labels) {
    st = viz_axis_make(&qa, m, q_labels, q0, q1, o.max_labels, cell, 12);
    if (!st) st = viz_axis_make(&ka, m, k_labels, k0, k1, o.max_labels, cell, 12);
  }
  double rw = 0;
  if (mode == GRID_MODEL) {
    viz_font(m, 11, 0);
    snprintf(buf, sizeof buf, "layer %lld", (long long)(layers - 1));
    rw = viz_text_width(m, buf) + 8;
  }
  double bar_lw = viz_colorbar_label_width(m, vmin, vmax, 11, bar_caption), head_w = 0;
  double head_h = viz_header_size(m, o.title, sub, &head_w);
  cairo_destroy(m);
  cairo_surface_destroy(ms);
  if (st) {
    viz_axis_free(&qa), viz_axis_free(&ka);
    return st;
  }

  const double pad = 12, gap = 10, caption = 16;
  double left = pad + rw + (labels ? qa.max_width + 4 : 0);
  double top = pad + head_h + caption + (labels ? ka.max_width + 4 : 0);
  double step_x = tw + gap, step_y = th + gap + (mode == GRID_HEADS ? caption : 0);
  double grid_w = (double)cols * step_x - gap, grid_h = (double)rows * step_y - gap;
  double bar_x = left + grid_w + 16, bar_h = fmax(fmin(grid_h, 240), 80);
  double width = fmax(bar_x + 14 + bar_lw + pad, pad + head_w + pad);
  double height = top + fmax(grid_h, bar_h) + pad;

  viz_canvas c;
  if ((st = viz_canvas_open(&c, path, width, height))) {
    viz_axis_free(&qa), viz_axis_free(&ka);
    return st;
  }
  cairo_t *cr = c.cr;
  for (int64_t t = 0; t < ntiles && !st; t++) {
    int64_t r = t / cols, col = t % cols;
    double x = left + (double)col * step_x;
    double y = top + (double)r * step_y + (mode == GRID_HEADS ? caption : 0);
    st = viz_draw_matrix(cr, fmt, probs + t * per, lk, q0, q1, k0, k1, x, y, cell, o.cmap, vmin,
                         vmax, o.row_norm);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 0.5);
    cairo_rectangle(cr, x, y, tw, th);
    cairo_stroke(cr);
    viz_font(cr, 11, 0);
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
    if (labels && col == 0) viz_axis_draw(cr, &qa, x, y, cell, 0, 0);
    if (labels && r == 0) viz_axis_draw(cr, &ka, x, y - caption + 1, cell, 1, 0);
  }
  viz_draw_header(cr, pad, pad, o.title, sub);
  viz_draw_colorbar(cr, bar_x, top, 14, bar_h, o.cmap, vmin, vmax, 11, bar_caption);
  viz_axis_free(&qa), viz_axis_free(&ka);
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
