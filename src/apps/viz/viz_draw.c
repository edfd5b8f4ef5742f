/* Drawing pieces shared by the pictures: the matrix of cells, the colour bar,
 * the title and subtitle, and the subtitle's text for the region drawn. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz_internal.h"

#define VIZ_HEADER_CHARS 160
#define VIZ_HEADER_BYTES (VIZ_HEADER_CHARS * 4 + 8)

/* "queries 0-39 of 512" or, uncropped, "512 queries". */
static int axis_range(char *buf, size_t n, int64_t a, int64_t b, int64_t len, const char *plural) {
  if (a == 0 && b == len) return snprintf(buf, n, "%lld %s", (long long)len, plural);
  return snprintf(buf, n, "%s %lld-%lld of %lld", plural, (long long)a, (long long)(b - 1),
                  (long long)len);
}

void viz_range_text(char *buf, size_t n, int64_t q0, int64_t q1, int64_t lq, int64_t k0, int64_t k1,
                    int64_t lk, const char *q_name, const char *k_name, const char *units) {
  char qp[64], kp[64];
  snprintf(qp, sizeof qp, "%s", !q_name || !strcmp(q_name, "query") ? "queries" : q_name);
  snprintf(kp, sizeof kp, "%s", !k_name || !strcmp(k_name, "key") ? "keys" : k_name);
  if (q0 == k0 && q1 == k1 && lq == lk && !q_name && !k_name) {
    axis_range(buf, n, q0, q1, lq, units ? units : "tokens");
    return;
  }
  int w = axis_range(buf, n, q0, q1, lq, qp);
  if (w >= 0 && (size_t)w + 2 < n) {
    memcpy(buf + w, ", ", 3);
    axis_range(buf + w + 2, n - (size_t)w - 2, k0, k1, lk, kp);
  }
}

void viz_subtitle(char *buf, size_t n, const attn_viz_opts *o, int64_t q0, int64_t q1, int64_t lq,
                  int64_t k0, int64_t k1, int64_t lk) {
  int w = o->subtitle && o->subtitle[0] ? snprintf(buf, n, "%s, ", o->subtitle) : 0;
  if (w < 0 || (size_t)w >= n) w = 0;
  viz_range_text(buf + w, n - (size_t)w, q0, q1, lq, k0, k1, lk, o->q_name, o->k_name, o->units);
  size_t len = strlen(buf);
  if (o->row_norm) snprintf(buf + len, n - len, ", each row scaled to its max");
}

#ifdef ATTN_HAVE_CAIRO

static double scale01(double v, double vmin, double vmax) {
  return vmax > vmin ? (v - vmin) / (vmax - vmin) : 0.0;
}

/* What a row's values are multiplied by: 1, or with row_norm 1 / its largest
 * value (a row without a positive value stays as it is). */
static double row_scale(const float *row, int64_t n, int row_norm) {
  if (!row_norm) return 1.0;
  double m = 0;
  for (int64_t j = 0; j < n; j++)
    m = fmax(m, row[j]);
  return m > 0 ? 1.0 / m : 1.0;
}

attn_status viz_draw_matrix(cairo_t *cr, viz_format fmt, const float *probs, int64_t ld, int64_t q0,
                            int64_t q1, int64_t k0, int64_t k1, double x, double y, double cell,
                            attn_viz_cmap cmap, double vmin, double vmax, int row_norm) {
  int64_t nq = q1 - q0, nk = k1 - k0;
  if (fmt != VIZ_PNG && nq * nk <= 16384) { /* small vector picture: one rectangle per cell */
    for (int64_t i = 0; i < nq; i++) {
      const float *row = probs + (q0 + i) * ld + k0;
      double rs = row_scale(row, nk, row_norm);
      for (int64_t j = 0; j < nk; j++) {
        double rgb[3];
        attn_viz_cmap_rgb(cmap, scale01(row[j] * rs, vmin, vmax), rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        /* each cell spills 0.5 under its right and lower neighbours, which
         * are drawn later: no anti-aliased seams show between cells */
        cairo_rectangle(cr, x + j * cell, y + i * cell, cell + (j + 1 < nk ? 0.5 : 0),
                        cell + (i + 1 < nq ? 0.5 : 0));
        cairo_fill(cr);
      }
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
    uint32_t *out = (uint32_t *)(px + i * stride);
    const float *row = probs + (q0 + i / up) * ld + k0;
    double rs = row_scale(row, nk, row_norm);
    for (int64_t j = 0; j < nk; j++) {
      uint32_t c = viz_cmap_argb(cmap, scale01(row[j] * rs, vmin, vmax));
      for (int u = 0; u < up; u++)
        out[j * up + u] = c;
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

#define MAX_TICKS 8

double viz_colorbar_label_width(cairo_t *cr, double vmin, double vmax, double font,
                                const char *caption) {
  viz_font(cr, font, 0);
  double ticks[MAX_TICKS], w = 0;
  int dec, n = viz_ticks(vmin, vmax, ticks, MAX_TICKS, &dec);
  for (int k = 0; k < n; k++) {
    char buf[32];
    viz_tick_label(buf, sizeof buf, ticks[k], dec);
    w = fmax(w, viz_text_width(cr, buf));
  }
  return w + 8 + (caption && caption[0] ? 2 * font : 0);
}

void viz_draw_colorbar(cairo_t *cr, double x, double y, double w, double h, attn_viz_cmap cmap,
                       double vmin, double vmax, double font, const char *caption) {
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
  double ticks[MAX_TICKS], lw = 0;
  int dec, n = viz_ticks(vmin, vmax, ticks, MAX_TICKS, &dec);
  for (int k = 0; k < n; k++) {
    double ty = vmax > vmin ? y + h - h * (ticks[k] - vmin) / (vmax - vmin) : y + h;
    char buf[32];
    viz_tick_label(buf, sizeof buf, ticks[k], dec);
    cairo_move_to(cr, x + w, ty);
    cairo_line_to(cr, x + w + 4, ty);
    cairo_stroke(cr);
    viz_text(cr, buf, x + w + 6, ty, 0);
    lw = fmax(lw, viz_text_width(cr, buf));
  }
  if (caption && caption[0]) {
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    viz_text_up(cr, caption, x + w + 8 + lw + font, y + h / 2, 0.5);
    cairo_set_source_rgb(cr, 0, 0, 0);
  }
}

double viz_header_size(cairo_t *measure, const char *title, const char *subtitle, double *width) {
  char buf[VIZ_HEADER_BYTES];
  double h = 0;
  *width = 0;
  if (title && title[0]) {
    viz_label_clean(title, buf, sizeof buf, VIZ_HEADER_CHARS);
    viz_font(measure, 14, 1);
    *width = viz_text_width(measure, buf), h += 22;
  }
  if (subtitle && subtitle[0]) {
    viz_label_clean(subtitle, buf, sizeof buf, VIZ_HEADER_CHARS);
    viz_font(measure, 12, 0);
    *width = fmax(*width, viz_text_width(measure, buf)), h += 18;
  }
  return h ? h + 6 : 0;
}

void viz_draw_header(cairo_t *cr, double x, double y, const char *title, const char *subtitle) {
  char buf[VIZ_HEADER_BYTES];
  if (title && title[0]) {
    viz_label_clean(title, buf, sizeof buf, VIZ_HEADER_CHARS);
    cairo_set_source_rgb(cr, 0, 0, 0);
    viz_font(cr, 14, 1);
    viz_text(cr, buf, x, y + 10, 0.0);
    y += 22;
  }
  if (subtitle && subtitle[0]) {
    viz_label_clean(subtitle, buf, sizeof buf, VIZ_HEADER_CHARS);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    viz_font(cr, 12, 0);
    viz_text(cr, buf, x, y + 8, 0.0);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
}
#endif
