/* Rotary position embeddings (RoPE), forward and backward (the inverse
 * rotation). x [N, L, H, D]: the first R dims of each D-vector at position
 * pos_offset + l are rotated pairwise (R = D: all of it; R < D: partial
 * rotary, the other D - R dims pass through); see include/attn/variants.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variants.h"

attn_status attn_rope_layout_from_name(const char *name, attn_rope_layout *out) {
  if (!name || !out) return attn_set_error(ATTN_EINVAL, "rope layout: NULL argument");
  if (!strcmp(name, "interleaved"))
    *out = ATTN_ROPE_INTERLEAVED;
  else if (!strcmp(name, "half"))
    *out = ATTN_ROPE_HALF;
  else
    return attn_set_error(ATTN_EINVAL, "rope layout '%s' unknown (interleaved or half)", name);
  return ATTN_OK;
}

/* sign = +1 rotates, -1 rotates back */
static attn_status rope(const float *x, float *y, int64_t N, int64_t L, int64_t H, int64_t D,
                        int64_t R, float theta, int64_t pos_offset, attn_rope_layout layout,
                        double sign) {
  if (N < 0 || L < 0 || H < 0 || D < 2 || pos_offset < 0)
    return attn_set_error(ATTN_EINVAL,
                          "rope: N %lld, L %lld, H %lld, D %lld, pos_offset %lld (D >= 2, "
                          "others >= 0)",
                          (long long)N, (long long)L, (long long)H, (long long)D,
                          (long long)pos_offset);
  if (R < 2 || R % 2 || R > D)
    return attn_set_error(ATTN_EINVAL, "rope: rotary dims %lld must be even, >= 2 and <= the "
                          "head dim %lld", (long long)R, (long long)D);
  if (!(theta > 1.0f) || !isfinite(theta))
    return attn_set_error(ATTN_EINVAL, "rope: theta = %g must be finite and > 1", (double)theta);
  if (layout != ATTN_ROPE_INTERLEAVED && layout != ATTN_ROPE_HALF)
    return attn_set_error(ATTN_EINVAL, "rope: unknown layout %d", (int)layout);
  if (N * L * H == 0) return ATTN_OK;
  if (!x || !y) return attn_set_error(ATTN_EINVAL, "rope: %s is NULL", !x ? "x" : "y");
  const int64_t half = R / 2;
  double *cs = malloc((size_t)(2 * half) * sizeof(double)); /* cos, sin of one position */
  if (!cs) return attn_set_error(ATTN_ENOMEM, "rope: out of memory");
  for (int64_t l = 0; l < L; l++) {
    const double pos = (double)(pos_offset + l);
    for (int64_t c = 0; c < half; c++) {
      double a = pos * pow((double)theta, -2.0 * (double)c / (double)R);
      cs[c] = cos(a);
      cs[half + c] = sign * sin(a);
    }
    for (int64_t n = 0; n < N; n++)
      for (int64_t h = 0; h < H; h++) {
        const int64_t off = ((n * L + l) * H + h) * D;
        const float *xi = x + off;
        float *yi = y + off;
        for (int64_t c = 0; c < half; c++) {
          const int64_t a = layout == ATTN_ROPE_HALF ? c : 2 * c;
          const int64_t b = layout == ATTN_ROPE_HALF ? c + half : 2 * c + 1;
          const double x0 = xi[a], x1 = xi[b];
          yi[a] = (float)(x0 * cs[c] - x1 * cs[half + c]);
          yi[b] = (float)(x0 * cs[half + c] + x1 * cs[c]);
        }
        if (yi != xi && R < D) memcpy(yi + R, xi + R, (size_t)(D - R) * sizeof(float));
      }
  }
  free(cs);
  return ATTN_OK;
}

attn_status attn_rope_f32(const float *x, float *y, int64_t N, int64_t L, int64_t H, int64_t D,
                          float theta, int64_t pos_offset, attn_rope_layout layout) {
  return rope(x, y, N, L, H, D, D, theta, pos_offset, layout, 1.0);
}

attn_status attn_rope_partial_f32(const float *x, float *y, int64_t N, int64_t L, int64_t H,
                                  int64_t D, int64_t rotary_dim, float theta, int64_t pos_offset,
                                  attn_rope_layout layout) {
  return rope(x, y, N, L, H, D, rotary_dim, theta, pos_offset, layout, 1.0);
}

attn_status attn_rope_partial_backward_f32(const float *dy, float *dx, int64_t N, int64_t L,
                                           int64_t H, int64_t D, int64_t rotary_dim, float theta,
                                           int64_t pos_offset, attn_rope_layout layout) {
  return rope(dy, dx, N, L, H, D, rotary_dim, theta, pos_offset, layout, -1.0);
}

attn_status attn_rope_backward_f32(const float *dy, float *dx, int64_t N, int64_t L, int64_t H,
                                   int64_t D, float theta, int64_t pos_offset,
                                   attn_rope_layout layout) {
  return rope(dy, dx, N, L, H, D, D, theta, pos_offset, layout, -1.0);
}
