/* Token bytes: a copy of a token sequence's bytes, and its metadata form
 * (hex strings in a JSON array, the breaks as a list of indices). */
#include "apps/text/token_bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/textbuf.h"

void attn_tok_bytes_free(attn_tok_bytes *t) {
  if (!t) return;
  free(t->off);
  free(t->data);
  free(t->brk);
  memset(t, 0, sizeof *t);
}

/* off [n + 1], data [bytes], brk [n] when want_brk; ATTN_ENOMEM else. */
static attn_status alloc(attn_tok_bytes *t, int64_t n, size_t bytes, int want_brk) {
  memset(t, 0, sizeof *t);
  t->n = n;
  t->off = calloc((size_t)n + 1, sizeof *t->off);
  t->data = malloc(bytes ? bytes : 1);
  t->brk = want_brk ? calloc((size_t)(n ? n : 1), 1) : NULL;
  if (!t->off || !t->data || (want_brk && !t->brk)) {
    attn_tok_bytes_free(t);
    return attn_set_error(ATTN_ENOMEM, "token bytes: out of memory for %lld tokens", (long long)n);
  }
  return ATTN_OK;
}

attn_status attn_tok_bytes_make(attn_tok_bytes *out, const char *const *tok, const size_t *len,
                                int64_t n, const unsigned char *brk) {
  if (!out) return attn_set_error(ATTN_EINVAL, "token bytes: NULL result");
  memset(out, 0, sizeof *out);
  if (n < 0 || (n > 0 && (!tok || !len)))
    return attn_set_error(ATTN_EINVAL, "token bytes: NULL tokens or %lld tokens", (long long)n);
  size_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    if (len[i] && !tok[i])
      return attn_set_error(ATTN_EINVAL, "token bytes: token %lld is NULL", (long long)i);
    total += len[i];
  }
  attn_status st = alloc(out, n, total, brk != NULL);
  for (int64_t i = 0; !st && i < n; i++) {
    if (len[i]) memcpy(out->data + out->off[i], tok[i], len[i]);
    out->off[i + 1] = out->off[i] + (int64_t)len[i];
    if (brk) out->brk[i] = brk[i] != 0;
  }
  return st;
}

attn_status attn_tok_bytes_to_json(const attn_tok_bytes *t, char **json, char **breaks) {
  if (!t || !json || !breaks) return attn_set_error(ATTN_EINVAL, "token bytes: NULL argument");
  *json = *breaks = NULL;
  static const char hex[] = "0123456789abcdef";
  attn_textbuf j = {0}, b = {0};
  int bad = attn_textbuf_putc(&j, '[');
  for (int64_t i = 0; !bad && i < t->n; i++) {
    bad |= (i && attn_textbuf_putc(&j, ',')) || attn_textbuf_putc(&j, '"');
    for (int64_t k = t->off[i]; !bad && k < t->off[i + 1]; k++) {
      unsigned char c = (unsigned char)t->data[k];
      char two[2] = {hex[c >> 4], hex[c & 15]};
      bad |= attn_textbuf_put(&j, two, 2);
    }
    bad |= attn_textbuf_putc(&j, '"');
    if (!bad && t->brk && t->brk[i]) {
      char num[32];
      snprintf(num, sizeof num, "%s%lld", b.len ? "," : "", (long long)i);
      bad |= attn_textbuf_puts(&b, num);
    }
  }
  bad |= attn_textbuf_putc(&j, ']');
  if (!bad) *json = attn_textbuf_take(&j, NULL);
  if (!bad && b.len) *breaks = attn_textbuf_take(&b, NULL);
  attn_textbuf_free(&j);
  attn_textbuf_free(&b);
  if (bad || !*json || (b.len && !*breaks)) {
    free(*json), free(*breaks);
    *json = *breaks = NULL;
    return attn_set_error(ATTN_ENOMEM, "token bytes: out of memory");
  }
  return ATTN_OK;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static const char *skip_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

/* Counts the strings of a JSON array of hex strings and their bytes; the
 * offset of the first wrong byte in *at, or -1 when it is well formed. */
static void scan(const char *json, int64_t *n, size_t *bytes, int64_t *at) {
  const char *p = skip_ws(json);
  *n = 0, *bytes = 0, *at = -1;
  if (*p != '[') goto bad;
  p = skip_ws(p + 1);
  if (*p == ']') goto end;
  for (;;) {
    if (*p != '"') goto bad;
    const char *s = ++p;
    while (hexval(*p) >= 0)
      p++;
    if (*p != '"' || (p - s) % 2) goto bad;
    *bytes += (size_t)(p - s) / 2, ++*n;
    p = skip_ws(p + 1);
    if (*p != ',') break;
    p = skip_ws(p + 1);
  }
  if (*p != ']') goto bad;
end:
  p = skip_ws(p + 1);
  if (!*p) return;
bad:
  *at = (int64_t)(p - json);
}

attn_status attn_tok_bytes_from_json(const char *json, const char *breaks, const char *what,
                                     attn_tok_bytes *out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "token bytes: NULL result");
  memset(out, 0, sizeof *out);
  if (!what) what = "token bytes";
  if (!json) return attn_set_error(ATTN_EINVAL, "%s: NULL", what);
  int64_t n, at;
  size_t bytes;
  scan(json, &n, &bytes, &at);
  if (at >= 0)
    return attn_set_error(ATTN_EFORMAT,
                          "%s: not a JSON array of hex strings (one per token, e.g. "
                          "[\"48\",\"e4bc\"]) at byte %lld",
                          what, (long long)at);
  attn_status st = alloc(out, n, bytes, breaks != NULL);
  const char *p = json;
  for (int64_t i = 0; !st && i < n; i++) {
    p = strchr(p, '"') + 1;
    int64_t k = out->off[i];
    for (; *p != '"'; p += 2)
      out->data[k++] = (char)(hexval(p[0]) << 4 | hexval(p[1]));
    out->off[i + 1] = k;
    p++;
  }
  for (const char *b = breaks; !st && b && *b;) {
    char *end;
    long long i = strtoll(b, &end, 10);
    if (end == b || i < 0 || i >= n || (*end && *end != ',') || (*end == ',' && !end[1])) {
      st = attn_set_error(ATTN_EFORMAT,
                          "%s: breaks '%.60s' are not token indices 0..%lld, "
                          "comma-separated",
                          what, breaks, (long long)(n - 1));
      break;
    }
    out->brk[i] = 1;
    b = *end ? end + 1 : end;
  }
  if (st) attn_tok_bytes_free(out);
  return st;
}
