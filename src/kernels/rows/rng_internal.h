/* Internal to the kernels: the raw Philox-4x32-10 block (rng.c). */
#ifndef ATTN_RNG_INTERNAL_H
#define ATTN_RNG_INTERNAL_H

#include <stdint.h>

/* One Philox-4x32-10 block: four 32-bit words for (counter, key). */
void attn_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
