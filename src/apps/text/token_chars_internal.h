/* What token_chars.c and token_units.c share: the characters of a token
 * sequence and the labels' form (apps/text/token_chars.h). Internal to the
 * text wing. */
#ifndef ATTN_APPS_TOKEN_CHARS_INTERNAL_H
#define ATTN_APPS_TOKEN_CHARS_INTERNAL_H

#include <stdint.h>

#include "apps/text/textbuf.h"
#include "apps/text/token_chars.h"

typedef struct {
  int64_t start; /* its first byte in the sequence (t->data) */
  int32_t len;   /* 1..4 bytes */
  int32_t cp;    /* code point; -1: a byte that is not valid UTF-8 there */
} tc_char;

/* The characters of t's bytes in order, never across a break: *chars
 * malloc'd (NULL when there are none), *n of them. */
attn_status tc_decode(const attn_tok_bytes *t, tc_char **chars, int64_t *n);

/* Takes b's text as a label of at most max_chars characters (0: no limit;
 * longer: max_chars - 1 and '…'); NULL when out of memory (b freed). */
char *tc_take_label(attn_textbuf *b, int max_chars);

#endif
