/* A small, strict JSON parser (RFC 8259) for safetensors headers: objects,
 * arrays, strings (escapes incl. \uXXXX and surrogate pairs, UTF-8 checked),
 * numbers, true/false/null. Nesting is limited to JSON_MAX_DEPTH; duplicate
 * object keys are rejected (found by sorting: O(n log n) for n keys). Plus a growable string buffer with JSON escaping
 * for the writer. Internal to the library. */
#ifndef ATTN_IO_JSON_H
#define ATTN_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 64

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
  json_type type;
  int boolean;     /* JSON_BOOL */
  double number;   /* JSON_NUMBER */
  int is_uint;     /* JSON_NUMBER written as a plain non-negative integer that fits uint64 */
  uint64_t uint;   /* its value when is_uint */
  char *str;       /* JSON_STRING: decoded UTF-8, NUL-terminated */
  size_t str_len;  /* may be < strlen if the string holds \u0000 */
  size_t count;    /* JSON_ARRAY / JSON_OBJECT: number of items */
  json_value *items; /* [count] elements or member values */
  char **keys;     /* JSON_OBJECT: [count] decoded keys (NUL-terminated) */
  size_t *key_lens;
};

/* Parses text[0..len) (one value, surrounding whitespace allowed). On failure
 * returns -1 with a message in err (e.g. "unexpected 'x' at byte 12"), or
 * JSON_ENOMEM when an allocation failed (the text may be valid). */
#define JSON_ENOMEM (-2)
int attn_json_parse(const char *text, size_t len, json_value **out, char *err, size_t errlen);
/* The same, refusing an object or array of more than max_items items (0: no
 * limit) as soon as it gets there: a reader's bound on absurd files. */
int attn_json_parse_limited(const char *text, size_t len, size_t max_items, json_value **out, char *err,
                       size_t errlen);
void attn_json_free(json_value *v);
/* Key comparisons the duplicate checks of this thread have made so far (a
 * work count for tests: near n log n for an object of n keys). */
uint64_t attn_json_key_compares(void);
/* Member of an object by key; NULL if absent or v is not an object. */
const json_value *attn_json_get(const json_value *v, const char *key);

/* Growable byte buffer for writing JSON. Functions return 0, or -1 on out of memory
 * (the buffer then stays valid and is freed by attn_json_buf_free). */
typedef struct {
  char *data;
  size_t len, cap;
} json_buf;
int attn_json_buf_put(json_buf *b, const char *s, size_t n);
int attn_json_buf_puts(json_buf *b, const char *s);
/* Writes s as a quoted JSON string: '"' and '\\' escaped, control bytes as \u00XX. */
int attn_json_buf_put_string(json_buf *b, const char *s);
int attn_json_buf_put_u64(json_buf *b, uint64_t v);
void attn_json_buf_free(json_buf *b);
/* 1 if s[0..n) is valid UTF-8 (no surrogates, no overlong forms). */
int attn_json_utf8_valid(const char *s, size_t n);

#endif
