/* Position scheme helpers (ALiBi slopes, T5 buckets) and block-sparse layout
 * builders; the per-(i, j) formulas live in sdpa_positions.h. */
#include <math.h>
#include <string.h>

#include "attn/kernels.h"
#include "attn/variants.h"
#include "kernels/sdpa/sdpa_positions.h"

attn_status attn_alibi_slopes(int64_t H, float *slopes) {
  if (H < 1 || !slopes)
    return attn_set_error(ATTN_EINVAL, "alibi slopes: H = %lld (must be >= 1), slopes %s",
                          (long long)H, slopes ? "given" : "NULL");
  int64_t n = 1; /* the largest power of two <= H */
  while (n * 2 <= H)
    n *= 2;
  for (int64_t h = 0; h < n; h++)
    slopes[h] = (float)exp2(-8.0 * (double)(h + 1) / (double)n);
  for (int64_t h = 0; h < H - n; h++)
    slopes[n + h] = (float)exp2(-4.0 * (double)(2 * h + 1) / (double)n);
  return ATTN_OK;
}

int64_t attn_t5_bucket(int64_t rel, int bidirectional, int64_t num_buckets, int64_t max_distance) {
  return attn_pos_t5_bucket(rel, bidirectional, num_buckets, max_distance);
}

attn_status attn_block_sparse_bigbird(uint8_t *mask, int64_t nqb, int64_t nkb, int64_t local,
                                      int64_t global, int64_t random, uint64_t seed, int causal) {
  if (!mask || nqb < 0 || nkb < 0 || global < 0 || random < 0)
    return attn_set_error(ATTN_EINVAL,
                          "block sparse: mask %s, nqb %lld, nkb %lld, global %lld, random %lld "
                          "(sizes must be >= 0)",
                          mask ? "given" : "NULL", (long long)nqb, (long long)nkb,
                          (long long)global, (long long)random);
  for (int64_t a = 0; a < nqb; a++) {
    uint8_t *row = mask + a * nkb;
    for (int64_t c = 0; c < nkb; c++) {
      int64_t dist = a > c ? a - c : c - a;
      row[c] = (local >= 0 && dist <= local) || a < global || c < global;
    }
    /* random blocks: draw until `random` new ones are set or the row is full */
    int64_t added = 0;
    for (uint64_t draw = 0; added < random && draw < (uint64_t)(8 * nkb + 8); draw++) {
      int64_t c = (int64_t)(attn_rng_uniform(seed, (uint64_t)a * 0x10000u + draw) * (float)nkb);
      if (c >= nkb) c = nkb - 1;
      if (causal && c > a) continue;
      if (!row[c]) {
        row[c] = 1;
        added++;
      }
    }
    if (causal)
      for (int64_t c = a + 1; c < nkb; c++)
        row[c] = 0;
  }
  return ATTN_OK;
}

attn_status attn_block_sparse_expand(const uint8_t *mask, int64_t block_size, int64_t Lq,
                                     int64_t Lk, uint8_t *dense) {
  if (!mask || !dense || block_size < 1 || Lq < 0 || Lk < 0)
    return attn_set_error(ATTN_EINVAL, "block sparse expand: block_size %lld, Lq %lld, Lk %lld",
                          (long long)block_size, (long long)Lq, (long long)Lk);
  const int64_t nkb = attn_ceil_div(Lk, block_size);
  for (int64_t i = 0; i < Lq; i++)
    for (int64_t j = 0; j < Lk; j++)
      dense[i * Lk + j] = mask[(i / block_size) * nkb + j / block_size] != 0;
  return ATTN_OK;
}
