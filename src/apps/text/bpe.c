/* BPE tokenizer: pre-tokenisation, encode, decode, text save/load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/bpe_internal.h"
#include "attn/kernels.h"
#include "apps/text/textbuf.h"

void attn_bpe_config_default(attn_bpe_config *cfg) {
  cfg->vocab_size = 8000;
  cfg->max_text_bytes = 4096;
  cfg->max_chunk = 64;
  cfg->min_count = 2;
}

enum { C_LETTER, C_DIGIT, C_SPACE, C_OTHER };

static int byte_class(unsigned char c) {
  if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return C_LETTER;
  if (c >= '0' && c <= '9') return C_DIGIT;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return C_SPACE;
  return C_OTHER;
}

size_t attn_bpe_chunk_end(const unsigned char *s, size_t n, size_t i, int max_chunk) {
  size_t start = i, lim = i + (size_t)max_chunk < n ? i + (size_t)max_chunk : n;
  int c = byte_class(s[i]);
  if (s[i] == ' ' && i + 1 < n && byte_class(s[i + 1]) != C_SPACE) {
    /* " word": the space joins the run that follows */
    c = byte_class(s[i + 1]);
    i += 2;
    while (i < lim && byte_class(s[i]) == c) i++;
    return i;
  }
  while (i < lim && byte_class(s[i]) == c) i++;
  /* a whitespace run leaves its final space to the word that follows */
  if (c == C_SPACE && i < n && byte_class(s[i]) != C_SPACE && i - start > 1 && s[i - 1] == ' ') i--;
  return i;
}

void attn_bpe_free(attn_bpe *b) {
  if (!b) return;
  free(b->merges);
  free(b->tok_off);
  free(b->tok_len);
  free(b->tok_bytes);
  attn_u64map_free(&b->rank);
  free(b);
}

int attn_bpe_vocab_size(const attn_bpe *b) { return ATTN_BPE_MERGE0 + b->n_merges; }
int attn_bpe_n_merges(const attn_bpe *b) { return b->n_merges; }

const char *attn_bpe_token(const attn_bpe *b, int id, size_t *len) {
  if (!b || id < 0 || id >= attn_bpe_vocab_size(b)) return NULL;
  if (len) *len = b->tok_len[id];
  return b->tok_bytes + b->tok_off[id];
}

attn_status attn_bpe_from_merges(int32_t *merges, int n_merges, int max_chunk, attn_bpe **out) {
  *out = NULL;
  if (max_chunk < 2 || max_chunk > 1024) {
    free(merges);
    return attn_set_error(ATTN_EINVAL, "bpe: max_chunk %d is outside 2..1024", max_chunk);
  }
  attn_bpe *b = calloc(1, sizeof *b);
  int vocab = ATTN_BPE_MERGE0 + n_merges;
  if (!b) {
    free(merges);
    return attn_set_error(ATTN_ENOMEM, "bpe: out of memory");
  }
  b->merges = merges;
  b->n_merges = n_merges;
  b->max_chunk = max_chunk;
  b->tok_off = calloc((size_t)vocab, sizeof *b->tok_off);
  b->tok_len = calloc((size_t)vocab, sizeof *b->tok_len);
  /* total bytes: 256 + sum of merged lengths (each <= max_chunk) */
  size_t total = 256;
  if (b->tok_off && b->tok_len) {
    for (int i = 0; i < 256; i++) b->tok_len[ATTN_BPE_BYTE0 + i] = 1;
    for (int m = 0; m < n_merges; m++) {
      int32_t l = merges[2 * m], r = merges[2 * m + 1], id = ATTN_BPE_MERGE0 + m;
      if (l < ATTN_BPE_BYTE0 || r < ATTN_BPE_BYTE0 || l >= id || r >= id) {
        attn_bpe_free(b);
        return attn_set_error(ATTN_EFORMAT, "bpe: merge %d joins ids %d and %d, not tokens defined before id %d",
                              m, (int)l, (int)r, (int)id);
      }
      b->tok_len[id] = b->tok_len[l] + b->tok_len[r];
      total += b->tok_len[id];
    }
  }
  b->tok_bytes = malloc(total);
  if (!b->tok_off || !b->tok_len || !b->tok_bytes) {
    attn_bpe_free(b);
    return attn_set_error(ATTN_ENOMEM, "bpe: out of memory for %d tokens", vocab);
  }
  for (int i = 0; i < 256; i++) {
    b->tok_off[ATTN_BPE_BYTE0 + i] = (uint32_t)i;
    b->tok_bytes[i] = (char)i;
  }
  size_t at = 256;
  for (int m = 0; m < n_merges; m++) {
    int32_t l = merges[2 * m], r = merges[2 * m + 1], id = ATTN_BPE_MERGE0 + m;
    b->tok_off[id] = (uint32_t)at;
    memcpy(b->tok_bytes + at, b->tok_bytes + b->tok_off[l], b->tok_len[l]);
    memcpy(b->tok_bytes + at + b->tok_len[l], b->tok_bytes + b->tok_off[r], b->tok_len[r]);
    at += b->tok_len[id];
    if (attn_u64map_get(&b->rank, bpe_pair_key(l, r)) >= 0) {
      attn_bpe_free(b);
      return attn_set_error(ATTN_EFORMAT, "bpe: merge %d (%d %d) repeats an earlier merge", m, (int)l, (int)r);
    }
    if (attn_u64map_put(&b->rank, bpe_pair_key(l, r), m)) {
      attn_bpe_free(b);
      return attn_set_error(ATTN_ENOMEM, "bpe: out of memory");
    }
  }
  *out = b;
  return ATTN_OK;
}

/* Applies the merges to one chunk: sym[0..*n) holds byte ids on entry.
 * Repeatedly takes the adjacent pair of lowest rank and merges all its
 * non-overlapping occurrences left to right (as training did). */
static void merge_chunk(const attn_bpe *b, int32_t *sym, int *n) {
  int len = *n;
  while (len > 1) {
    int32_t best = -1;
    for (int i = 0; i + 1 < len; i++) {
      int32_t r = attn_u64map_get(&b->rank, bpe_pair_key(sym[i], sym[i + 1]));
      if (r >= 0 && (best < 0 || r < best)) best = r;
    }
    if (best < 0) break;
    int32_t l = b->merges[2 * best], rr = b->merges[2 * best + 1], id = ATTN_BPE_MERGE0 + best;
    int o = 0;
    for (int i = 0; i < len; i++) {
      if (i + 1 < len && sym[i] == l && sym[i + 1] == rr) {
        sym[o++] = id;
        i++;
      } else {
        sym[o++] = sym[i];
      }
    }
    len = o;
  }
  *n = len;
}

attn_status attn_bpe_encode(const attn_bpe *b, const char *s, size_t n, int32_t *ids, size_t cap,
                            size_t *n_ids) {
  if (!b || (!s && n) || (!ids && cap) || !n_ids)
    return attn_set_error(ATTN_EINVAL, "bpe_encode: NULL tokenizer, text, ids or n_ids");
  const unsigned char *u = (const unsigned char *)s;
  int32_t sym[1024];
  size_t out = 0, i = 0;
  while (i < n && out < cap) {
    size_t e = attn_bpe_chunk_end(u, n, i, b->max_chunk);
    int len = (int)(e - i);
    for (int k = 0; k < len; k++) sym[k] = ATTN_BPE_BYTE0 + u[i + k];
    merge_chunk(b, sym, &len);
    for (int k = 0; k < len && out < cap; k++) ids[out++] = sym[k];
    i = e;
  }
  *n_ids = out;
  return ATTN_OK;
}

attn_status attn_bpe_encode_alloc(const attn_bpe *b, const char *s, size_t n, int32_t **ids,
                                  size_t *n_ids) {
  if (!ids) return attn_set_error(ATTN_EINVAL, "bpe_encode: NULL ids");
  *ids = malloc((n ? n : 1) * sizeof **ids); /* at most one token per byte */
  if (!*ids) return attn_set_error(ATTN_ENOMEM, "bpe_encode: out of memory for %zu bytes", n);
  attn_status st = attn_bpe_encode(b, s, n, *ids, n, n_ids);
  if (st) {
    free(*ids);
    *ids = NULL;
  }
  return st;
}

attn_status attn_bpe_encode_many(const attn_bpe *b, const char *const *texts, const size_t *lens,
                                 int n, size_t max_tokens, int32_t **ids, size_t *n_ids) {
  if (!b || n < 0 || (n > 0 && (!texts || !lens || !ids || !n_ids)))
    return attn_set_error(ATTN_EINVAL, "bpe_encode_many: NULL argument or n = %d < 0", n);
  for (int i = 0; i < n; i++) {
    ids[i] = NULL;
    n_ids[i] = 0;
    if (!texts[i] && lens[i]) return attn_set_error(ATTN_EINVAL, "bpe_encode_many: texts[%d] is NULL", i);
  }
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 16) num_threads(attn_get_num_threads()) reduction(| : failed)
  for (int i = 0; i < n; i++) {
    /* at most one token per byte; a cut at max_tokens needs no more */
    size_t cap = lens[i] ? lens[i] : 1;
    if (max_tokens && cap > max_tokens) cap = max_tokens;
    ids[i] = malloc(cap * sizeof **ids);
    if (!ids[i] || attn_bpe_encode(b, texts[i], lens[i], ids[i], cap, &n_ids[i]) != ATTN_OK) failed = 1;
  }
  if (failed) {
    for (int i = 0; i < n; i++) {
      free(ids[i]);
      ids[i] = NULL;
      n_ids[i] = 0;
    }
    return attn_set_error(ATTN_ENOMEM, "bpe_encode_many: out of memory encoding %d texts", n);
  }
  return ATTN_OK;
}

attn_status attn_bpe_decode(const attn_bpe *b, const int32_t *ids, size_t n, char **out,
                            size_t *len) {
  if (!b || (!ids && n) || !out) return attn_set_error(ATTN_EINVAL, "bpe_decode: NULL argument");
  *out = NULL;
  attn_textbuf t = {0};
  int vocab = attn_bpe_vocab_size(b);
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      attn_textbuf_free(&t);
      return attn_set_error(ATTN_EINVAL, "bpe_decode: ids[%zu] = %d is outside the vocabulary [0, %d)",
                            i, (int)ids[i], vocab);
    }
    if (attn_textbuf_put(&t, b->tok_bytes + b->tok_off[ids[i]], b->tok_len[ids[i]])) {
      attn_textbuf_free(&t);
      return attn_set_error(ATTN_ENOMEM, "bpe_decode: out of memory");
    }
  }
  *out = attn_textbuf_take(&t, len);
  return *out ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "bpe_decode: out of memory");
}

attn_status attn_bpe_save(const attn_bpe *b, char **text) {
  if (!b || !text) return attn_set_error(ATTN_EINVAL, "bpe_save: NULL argument");
  attn_textbuf t = {0};
  char line[64];
  snprintf(line, sizeof line, "attn-bpe 1\nmax_chunk %d\nmerges %d\n", b->max_chunk, b->n_merges);
  int bad = attn_textbuf_puts(&t, line);
  for (int m = 0; m < b->n_merges && !bad; m++) {
    snprintf(line, sizeof line, "%d %d\n", (int)b->merges[2 * m], (int)b->merges[2 * m + 1]);
    bad = attn_textbuf_puts(&t, line);
  }
  *text = bad ? NULL : attn_textbuf_take(&t, NULL);
  if (!*text) {
    attn_textbuf_free(&t);
    return attn_set_error(ATTN_ENOMEM, "bpe_save: out of memory");
  }
  return ATTN_OK;
}

/* Reads one non-negative decimal < 2^31 at *p, then expects `end`. */
static int read_int(const char **p, char end, long *v) {
  const char *s = *p;
  long x = 0;
  if (*s < '0' || *s > '9') return -1;
  while (*s >= '0' && *s <= '9') {
    x = x * 10 + (*s - '0');
    if (x > 0x7fffffff) return -1;
    s++;
  }
  if (*s != end) return -1;
  *p = s + 1;
  *v = x;
  return 0;
}

attn_status attn_bpe_load(const char *text, attn_bpe **out) {
  if (!text || !out) return attn_set_error(ATTN_EINVAL, "bpe_load: NULL argument");
  *out = NULL;
  const char *p = text;
  long max_chunk, n;
  if (strncmp(p, "attn-bpe 1\n", 11))
    return attn_set_error(ATTN_EFORMAT, "bpe_load: line 1 is not 'attn-bpe 1'");
  p += 11;
  if (strncmp(p, "max_chunk ", 10) || (p += 10, read_int(&p, '\n', &max_chunk)))
    return attn_set_error(ATTN_EFORMAT, "bpe_load: line 2 is not 'max_chunk N'");
  if (strncmp(p, "merges ", 7) || (p += 7, read_int(&p, '\n', &n)) || n > 1000000)
    return attn_set_error(ATTN_EFORMAT, "bpe_load: line 3 is not 'merges N' (N <= 1000000)");
  int32_t *merges = malloc((size_t)(n ? n : 1) * 2 * sizeof *merges);
  if (!merges) return attn_set_error(ATTN_ENOMEM, "bpe_load: out of memory for %ld merges", n);
  for (long m = 0; m < n; m++) {
    long l, r;
    if (read_int(&p, ' ', &l) || read_int(&p, '\n', &r)) {
      free(merges);
      return attn_set_error(ATTN_EFORMAT, "bpe_load: line %ld is not 'LEFT RIGHT' (merge %ld of %ld)",
                            m + 4, m, n);
    }
    merges[2 * m] = (int32_t)l;
    merges[2 * m + 1] = (int32_t)r;
  }
  if (*p) {
    free(merges);
    return attn_set_error(ATTN_EFORMAT, "bpe_load: unexpected text after %ld merges (line %ld)", n, n + 4);
  }
  return attn_bpe_from_merges(merges, (int)n, (int)max_chunk, out);
}
