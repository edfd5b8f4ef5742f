/* Internal to the SDPA backends: attention dropout's keep-mask, regenerated
 * wherever it is needed from a counter-based hash (sdpa_dropout.c; the
 * public contract is in attn/sdpa.h, dropout_* fields).
 *
 * Row key of query row i of (b, h): five splitmix64 steps over seed,
 * offset, b + batch0, h, i; its two 32-bit halves k0, k1. Key j's word:
 *   w = fmix32(fmix32((j * 0x9E3779B9) ^ k0) + k1)   (murmur3's finaliser)
 * kept iff (w >> 8) >= thr, thr = floor(p 2^24) (a keep probability of
 * 1 - thr / 2^24). Integer arithmetic only, so every ISA's kernel gives the
 * same bits; a kept value is x * (1 / (1 - p)) in f32, a dropped one 0. */
#ifndef ATTN_SDPA_DROPOUT_H
#define ATTN_SDPA_DROPOUT_H

#include <stdint.h>

#include "attn/sdpa.h"

#define ATTN_DROP_GOLDEN32 0x9E3779B9u

static inline uint32_t attn_drop_fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  return h ^ (h >> 16);
}

/* The word of key j under the row key k (the 24-bit compare is on w >> 8). */
static inline uint32_t attn_drop_word(const uint32_t k[2], uint32_t j) {
  return attn_drop_fmix32(attn_drop_fmix32((j * ATTN_DROP_GOLDEN32) ^ k[0]) + k[1]);
}

/* Row key of query row i of (b, h) under d's seed, offset and batch0. */
void attn_sdpa_dropout_row_key(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i,
                               uint32_t k[2]);
/* floor(p 2^24) */
uint32_t attn_sdpa_dropout_threshold(float p);

/* The portable row kernel (kern.h's attn_row_ops.sdpa_dropout): x[c] for
 * c < n (keys j0 + c) := keep ? x[c] * scale : 0. */
void attn_sdpa_dropout_row_generic(const uint32_t k[2], uint32_t thr, float scale, int64_t j0,
                                   int64_t n, float *x);
#if defined(__x86_64__)
void attn_sdpa_dropout_row_avx2(const uint32_t k[2], uint32_t thr, float scale, int64_t j0,
                                int64_t n, float *x);   /* sdpa_dropout_avx2.c */
void attn_sdpa_dropout_row_avx512(const uint32_t k[2], uint32_t thr, float scale, int64_t j0,
                                  int64_t n, float *x); /* sdpa_dropout_avx512.c */
#endif

/* s[r lds + c] for r < R, c < n (rows i0 + r of (b, h), keys j0 + c) :=
 * keep ? s * 1/(1-p) : 0, with the active level's row kernel. Callers test
 * d->dropout_p != 0 first. */
void attn_sdpa_dropout_tile(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                            int64_t j0, int64_t n, float *s, int64_t lds);
/* ATTN_EUNSUPPORTED "<who>: attention dropout ..." when d asks for dropout
 * (the backends without it), else ATTN_OK. */
attn_status attn_sdpa_dropout_refuse(const attn_sdpa_desc *d, const char *who);
/* The descriptor's dropout fields (from attn_sdpa_validate). */
attn_status attn_sdpa_dropout_validate(const attn_sdpa_desc *d);

#endif
