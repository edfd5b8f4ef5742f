/* GPT-2 tokenizer: encoding (pre-tokenizer chunks, then the lowest-rank
 * merge first, by a heap of candidate pairs) and decoding (gpt2_bpe.h). */
#include <stdlib.h>
#include <string.h>

#include "apps/text/gpt2_bpe_internal.h"

int32_t attn_gpt2_bpe_vocab_size(const attn_gpt2_bpe *t) { return t ? t->n_ids : 0; }
int32_t attn_gpt2_bpe_n_merges(const attn_gpt2_bpe *t) { return t ? t->n_merges : 0; }

int32_t attn_gpt2_bpe_id(const attn_gpt2_bpe *t, const char *s) {
  if (!t || !s) return -1;
  size_t n = strlen(s), m;
  char *b = malloc(n + 1);
  int32_t id = b && !attn_gpt2_str_bytes(s, n, b, &m) ? attn_gpt2_lookup(t, b, m) : -1;
  free(b);
  return id;
}

const char *attn_gpt2_bpe_token(const attn_gpt2_bpe *t, int32_t id, size_t *len) {
  if (!t || id < 0 || id >= t->n_ids || t->len[id] == ATTN_GPT2_ABSENT) return NULL;
  if (len) *len = t->len[id];
  return t->blob + t->off[id];
}

/* ---- one chunk ------------------------------------------------------------------ */
typedef struct {
  int32_t rank, pos, left, right;
} pair;

typedef struct {
  int32_t *sym, *nxt, *prv;
  pair *heap;
  size_t cap, n_heap; /* cap: symbols the arrays hold (the heap 3 cap) */
} work;

static int before(const pair *a, const pair *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(work *w, pair p) {
  size_t i = w->n_heap++;
  while (i && before(&p, &w->heap[(i - 1) / 2])) {
    w->heap[i] = w->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  w->heap[i] = p;
}

static pair heap_pop(work *w) {
  pair top = w->heap[0], last = w->heap[--w->n_heap];
  size_t i = 0, n = w->n_heap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(&w->heap[c + 1], &w->heap[c])) c++;
    if (!before(&w->heap[c], &last)) break;
    w->heap[i] = w->heap[c];
    i = c;
  }
  if (n) w->heap[i] = last;
  return top;
}

/* the pair at symbol p and its successor, when the merges have it */
static void push_pair(const attn_gpt2_bpe *t, work *w, int32_t p) {
  if (p < 0 || w->nxt[p] < 0) return;
  int32_t q = w->nxt[p];
  int32_t r = attn_u64map_get(&t->ranks, (uint64_t)(uint32_t)w->sym[p] << 32 | (uint32_t)w->sym[q]);
  if (r >= 0) heap_push(w, (pair){r, p, w->sym[p], w->sym[q]});
}

static attn_status reserve(work *w, size_t n) {
  if (n <= w->cap) return ATTN_OK;
  size_t cap = w->cap ? w->cap : 64;
  while (cap < n)
    cap *= 2;
  int32_t *s = realloc(w->sym, 3 * cap * sizeof *s);
  if (!s) return attn_set_error(ATTN_ENOMEM, "tokenizer: out of memory");
  w->sym = s;
  pair *h = realloc(w->heap, 3 * cap * sizeof *h);
  if (!h) return attn_set_error(ATTN_ENOMEM, "tokenizer: out of memory");
  w->heap = h;
  w->cap = cap;
  return ATTN_OK;
}

/* the tokens of chunk s[0..n) appended to out[*k..] */
static attn_status chunk(const attn_gpt2_bpe *t, work *w, const unsigned char *s, size_t n,
                         int32_t *out, size_t *k) {
  attn_status st = reserve(w, n);
  if (st) return st;
  w->nxt = w->sym + w->cap;
  w->prv = w->nxt + w->cap;
  for (size_t i = 0; i < n; i++) {
    w->sym[i] = t->byte_id[s[i]];
    if (w->sym[i] < 0)
      return attn_set_error(ATTN_EINVAL, "tokenizer: byte 0x%02x has no token in the vocabulary",
                            s[i]);
    w->nxt[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    w->prv[i] = (int32_t)i - 1;
  }
  w->n_heap = 0;
  for (size_t i = 0; i + 1 < n; i++)
    push_pair(t, w, (int32_t)i);
  while (w->n_heap) {
    pair e = heap_pop(w);
    int32_t q = w->nxt[e.pos];
    /* stale: the left symbol was merged into its predecessor (sym -1), or
     * it or its successor changed since the pair was pushed */
    if (w->sym[e.pos] != e.left || q < 0 || w->sym[q] != e.right) continue;
    w->sym[e.pos] = t->merged[e.rank];
    w->sym[q] = -1;
    w->nxt[e.pos] = w->nxt[q];
    if (w->nxt[q] >= 0) w->prv[w->nxt[q]] = e.pos;
    push_pair(t, w, w->prv[e.pos]);
    push_pair(t, w, e.pos);
  }
  for (int32_t p = 0; p >= 0; p = w->nxt[p])
    out[(*k)++] = w->sym[p];
  return ATTN_OK;
}

attn_status attn_gpt2_bpe_encode(const attn_gpt2_bpe *t, const char *s, size_t n, int32_t **ids,
                                 size_t *n_ids) {
  if (!t || (!s && n) || !ids || !n_ids)
    return attn_set_error(ATTN_EINVAL, "tokenizer encode: NULL argument");
  *ids = NULL;
  *n_ids = 0;
  char *prefixed = NULL;
  if (t->add_prefix_space && (n == 0 || s[0] != ' ')) {
    if (!(prefixed = malloc(n + 1))) return attn_set_error(ATTN_ENOMEM, "tokenizer: out of memory");
    prefixed[0] = ' ';
    if (n) memcpy(prefixed + 1, s, n);
    s = prefixed;
    n++;
  }
  if (!n) return ATTN_OK;
  int32_t *out = malloc(n * sizeof *out); /* a token per byte at most */
  work w = {0};
  size_t k = 0;
  attn_status st = out ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "tokenizer: out of memory");
  for (size_t i = 0; !st && i < n;) {
    size_t j = attn_gpt2_pretok_next(s, n, i);
    st = chunk(t, &w, (const unsigned char *)s + i, j - i, out, &k);
    i = j;
  }
  free(w.sym);
  free(w.heap);
  free(prefixed);
  if (st) {
    free(out);
    return st;
  }
  *ids = out;
  *n_ids = k;
  return ATTN_OK;
}

attn_status attn_gpt2_bpe_decode(const attn_gpt2_bpe *t, const int32_t *ids, size_t n, char **out,
                                 size_t *len) {
  if (!t || (!ids && n) || !out)
    return attn_set_error(ATTN_EINVAL, "tokenizer decode: NULL argument");
  *out = NULL;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l;
    if (!attn_gpt2_bpe_token(t, ids[i], &l))
      return attn_set_error(ATTN_EINVAL, "tokenizer decode: id %d at %zu is not in the vocabulary",
                            (int)ids[i], i);
    total += l;
  }
  char *b = malloc(total + 1);
  if (!b) return attn_set_error(ATTN_ENOMEM, "tokenizer decode: out of memory");
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l;
    const char *tok = attn_gpt2_bpe_token(t, ids[i], &l);
    memcpy(b + k, tok, l);
    k += l;
  }
  b[k] = 0;
  *out = b;
  if (len) *len = k;
  return ATTN_OK;
}
