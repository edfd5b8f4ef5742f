/* One attention heatmap (the seed's plot_attention, done properly): query
 * tokens down, key tokens across rotated 90°, a colour bar, a title; long
 * axes get thinned labels (at most max_labels each) or a cropped region. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz_internal.h"

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
  double vmin, vmax;
  viz_autoscale(&o, probs, 1, 0, lk, r[0], r[1], r[2], r[3], &vmin, &vmax);
  int64_t nmax = nq > nk ? nq : nk, nmin = nq < nk ? nq : nk;
  /* square cells, the long side ~640 px; a short side gets at least ~120 px
   * as long as the long side stays within 2400 px */
  double cell = fmin(28.0, 640.0 / (double)nmax);
  cell = fmax(cell, fmin(120.0 / (double)nmin, 2400.0 / (double)nmax));
  if (cell < 1) cell = nmax <= 2400 ? 1.0 : 2400.0 / (double)nmax;
  double pw = cell * (double)nk, ph = cell * (double)nq;

  char sub[512];
  viz_subtitle(sub, sizeof sub, &o, r[0], r[1], lq, r[2], r[3], lk);
  const char *bar_caption = viz_bar_caption(&o);
  cairo_surface_t *ms = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *measure = cairo_create(ms);
  viz_axis qa, ka = {0};
  st = viz_axis_make(&qa, measure, q_labels, r[0], r[1], o.max_labels, cell, VIZ_LABEL_CHARS);
  if (!st)
    st = viz_axis_make(&ka, measure, k_labels, r[2], r[3], o.max_labels, cell, VIZ_LABEL_CHARS);
  const char *qn = o.q_name ? o.q_name : "query", *kn = o.k_name ? o.k_name : "key";
  double head_w = 0, head_h = 0, bar_font = 11, bar_lw = 0;
  if (!st) {
    head_h = viz_header_size(measure, o.title, sub, &head_w);
    bar_lw = viz_colorbar_label_width(measure, vmin, vmax, bar_font, bar_caption);
  }
  cairo_destroy(measure);
  cairo_surface_destroy(ms);
  if (st) {
    viz_axis_free(&qa), viz_axis_free(&ka);
    return st;
  }
  const double pad = 12, caption = 18, tick = 4;
  double left = pad + caption + qa.max_width + tick + 4;
  double top = pad + head_h + caption + ka.max_width + tick + 4;
  double bar_x = left + pw + 16, bar_w = 14, bar_h = fmax(ph, 120);
  double width = fmax(bar_x + bar_w + bar_lw + pad, pad + head_w + pad);
  double height = top + fmax(ph, bar_h) + pad;

  viz_canvas c;
  if ((st = viz_canvas_open(&c, path, width, height))) {
    viz_axis_free(&qa), viz_axis_free(&ka);
    return st;
  }
  cairo_t *cr = c.cr;
  st = viz_draw_matrix(cr, fmt, probs, lk, r[0], r[1], r[2], r[3], left, top, cell, o.cmap, vmin,
                       vmax, o.row_norm);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, left, top, pw, ph);
  cairo_stroke(cr);
  /* query labels down the left, key labels across the top (rotated) */
  viz_axis_draw(cr, &qa, left, top, cell, 0, tick);
  viz_axis_draw(cr, &ka, left, top, cell, 1, tick);
  viz_font(cr, 11, 0);
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  viz_text(cr, kn, left + pw / 2, top - tick - 4 - ka.max_width - caption / 2, 0.5);
  viz_text_up(cr, qn, pad + caption / 2 - 4, top + ph / 2, 0.5);
  viz_draw_header(cr, pad, pad, o.title, sub);
  viz_draw_colorbar(cr, bar_x, top, bar_w, bar_h, o.cmap, vmin, vmax, bar_font, bar_caption);
  viz_axis_free(&qa), viz_axis_free(&ka);
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
