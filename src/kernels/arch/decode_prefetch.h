/* The x86-64 decode kernels' prefetches (avx512/decode_avx512.c,
 * avx512/decode_avx512_bf16.c, avx2/decode_avx2.c): a line into L1 (T0), or
 * into L2 only (T1) where the block says so (attn_decode_block.pf_l2: the
 * call reads its cache from memory on a CPU whose L1 miss buffers bound it,
 * attn_cpu_decode_pf_l2). Prefetches need no target beyond x86-64's base:
 * inlined into each level's kernels. */
#ifndef ATTN_DECODE_PREFETCH_H
#define ATTN_DECODE_PREFETCH_H

#include <immintrin.h>
#include <stdint.h>

static inline __attribute__((always_inline)) void attn_decode_pf_line(const void *p, int l2) {
  if (l2)
    _mm_prefetch((const char *)p, _MM_HINT_T1);
  else
    _mm_prefetch((const char *)p, _MM_HINT_T0);
}

/* n lines, stride bytes apart from p (n a constant where it is inlined):
 * the hint tested once, not once per line */
static inline __attribute__((always_inline)) void attn_decode_pf_lines(const void *p, int n,
                                                                       int64_t stride, int l2) {
  const char *c = (const char *)p;
  if (l2)
    for (int i = 0; i < n; i++)
      _mm_prefetch(c + i * stride, _MM_HINT_T1);
  else
    for (int i = 0; i < n; i++)
      _mm_prefetch(c + i * stride, _MM_HINT_T0);
}

/* attn_decode_pf_lines with the base opaque in each branch (an empty asm),
 * so that the lines are addressed from it by displacement: in the AVX-512
 * int8 P·V GCC otherwise computed every line's address before the branch,
 * kept them in vector registers and moved each back for its prefetch (P·V
 * 1.02x; in the avx2 level's P·V the same asm ran 1.08x slower) */
static inline __attribute__((always_inline)) void
attn_decode_pf_lines_disp(const void *p, int n, int64_t stride, int l2) {
  const char *c = (const char *)p;
  if (l2) {
    __asm__("" : "+r"(c));
    for (int i = 0; i < n; i++)
      _mm_prefetch(c + i * stride, _MM_HINT_T1);
  } else {
    __asm__("" : "+r"(c));
    for (int i = 0; i < n; i++)
      _mm_prefetch(c + i * stride, _MM_HINT_T0);
  }
}

/* the lines at p and q, the hint tested once */
static inline __attribute__((always_inline)) void attn_decode_pf_pair(const void *p, const void *q,
                                                                      int l2) {
  if (l2)
    _mm_prefetch((const char *)p, _MM_HINT_T1), _mm_prefetch((const char *)q, _MM_HINT_T1);
  else
    _mm_prefetch((const char *)p, _MM_HINT_T0), _mm_prefetch((const char *)q, _MM_HINT_T0);
}

/* the cache lines of bytes [p, p + n) */
static inline __attribute__((always_inline)) void attn_decode_pf_bytes(const void *p, int64_t n,
                                                                       int l2) {
  attn_decode_pf_lines(p, (int)((n + 63) / 64), 64, l2);
}

#endif
