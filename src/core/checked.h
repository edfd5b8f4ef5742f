/* Checked size arithmetic, in one place (internal). Sizes in attn are int64_t
 * counts that come from user data (tensor shapes, metadata, arguments); a sum
 * or product of them that does not fit is refused with a message by the
 * caller, never wrapped (signed overflow is undefined behaviour, and a wrapped
 * size turns into a short allocation). Each attn_ck_* helper returns 0 with
 * the result in *out, or 1 (*out unspecified) on overflow. */
#ifndef ATTN_CORE_CHECKED_H
#define ATTN_CORE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

static inline int attn_ck_mul(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

static inline int attn_ck_add(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

/* Product of n sizes >= 0 (1 for n = 0). A zero size makes it 0 whatever the
 * others are (an empty tensor may have huge other dims); negative sizes are
 * an overflow. */
static inline int attn_ck_numel(int n, const int64_t *dims, int64_t *out) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0) return 1;
    if (dims[i] == 0) {
      *out = 0;
      return 0;
    }
  }
  for (int i = 0; i < n; i++)
    if (__builtin_mul_overflow(p, dims[i], &p)) return 1;
  *out = p;
  return 0;
}

/* count elements of elem bytes, as a size_t byte count (count >= 0). */
static inline int attn_ck_bytes(int64_t count, size_t elem, size_t *out) {
  if (count < 0) return 1;
  return __builtin_mul_overflow((uint64_t)count, (uint64_t)elem, out);
}

/* a / b rounded up, for a >= 0, b > 0; never overflows (unlike (a+b-1)/b). */
static inline int64_t attn_ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

#endif
