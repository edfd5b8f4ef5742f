/* One attention heatmap (the seed's plot_attention, done properly): query
 * tokens down, key tokens across rotated 90°, a colour bar, a title; long
 * axes get thinned labels (at most max_labels each) or a cropped region. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz_internal.h"

#define LABEL_CHARS 24 /* longer labels are cut with an ellipsis */
#define LABEL_BYTES (LABEL_CHARS * 4 + 8)
#define TEXT_BYTES (LABEL_BYTES + 32) /* room for an index in front */

void attn_viz_opts_default(attn_viz_opts *o) {
  memset(o, 0, sizeof *o);
  o->cmap = ATTN_CMAP_BONE;
  o->max_labels = 60;
}

int64_t attn_viz_label_stride(int64_t n, int max_labels) {
  if (max_labels <= 0) max_labels = 60;
  if (n <= max_labels) return 1;
  return (n + max_labels - 1) / max_labels;
}

#ifdef ATTN_HAVE_CAIRO
/* Shown labels of one axis: positions first, first+stride, ... of [a, b). */
typedef struct {
  int64_t a, b, stride, count;
  char (*text)[TEXT_BYTES];
  double font, max_width;
} axis_labels;

static attn_status axis_labels_make(axis_labels *ax, cairo_t *measure, const char *const *labels,
                                    int64_t a, int64_t b, int max_labels, double cell) {
  ax->a = a, ax->b = b;
  ax->stride = attn_viz_label_stride(b - a, max_labels);
  while (cell * (double)ax->stride < 7.0)
    ax->stride++; /* labels need 7 px of room */
  ax->count = (b - a + ax->stride - 1) / ax->stride;
  ax->text = calloc((size_t)ax->count, sizeof *ax->text);
  if (!ax->text) return attn_set_error(ATTN_ENOMEM, "heatmap: out of memory for labels");
  double room = cell * (double)ax->stride; /* space along the axis per label */
  ax->font = fmin(12.0, fmax(5.0, room * 0.8));
  viz_font(measure, ax->font, 0);
  ax->max_width = 0;
  for (int64_t n = 0; n < ax->count; n++) {
    int64_t i = a + n * ax->stride;
    char clean[LABEL_BYTES];
    viz_label_clean(labels ? labels[i] : NULL, clean, sizeof clean, LABEL_CHARS);
    if (!labels)
      snprintf(ax->text[n], TEXT_BYTES, "%lld", (long long)i);
    else if (ax->stride > 1) /* thinned: the index tells where the label belongs */
      snprintf(ax->text[n], TEXT_BYTES, "%lld %s", (long long)i, clean);
    else
      memcpy(ax->text[n], clean, LABEL_BYTES);
    double w = viz_text_width(measure, ax->text[n]);
    if (w > ax->max_width) ax->max_width = w;
  }
  return ATTN_OK;
}
#endif

/* Region and colour scale from opts, validated against [lq, lk]. */
static attn_status resolve_region(const attn_viz_opts *o, int64_t lq, int64_t lk, int64_t r[4]) {
  r[0] = o->q0, r[1] = o->q1 ? o->q1 : lq, r[2] = o->k0, r[3] = o->k1 ? o->k1 : lk;
  if (r[0] < 0 || r[0] >= r[1] || r[1] > lq || r[2] < 0 || r[2] >= r[3] || r[3] > lk)
    return attn_set_error(ATTN_EINVAL,
                          "heatmap: region [%lld,%lld)x[%lld,%lld) is empty or outside the "
                          "%lldx%lld matrix",
                          (long long)r[0], (long long)r[1], (long long)r[2], (long long)r[3],
                          (long long)lq, (long long)lk);
  return ATTN_OK;
}

attn_status attn_viz_heatmap_f32(const char *path, const float *probs, int64_t lq, int64_t lk,
                                 const char *const *q_labels, const char *const *k_labels,
                                 const attn_viz_opts *opts) {
  attn_viz_opts o;
  if (opts)
    o = *opts;
  else
    attn_viz_opts_default(&o);
  viz_format fmt;
  attn_status st = viz_format_of(path, &fmt);
  if (st) return st;
  if (lq < 1 || lk < 1 || lq > 100000 || lk > 100000)
    return attn_set_error(ATTN_EINVAL, "heatmap: shape [%lld, %lld] must be within 1..100000",
                          (long long)lq, (long long)lk);
  if ((st = viz_check_finite(probs, lq * lk, "heatmap probs"))) return st;
  int64_t r[4];
  if ((st = resolve_region(&o, lq, lk, r))) return st;
  if (o.cmap != ATTN_CMAP_BONE && o.cmap != ATTN_CMAP_VIRIDIS)
    return attn_set_error(ATTN_EINVAL, "heatmap: unknown colormap %d", (int)o.cmap);
#ifndef ATTN_HAVE_CAIRO
  (void)q_labels, (void)k_labels;
  return viz_no_cairo("heatmap");
#else
  int64_t nq = r[1] - r[0], nk = r[3] - r[2];
  double vmin = o.vmin, vmax = o.vmax;
  if (!(vmin < vmax)) { /* autoscale to the drawn region, as matshow does */
    vmin = INFINITY, vmax = -INFINITY;
    for (int64_t i = r[0]; i < r[1]; i++)
      for (int64_t j = r[2]; j < r[3]; j++) {
        double v = probs[i * lk + j];
        vmin = fmin(vmin, v), vmax = fmax(vmax, v);
      }
  }
  int64_t nmax = nq > nk ? nq : nk, nmin = nq < nk ? nq : nk;
  /* square cells, the long side ~640 px; a short side gets at least ~120 px
   * as long as the long side stays within 2400 px */
  double cell = fmin(28.0, 640.0 / (double)nmax);
  cell = fmax(cell, fmin(120.0 / (double)nmin, 2400.0 / (double)nmax));
  if (cell < 1) cell = nmax <= 2400 ? 1.0 : 2400.0 / (double)nmax;
  double pw = cell * (double)nk, ph = cell * (double)nq;

  cairo_surface_t *ms = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *measure = cairo_create(ms);
  axis_labels qa = {0}, ka = {0};
  st = axis_labels_make(&qa, measure, q_labels, r[0], r[1], o.max_labels, cell);
  if (!st) st = axis_labels_make(&ka, measure, k_labels, r[2], r[3], o.max_labels, cell);
  char title[512] = "";
  if (o.title) viz_label_clean(o.title, title, sizeof title, 120);
  const char *qn = o.q_name ? o.q_name : "query", *kn = o.k_name ? o.k_name : "key";
  double title_w = 0, bar_font = 10, bar_lw = 0;
  if (!st) {
    viz_font(measure, 14, 1);
    title_w = title[0] ? viz_text_width(measure, title) : 0;
    bar_lw = viz_colorbar_label_width(measure, vmin, vmax, bar_font);
  }
  cairo_destroy(measure);
  cairo_surface_destroy(ms);
  if (st) {
    free(qa.text), free(ka.text);
    return st;
  }
  const double pad = 12, caption = 18, tick = 4;
  double left = pad + caption + qa.max_width + tick + 4;
  double top = pad + (title[0] ? 24 : 0) + caption + ka.max_width + tick + 4;
  double bar_x = left + pw + 16, bar_w = 14, bar_h = fmax(ph, 120);
  double width = fmax(bar_x + bar_w + bar_lw + pad, left + title_w + pad);
  double height = top + fmax(ph, bar_h) + pad;

  viz_canvas c;
  if ((st = viz_canvas_open(&c, path, width, height))) {
    free(qa.text), free(ka.text);
    return st;
  }
  cairo_t *cr = c.cr;
  st = viz_draw_matrix(cr, fmt, probs, lk, r[0], r[1], r[2], r[3], left, top, cell, o.cmap, vmin,
                       vmax);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, left, top, pw, ph);
  cairo_stroke(cr);
  /* query labels down the left, key labels across the top (rotated) */
  viz_font(cr, qa.font, 0);
  for (int64_t n = 0; n < qa.count; n++) {
    double y = top + ((double)(n * qa.stride) + 0.5) * cell;
    cairo_move_to(cr, left - tick, y), cairo_line_to(cr, left, y), cairo_stroke(cr);
    viz_text(cr, qa.text[n], left - tick - 3, y, 1.0);
  }
  viz_font(cr, ka.font, 0);
  for (int64_t n = 0; n < ka.count; n++) {
    double x = left + ((double)(n * ka.stride) + 0.5) * cell;
    cairo_move_to(cr, x, top - tick), cairo_line_to(cr, x, top), cairo_stroke(cr);
    viz_text_up(cr, ka.text[n], x, top - tick - 3, 0.0);
  }
  viz_font(cr, 11, 0);
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  viz_text(cr, kn, left + pw / 2, top - tick - 4 - ka.max_width - caption / 2, 0.5);
  viz_text_up(cr, qn, pad + caption / 2 - 4, top + ph / 2, 0.5);
  cairo_set_source_rgb(cr, 0, 0, 0);
  if (title[0]) {
    viz_font(cr, 14, 1);
    viz_text(cr, title, left, pad + 10, 0.0);
  }
  viz_draw_colorbar(cr, bar_x, top, bar_w, bar_h, o.cmap, vmin, vmax, bar_font);
  free(qa.text), free(ka.text);
  attn_status cs = viz_canvas_close(&c, st == ATTN_OK);
  return st ? st : cs;
#endif
}

attn_status attn_viz_alignment_f32(const char *path, const float *probs, int64_t l_out,
                                   int64_t l_src, const char *const *out_labels,
                                   const char *const *src_labels, const attn_viz_opts *opts) {
  attn_viz_opts o;
  if (opts)
    o = *opts;
  else
    attn_viz_opts_default(&o);
  if (!o.q_name) o.q_name = "output";
  if (!o.k_name) o.k_name = "source";
  return attn_viz_heatmap_f32(path, probs, l_out, l_src, out_labels, src_labels, &o);
}
