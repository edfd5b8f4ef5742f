/* Classifying a code point by the generated ranges (unicode_tables.c). */
#include "apps/text/unicode_classes.h"

static int in_ranges(const attn_uc_range *r, int n, uint32_t cp) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (cp < r[mid].lo)
      hi = mid - 1;
    else if (cp > r[mid].hi)
      lo = mid + 1;
    else
      return 1;
  }
  return 0;
}

attn_uc_class attn_uc_classify(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return ATTN_UC_LETTER;
    if (cp >= '0' && cp <= '9') return ATTN_UC_NUMBER;
  }
  if (in_ranges(attn_uc_letter, attn_uc_letter_n, cp)) return ATTN_UC_LETTER;
  if (in_ranges(attn_uc_number, attn_uc_number_n, cp)) return ATTN_UC_NUMBER;
  if (in_ranges(attn_uc_space, attn_uc_space_n, cp)) return ATTN_UC_SPACE;
  return ATTN_UC_OTHER;
}
