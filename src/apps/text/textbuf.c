#include "apps/text/textbuf.h"

#include <stdlib.h>
#include <string.h>

static int reserve(attn_textbuf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) {
    if (cap > SIZE_MAX / 2) return -1;
    cap *= 2;
  }
  char *p = realloc(b->data, cap);
  if (!p) return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

int attn_textbuf_put(attn_textbuf *b, const char *s, size_t n) {
  if (n == 0) return 0;
  if (reserve(b, n)) return -1;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int attn_textbuf_puts(attn_textbuf *b, const char *s) { return attn_textbuf_put(b, s, strlen(s)); }

int attn_textbuf_putc(attn_textbuf *b, char c) { return attn_textbuf_put(b, &c, 1); }

int attn_textbuf_put_cp(attn_textbuf *b, uint32_t cp) {
  char u[4];
  if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 0xfffd;
  if (cp < 0x80) {
    u[0] = (char)cp;
    return attn_textbuf_put(b, u, 1);
  }
  if (cp < 0x800) {
    u[0] = (char)(0xc0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 0x3f));
    return attn_textbuf_put(b, u, 2);
  }
  if (cp < 0x10000) {
    u[0] = (char)(0xe0 | (cp >> 12));
    u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[2] = (char)(0x80 | (cp & 0x3f));
    return attn_textbuf_put(b, u, 3);
  }
  u[0] = (char)(0xf0 | (cp >> 18));
  u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  u[3] = (char)(0x80 | (cp & 0x3f));
  return attn_textbuf_put(b, u, 4);
}

char *attn_textbuf_take(attn_textbuf *b, size_t *len) {
  char *p = b->data;
  if (!p) {
    p = calloc(1, 1);
    if (!p) return NULL;
  }
  if (len) *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}

void attn_textbuf_free(attn_textbuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
