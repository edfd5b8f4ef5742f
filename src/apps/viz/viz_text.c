/* Text in pictures with Pango: one family list that fontconfig completes, so
 * Chinese, Japanese, Arabic or emoji labels come from whichever installed
 * font has those characters (DejaVu Sans first for Latin text and digits).
 * Every string is laid out as one PangoLayout, measured by its logical
 * extents, drawn straight or rotated; tests can ask for a note of each one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz_internal.h"

#ifdef ATTN_HAVE_CAIRO
#include <pango/pangocairo.h>

/* The font of a cairo context (set by viz_font), kept as its user data. */
typedef struct {
  PangoFontDescription *desc;
  double baseline_shift; /* centre of a line to its baseline; < 0: not measured yet */
} viz_font_state;

static const cairo_user_data_key_t font_key;

static void font_state_free(void *p) {
  viz_font_state *f = p;
  pango_font_description_free(f->desc);
  free(f);
}

void viz_font(cairo_t *cr, double size, int bold) {
  viz_font_state *f = malloc(sizeof *f);
  if (!f) return; /* the previous font stays */
  f->desc = pango_font_description_new();
  pango_font_description_set_family(f->desc, VIZ_FONT_FAMILIES);
  pango_font_description_set_absolute_size(f->desc, size * PANGO_SCALE);
  pango_font_description_set_weight(f->desc, bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
  f->baseline_shift = -1;
  if (cairo_set_user_data(cr, &font_key, f, font_state_free) != CAIRO_STATUS_SUCCESS)
    font_state_free(f);
}

static viz_font_state *font_of(cairo_t *cr) {
  viz_font_state *f = cairo_get_user_data(cr, &font_key);
  if (!f) {
    viz_font(cr, 10, 0);
    f = cairo_get_user_data(cr, &font_key);
  }
  return f;
}

/* s laid out in cr's font; NULL when out of memory. */
static PangoLayout *layout_of(cairo_t *cr, const char *s) {
  PangoLayout *l = pango_cairo_create_layout(cr);
  if (!l) return NULL;
  viz_font_state *f = font_of(cr);
  if (f) pango_layout_set_font_description(l, f->desc);
  pango_layout_set_text(l, s, -1);
  return l;
}

/* Offset from the vertical centre of a line to its baseline, from the
 * primary font's ascent and descent (not the layout's, which fallback fonts
 * with tall lines would change: CJK labels must sit where Latin ones do). */
static double baseline_shift(cairo_t *cr, PangoLayout *l) {
  viz_font_state *f = font_of(cr);
  if (f && f->baseline_shift >= 0) return f->baseline_shift;
  PangoFontMetrics *m =
      pango_context_get_metrics(pango_layout_get_context(l), f ? f->desc : NULL, NULL);
  double shift =
      (pango_font_metrics_get_ascent(m) - pango_font_metrics_get_descent(m)) / (2.0 * PANGO_SCALE);
  pango_font_metrics_unref(m);
  if (f) f->baseline_shift = fmax(shift, 0);
  return fmax(shift, 0);
}

double viz_text_width(cairo_t *cr, const char *s) {
  PangoLayout *l = layout_of(cr, s);
  if (!l) return 0;
  PangoRectangle logical;
  pango_layout_get_pixel_extents(l, NULL, &logical);
  g_object_unref(l);
  return logical.width;
}

/* Notes for tests (viz_text_notes); one list per thread. */
static _Thread_local viz_text_note *notes;
static _Thread_local int notes_cap, notes_n;

void viz_text_notes(viz_text_note *buf, int cap) {
  notes = buf, notes_cap = buf ? cap : 0, notes_n = 0;
}

int viz_text_notes_count(void) { return notes_n; }

/* Notes the layout just drawn at the current point: its logical box in
 * device pixels (the bounds of the rotated box for rotated text). */
static void note(cairo_t *cr, PangoLayout *l, const char *s) {
  if (!notes || notes_n >= notes_cap) return;
  viz_text_note *n = &notes[notes_n++];
  PangoRectangle logical;
  pango_layout_get_pixel_extents(l, NULL, &logical);
  double cx, cy;
  cairo_get_current_point(cr, &cx, &cy);
  n->x0 = n->y0 = INFINITY, n->x1 = n->y1 = -INFINITY;
  for (int k = 0; k < 4; k++) {
    double x = cx + logical.x + (k & 1 ? logical.width : 0);
    double y = cy + logical.y + (k & 2 ? logical.height : 0);
    cairo_user_to_device(cr, &x, &y);
    n->x0 = fmin(n->x0, x), n->x1 = fmax(n->x1, x);
    n->y0 = fmin(n->y0, y), n->y1 = fmax(n->y1, y);
  }
  n->height = logical.height;
  viz_font_state *f = font_of(cr);
  n->size = f ? pango_font_description_get_size(f->desc) / (double)PANGO_SCALE : 0;
  n->unknown = pango_layout_get_unknown_glyphs_count(l);
  snprintf(n->text, sizeof n->text, "%s", s);
}

/* Draws layout l of s with its baseline's left end at (x, y) in the current
 * user space, shifted left by halign times its width. */
static void show(cairo_t *cr, PangoLayout *l, const char *s, double x, double y, double halign) {
  PangoRectangle logical;
  pango_layout_get_pixel_extents(l, NULL, &logical);
  double top = y - pango_layout_get_baseline(l) / (double)PANGO_SCALE;
  cairo_move_to(cr, x - halign * logical.width, top);
  pango_cairo_update_layout(cr, l);
  note(cr, l, s);
  pango_cairo_show_layout(cr, l);
  cairo_new_path(cr);
}

void viz_text(cairo_t *cr, const char *s, double x, double y, double halign) {
  PangoLayout *l = layout_of(cr, s);
  if (!l) return;
  show(cr, l, s, x, y + baseline_shift(cr, l), halign);
  g_object_unref(l);
}

void viz_text_up(cairo_t *cr, const char *s, double x, double y, double halign) {
  PangoLayout *l = layout_of(cr, s);
  if (!l) return;
  cairo_save(cr);
  cairo_translate(cr, x + baseline_shift(cr, l), y);
  cairo_rotate(cr, -M_PI / 2);
  show(cr, l, s, 0, 0, halign);
  cairo_restore(cr);
  g_object_unref(l);
}

void attn_viz_release_fonts(void) {
  pango_cairo_font_map_set_default(NULL); /* its fonts hold cairo's scaled fonts */
  cairo_debug_reset_static_data();
}
#else
void attn_viz_release_fonts(void) {}
#endif
