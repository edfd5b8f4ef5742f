/* HTML reduced to plain text, for mail bodies: tags removed (block tags such
 * as <p>, <br>, <div>, <tr>, <li> become line breaks, cells a space),
 * <script> and <style> contents, comments, <!...> and <?...> dropped,
 * character references decoded (named: the common ones; numeric:
 * decimal and hex, 0x80..0x9F as Windows-1252 like HTML5), whitespace
 * collapsed. Link targets (<a href>) are kept as " <url> " after the tag,
 * since they carry much of a spam message's meaning. Input is UTF-8 (invalid
 * bytes pass through unchanged). Never fails on any input except for memory. */
#ifndef ATTN_APPS_HTML_TEXT_H
#define ATTN_APPS_HTML_TEXT_H

#include <stddef.h>

#include "apps/text/textbuf.h"

/* Appends the text of html[0..n) to b. Returns 0, or -1 when out of memory. */
int attn_html_to_text(attn_textbuf *b, const char *html, size_t n);

#endif
