/* Output canvas for pictures: a cairo surface chosen by the file's extension
 * (PNG image, SVG or PDF vector), written to PATH.tmp.<pid> and renamed over
 * PATH only when complete. Plus the input checks and label cleaning that
 * every picture uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "apps/viz/viz_internal.h"

attn_status viz_format_of(const char *path, viz_format *out) {
  if (!path || !path[0]) return attn_set_error(ATTN_EINVAL, "output path is empty");
  const char *dot = strrchr(path, '.');
  const char *slash = strrchr(path, '/');
  if (dot && (!slash || dot > slash)) {
    if (!strcasecmp(dot, ".png")) return *out = VIZ_PNG, ATTN_OK;
    if (!strcasecmp(dot, ".svg")) return *out = VIZ_SVG, ATTN_OK;
    if (!strcasecmp(dot, ".pdf")) return *out = VIZ_PDF, ATTN_OK;
  }
  return attn_set_error(ATTN_EINVAL, "output '%s': extension must be .png, .svg or .pdf", path);
}

attn_status viz_check_finite(const float *probs, int64_t n, const char *what) {
  if (!probs) return attn_set_error(ATTN_EINVAL, "%s: NULL data", what);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(probs[i]))
      return attn_set_error(ATTN_ENUMERIC, "%s: non-finite value %g at flat index %lld", what,
                            (double)probs[i], (long long)i);
  return ATTN_OK;
}

attn_status viz_no_cairo(const char *what) {
  return attn_set_error(ATTN_EUNSUPPORTED,
                        "%s: this build has no cairo and pangocairo (install libpango1.0-dev, which "
                        "brings libcairo2-dev, and rebuild)", what);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  int n;
  unsigned min;
  if ((c & 0xe0) == 0xc0) {
    n = 2, min = 0x80, c &= 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, min = 0x800, c &= 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, min = 0x10000, c &= 0x07;
  } else {
    return 0;
  }
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    c = c << 6 | (s[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  return n;
}

void viz_label_clean(const char *s, char *out, size_t cap, int max_chars) {
  size_t o = 0;
  int chars = 0;
  if (cap == 0) return;
  if (!s) s = "";
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    int n = utf8_len(p);
    if (chars == max_chars) { /* truncated: end with an ellipsis (3 bytes) */
      if (o + 3 < cap) memcpy(out + o, "\xe2\x80\xa6", 3), o += 3;
      break;
    }
    if (n == 0) {
      if (o + 1 >= cap) break;
      out[o++] = '?', p++;
    } else if (n == 1 && (*p < 0x20 || *p == 0x7f)) {
      if (o + 1 >= cap) break;
      out[o++] = ' ', p++;
    } else {
      if (o + (size_t)n >= cap) break;
      memcpy(out + o, p, (size_t)n), o += (size_t)n, p += n;
    }
    chars++;
  }
  out[o] = '\0';
}

#ifdef ATTN_HAVE_CAIRO
#include <cairo-pdf.h>
#include <cairo-svg.h>

static cairo_status_t write_file(void *closure, const unsigned char *data, unsigned int len) {
  return fwrite(data, 1, len, (FILE *)closure) == len ? CAIRO_STATUS_SUCCESS
                                                      : CAIRO_STATUS_WRITE_ERROR;
}

static void canvas_free(viz_canvas *c) {
  if (c->cr) cairo_destroy(c->cr);
  if (c->surface) cairo_surface_destroy(c->surface);
  if (c->file) fclose(c->file);
  if (c->tmp_path) unlink(c->tmp_path);
  free(c->tmp_path);
  free(c->final_path);
  memset(c, 0, sizeof *c);
}

attn_status viz_canvas_open(viz_canvas *c, const char *path, double width, double height) {
  memset(c, 0, sizeof *c);
  attn_status st = viz_format_of(path, &c->format);
  if (st) return st;
  if (!(width >= 1 && height >= 1 && width <= 32000 && height <= 32000))
    return attn_set_error(ATTN_EINVAL, "picture '%s': size %.0fx%.0f is out of range 1..32000",
                          path, width, height);
  c->width = ceil(width), c->height = ceil(height);
  size_t n = strlen(path) + 32;
  c->tmp_path = malloc(n);
  c->final_path = strdup(path);
  if (!c->tmp_path || !c->final_path) {
    canvas_free(c);
    return attn_set_error(ATTN_ENOMEM, "picture '%s': out of memory", path);
  }
  snprintf(c->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
  c->file = fopen(c->tmp_path, "wb");
  if (!c->file) {
    free(c->tmp_path), c->tmp_path = NULL; /* nothing to unlink */
    canvas_free(c);
    return attn_set_error(ATTN_EIO, "cannot create '%s.tmp.%ld'", path, (long)getpid());
  }
  if (c->format == VIZ_PNG)
    c->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)c->width, (int)c->height);
  else if (c->format == VIZ_SVG)
    c->surface = cairo_svg_surface_create_for_stream(write_file, c->file, c->width, c->height);
  else
    c->surface = cairo_pdf_surface_create_for_stream(write_file, c->file, c->width, c->height);
  c->cr = cairo_create(c->surface);
  if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
    const char *why = cairo_status_to_string(cairo_status(c->cr));
    canvas_free(c);
    return attn_set_error(ATTN_ENOMEM, "picture '%s': cairo: %s", path, why);
  }
  cairo_set_source_rgb(c->cr, 1, 1, 1);
  cairo_paint(c->cr);
  return ATTN_OK;
}

attn_status viz_canvas_close(viz_canvas *c, int commit) {
  attn_status st = ATTN_OK;
  if (commit) {
    cairo_status_t cs = cairo_status(c->cr);
    if (cs == CAIRO_STATUS_SUCCESS) {
      cairo_surface_flush(c->surface);
      if (c->format == VIZ_PNG)
        cs = cairo_surface_write_to_png_stream(c->surface, write_file, c->file);
      cairo_surface_finish(c->surface);
      if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(c->surface);
    }
    if (cs != CAIRO_STATUS_SUCCESS) {
      st = attn_set_error(cs == CAIRO_STATUS_WRITE_ERROR ? ATTN_EIO : ATTN_EINVAL,
                          "picture '%s': cairo: %s", c->final_path, cairo_status_to_string(cs));
    } else if (fflush(c->file) != 0 || fsync(fileno(c->file)) != 0) {
      st = attn_set_error(ATTN_EIO, "picture '%s': write failed", c->final_path);
    } else {
      int bad = fclose(c->file);
      c->file = NULL;
      if (bad || rename(c->tmp_path, c->final_path) != 0)
        st = attn_set_error(ATTN_EIO, "picture '%s': cannot write or rename into place",
                            c->final_path);
      else
        free(c->tmp_path), c->tmp_path = NULL; /* renamed: nothing to remove */
    }
  }
  canvas_free(c);
  return st;
}
#endif
