#include "apps/text/utf8_text.h"

#include <stdio.h>

/* Windows-1252 0x80..0x9F (0 = undefined in 1252: keep the C1 control). */
static const uint16_t cp1252_c1[32] = {
    0x20ac, 0,      0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021, 0x02c6, 0x2030, 0x0160,
    0x2039, 0x0152, 0,      0x017d, 0,      0,      0x2018, 0x2019, 0x201c, 0x201d, 0x2022,
    0x2013, 0x2014, 0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, 0,      0x017e, 0x0178};

uint32_t attn_cp1252_to_cp(unsigned char c) {
  if (c >= 0x80 && c < 0xa0 && cp1252_c1[c - 0x80]) return cp1252_c1[c - 0x80];
  return c;
}

int attn_utf8_seq_len(const unsigned char *s, size_t n) {
  if (n == 0) return 0;
  unsigned c = s[0];
  if (c < 0x80) return 1;
  int len;
  uint32_t cp, min;
  if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07, min = 0x10000;
  else return 0;
  if ((size_t)len > n) return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

int attn_utf8_sanitize(attn_textbuf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, run = 0; /* run: start of the pending valid stretch */
  while (i < n) {
    if (u[i] != 0 && u[i] != '\r' && u[i] < 0x80) {
      i++;
      continue;
    }
    int len = u[i] >= 0x80 ? attn_utf8_seq_len(u + i, n - i) : 0;
    if (len > 0) {
      i += (size_t)len;
      continue;
    }
    if (attn_textbuf_put(b, s + run, i - run)) return -1;
    if (u[i] >= 0x80 && attn_textbuf_put_cp(b, attn_cp1252_to_cp(u[i]))) return -1;
    i++;
    run = i;
  }
  return attn_textbuf_put(b, s + run, n - run);
}

int attn_utf8_visible(attn_textbuf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    int len = attn_utf8_seq_len(u + i, n - i);
    unsigned c = u[i];
    int r;
    if (c == ' ') {
      r = attn_textbuf_put_cp(b, 0x2423); /* ␣ */
    } else if (c == '\n') {
      r = attn_textbuf_put_cp(b, 0x21b5); /* ↵ */
    } else if (c == '\t') {
      r = attn_textbuf_put_cp(b, 0x21e5); /* ⇥ */
    } else if (len == 0 || c < 0x20 || c == 0x7f) {
      char hex[8];
      snprintf(hex, sizeof hex, "\\x%02X", c);
      r = attn_textbuf_puts(b, hex);
      len = 1;
    } else {
      r = attn_textbuf_put(b, s + i, (size_t)len);
    }
    if (r) return -1;
    i += len > 0 ? (size_t)len : 1;
  }
  return 0;
}
