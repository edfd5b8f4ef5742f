#include "apps/text/html_text.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "apps/text/utf8_text.h"

typedef struct {
  const char *name;
  unsigned cp;
} entity;

/* The named references mail actually uses (HTML 4 Latin-1 + symbols subset). */
static const entity entities[] = {
    {"amp", '&'},      {"lt", '<'},        {"gt", '>'},        {"quot", '"'},
    {"apos", '\''},    {"nbsp", 0xa0},     {"copy", 0xa9},     {"reg", 0xae},
    {"trade", 0x2122}, {"hellip", 0x2026}, {"mdash", 0x2014},  {"ndash", 0x2013},
    {"lsquo", 0x2018}, {"rsquo", 0x2019},  {"ldquo", 0x201c},  {"rdquo", 0x201d},
    {"laquo", 0xab},   {"raquo", 0xbb},    {"bull", 0x2022},   {"middot", 0xb7},
    {"euro", 0x20ac},  {"pound", 0xa3},    {"yen", 0xa5},      {"cent", 0xa2},
    {"sect", 0xa7},    {"deg", 0xb0},      {"plusmn", 0xb1},   {"times", 0xd7},
    {"divide", 0xf7},  {"frac12", 0xbd},   {"frac14", 0xbc},   {"frac34", 0xbe},
    {"iexcl", 0xa1},   {"iquest", 0xbf},   {"shy", 0xad},      {"para", 0xb6},
    {"agrave", 0xe0},  {"aacute", 0xe1},   {"acirc", 0xe2},    {"atilde", 0xe3},
    {"auml", 0xe4},    {"aring", 0xe5},    {"aelig", 0xe6},    {"ccedil", 0xe7},
    {"egrave", 0xe8},  {"eacute", 0xe9},   {"ecirc", 0xea},    {"euml", 0xeb},
    {"igrave", 0xec},  {"iacute", 0xed},   {"icirc", 0xee},    {"iuml", 0xef},
    {"ntilde", 0xf1},  {"ograve", 0xf2},   {"oacute", 0xf3},   {"ocirc", 0xf4},
    {"otilde", 0xf5},  {"ouml", 0xf6},     {"oslash", 0xf8},   {"ugrave", 0xf9},
    {"uacute", 0xfa},  {"ucirc", 0xfb},    {"uuml", 0xfc},     {"szlig", 0xdf},
    {"Agrave", 0xc0},  {"Aacute", 0xc1},   {"Auml", 0xc4},     {"Eacute", 0xc9},
    {"Ntilde", 0xd1},  {"Ouml", 0xd6},     {"Uuml", 0xdc},     {"Ccedil", 0xc7},
};

typedef struct {
  attn_textbuf *b;
  int space;   /* whitespace seen since the last text */
  int newline; /* a line break is pending */
  int started; /* some text was written */
} writer;

static int flush_ws(writer *w) {
  if (w->started && (w->newline || w->space))
    if (attn_textbuf_putc(w->b, w->newline ? '\n' : ' ')) return -1;
  w->space = w->newline = 0;
  return 0;
}

static int emit_cp(writer *w, unsigned cp) {
  if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '\f' || cp == 0xa0) {
    w->space = 1;
    return 0;
  }
  if (flush_ws(w)) return -1;
  w->started = 1;
  return attn_textbuf_put_cp(w->b, cp ? cp : 0xfffd);
}

static int emit_bytes(writer *w, const char *s, size_t n) {
  if (flush_ws(w)) return -1;
  w->started = 1;
  return attn_textbuf_put(w->b, s, n);
}

/* Decodes the reference at s[0] == '&'; *used = bytes consumed (0: not a
 * reference, emit '&' literally). */
static unsigned decode_entity(const char *s, size_t n, size_t *used) {
  *used = 0;
  if (n >= 3 && s[1] == '#') {
    size_t i = 2;
    int hex = 0;
    if (s[i] == 'x' || s[i] == 'X') hex = 1, i++;
    unsigned long v = 0;
    size_t d0 = i;
    while (i < n && (hex ? isxdigit((unsigned char)s[i]) : isdigit((unsigned char)s[i]))) {
      int dv = isdigit((unsigned char)s[i]) ? s[i] - '0' : (tolower((unsigned char)s[i]) - 'a' + 10);
      if (v < 0x110000) v = v * (hex ? 16 : 10) + (unsigned long)dv;
      i++;
    }
    if (i == d0) return 0;
    if (i < n && s[i] == ';') i++;
    *used = i;
    if (v >= 0x80 && v < 0xa0) return attn_cp1252_to_cp((unsigned char)v);
    if (v == 0 || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0xfffd;
    return (unsigned)v;
  }
  size_t i = 1;
  while (i < n && i < 12 && isalnum((unsigned char)s[i])) i++;
  size_t len = i - 1;
  if (len == 0) return 0;
  for (size_t k = 0; k < sizeof entities / sizeof entities[0]; k++) {
    /* longest match not needed: names are whole alnum runs */
    if (strlen(entities[k].name) == len && !strncmp(entities[k].name, s + 1, len)) {
      *used = (i < n && s[i] == ';') ? i + 1 : i;
      return entities[k].cp;
    }
  }
  /* case-insensitive second chance for the ASCII ones (&AMP; &NBSP;) */
  for (size_t k = 0; k < 6; k++) {
    if (strlen(entities[k].name) == len && !strncasecmp(entities[k].name, s + 1, len)) {
      *used = (i < n && s[i] == ';') ? i + 1 : i;
      return entities[k].cp;
    }
  }
  return 0;
}

/* Emits text s[0..n) (entities decoded, whitespace collapsed). */
static int emit_text(writer *w, const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    if (c == '&') {
      size_t used;
      unsigned cp = decode_entity(s + i, n - i, &used);
      if (used) {
        if (emit_cp(w, cp)) return -1;
        i += used;
        continue;
      }
    }
    if (c < 0x80) {
      if (emit_cp(w, c)) return -1;
      i++;
      continue;
    }
    size_t j = i + 1; /* a run of non-ASCII bytes, copied as they are */
    while (j < n && (unsigned char)s[j] >= 0x80) j++;
    if (emit_bytes(w, s + i, j - i)) return -1;
    i = j;
  }
  return 0;
}

static const char *find_ci(const char *s, size_t n, const char *needle) {
  size_t m = strlen(needle);
  for (size_t i = 0; i + m <= n; i++)
    if (!strncasecmp(s + i, needle, m)) return s + i;
  return NULL;
}

/* End of the tag starting at s[0] == '<': index just past its '>' (quotes
 * respected), or n if unterminated. */
static size_t tag_end(const char *s, size_t n) {
  char q = 0;
  for (size_t i = 1; i < n; i++) {
    if (q) {
      if (s[i] == q) q = 0;
    } else if (s[i] == '"' || s[i] == '\'') {
      /* only quotes that open an attribute value count */
      if (s[i - 1] == '=' || isspace((unsigned char)s[i - 1])) q = s[i];
    } else if (s[i] == '>') {
      return i + 1;
    }
  }
  return n;
}

static int is_block(const char *name) {
  static const char *const blocks[] = {"br",    "p",     "div",  "tr",  "li",    "h1",
                                       "h2",    "h3",    "h4",   "h5",  "h6",    "table",
                                       "ul",    "ol",    "hr",   "pre", "title", "blockquote",
                                       "dt",    "dd",    "form", "center", "body", "html"};
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
    if (!strcasecmp(name, blocks[i])) return 1;
  return 0;
}

/* The value of attribute attr inside tag text t[0..n), or NULL. */
static const char *attr_value(const char *t, size_t n, const char *attr, size_t *len) {
  size_t m = strlen(attr);
  for (size_t i = 1; i + m < n; i++) {
    if (!isspace((unsigned char)t[i - 1]) || strncasecmp(t + i, attr, m)) continue;
    size_t j = i + m;
    while (j < n && isspace((unsigned char)t[j])) j++;
    if (j >= n || t[j] != '=') continue;
    j++;
    while (j < n && isspace((unsigned char)t[j])) j++;
    if (j >= n) return NULL;
    size_t k;
    if (t[j] == '"' || t[j] == '\'') {
      char q = t[j++];
      for (k = j; k < n && t[k] != q; k++) {
      }
    } else {
      for (k = j; k < n && !isspace((unsigned char)t[k]) && t[k] != '>'; k++) {
      }
    }
    *len = k - j;
    return t + j;
  }
  return NULL;
}

int attn_html_to_text(attn_textbuf *b, const char *html, size_t n) {
  writer w = {b, 0, 0, 0};
  size_t i = 0;
  while (i < n) {
    const char *lt = memchr(html + i, '<', n - i);
    size_t stop = lt ? (size_t)(lt - html) : n;
    if (emit_text(&w, html + i, stop - i)) return -1;
    i = stop;
    if (i >= n) break;
    const char *s = html + i;
    size_t left = n - i;
    if (left >= 4 && !strncmp(s, "<!--", 4)) { /* comment */
      const char *e = find_ci(s + 4, left - 4, "-->");
      i = e ? (size_t)(e - html) + 3 : n;
      continue;
    }
    size_t k = 1;
    int closing = 0;
    if (k < left && s[k] == '/') closing = 1, k++;
    char name[16];
    size_t nl = 0;
    while (k < left && isalnum((unsigned char)s[k])) {
      if (nl < sizeof name - 1) name[nl++] = s[k];
      k++;
    }
    name[nl] = '\0';
    if (nl == 0 && !(k < left && (s[k] == '!' || s[k] == '?'))) {
      /* a lone '<' ("a < b"): text */
      if (emit_cp(&w, '<')) return -1;
      i++;
      continue;
    }
    size_t end = tag_end(s, left);
    if (!closing && (!strcasecmp(name, "script") || !strcasecmp(name, "style"))) {
      char close[24];
      snprintf(close, sizeof close, "</%s", name);
      const char *e = find_ci(s + end, left - end, close);
      if (!e) break; /* unterminated: the rest is code */
      size_t at = (size_t)(e - s);
      i += at + tag_end(e, left - at);
      w.space = 1;
      continue;
    }
    if (nl && is_block(name)) w.newline = 1;
    else if (nl && (!strcasecmp(name, "td") || !strcasecmp(name, "th"))) w.space = 1;
    if (!closing && nl == 1 && (name[0] == 'a' || name[0] == 'A')) {
      size_t hl;
      const char *href = attr_value(s, end, "href", &hl);
      if (href && hl > 0 && href[0] != '#' && strncasecmp(href, "javascript:", 11)) {
        w.space = 1;
        if (emit_text(&w, href, hl)) return -1;
        w.space = 1;
      }
    }
    i += end;
  }
  return 0;
}
