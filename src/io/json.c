/* Strict recursive-descent JSON parser and a JSON-escaping string buffer. */
#include "io/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *s;
  size_t len, pos;
  char *err;
  size_t errlen;
  int failed;
  size_t max_items; /* per object or array; 0: no limit */
  int oom;          /* the failure was an allocation's: JSON_ENOMEM */
} parser;

static int fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *p, const char *fmt, ...) {
  if (!p->failed) {
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->errlen) snprintf(p->err, p->errlen, "%s at byte %zu", msg, p->pos);
    p->failed = 1;
  }
  return -1;
}

/* an allocation failed: the text may be fine */
static int fail_oom(parser *p) {
  if (!p->failed) p->oom = 1;
  return fail(p, "out of memory");
}

static void skip_ws(parser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static int unexpected(parser *p) {
  if (p->pos >= p->len) return fail(p, "unexpected end of JSON");
  unsigned char c = (unsigned char)p->s[p->pos];
  if (c >= 0x20 && c < 0x7f) return fail(p, "unexpected '%c'", c);
  return fail(p, "unexpected byte 0x%02x", c);
}

static int literal(parser *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return unexpected(p);
  p->pos += n;
  return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_number(parser *p, json_value *v) {
  size_t start = p->pos;
  int plain = 1; /* no sign, fraction or exponent */
  if (p->pos < p->len && p->s[p->pos] == '-') {
    plain = 0;
    p->pos++;
  }
  if (p->pos >= p->len || !is_digit(p->s[p->pos])) return unexpected(p);
  if (p->s[p->pos] == '0') {
    p->pos++;
  } else {
    while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
  }
  if (p->pos < p->len && p->s[p->pos] == '.') {
    plain = 0;
    p->pos++;
    if (p->pos >= p->len || !is_digit(p->s[p->pos])) return unexpected(p);
    while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
  }
  if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
    plain = 0;
    p->pos++;
    if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
    if (p->pos >= p->len || !is_digit(p->s[p->pos])) return unexpected(p);
    while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
  }
  size_t n = p->pos - start;
  char buf[64];
  if (n >= sizeof buf) return fail(p, "number too long");
  memcpy(buf, p->s + start, n);
  buf[n] = '\0';
  v->type = JSON_NUMBER;
  v->number = strtod(buf, NULL);
  v->is_uint = 0;
  if (plain) {
    uint64_t u = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
      unsigned d = (unsigned)(buf[i] - '0');
      if (u > (UINT64_MAX - d) / 10) {
        ok = 0;
        break;
      }
      u = u * 10 + d;
    }
    v->is_uint = ok;
    v->uint = ok ? u : 0;
  }
  return 0;
}

static int hex4(parser *p, unsigned *out) {
  if (p->len - p->pos < 4) return fail(p, "truncated \\u escape");
  unsigned u = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos + i];
    unsigned d;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return fail(p, "bad \\u escape");
    u = u * 16 + d;
  }
  p->pos += 4;
  *out = u;
  return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t k;
  unsigned cp, min;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) { k = 2; cp = c & 0x1f; min = 0x80; }
  else if ((c & 0xf0) == 0xe0) { k = 3; cp = c & 0x0f; min = 0x800; }
  else if ((c & 0xf8) == 0xf0) { k = 4; cp = c & 0x07; min = 0x10000; }
  else return 0;
  if (n < k) return 0;
  for (size_t i = 1; i < k; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return k;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* At the opening quote. The decoded string is never longer than the source. */
static int parse_string(parser *p, char **out, size_t *out_len) {
  p->pos++; /* '"' */
  size_t end = p->pos;
  while (end < p->len && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
  if (end >= p->len) return fail(p, "unterminated string");
  char *o = malloc(end - p->pos + 1);
  if (!o) return fail_oom(p);
  size_t n = 0;
  while (p->s[p->pos] != '"') {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c < 0x20) {
      free(o);
      return fail(p, "control character in string");
    }
    if (c != '\\') {
      size_t k = utf8_seq((const unsigned char *)p->s + p->pos, end - p->pos);
      if (!k) {
        free(o);
        return fail(p, "invalid UTF-8 in string");
      }
      memcpy(o + n, p->s + p->pos, k);
      n += k;
      p->pos += k;
      continue;
    }
    p->pos++;
    char e = p->s[p->pos++];
    switch (e) {
    case '"': o[n++] = '"'; break;
    case '\\': o[n++] = '\\'; break;
    case '/': o[n++] = '/'; break;
    case 'b': o[n++] = '\b'; break;
    case 'f': o[n++] = '\f'; break;
    case 'n': o[n++] = '\n'; break;
    case 'r': o[n++] = '\r'; break;
    case 't': o[n++] = '\t'; break;
    case 'u': {
      unsigned cp, lo;
      if (hex4(p, &cp)) break;
      if (cp >= 0xdc00 && cp <= 0xdfff) {
        fail(p, "lone low surrogate in \\u escape");
        break;
      }
      if (cp >= 0xd800 && cp <= 0xdbff) {
        if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
          fail(p, "lone high surrogate in \\u escape");
          break;
        }
        p->pos += 2;
        if (hex4(p, &lo)) break;
        if (lo < 0xdc00 || lo > 0xdfff) {
          fail(p, "bad surrogate pair in \\u escape");
          break;
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      }
      /* \uXXXX (6 source bytes) -> at most 3 bytes; a pair (12) -> 4 */
      n += put_utf8(o + n, cp);
      break;
    }
    default: p->pos--; fail(p, "bad escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?'); break;
    }
    if (p->failed) {
      free(o);
      return -1;
    }
  }
  p->pos++; /* closing '"' */
  o[n] = '\0';
  *out = o;
  *out_len = n;
  return 0;
}

static void free_inner(json_value *v) {
  if (v->type == JSON_STRING) free(v->str);
  if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
    for (size_t i = 0; i < v->count; i++) {
      free_inner(&v->items[i]);
      if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
  }
}

static int parse_value(parser *p, json_value *v, int depth);
static int parse_members(parser *p, json_value *v, int depth, size_t *cap, size_t **pos,
                         size_t *pos_cap);

/* Grows the item (and key) arrays of an array/object to hold one more. */
static int grow(parser *p, json_value *v, size_t *cap, int with_keys) {
  if (p->max_items && v->count >= p->max_items)
    return fail(p, "more than %zu items in one %s", p->max_items, with_keys ? "object" : "array");
  if (v->count < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 4;
  json_value *items = realloc(v->items, nc * sizeof *items);
  if (!items) return fail_oom(p);
  v->items = items;
  if (with_keys) {
    char **keys = realloc(v->keys, nc * sizeof *keys);
    if (!keys) return fail_oom(p);
    v->keys = keys;
    size_t *lens = realloc(v->key_lens, nc * sizeof *lens);
    if (!lens) return fail_oom(p);
    v->key_lens = lens;
  }
  *cap = nc;
  return 0;
}

static int parse_array(parser *p, json_value *v, int depth) {
  size_t cap = 0;
  v->type = JSON_ARRAY;
  p->pos++; /* '[' */
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == ']') {
    p->pos++;
    return 0;
  }
  for (;;) {
    if (grow(p, v, &cap, 0)) return -1;
    memset(&v->items[v->count], 0, sizeof v->items[0]);
    v->count++;
    if (parse_value(p, &v->items[v->count - 1], depth + 1)) return -1;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->pos < p->len && p->s[p->pos] == ']') {
      p->pos++;
      return 0;
    }
    return unexpected(p);
  }
}

/* Key comparisons of the duplicate checks in this thread (for tests). */
static _Thread_local uint64_t key_compares;

uint64_t attn_json_key_compares(void) { return key_compares; }

typedef struct {
  const char *key;
  size_t len, pos; /* decoded length; byte offset of the key in the text */
} key_ref;

static int key_ref_cmp(const void *a, const void *b) {
  const key_ref *x = a, *y = b;
  key_compares++;
  if (x->len != y->len) return x->len < y->len ? -1 : 1;
  int c = memcmp(x->key, y->key, x->len);
  if (c) return c;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Fails on the first key (in text order) of object v that repeats an earlier
 * one; pos[i] is where key i starts. A few keys are compared pairwise; more
 * are sorted (O(n log n) comparisons: a check of each new key against all
 * earlier ones made a header of n keys cost n^2/2, hours for a million). */
static int check_duplicates(parser *p, const json_value *v, const size_t *pos) {
  const size_t n = v->count;
  size_t dup = SIZE_MAX, dup_of = 0; /* the repeating key and the key it repeats */
  if (n <= 8) {
    for (size_t i = 1; i < n && dup == SIZE_MAX; i++)
      for (size_t j = 0; j < i; j++) {
        key_compares++;
        if (v->key_lens[j] == v->key_lens[i] && memcmp(v->keys[j], v->keys[i], v->key_lens[i]) == 0) {
          dup = i, dup_of = j;
          break;
        }
      }
  } else {
    key_ref *r = malloc(n * sizeof *r);
    if (!r) return fail_oom(p);
    for (size_t i = 0; i < n; i++) r[i] = (key_ref){v->keys[i], v->key_lens[i], i};
    qsort(r, n, sizeof *r, key_ref_cmp);
    for (size_t i = 1; i < n; i++) /* equal keys sort together, in text order */
      if (r[i].len == r[i - 1].len && memcmp(r[i].key, r[i - 1].key, r[i].len) == 0 &&
          (dup == SIZE_MAX || r[i].pos < dup))
        dup = r[i].pos, dup_of = r[i - 1].pos;
    free(r);
  }
  if (dup == SIZE_MAX) return 0;
  p->pos = pos[dup];
  return fail(p, "duplicate key \"%.60s\"", v->keys[dup_of]);
}

static int parse_object(parser *p, json_value *v, int depth) {
  size_t cap = 0, pos_cap = 0, *pos = NULL;
  int rc = parse_members(p, v, depth, &cap, &pos, &pos_cap);
  if (rc == 0) rc = check_duplicates(p, v, pos);
  free(pos);
  return rc;
}

/* The members of an object (at its '{'), with where each key starts. */
static int parse_members(parser *p, json_value *v, int depth, size_t *cap, size_t **pos,
                         size_t *pos_cap) {
  v->type = JSON_OBJECT;
  p->pos++; /* '{' */
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == '}') {
    p->pos++;
    return 0;
  }
  for (;;) {
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '"') return unexpected(p);
    if (grow(p, v, cap, 1)) return -1;
    size_t i = v->count;
    if (i == *pos_cap) {
      size_t nc = *cap;
      size_t *np = realloc(*pos, nc * sizeof *np);
      if (!np) return fail_oom(p);
      *pos = np;
      *pos_cap = nc;
    }
    (*pos)[i] = p->pos;
    char *key;
    size_t klen;
    if (parse_string(p, &key, &klen)) return -1;
    v->keys[i] = key;
    v->key_lens[i] = klen;
    memset(&v->items[i], 0, sizeof v->items[0]);
    v->count++;
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ':') return unexpected(p);
    p->pos++;
    if (parse_value(p, &v->items[i], depth + 1)) return -1;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->pos < p->len && p->s[p->pos] == '}') {
      p->pos++;
      return 0;
    }
    return unexpected(p);
  }
}

static int parse_value(parser *p, json_value *v, int depth) {
  if (depth > JSON_MAX_DEPTH) return fail(p, "nesting deeper than %d", JSON_MAX_DEPTH);
  skip_ws(p);
  if (p->pos >= p->len) return unexpected(p);
  switch (p->s[p->pos]) {
  case '{': return parse_object(p, v, depth);
  case '[': return parse_array(p, v, depth);
  case '"': v->type = JSON_STRING; return parse_string(p, &v->str, &v->str_len);
  case 't': v->type = JSON_BOOL; v->boolean = 1; return literal(p, "true");
  case 'f': v->type = JSON_BOOL; v->boolean = 0; return literal(p, "false");
  case 'n': v->type = JSON_NULL; return literal(p, "null");
  default: return parse_number(p, v);
  }
}

int attn_json_parse(const char *text, size_t len, json_value **out, char *err, size_t errlen) {
  return attn_json_parse_limited(text, len, 0, out, err, errlen);
}

int attn_json_parse_limited(const char *text, size_t len, size_t max_items, json_value **out, char *err,
                       size_t errlen) {
  parser p = {text, len, 0, err, errlen, 0, max_items, 0};
  if (errlen) err[0] = '\0';
  *out = NULL;
  json_value *v = calloc(1, sizeof *v);
  if (!v) {
    fail_oom(&p);
    return JSON_ENOMEM;
  }
  if (parse_value(&p, v, 0) == 0) {
    skip_ws(&p);
    if (p.pos != p.len) unexpected(&p);
  }
  if (p.failed) {
    attn_json_free(v);
    return p.oom ? JSON_ENOMEM : -1;
  }
  *out = v;
  return 0;
}

void attn_json_free(json_value *v) {
  if (!v) return;
  free_inner(v);
  free(v);
}

const json_value *attn_json_get(const json_value *v, const char *key) {
  if (!v || v->type != JSON_OBJECT) return NULL;
  size_t n = strlen(key);
  for (size_t i = 0; i < v->count; i++)
    if (v->key_lens[i] == n && memcmp(v->keys[i], key, n) == 0) return &v->items[i];
  return NULL;
}

/* ---- writer ---------------------------------------------------------------- */

int attn_json_buf_put(json_buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->len + n + 1) nc *= 2;
    char *d = realloc(b->data, nc);
    if (!d) return -1;
    b->data = d;
    b->cap = nc;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int attn_json_buf_puts(json_buf *b, const char *s) { return attn_json_buf_put(b, s, strlen(s)); }

int attn_json_buf_put_string(json_buf *b, const char *s) {
  if (attn_json_buf_put(b, "\"", 1)) return -1;
  for (const char *c = s; *c; c++) {
    unsigned char u = (unsigned char)*c;
    char esc[8];
    if (u == '"' || u == '\\') {
      esc[0] = '\\';
      esc[1] = (char)u;
      if (attn_json_buf_put(b, esc, 2)) return -1;
    } else if (u < 0x20 || u == 0x7f) {
      snprintf(esc, sizeof esc, "\\u%04x", u);
      if (attn_json_buf_put(b, esc, 6)) return -1;
    } else if (attn_json_buf_put(b, c, 1)) {
      return -1;
    }
  }
  return attn_json_buf_put(b, "\"", 1);
}

int attn_json_buf_put_u64(json_buf *b, uint64_t v) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
  return attn_json_buf_put(b, tmp, (size_t)n);
}

void attn_json_buf_free(json_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int attn_json_utf8_valid(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t k = utf8_seq((const unsigned char *)s + i, n - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}
