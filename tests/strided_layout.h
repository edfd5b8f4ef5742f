/* Tensors [B, H, L, n] copied into strided layouts and back, for tests that
 * run the SDPA on views: each head's rows n + pitch_extra floats apart
 * within a row of H heads, `slots` such rows interleaved per position (3:
 * q, k, v as views of one [B, L, 3, H, n] projection), 5 floats between
 * batches; everything outside the view is NaN. */
#ifndef ATTN_TEST_STRIDED_LAYOUT_H
#define ATTN_TEST_STRIDED_LAYOUT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* x (NULL: nothing) into a new NaN-filled buffer; st receives the b, h, l
 * strides, *total the buffer's floats */
static inline float *layout_scatter(const float *x, int64_t B, int64_t H, int64_t L, int64_t n,
                                    int64_t pitch_extra, int64_t slots, int64_t st[3],
                                    int64_t *total) {
  st[1] = n + pitch_extra;
  st[2] = H * st[1] * slots;
  st[0] = L * st[2] + 5;
  *total = B * st[0];
  float *y = malloc(sizeof(float) * (size_t)(*total > 0 ? *total : 1));
  for (int64_t i = 0; i < *total; i++) y[i] = NAN;
  if (x)
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t l = 0; l < L; l++)
          memcpy(y + b * st[0] + h * st[1] + l * st[2], x + ((b * H + h) * L + l) * n,
                 sizeof(float) * (size_t)n);
  return y;
}

/* y's view back into x [B, H, L, n]; 1 if every float outside it is still NaN */
static inline int layout_gather(const float *y, float *x, int64_t B, int64_t H, int64_t L,
                                int64_t n, const int64_t st[3], int64_t total) {
  int64_t inside = 0, nan = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t l = 0; l < L; l++, inside += n)
        memcpy(x + ((b * H + h) * L + l) * n, y + b * st[0] + h * st[1] + l * st[2],
               sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < total; i++) nan += y[i] != y[i];
  return nan == total - inside;
}

#endif
