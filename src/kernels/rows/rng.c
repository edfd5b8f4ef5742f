/* Counter-based RNG: Philox-4x32-10 (Salmon et al., SC'11), keyed by the
 * 64-bit seed, counter = the 64-bit element index (upper counter words 0).
 * Every value depends only on (seed, counter), so any split of the work
 * over threads draws the same numbers. */
#include <math.h>

#include "attn/kernels.h"
#include "kernels/rows/rng_internal.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

void attn_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(PHILOX_M0, c0, &hi0);
    uint32_t lo1 = mulhilo(PHILOX_M1, c2, &hi1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* counter = (i low, i high, 0, 0), key = (seed low, seed high) */
static inline void philox_at(uint64_t seed, uint64_t i, uint32_t r[4]) {
  const uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), 0, 0};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  attn_philox4x32_10(ctr, key, r);
}

float attn_rng_uniform(uint64_t seed, uint64_t i) {
  uint32_t r[4];
  philox_at(seed, i, r);
  return (float)(r[0] >> 8) * 0x1p-24f; /* top 24 bits: exact in f32, in [0,1) */
}

float attn_rng_normal(uint64_t seed, uint64_t i) {
  uint32_t r[4];
  philox_at(seed, i, r);
  /* u1 in (0,1] so log(u1) is finite; u2 in [0,1). */
  double u1 = ((double)(r[0] >> 8) + 1.0) * 0x1p-24;
  double u2 = (double)(r[1] >> 8) * 0x1p-24;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
