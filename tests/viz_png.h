/* PNG pictures read back for pixel checks (cairo decodes them). */
#ifndef ATTN_TESTS_VIZ_PNG_H
#define ATTN_TESTS_VIZ_PNG_H

#ifdef ATTN_HAVE_CAIRO
#include <cairo.h>
#include <stdint.h>

typedef struct {
  int w, h, stride;
  const unsigned char *data;
  cairo_surface_t *s; /* NULL when the file could not be read */
} png_image;

static inline int png_load(const char *path, png_image *img) {
  img->s = cairo_image_surface_create_from_png(path);
  if (cairo_surface_status(img->s) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(img->s);
    img->s = NULL;
    return 0;
  }
  img->w = cairo_image_surface_get_width(img->s);
  img->h = cairo_image_surface_get_height(img->s);
  img->stride = cairo_image_surface_get_stride(img->s);
  img->data = cairo_image_surface_get_data(img->s);
  return 1;
}

/* 0xRRGGBB of pixel (x, y) */
static inline uint32_t px(const png_image *img, int x, int y) {
  return *(const uint32_t *)(img->data + y * img->stride + x * 4) & 0xffffffu;
}
#endif
#endif
