/* Attention dropout's mask (sdpa_dropout.h): the row keys, the portable row
 * kernel, the tile loop the flash and math backends call, the checks and
 * the public mask queries. */
#include <math.h>

#include "attn/kernels.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_dropout.h"

static uint64_t mix64(uint64_t x) { /* splitmix64 */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void attn_sdpa_dropout_row_key(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i,
                               uint32_t k[2]) {
  uint64_t z = mix64(d->dropout_seed);
  z = mix64(z ^ d->dropout_offset);
  z = mix64(z ^ (uint64_t)(b + d->dropout_batch0));
  z = mix64(z ^ (uint64_t)h);
  z = mix64(z ^ (uint64_t)i);
  k[0] = (uint32_t)z;
  k[1] = (uint32_t)(z >> 32);
}

uint32_t attn_sdpa_dropout_threshold(float p) { return (uint32_t)((double)p * 16777216.0); }

void attn_sdpa_dropout_tile(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                            int64_t j0, int64_t n, float *s, int64_t lds) {
  void (*row)(const uint32_t *, uint32_t, float, int64_t, int64_t, float *) =
      attn_kern_get()->row.sdpa_dropout;
  const uint32_t thr = attn_sdpa_dropout_threshold(d->dropout_p);
  const float scale = 1.0f / (1.0f - d->dropout_p);
  for (int64_t r = 0; r < R; r++) {
    uint32_t k[2];
    attn_sdpa_dropout_row_key(d, b, h, i0 + r, k);
    row(k, thr, scale, j0, n, s + r * lds);
  }
}

attn_status attn_sdpa_dropout_validate(const attn_sdpa_desc *d) {
  const float p = d->dropout_p;
  if (!(p >= 0.0f && p < 1.0f))
    return attn_set_error(ATTN_EINVAL, "sdpa: dropout_p %g must be in [0, 1)", (double)p);
  if (p != 0.0f && (d->shaw_k || d->shaw_v))
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa: attention dropout is not combined with Shaw positions");
  return ATTN_OK;
}

attn_status attn_sdpa_dropout_refuse(const attn_sdpa_desc *d, const char *who) {
  if (d && d->dropout_p != 0.0f)
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "%s: attention dropout (dropout_p %g) needs the f32 (or fp16) flash or "
                          "math backend",
                          who, (double)d->dropout_p);
  return ATTN_OK;
}

static attn_status check_index(const attn_sdpa_desc *d, int64_t b, int64_t h) {
  if (!d) return attn_set_error(ATTN_EINVAL, "sdpa dropout mask: NULL descriptor");
  attn_status st = attn_sdpa_dropout_validate(d);
  if (st) return st;
  if (b < 0 || b >= d->B || h < 0 || h >= d->Hq)
    return attn_set_error(ATTN_EINVAL, "sdpa dropout mask: (b %lld, h %lld) outside B %lld, Hq %lld",
                          (long long)b, (long long)h, (long long)d->B, (long long)d->Hq);
  return ATTN_OK;
}

int attn_sdpa_dropout_keep(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (check_index(d, b, h)) return 0;
  uint32_t k[2];
  attn_sdpa_dropout_row_key(d, b, h, i, k);
  return (attn_drop_word(k, (uint32_t)j) >> 8) >= attn_sdpa_dropout_threshold(d->dropout_p);
}

attn_status attn_sdpa_dropout_mask(const attn_sdpa_desc *d, int64_t b, int64_t h, uint8_t *mask) {
  attn_status st = check_index(d, b, h);
  if (st) return st;
  if (!mask && d->Lq > 0 && d->Lk > 0)
    return attn_set_error(ATTN_EINVAL, "sdpa dropout mask: mask is NULL");
  const uint32_t thr = attn_sdpa_dropout_threshold(d->dropout_p);
  for (int64_t i = 0; i < d->Lq; i++) {
    uint32_t k[2];
    attn_sdpa_dropout_row_key(d, b, h, i, k);
    for (int64_t j = 0; j < d->Lk; j++)
      mask[i * d->Lk + j] = (attn_drop_word(k, (uint32_t)j) >> 8) >= thr;
  }
  return ATTN_OK;
}
