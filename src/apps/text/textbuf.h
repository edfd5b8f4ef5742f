/* A growable byte buffer for building text (always NUL-terminated when
 * non-empty). Functions return 0, or -1 when out of memory (the buffer then
 * stays valid and is freed by attn_textbuf_free). Internal to the apps. */
#ifndef ATTN_APPS_TEXTBUF_H
#define ATTN_APPS_TEXTBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  char *data;
  size_t len, cap;
} attn_textbuf;

int attn_textbuf_put(attn_textbuf *b, const char *s, size_t n);
int attn_textbuf_puts(attn_textbuf *b, const char *s);
int attn_textbuf_putc(attn_textbuf *b, char c);
/* Appends code point cp as UTF-8 (U+FFFD for surrogates and cp > 0x10FFFF). */
int attn_textbuf_put_cp(attn_textbuf *b, uint32_t cp);
/* Hands the bytes to the caller (never NULL on success: "" for empty) and
 * empties b. Returns NULL when out of memory. */
char *attn_textbuf_take(attn_textbuf *b, size_t *len);
void attn_textbuf_free(attn_textbuf *b);

#endif
