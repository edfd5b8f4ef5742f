/* Internal helpers shared by the viz*.c and diagnose*.c files: output canvas
 * (cairo surface by file extension, atomic write), matrix/colour-bar/label
 * drawing, input checks. Not part of the public API. */
#ifndef ATTN_APPS_VIZ_INTERNAL_H
#define ATTN_APPS_VIZ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "apps/viz.h"

#ifdef ATTN_HAVE_CAIRO
#include <cairo.h>
#endif

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
 * (x, y) with cells of size cell, colours scaled from [vmin, vmax]. */
attn_status viz_draw_matrix(cairo_t *cr, viz_format fmt, const float *probs, int64_t ld, int64_t q0,
                            int64_t q1, int64_t k0, int64_t k1, double x, double y, double cell,
                            attn_viz_cmap cmap, double vmin, double vmax);
/* Vertical colour bar at (x, y) of size w x h with 5 labelled ticks on its right. */
void viz_draw_colorbar(cairo_t *cr, double x, double y, double w, double h, attn_viz_cmap cmap,
                       double vmin, double vmax, double font);
/* Width the colour bar's tick labels need at this font size. */
double viz_colorbar_label_width(cairo_t *cr, double vmin, double vmax, double font);

void viz_font(cairo_t *cr, double size, int bold);
/* Text width of s (already clean UTF-8) at the current font. */
double viz_text_width(cairo_t *cr, const char *s);
/* Text with its anchor: halign 0 left, 0.5 centre, 1 right; vertically centred on y. */
void viz_text(cairo_t *cr, const char *s, double x, double y, double halign);
/* Text rotated 90° counter-clockwise (reading upwards), its end (halign 1) or
 * start (0) at y, horizontally centred on x. */
void viz_text_up(cairo_t *cr, const char *s, double x, double y, double halign);
#endif

#endif
