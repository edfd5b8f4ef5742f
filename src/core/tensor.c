#include "attn/tensor.h"

#include <math.h>
#include <string.h>

static const struct {
  const char *name;
  size_t size;
} dtype_info[ATTN_DTYPE_COUNT] = {
    [ATTN_F32] = {"F32", 4}, [ATTN_F16] = {"F16", 2}, [ATTN_BF16] = {"BF16", 2},
    [ATTN_I64] = {"I64", 8}, [ATTN_I32] = {"I32", 4}, [ATTN_I8] = {"I8", 1},
    [ATTN_U8] = {"U8", 1},   [ATTN_BOOL] = {"BOOL", 1},
};

size_t attn_dtype_size(attn_dtype t) {
  return (unsigned)t < ATTN_DTYPE_COUNT ? dtype_info[t].size : 0;
}

const char *attn_dtype_name(attn_dtype t) {
  return (unsigned)t < ATTN_DTYPE_COUNT ? dtype_info[t].name : NULL;
}

attn_status attn_dtype_from_name(const char *name, attn_dtype *out) {
  for (int i = 0; i < ATTN_DTYPE_COUNT; i++) {
    if (strcmp(name, dtype_info[i].name) == 0) {
      *out = (attn_dtype)i;
      return ATTN_OK;
    }
  }
  return attn_set_error(ATTN_EUNSUPPORTED, "unsupported dtype '%s'", name);
}

int64_t attn_tensor_numel(const attn_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

size_t attn_tensor_nbytes(const attn_tensor *t) {
  return (size_t)attn_tensor_numel(t) * attn_dtype_size(t->dtype);
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float attn_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t attn_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40); /* keep NaN quiet */
  u += 0x7fffu + ((u >> 16) & 1u);                   /* round to nearest even */
  return (uint16_t)(u >> 16);
}

float attn_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) { /* zero or subnormal: man * 2^-24 */
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
  return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t attn_f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  float a = fabsf(f);
  if (isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u; /* rounds to inf */
  if (a < 6.103515625e-05f) {               /* subnormal: units of 2^-24 */
    float q = nearbyintf(ldexpf(a, 24));    /* default rounding: to even */
    return sign | (uint16_t)q;
  }
  uint32_t au = f32_bits(a);
  au += 0xfffu + ((au >> 13) & 1u);
  return sign | (uint16_t)(((au >> 23) - 112u) << 10 | ((au >> 13) & 0x3ffu));
}
