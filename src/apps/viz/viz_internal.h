/* Internal helpers shared by the viz*.c and diagnose*.c files: output canvas
 * (cairo surface by file extension, atomic write), matrix/colour-bar/label
 * drawing, input checks. Not part of the public API. */
#ifndef ATTN_APPS_VIZ_INTERNAL_H
#define ATTN_APPS_VIZ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "apps/viz/viz.h"

#ifdef ATTN_HAVE_CAIRO
#ifndef ATTN_HAVE_PANGOCAIRO
#error "pictures need pangocairo with cairo (libpango1.0-dev); the Makefile pairs them"
#endif
#include <cairo.h>
#endif

/* Every picture's fonts: DejaVu Sans for Latin text, digits and Arabic,
 * Noto Sans CJK SC (when installed) so that Han characters take the
 * Simplified Chinese forms the tutorials use, then fontconfig's fallback
 * (sans-serif) for everything else, emoji included. Naming "Noto Color
 * Emoji" here would be wrong: it has digits, and they would be taken from it. */
#define VIZ_FONT_FAMILIES "DejaVu Sans,Noto Sans CJK SC,sans-serif"

typedef enum { VIZ_PNG, VIZ_SVG, VIZ_PDF } viz_format;

/* Format from PATH's extension (.png/.svg/.pdf, any case); ATTN_EINVAL otherwise. */
attn_status viz_format_of(const char *path, viz_format *out);

/* Opaque ARGB32 pixel of t in [0,1] (matplotlib's bytes=True rounding). */
uint32_t viz_cmap_argb(attn_viz_cmap cmap, double t);

/* ATTN_ENUMERIC naming `what` and the flat index of the first non-finite value;
 * ATTN_EINVAL if probs is NULL. */
attn_status viz_check_finite(const float *probs, int64_t n, const char *what);

/* Copy label s into out[cap] as printable valid UTF-8: invalid bytes become
 * '?', control characters ' ', at most max_chars characters (then "…"). */
void viz_label_clean(const char *s, char *out, size_t cap, int max_chars);

/* Nice colour-bar ticks in [vmin, vmax]: multiples of 1, 2, 2.5 or 5 x 10^k,
 * 2 to 6 of them (one, vmin, when vmax <= vmin). Returns the count (<= max)
 * and the decimals their labels need. */
int viz_ticks(double vmin, double vmax, double *ticks, int max, int *decimals);
/* Label of tick v with that many decimals (tiny or huge steps: %.3g). */
void viz_tick_label(char *buf, size_t n, double v, int decimals);

/* "queries 0-39 of 512, keys 0-39 of 512" ("tokens 0-39 of 512" when both
 * axes are the same; "40 tokens" when nothing is cropped; units instead of
 * "tokens" when not NULL: "words 0-39 of 90") for region [q0,q1) x [k0,k1)
 * of an lq x lk matrix; q_name / k_name NULL: query/key. */
void viz_range_text(char *buf, size_t n, int64_t q0, int64_t q1, int64_t lq, int64_t k0, int64_t k1,
                    int64_t lk, const char *q_name, const char *k_name, const char *units);

/* The picture's subtitle: opts' subtitle, the region (viz_range_text) and,
 * with row_norm, ", each row scaled to its max". */
void viz_subtitle(char *buf, size_t n, const attn_viz_opts *o, int64_t q0, int64_t q1, int64_t lq,
                  int64_t k0, int64_t k1, int64_t lk);

/* opts (NULL: the defaults) with the axis names of cross attention,
 * "output" down and "source" across, unless opts name them. */
void viz_cross_opts(const attn_viz_opts *opts, attn_viz_opts *o);

/* The message for builds without cairo. */
attn_status viz_no_cairo(const char *what);

#ifdef ATTN_HAVE_CAIRO
typedef struct {
  viz_format format;
  double width, height;
  cairo_surface_t *surface;
  cairo_t *cr;
  FILE *file;       /* the temporary file being written */
  char *tmp_path;   /* PATH.tmp.<pid> */
  char *final_path; /* PATH */
} viz_canvas;

/* Opens a white width x height canvas writing to a temporary file next to path. */
attn_status viz_canvas_open(viz_canvas *c, const char *path, double width, double height);
/* commit = 1: finish, flush, fsync and rename over the final path (checking
 * cairo's status); commit = 0 or any failure: remove the temporary file.
 * Always frees everything; returns the first error. */
attn_status viz_canvas_close(viz_canvas *c, int commit);

/* Draws probs rows [q0,q1) x cols [k0,k1) of a matrix with row stride ld at
 * (x, y) with cells of size cell, colours scaled from [vmin, vmax]; with
 * row_norm each row is first divided by its largest drawn value. */
attn_status viz_draw_matrix(cairo_t *cr, viz_format fmt, const float *probs, int64_t ld, int64_t q0,
                            int64_t q1, int64_t k0, int64_t k1, double x, double y, double cell,
                            attn_viz_cmap cmap, double vmin, double vmax, int row_norm);
/* The colour scale of `tiles` matrices (stride per, row stride ld) over the
 * region: opts' vmin..vmax when vmin < vmax; else 0..1 with row_norm, or the
 * drawn values' min..max (as matplotlib's matshow). */
void viz_autoscale(const attn_viz_opts *o, const float *probs, int64_t tiles, int64_t per,
                   int64_t ld, int64_t q0, int64_t q1, int64_t k0, int64_t k1, double *vmin,
                   double *vmax);
/* The colour bar's caption: opts' bar_name, or "weight" / "weight / row max". */
const char *viz_bar_caption(const attn_viz_opts *o);
/* Vertical colour bar at (x, y) of size w x h, nice labelled ticks on its
 * right and the caption (reading upwards) beyond them. */
void viz_draw_colorbar(cairo_t *cr, double x, double y, double w, double h, attn_viz_cmap cmap,
                       double vmin, double vmax, double font, const char *caption);
/* Width the colour bar's tick labels and caption need at this font size. */
double viz_colorbar_label_width(cairo_t *cr, double vmin, double vmax, double font,
                                const char *caption);

/* The title (bold) and under it the subtitle, each optional (NULL or ""):
 * viz_header_size gives their height (0 for neither) and *width; the text
 * is cleaned to at most 160 characters. */
double viz_header_size(cairo_t *measure, const char *title, const char *subtitle, double *width);
void viz_draw_header(cairo_t *cr, double x, double y, const char *title, const char *subtitle);

/* Token labels of one axis [a, b) (viz_axis.c): the stride keeps at least
 * VIZ_LABEL_ROOM px per label, so the font is >= VIZ_LABEL_FONT_MIN px. */
#define VIZ_LABEL_FONT_MIN 10.0
#define VIZ_LABEL_ROOM 12.5 /* VIZ_LABEL_FONT_MIN / 0.8 */
#define VIZ_LABEL_CHARS 24  /* longer labels are cut with an ellipsis */
#define VIZ_LABEL_BYTES (VIZ_LABEL_CHARS * 4 + 8)
#define VIZ_AXIS_TEXT_BYTES (VIZ_LABEL_BYTES + 32) /* room for an index in front */
typedef struct {
  int64_t a, b, stride, count;
  char (*text)[VIZ_AXIS_TEXT_BYTES];
  double font, max_width;
} viz_axis;
/* Labels (NULL: indices) for cells of size cell, at most max_labels shown,
 * each cut to max_chars characters; measured with measure's surface. */
attn_status viz_axis_make(viz_axis *ax, cairo_t *measure, const char *const *labels, int64_t a,
                          int64_t b, int max_labels, double cell, int max_chars);
/* Draws them along the matrix whose corner is (x, y): across (rotated,
 * above y) or down (right-aligned, left of x), with ticks of length tick. */
void viz_axis_draw(cairo_t *cr, const viz_axis *ax, double x, double y, double cell, int across,
                   double tick);
void viz_axis_free(viz_axis *ax);

/* Text (Pango, viz_text.c). viz_font sets cr's font: size in pixels. */
void viz_font(cairo_t *cr, double size, int bold);
/* Text width of s (already clean UTF-8) at the current font. */
double viz_text_width(cairo_t *cr, const char *s);
/* Text with its anchor: halign 0 left, 0.5 centre, 1 right; vertically centred on y. */
void viz_text(cairo_t *cr, const char *s, double x, double y, double halign);
/* Text rotated 90° counter-clockwise (reading upwards), its end (halign 1) or
 * start (0) at y, horizontally centred on x. */
void viz_text_up(cairo_t *cr, const char *s, double x, double y, double halign);

/* For tests: each string drawn by this thread, noted while a list is set. */
typedef struct {
  char text[128];
  double x0, y0, x1, y1; /* logical box in device pixels (bounds, if rotated) */
  double height;         /* the line's logical height in pixels */
  double size;           /* the font size in pixels */
  int unknown;           /* glyphs no installed font has (Pango's unknown glyphs) */
} viz_text_note;
/* Notes the next cap strings into buf (NULL: stop noting). */
void viz_text_notes(viz_text_note *buf, int cap);
int viz_text_notes_count(void);
#endif

#endif
