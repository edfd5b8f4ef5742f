/* Decode attention's arm64 micro-kernels (decode_ukr.h): decode_avx2.c's
 * loops on 4 lanes (f16: FCVTL; bf16: a 16-bit shift; int8: SXTL twice and
 * SCVTF), query-row tiles of 8, 4, 2, 1; the tail of a row through a
 * zero-padded copy. */
#include "kernels/kern.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "attn/tensor.h"

enum { NB = ATTN_DECODE_NB };

static inline __attribute__((always_inline)) float32x4_t load4(int dt, const void *row, int64_t c) {
  switch (dt) {
  case ATTN_F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)row + c)));
  case ATTN_BF16:
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)row + c), 16));
  case ATTN_I8: {
    int32_t w;
    memcpy(&w, (const int8_t *)row + c, 4);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
  }
  default: return vld1q_f32((const float *)row + c);
  }
}

static inline __attribute__((always_inline)) float32x4_t load4_tail(int dt, const void *row,
                                                                    int64_t c, int64_t n) {
  const size_t elt = dt == ATTN_F32 ? 4 : dt == ATTN_I8 ? 1 : 2;
  unsigned char tmp[16] = {0};
  memcpy(tmp, (const char *)row + c * (int64_t)elt, (size_t)n * elt);
  return load4(dt, tmp, 0);
}

static inline __attribute__((always_inline)) void
scores_tile(const attn_decode_block *b, const float *q, float *s, int dt, int RT) {
  const int64_t D = b->D, Df = D & ~(int64_t)3;
  for (int j = 0; j < b->n; j++) {
    const void *kr = b->k[j];
    float32x4_t a[8];
DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++)
      a[r] = vdupq_n_f32(0.0f);
    for (int64_t c = 0; c < Df; c += 4) {
      const float32x4_t kv = load4(dt, kr, c);
DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++)
        a[r] = vfmaq_f32(a[r], vld1q_f32(q + r * D + c), kv);
    }
    if (Df < D) {
      const float32x4_t kv = load4_tail(dt, kr, Df, D - Df);
DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++)
        a[r] = vfmaq_f32(a[r], load4_tail(ATTN_F32, q + r * D, Df, D - Df), kv);
    }
DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++)
      s[r * NB + j] = vaddvq_f32(a[r]);
  }
}

static inline __attribute__((always_inline)) void
pv_tile(const attn_decode_block *b, const float *p, const float *corr, float *acc, int dt, int RT) {
  const int64_t Dv = b->Dv;
  for (int64_t c = 0; c < Dv; c += 4) {
    const int64_t w = Dv - c >= 4 ? 4 : Dv - c;
    float32x4_t a[8];
DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      const float32x4_t x =
          w == 4 ? vld1q_f32(acc + r * Dv + c) : load4_tail(ATTN_F32, acc + r * Dv, c, w);
      a[r] = vmulq_n_f32(x, corr[r]);
    }
    for (int j = 0; j < b->n; j++) {
      const float32x4_t vv = w == 4 ? load4(dt, b->v[j], c) : load4_tail(dt, b->v[j], c, w);
DECODE_UNROLL(8)
      for (int r = 0; r < RT; r++)
        a[r] = vfmaq_n_f32(a[r], vv, p[r * NB + j]);
    }
DECODE_UNROLL(8)
    for (int r = 0; r < RT; r++) {
      if (w == 4) {
        vst1q_f32(acc + r * Dv + c, a[r]);
      } else {
        float tmp[4];
        vst1q_f32(tmp, a[r]);
        memcpy(acc + r * Dv + c, tmp, (size_t)w * sizeof(float));
      }
    }
  }
}

static inline __attribute__((always_inline)) void
scores_rows(const attn_decode_block *b, const float *q, int64_t R, float *s, int dt) {
  int64_t r = 0;
  for (; R - r >= 8; r += 8)
    scores_tile(b, q + r * b->D, s + r * NB, dt, 8);
  if (R - r >= 4) scores_tile(b, q + r * b->D, s + r * NB, dt, 4), r += 4;
  if (R - r >= 2) scores_tile(b, q + r * b->D, s + r * NB, dt, 2), r += 2;
  if (R - r >= 1) scores_tile(b, q + r * b->D, s + r * NB, dt, 1);
}

static inline __attribute__((always_inline)) void pv_rows(const attn_decode_block *b,
                                                          const float *p, const float *corr,
                                                          int64_t R, float *acc, int dt) {
  int64_t r = 0;
  for (; R - r >= 8; r += 8)
    pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 8);
  if (R - r >= 4) pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 4), r += 4;
  if (R - r >= 2) pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 2), r += 2;
  if (R - r >= 1) pv_tile(b, p + r * NB, corr + r, acc + r * b->Dv, dt, 1);
}

/* one instance per dtype (the constant makes the compiler drop the others' loads) */
static void scores_neon(const attn_decode_block *b, const float *q, int64_t R, float *s) {
  switch (b->dtype) {
  case ATTN_F16: scores_rows(b, q, R, s, ATTN_F16); break;
  case ATTN_BF16: scores_rows(b, q, R, s, ATTN_BF16); break;
  case ATTN_I8: scores_rows(b, q, R, s, ATTN_I8); break;
  default: scores_rows(b, q, R, s, ATTN_F32);
  }
}

static void pv_neon(const attn_decode_block *b, const float *p, const float *corr, int64_t R,
                    float *acc) {
  switch (b->dtype) {
  case ATTN_F16: pv_rows(b, p, corr, R, acc, ATTN_F16); break;
  case ATTN_BF16: pv_rows(b, p, corr, R, acc, ATTN_BF16); break;
  case ATTN_I8: pv_rows(b, p, corr, R, acc, ATTN_I8); break;
  default: pv_rows(b, p, corr, R, acc, ATTN_F32);
  }
}

static const attn_decode_ops ops = {"neon", 0,    scores_neon, pv_neon, NULL, NULL, NULL,
                                    NULL,   NULL, NULL,        NULL,    NULL, NULL};

const attn_decode_ops *attn_decode_ops_neon(void) { return &ops; }
#else
const attn_decode_ops *attn_decode_ops_neon(void) { return 0; }
#endif
