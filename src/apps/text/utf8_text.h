/* Making mail text valid UTF-8. Mail often declares no charset, or the wrong
 * one; bytes that do not form valid UTF-8 are read as Windows-1252 (the
 * superset of ISO-8859-1 that HTML5 also assumes), so the result is always
 * valid UTF-8 and no byte is lost. Internal to the apps. */
#ifndef ATTN_APPS_UTF8_TEXT_H
#define ATTN_APPS_UTF8_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "apps/text/textbuf.h"

/* Code point of Windows-1252 byte c (ISO-8859-1 for 0xA0..0xFF; the five
 * bytes 1252 leaves undefined map to the C1 control of the same value). */
uint32_t attn_cp1252_to_cp(unsigned char c);

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 if s does not
 * start one (overlong forms, surrogates and > U+10FFFF are invalid). */
int attn_utf8_seq_len(const unsigned char *s, size_t n);

/* Appends s[0..n) to b as valid UTF-8: invalid bytes via Windows-1252, NUL
 * and CR dropped (CRLF becomes LF). Returns 0 or -1 when out of memory. */
int attn_utf8_sanitize(attn_textbuf *b, const char *s, size_t n);

/* Appends bytes s[0..n) to b as a label a person can read: valid UTF-8 as
 * it is (CJK, emoji...), space as U+2423 '␣', newline U+21B5 '↵', tab U+21E5
 * '⇥', other control bytes and bytes that are not valid UTF-8 (a character
 * split between two byte-level tokens) as \xNN. Returns 0, or -1 when out
 * of memory. */
int attn_utf8_visible(attn_textbuf *b, const char *s, size_t n);

#endif
