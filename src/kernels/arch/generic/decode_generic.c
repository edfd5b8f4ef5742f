/* Decode attention's portable micro-kernels (decode_ukr.h): each row
 * widened to f32 once, 64 elements at a time, and used for every query
 * row. The reference of the SIMD levels' kernels (tests/test_decode.c). */
#include <string.h>

#include "attn/tensor.h"
#include "kernels/kern.h"

enum { PIECE = 64 };

/* x[0..n) := row[c0..c0+n) widened to f32 */
static void widen(int dtype, const void *row, int64_t c0, int64_t n, float *x) {
  switch (dtype) {
  case ATTN_F16: {
    const uint16_t *h = (const uint16_t *)row + c0;
    for (int64_t i = 0; i < n; i++)
      x[i] = attn_f16_to_f32(h[i]);
    break;
  }
  case ATTN_BF16: {
    const uint16_t *h = (const uint16_t *)row + c0;
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)h[i] << 16;
      memcpy(&x[i], &u, 4);
    }
    break;
  }
  case ATTN_I8: {
    const int8_t *b = (const int8_t *)row + c0;
    for (int64_t i = 0; i < n; i++)
      x[i] = (float)b[i];
    break;
  }
  default: memcpy(x, (const float *)row + c0, (size_t)n * sizeof(float));
  }
}

static void scores_generic(const attn_decode_block *b, const float *q, int64_t R, float *s) {
  float x[PIECE];
  for (int j = 0; j < b->n; j++) {
    for (int64_t r = 0; r < R; r++)
      s[r * ATTN_DECODE_NB + j] = 0.0f;
    for (int64_t c0 = 0; c0 < b->D; c0 += PIECE) {
      const int64_t n = b->D - c0 < PIECE ? b->D - c0 : PIECE;
      widen(b->dtype, b->k[j], c0, n, x);
      for (int64_t r = 0; r < R; r++) {
        const float *qr = q + r * b->D + c0;
        float a = 0.0f;
        for (int64_t i = 0; i < n; i++)
          a += qr[i] * x[i];
        s[r * ATTN_DECODE_NB + j] += a;
      }
    }
  }
}

static void pv_generic(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
                       float *acc) {
  const int64_t Dv = b->Dv;
  for (int64_t r = 0; r < R; r++) {
    float *a = acc + r * Dv;
    for (int64_t c = 0; c < Dv; c++)
      a[c] *= corr[r];
  }
  float x[PIECE];
  for (int j = 0; j < b->n; j++)
    for (int64_t c0 = 0; c0 < Dv; c0 += PIECE) {
      const int64_t n = Dv - c0 < PIECE ? Dv - c0 : PIECE;
      widen(b->dtype, b->v[j], c0, n, x);
      for (int64_t r = 0; r < R; r++) {
        const float w = p[r * ATTN_DECODE_NB + j];
        float *a = acc + r * Dv + c0;
        for (int64_t i = 0; i < n; i++)
          a[i] += w * x[i];
      }
    }
}

static const attn_decode_ops ops = {"generic", 0,    scores_generic, pv_generic, NULL, NULL, NULL,
                                    NULL,      NULL, NULL,           NULL,       NULL, NULL};

const attn_decode_ops *attn_decode_ops_generic(void) { return &ops; }
