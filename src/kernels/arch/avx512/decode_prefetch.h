/* The AVX-512 decode kernels' prefetches (decode_avx512.c,
 * decode_avx512_bf16.c): a line into L1 (T0), or into L2 only (T1) where the
 * block says so (attn_decode_block.pf_l2: the call reads its cache from
 * memory on a CPU whose L1 miss buffers bound it, attn_cpu_decode_pf_l2).
 * x86-64 only; inlined into each caller. */
#ifndef ATTN_DECODE_PREFETCH_H
#define ATTN_DECODE_PREFETCH_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/arch/isa_targets.h"

ATTN_AVX512_INLINE void attn_decode_pf_line(const void *p, int l2) {
  if (l2)
    _mm_prefetch((const char *)p, _MM_HINT_T1);
  else
    _mm_prefetch((const char *)p, _MM_HINT_T0);
}

/* the cache lines of bytes [p, p + n) */
ATTN_AVX512_INLINE void attn_decode_pf_bytes(const void *p, int64_t n, int l2) {
  const char *c = (const char *)p;
  for (int64_t o = 0; o < n; o += 64)
    attn_decode_pf_line(c + o, l2);
}

#endif
