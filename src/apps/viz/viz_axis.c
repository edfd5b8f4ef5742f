/* Token labels along one axis of a matrix picture: every label if there is
 * room for text at least VIZ_LABEL_FONT_MIN px high, else every n-th one with
 * its index in front; measured, then drawn with tick marks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz_internal.h"

#ifdef ATTN_HAVE_CAIRO
attn_status viz_axis_make(viz_axis *ax, cairo_t *measure, const char *const *labels, int64_t a,
                          int64_t b, int max_labels, double cell, int max_chars) {
  memset(ax, 0, sizeof *ax);
  ax->a = a, ax->b = b;
  ax->stride = attn_viz_label_stride(b - a, max_labels);
  while (cell * (double)ax->stride < VIZ_LABEL_ROOM)
    ax->stride++;
  ax->count = (b - a + ax->stride - 1) / ax->stride;
  ax->text = calloc((size_t)ax->count, sizeof *ax->text);
  if (!ax->text) return attn_set_error(ATTN_ENOMEM, "picture: out of memory for labels");
  double room = cell * (double)ax->stride; /* space along the axis per label */
  ax->font = fmin(12.0, room * 0.8);
  viz_font(measure, ax->font, 0);
  for (int64_t n = 0; n < ax->count; n++) {
    int64_t i = a + n * ax->stride;
    char clean[VIZ_LABEL_BYTES];
    viz_label_clean(labels ? labels[i] : NULL, clean, sizeof clean,
                    max_chars < VIZ_LABEL_CHARS ? max_chars : VIZ_LABEL_CHARS);
    if (!labels)
      snprintf(ax->text[n], VIZ_AXIS_TEXT_BYTES, "%lld", (long long)i);
    else if (ax->stride > 1) /* thinned: the index tells where the label belongs */
      snprintf(ax->text[n], VIZ_AXIS_TEXT_BYTES, "%lld %s", (long long)i, clean);
    else
      memcpy(ax->text[n], clean, VIZ_LABEL_BYTES);
    ax->max_width = fmax(ax->max_width, viz_text_width(measure, ax->text[n]));
  }
  return ATTN_OK;
}

void viz_axis_draw(cairo_t *cr, const viz_axis *ax, double x, double y, double cell, int across,
                   double tick) {
  viz_font(cr, ax->font, 0);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  for (int64_t n = 0; n < ax->count; n++) {
    double at = ((double)(n * ax->stride) + 0.5) * cell;
    if (across) {
      if (tick > 0) cairo_move_to(cr, x + at, y - tick), cairo_line_to(cr, x + at, y);
      cairo_stroke(cr);
      viz_text_up(cr, ax->text[n], x + at, y - tick - 3, 0.0);
    } else {
      if (tick > 0) cairo_move_to(cr, x - tick, y + at), cairo_line_to(cr, x, y + at);
      cairo_stroke(cr);
      viz_text(cr, ax->text[n], x - tick - 3, y + at, 1.0);
    }
  }
}

void viz_axis_free(viz_axis *ax) {
  free(ax->text);
  ax->text = NULL;
}
#endif
