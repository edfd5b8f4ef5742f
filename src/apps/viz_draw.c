/* Drawing pieces shared by the pictures: the matrix of cells, the colour bar,
 * and text (cairo's toy text API; labels are cleaned to valid UTF-8 first). */
#include <math.h>
#include <stdlib.h>

#include "apps/viz_internal.h"

#ifdef ATTN_HAVE_CAIRO

void viz_font(cairo_t *cr, double size, int bold) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double viz_text_width(cairo_t *cr, const char *s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  return e.x_advance;
}

/* Offset from the vertical centre of a line to its baseline. */
static double centre_to_baseline(cairo_t *cr) {
  cairo_font_extents_t f;
  cairo_font_extents(cr, &f);
  return (f.ascent - f.descent) / 2;
}

void viz_text(cairo_t *cr, const char *s, double x, double y, double halign) {
  double w = viz_text_width(cr, s);
  cairo_move_to(cr, x - halign * w, y + centre_to_baseline(cr));
  cairo_show_text(cr, s);
}

void viz_text_up(cairo_t *cr, const char *s, double x, double y, double halign) {
  double w = viz_text_width(cr, s);
  cairo_save(cr);
  cairo_translate(cr, x + centre_to_baseline(cr), y);
  cairo_rotate(cr, -M_PI / 2);
  cairo_move_to(cr, -halign * w, 0);
  cairo_show_text(cr, s);
  cairo_restore(cr);
}

static double scale01(double v, double vmin, double vmax) {
  return vmax > vmin ? (v - vmin) / (vmax - vmin) : 0.0;
}

attn_status viz_draw_matrix(cairo_t *cr, viz_format fmt, const float *probs, int64_t ld, int64_t q0,
                            int64_t q1, int64_t k0, int64_t k1, double x, double y, double cell,
                            attn_viz_cmap cmap, double vmin, double vmax) {
  int64_t nq = q1 - q0, nk = k1 - k0;
  if (fmt != VIZ_PNG && nq * nk <= 16384) { /* small vector picture: one rectangle per cell */
    for (int64_t i = 0; i < nq; i++)
      for (int64_t j = 0; j < nk; j++) {
        double rgb[3];
        attn_viz_cmap_rgb(cmap, scale01(probs[(q0 + i) * ld + k0 + j], vmin, vmax), rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        /* each cell spills 0.5 under its right and lower neighbours, which
         * are drawn later: no anti-aliased seams show between cells */
        cairo_rectangle(cr, x + j * cell, y + i * cell, cell + (j + 1 < nk ? 0.5 : 0),
                        cell + (i + 1 < nq ? 0.5 : 0));
        cairo_fill(cr);
      }
    return ATTN_OK;
  }
  /* One pixel per cell, scaled without smoothing. SVG viewers smooth images
   * whatever cairo asks, so vector files get up x up pixels per cell. */
  int up = 1;
  if (fmt != VIZ_PNG)
    while (up < 8 && up < cell && (double)nk * nq * (up + 1) * (up + 1) <= 16e6)
      up++;
  cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)nk * up, (int)nq * up);
  if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(img);
    return attn_set_error(ATTN_ENOMEM, "heatmap: cannot make a %lldx%lld image", (long long)nk,
                          (long long)nq);
  }
  cairo_surface_flush(img);
  unsigned char *px = cairo_image_surface_get_data(img);
  int stride = cairo_image_surface_get_stride(img);
  for (int64_t i = 0; i < nq * up; i++) {
    uint32_t *row = (uint32_t *)(px + i * stride);
    for (int64_t j = 0; j < nk; j++) {
      uint32_t c = viz_cmap_argb(cmap, scale01(probs[(q0 + i / up) * ld + k0 + j], vmin, vmax));
      for (int u = 0; u < up; u++)
        row[j * up + u] = c;
    }
  }
  cairo_surface_mark_dirty(img);
  cairo_save(cr);
  cairo_rectangle(cr, x, y, nk * cell, nq * cell);
  cairo_clip(cr);
  cairo_translate(cr, x, y);
  cairo_scale(cr, cell / up, cell / up);
  cairo_set_source_surface(cr, img, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr),
                           cell >= 1 ? CAIRO_FILTER_NEAREST : CAIRO_FILTER_GOOD);
  cairo_paint(cr);
  cairo_restore(cr);
  cairo_surface_destroy(img);
  return ATTN_OK;
}

/* Three significant digits; values within 1e-4 of the range from 0 show as 0
 * (an autoscaled minimum of 5.8e-13 reads better as 0). */
static void tick_label(char *buf, size_t n, double v, double range) {
  if (fabs(v) < 1e-4 * range) v = 0;
  snprintf(buf, n, "%.3g", v);
}

double viz_colorbar_label_width(cairo_t *cr, double vmin, double vmax, double font) {
  viz_font(cr, font, 0);
  double w = 0;
  for (int k = 0; k <= 4; k++) {
    char buf[32];
    tick_label(buf, sizeof buf, vmin + (vmax - vmin) * k / 4, vmax - vmin);
    double tw = viz_text_width(cr, buf);
    if (tw > w) w = tw;
  }
  return w + 8;
}

void viz_draw_colorbar(cairo_t *cr, double x, double y, double w, double h, attn_viz_cmap cmap,
                       double vmin, double vmax, double font) {
  if (cairo_surface_get_type(cairo_get_target(cr)) != CAIRO_SURFACE_TYPE_IMAGE) {
    for (int i = 0; i < 256; i++) { /* vector files: 256 bands, no image to smooth */
      double rgb[3];
      attn_viz_cmap_rgb(cmap, (255 - i + 0.5) / 256.0, rgb);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle(cr, x, y + h * i / 256.0, w, h / 256.0 + 0.05);
      cairo_fill(cr);
    }
  } else {
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 256);
    if (cairo_surface_status(img) == CAIRO_STATUS_SUCCESS) {
      cairo_surface_flush(img);
      unsigned char *px = cairo_image_surface_get_data(img);
      int stride = cairo_image_surface_get_stride(img);
      for (int i = 0; i < 256; i++) /* top = high values */
        *(uint32_t *)(px + i * stride) = viz_cmap_argb(cmap, (255 - i + 0.5) / 256.0);
      cairo_surface_mark_dirty(img);
      cairo_save(cr);
      cairo_rectangle(cr, x, y, w, h);
      cairo_clip(cr);
      cairo_translate(cr, x, y);
      cairo_scale(cr, w, h / 256.0);
      cairo_set_source_surface(cr, img, 0, 0);
      cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
      cairo_paint(cr);
      cairo_restore(cr);
    }
    cairo_surface_destroy(img);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x, y, w, h);
  cairo_stroke(cr);
  viz_font(cr, font, 0);
  for (int k = 0; k <= 4; k++) {
    double v = vmin + (vmax - vmin) * k / 4, ty = y + h - h * k / 4.0;
    if (vmax <= vmin) v = vmin;
    char buf[32];
    tick_label(buf, sizeof buf, v, vmax - vmin);
    cairo_move_to(cr, x + w, ty);
    cairo_line_to(cr, x + w + 4, ty);
    cairo_stroke(cr);
    viz_text(cr, buf, x + w + 6, ty, 0);
    if (vmax <= vmin) break;
  }
}
#endif
