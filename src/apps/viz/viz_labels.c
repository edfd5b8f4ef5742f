/* Token labels from JSON: a strict parser for one array of strings (the
 * "tokens" metadata value PyTorch users write), with escapes \" \\ \/ \b \f
 * \n \r \t and \uXXXX (surrogate pairs combined) decoded to UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz.h"

static const char *skip_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, unsigned c) {
  if (c < 0x80) return o[0] = (char)c, 1;
  if (c < 0x800) return o[0] = (char)(0xc0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3f)), 2;
  if (c < 0x10000) {
    o[0] = (char)(0xe0 | c >> 12), o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
    o[2] = (char)(0x80 | (c & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | c >> 18), o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((c >> 6) & 0x3f)), o[3] = (char)(0x80 | (c & 0x3f));
  return 4;
}

/* Parses the string starting after its opening quote; *end is after the
 * closing quote. Returns a malloc'd string or NULL (bad syntax or memory). */
static char *parse_string(const char *p, const char **end) {
  size_t cap = strlen(p) + 1; /* decoded text is never longer than the source */
  char *out = malloc(cap), *o = out;
  if (!out) return NULL;
  while (*p != '"') {
    unsigned char ch = (unsigned char)*p;
    if (ch == 0 || ch < 0x20) goto bad;
    if (ch != '\\') {
      *o++ = *p++;
      continue;
    }
    p++;
    unsigned c;
    switch (*p) {
    case '"': c = '"'; break;
    case '\\': c = '\\'; break;
    case '/': c = '/'; break;
    case 'b': c = '\b'; break;
    case 'f': c = '\f'; break;
    case 'n': c = '\n'; break;
    case 'r': c = '\r'; break;
    case 't': c = '\t'; break;
    case 'u':
      if (hex4(p + 1, &c)) goto bad;
      p += 4;
      if (c >= 0xd800 && c <= 0xdbff) { /* high surrogate: a low one must follow */
        unsigned lo;
        if (p[1] != '\\' || p[2] != 'u' || hex4(p + 3, &lo) || lo < 0xdc00 || lo > 0xdfff) goto bad;
        c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
        p += 6;
      } else if (c >= 0xdc00 && c <= 0xdfff) {
        goto bad;
      } else if (c == 0) {
        goto bad; /* labels are C strings */
      }
      break;
    default: goto bad;
    }
    p++;
    o += put_utf8(o, c);
  }
  *o = '\0';
  *end = p + 1;
  return out;
bad:
  free(out);
  return NULL;
}

void attn_viz_labels_free(char **labels, int64_t n) {
  if (!labels) return;
  for (int64_t i = 0; i < n; i++)
    free(labels[i]);
  free(labels);
}

attn_status attn_viz_labels_parse(const char *json, char ***out, int64_t *n) {
  if (!json || !out || !n) return attn_set_error(ATTN_EINVAL, "labels: NULL argument");
  *out = NULL, *n = 0;
  const char *p = skip_ws(json);
  if (*p != '[') return attn_set_error(ATTN_EFORMAT, "labels: expected a JSON array of strings");
  p = skip_ws(p + 1);
  char **v = NULL;
  int64_t count = 0, cap = 0;
  if (*p == ']') {
    p++;
    goto done;
  }
  for (;;) {
    if (*p != '"') goto bad;
    if (count == cap) {
      cap = cap ? cap * 2 : 16;
      char **nv = realloc(v, (size_t)cap * sizeof *nv);
      if (!nv) {
        attn_viz_labels_free(v, count);
        return attn_set_error(ATTN_ENOMEM, "labels: out of memory");
      }
      v = nv;
    }
    const char *end;
    char *s = parse_string(p + 1, &end);
    if (!s) goto bad;
    v[count++] = s;
    p = skip_ws(end);
    if (*p == ',') {
      p = skip_ws(p + 1);
      continue;
    }
    if (*p == ']') {
      p++;
      break;
    }
    goto bad;
  }
done:
  p = skip_ws(p);
  if (*p) goto bad;
  *out = v, *n = count;
  return ATTN_OK;
bad:
  attn_viz_labels_free(v, count);
  return attn_set_error(ATTN_EFORMAT, "labels: bad JSON array of strings at byte %lld",
                        (long long)(p - json));
}
