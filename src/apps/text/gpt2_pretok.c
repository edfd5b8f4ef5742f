/* GPT-2's pre-tokenizer pattern (gpt2_bpe.h), matched by hand:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * tried in that order at each position, as the regex engine does. */
#include "apps/text/gpt2_bpe.h"
#include "apps/text/unicode_classes.h"
#include "apps/text/utf8_text.h"

/* the character at s[i]: its class and byte length (an invalid byte: one
 * "other" character) */
static attn_uc_class char_at(const char *s, size_t n, size_t i, size_t *len) {
  const unsigned char *u = (const unsigned char *)s + i;
  int k = attn_utf8_seq_len(u, n - i);
  if (k == 0) {
    *len = 1;
    return ATTN_UC_OTHER;
  }
  uint32_t cp = k == 1   ? u[0]
                : k == 2 ? (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F)
                : k == 3
                    ? (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F)
                    : (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
                          (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
  *len = (size_t)k;
  return attn_uc_classify(cp);
}

/* the end of the run of characters of class c that starts at i */
static size_t run_of(const char *s, size_t n, size_t i, attn_uc_class c) {
  while (i < n) {
    size_t len;
    if (char_at(s, n, i, &len) != c) break;
    i += len;
  }
  return i;
}

/* the length of the contraction ('s 't 're 've 'm 'll 'd) at s[i] == '\'', or 0 */
static size_t contraction(const char *s, size_t n, size_t i) {
  if (i + 1 >= n) return 0;
  char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

size_t attn_gpt2_pretok_next(const char *s, size_t n, size_t i) {
  if (i >= n) return n;
  if (s[i] == '\'') {
    size_t k = contraction(s, n, i);
    if (k) return i + k;
  }
  size_t len;
  attn_uc_class c = char_at(s, n, i, &len);
  if (s[i] == ' ' && i + 1 < n) { /* " ?X+": a space, then a run of one class */
    size_t len1;
    attn_uc_class c1 = char_at(s, n, i + 1, &len1);
    if (c1 != ATTN_UC_SPACE) return run_of(s, n, i + 1 + len1, c1);
  }
  if (c != ATTN_UC_SPACE) return run_of(s, n, i + len, c);
  /* \s+(?!\S), else \s+: the whole run at the end of the text; before a
   * non-space, the run less its last character when that leaves one */
  size_t j = i + len, last = i;
  while (j < n) {
    size_t l2;
    if (char_at(s, n, j, &l2) != ATTN_UC_SPACE) break;
    last = j;
    j += l2;
  }
  if (j == n || last == i) return j;
  return last;
}
