/* attn's byte-level BPE tokenizer -> Hugging Face tokenizer.json (see
 * apps/hf_tokenizer.h for the mapping and its limits). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/text/bpe_internal.h"
#include "apps/text/hf_tokenizer.h"
#include "io/json.h"
#include "io/tmpname.h"

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes ('!'..'~', '¡'..'¬',
 * '®'..'ÿ') map to themselves, the other 68 to 256, 257, ... in byte order. */
unsigned attn_hf_byte_to_unicode(unsigned char byte) {
  unsigned n = 0;
  for (unsigned b = 0; b < 256; b++) {
    int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (b == byte) return printable ? b : 256 + n;
    if (!printable) n++;
  }
  return 0; /* not reached */
}

/* code point (< 0x800 here) as UTF-8 */
static size_t put_utf8(char *out, unsigned cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  out[0] = (char)(0xC0 | (cp >> 6));
  out[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

/* The byte-level string of token id (NUL-terminated, malloc'd); specials by
 * name. */
static char *token_string(const attn_bpe *b, int id, const unsigned *map) {
  static const char *const special[3] = {"[PAD]", "[CLS]", "[SEP]"};
  if (id < ATTN_BPE_BYTE0) return strdup(special[id]);
  size_t len;
  const char *bytes = attn_bpe_token(b, id, &len);
  char *s = malloc(2 * len + 1);
  if (!s) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += put_utf8(s + n, map[(unsigned char)bytes[i]]);
  s[n] = '\0';
  return s;
}

typedef struct {
  const char *bytes;
  size_t len;
  int id;
} tok_ref;

/* by bytes, then by id */
static int cmp_token(const void *pa, const void *pb) {
  const tok_ref *a = pa, *b = pb;
  int c = memcmp(a->bytes, b->bytes, a->len < b->len ? a->len : b->len);
  if (c) return c;
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* alias[id] = 1 for an id whose bytes an earlier id already has */
static attn_status find_aliases(const attn_bpe *b, unsigned char *alias, int *count) {
  int n = attn_bpe_vocab_size(b) - ATTN_BPE_BYTE0;
  tok_ref *t = malloc((size_t)n * sizeof *t);
  if (!t) return attn_set_error(ATTN_ENOMEM, "tokenizer.json: out of memory");
  for (int i = 0; i < n; i++) {
    t[i].id = ATTN_BPE_BYTE0 + i;
    t[i].bytes = attn_bpe_token(b, t[i].id, &t[i].len);
  }
  qsort(t, (size_t)n, sizeof *t, cmp_token);
  *count = 0;
  for (int i = 1; i < n; i++)
    if (t[i].len == t[i - 1].len && !memcmp(t[i].bytes, t[i - 1].bytes, t[i].len))
      alias[t[i].id] = 1, (*count)++;
  free(t);
  return ATTN_OK;
}

/* Split regex of attn_bpe_chunk_end (bpe.c) for chunks of at most M bytes:
 * a space + a run of one class, or a run of one class (letters = ASCII
 * letters and every non-ASCII character, digits, other), or a whitespace
 * run that leaves its final ' ' to a following word. */
static int put_regex(json_buf *j, int M) {
  const char *L = "[^\\x00-\\x40\\x5B-\\x60\\x7B-\\x7F]", *D = "[0-9]", *S = "[\\t-\\r ]";
  const char *O = "[\\x00-\\x08\\x0E-\\x1F!-/:-@\\x5B-\\x60\\x7B-\\x7F]";
  const char *cls[3] = {L, D, O};
  char re[512];
  size_t n = 0;
  for (int i = 0; i < 3; i++) n += (size_t)snprintf(re + n, sizeof re - n, " %s{1,%d}|", cls[i], M - 1);
  for (int i = 0; i < 3; i++) n += (size_t)snprintf(re + n, sizeof re - n, "%s{1,%d}|", cls[i], M);
  snprintf(re + n, sizeof re - n, "%s{1,%d}(?= [^\\t-\\r ])|%s{1,%d}", S, M, S, M);
  return attn_json_buf_put_string(j, re);
}

static const char *const HEAD =
    "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n"
    "  \"added_tokens\": [\n";
static const char *const ADDED_FLAGS =
    ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
    "\"normalized\": false, \"special\": true}";
static const char *const BYTE_LEVEL =
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
    "\"use_regex\": false}";

static int put_header(json_buf *j, int max_chunk) {
  static const char *const special[3] = {"[PAD]", "[CLS]", "[SEP]"};
  int bad = attn_json_buf_puts(j, HEAD);
  for (int i = 0; i < 3; i++) {
    char id[48];
    snprintf(id, sizeof id, "    {\"id\": %d, \"content\": ", i);
    bad |= attn_json_buf_puts(j, id) | attn_json_buf_put_string(j, special[i]) |
           attn_json_buf_puts(j, ADDED_FLAGS) | attn_json_buf_puts(j, i < 2 ? ",\n" : "\n");
  }
  bad |= attn_json_buf_puts(j, "  ],\n  \"normalizer\": null,\n  \"pre_tokenizer\": {\"type\": "
                          "\"Sequence\", \"pretokenizers\": [\n    {\"type\": \"Split\", "
                          "\"pattern\": {\"Regex\": ");
  bad |= put_regex(j, max_chunk);
  bad |= attn_json_buf_puts(j, "}, \"behavior\": \"Isolated\", \"invert\": false},\n    ");
  bad |= attn_json_buf_puts(j, BYTE_LEVEL);
  bad |= attn_json_buf_puts(j, "\n  ]},\n  \"post_processor\": null,\n  \"decoder\": ");
  bad |= attn_json_buf_puts(j, BYTE_LEVEL);
  bad |= attn_json_buf_puts(j, ",\n  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": "
                          "null, \"continuing_subword_prefix\": null, \"end_of_word_suffix\": "
                          "null, \"fuse_unk\": false, \"byte_fallback\": false,\n"
                          "    \"vocab\": {");
  return bad;
}

static int put_body(json_buf *j, const attn_bpe *b, char **str, const unsigned char *alias) {
  int V = attn_bpe_vocab_size(b), bad = 0, first = 1;
  for (int id = 0; id < V && !bad; id++) {
    if (alias[id]) continue;
    char num[32];
    snprintf(num, sizeof num, ": %d", id);
    bad |= attn_json_buf_puts(j, first ? "\n      " : ",\n      ") | attn_json_buf_put_string(j, str[id]) |
           attn_json_buf_puts(j, num);
    first = 0;
  }
  bad |= attn_json_buf_puts(j, "\n    },\n    \"merges\": [");
  for (int m = 0; m < b->n_merges && !bad; m++) {
    const char *l = str[b->merges[2 * m]], *r = str[b->merges[2 * m + 1]];
    size_t ll = strlen(l), lr = strlen(r);
    char *pair = malloc(ll + lr + 2);
    if (!pair) return 1;
    memcpy(pair, l, ll);
    pair[ll] = ' ';
    memcpy(pair + ll + 1, r, lr + 1);
    bad |= attn_json_buf_puts(j, m ? ",\n      " : "\n      ") | attn_json_buf_put_string(j, pair);
    free(pair);
  }
  bad |= attn_json_buf_puts(j, "\n    ]\n  }\n}\n");
  return bad;
}

attn_status attn_hf_tokenizer_json(const attn_bpe *b, char **json, size_t *len, int *aliased) {
  if (!b || !json) return attn_set_error(ATTN_EINVAL, "tokenizer.json: NULL argument");
  *json = NULL;
  int V = attn_bpe_vocab_size(b), count = 0;
  unsigned map[256];
  for (int i = 0; i < 256; i++) map[i] = attn_hf_byte_to_unicode((unsigned char)i);
  char **str = calloc((size_t)V, sizeof *str);
  unsigned char *alias = calloc((size_t)V, 1);
  attn_status st = str && alias ? find_aliases(b, alias, &count)
                                : attn_set_error(ATTN_ENOMEM, "tokenizer.json: out of memory");
  for (int id = 0; id < V && !st; id++)
    if (!(str[id] = token_string(b, id, map)))
      st = attn_set_error(ATTN_ENOMEM, "tokenizer.json: out of memory");
  json_buf j = {0};
  if (!st && (put_header(&j, b->max_chunk) || put_body(&j, b, str, alias)))
    st = attn_set_error(ATTN_ENOMEM, "tokenizer.json: out of memory");
  for (int id = 0; str && id < V; id++) free(str[id]);
  free(str);
  free(alias);
  if (st) {
    attn_json_buf_free(&j);
    return st;
  }
  *json = j.data;
  if (len) *len = j.len;
  if (aliased) *aliased = count;
  return ATTN_OK;
}

attn_status attn_hf_tokenizer_save(const attn_bpe *b, const char *path, int *aliased) {
  if (!path) return attn_set_error(ATTN_EINVAL, "tokenizer.json: NULL path");
  char *json;
  size_t len;
  attn_status st = attn_hf_tokenizer_json(b, &json, &len, aliased);
  if (st) return st;
  char *tmp = attn_tmp_name(path);
  FILE *f = tmp ? fopen(tmp, "wb") : NULL;
  if (!f) {
    st = attn_set_error(tmp ? ATTN_EIO : ATTN_ENOMEM, "%s: cannot write: %s", path,
                        tmp ? strerror(errno) : "out of memory");
    free(tmp);
    free(json);
    return st;
  }
  int bad = fwrite(json, 1, len, f) != len;
  bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    st = attn_set_error(ATTN_EIO, "%s: writing failed: %s", path, strerror(errno));
    remove(tmp);
  }
  free(tmp);
  free(json);
  return st;
}
