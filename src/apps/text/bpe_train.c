/* BPE training: chunk counts, then merges with incremental pair counts and
 * a lazy max-heap (stale entries are skipped when popped). */
#include <stdlib.h>
#include <string.h>

#include "apps/text/bpe_internal.h"

typedef struct {
  int64_t count;
  int32_t pair;
} heap_item;

typedef struct {
  int32_t left, right;
  int64_t count;  /* occurrences, weighted by word counts */
  int32_t *words; /* words that may hold the pair (stale entries allowed) */
  int32_t n_words, cap_words;
  int touched;    /* in trainer.touched during a merge */
} pair_info;

typedef struct {
  /* words: the distinct chunks */
  int n_words, cap_words;
  int64_t *w_count;
  uint32_t *w_boff; /* offset of the chunk's bytes in bytes[] */
  uint32_t *w_soff; /* offset of its symbols in sym[] */
  int32_t *w_slen;  /* current number of symbols */
  int32_t *w_stamp;
  char *bytes;
  size_t n_bytes, cap_bytes;
  int32_t *sym;
  attn_u64map chunks; /* hash -> word */
  /* tokens' bytes (for tie-breaking) */
  uint32_t *t_off, *t_len;
  char *t_bytes;
  size_t t_nbytes, t_cap;
  /* pairs */
  int n_pairs, cap_pairs;
  pair_info *p;
  attn_u64map pairs; /* (left << 32 | right) -> pair */
  int32_t *touched;
  int n_touched;
  heap_item *heap;
  size_t n_heap, cap_heap;
} trainer;

static uint64_t hash_bytes(const unsigned char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h == UINT64_MAX ? 0 : h;
}

static int add_chunk(trainer *t, const unsigned char *s, size_t n) {
  uint64_t h = hash_bytes(s, n);
  for (;;) {
    int32_t w = attn_u64map_get(&t->chunks, h);
    if (w < 0) break;
    size_t wl = (size_t)t->w_slen[w]; /* == byte length before merging */
    if (wl == n && !memcmp(t->bytes + t->w_boff[w], s, n)) {
      t->w_count[w]++;
      return 0;
    }
    h = h * 0x9e3779b97f4a7c15ull + 1; /* collision: probe the next key */
    if (h == UINT64_MAX) h = 0;
  }
  int w = t->n_words;
  if (w == t->cap_words) {
    int c = w ? 2 * w : 4096;
    int64_t *a = realloc(t->w_count, (size_t)c * sizeof *a);
    if (a) t->w_count = a;
    uint32_t *b = realloc(t->w_boff, (size_t)c * sizeof *b);
    if (b) t->w_boff = b;
    uint32_t *d = realloc(t->w_soff, (size_t)c * sizeof *d);
    if (d) t->w_soff = d;
    int32_t *e = realloc(t->w_slen, (size_t)c * sizeof *e);
    if (e) t->w_slen = e;
    if (!a || !b || !d || !e) return -1;
    t->cap_words = c;
  }
  if (t->n_bytes + n > t->cap_bytes) {
    size_t c = t->cap_bytes ? t->cap_bytes : 1 << 20;
    while (c < t->n_bytes + n) c *= 2;
    if (c > UINT32_MAX) return -1;
    char *p = realloc(t->bytes, c);
    if (!p) return -1;
    t->bytes = p;
    t->cap_bytes = c;
  }
  memcpy(t->bytes + t->n_bytes, s, n);
  t->w_boff[w] = (uint32_t)t->n_bytes;
  t->w_soff[w] = (uint32_t)t->n_bytes; /* symbols share the offsets: one per byte at most */
  t->w_slen[w] = (int32_t)n;
  t->w_count[w] = 1;
  t->n_bytes += n;
  t->n_words++;
  return attn_u64map_put(&t->chunks, h, w);
}

/* Bytes of token id. */
static const char *tok(const trainer *t, int32_t id, uint32_t *len) {
  *len = t->t_len[id];
  return t->t_bytes + t->t_off[id];
}

static int bytes_cmp(const char *a, uint32_t la, const char *b, uint32_t lb) {
  int c = memcmp(a, b, la < lb ? la : lb);
  if (c) return c;
  return (la > lb) - (la < lb);
}

/* 1 if pair x ranks before pair y: more frequent, then lexicographically
 * smaller (left bytes, right bytes). */
static int before(const trainer *t, heap_item x, heap_item y) {
  if (x.count != y.count) return x.count > y.count;
  uint32_t l1, l2;
  const char *a = tok(t, t->p[x.pair].left, &l1), *b = tok(t, t->p[y.pair].left, &l2);
  int c = bytes_cmp(a, l1, b, l2);
  if (c) return c < 0;
  a = tok(t, t->p[x.pair].right, &l1);
  b = tok(t, t->p[y.pair].right, &l2);
  return bytes_cmp(a, l1, b, l2) < 0;
}

static int heap_push(trainer *t, heap_item it) {
  if (t->n_heap == t->cap_heap) {
    size_t c = t->cap_heap ? 2 * t->cap_heap : 4096;
    heap_item *h = realloc(t->heap, c * sizeof *h);
    if (!h) return -1;
    t->heap = h;
    t->cap_heap = c;
  }
  size_t i = t->n_heap++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!before(t, it, t->heap[p])) break;
    t->heap[i] = t->heap[p];
    i = p;
  }
  t->heap[i] = it;
  return 0;
}

static heap_item heap_pop(trainer *t) {
  heap_item top = t->heap[0], last = t->heap[--t->n_heap];
  size_t i = 0, n = t->n_heap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(t, t->heap[c + 1], t->heap[c])) c++;
    if (!before(t, t->heap[c], last)) break;
    t->heap[i] = t->heap[c];
    i = c;
  }
  if (n) t->heap[i] = last;
  return top;
}

/* Pair index of (l, r), created with count 0 if new; -1 when out of memory. */
static int32_t pair_of(trainer *t, int32_t l, int32_t r) {
  uint64_t key = bpe_pair_key(l, r);
  int32_t p = attn_u64map_get(&t->pairs, key);
  if (p >= 0) return p;
  p = t->n_pairs;
  if (p == t->cap_pairs) {
    int c = p ? 2 * p : 4096;
    pair_info *np = realloc(t->p, (size_t)c * sizeof *np);
    int32_t *nt = realloc(t->touched, (size_t)c * sizeof *nt);
    if (np) t->p = np;
    if (nt) t->touched = nt;
    if (!np || !nt) return -1;
    t->cap_pairs = c;
  }
  t->p[p] = (pair_info){.left = l, .right = r};
  t->n_pairs++;
  if (attn_u64map_put(&t->pairs, key, p)) return -1;
  return p;
}

static int pair_list_add(trainer *t, int32_t p, int32_t w) {
  pair_info *q = &t->p[p];
  if (q->n_words && q->words[q->n_words - 1] == w) return 0;
  if (q->n_words == q->cap_words) {
    int c = q->cap_words ? 2 * q->cap_words : 4;
    int32_t *nw = realloc(q->words, (size_t)c * sizeof *nw);
    if (!nw) return -1;
    q->words = nw;
    q->cap_words = c;
  }
  q->words[q->n_words++] = w;
  return 0;
}

static void touch(trainer *t, int32_t p) {
  if (!t->p[p].touched) {
    t->p[p].touched = 1;
    t->touched[t->n_touched++] = p;
  }
}

static void trainer_free(trainer *t) {
  free(t->w_count);
  free(t->w_boff);
  free(t->w_soff);
  free(t->w_slen);
  free(t->w_stamp);
  free(t->bytes);
  free(t->sym);
  attn_u64map_free(&t->chunks);
  free(t->t_off);
  free(t->t_len);
  free(t->t_bytes);
  for (int p = 0; p < t->n_pairs; p++) free(t->p[p].words);
  free(t->p);
  attn_u64map_free(&t->pairs);
  free(t->touched);
  free(t->heap);
}

/* Merges pair p (left l, right r) into id in every word that holds it. */
static int apply_merge(trainer *t, int32_t p, int32_t l, int32_t r, int32_t id, int32_t step) {
  int32_t *list = t->p[p].words, nw = t->p[p].n_words;
  t->p[p].words = NULL; /* the pair disappears everywhere: drop its list */
  t->p[p].n_words = t->p[p].cap_words = 0;
  int rc = 0;
  for (int32_t k = 0; k < nw && !rc; k++) {
    int32_t w = list[k];
    if (t->w_stamp[w] == step) continue;
    t->w_stamp[w] = step;
    int32_t *s = t->sym + t->w_soff[w];
    int len = t->w_slen[w], has = 0;
    for (int i = 0; i + 1 < len && !has; i++) has = s[i] == l && s[i + 1] == r;
    if (!has) continue; /* a stale listing */
    int64_t c = t->w_count[w];
    for (int i = 0; i + 1 < len; i++) {
      int32_t q = attn_u64map_get(&t->pairs, bpe_pair_key(s[i], s[i + 1]));
      t->p[q].count -= c;
      touch(t, q);
    }
    int o = 0;
    for (int i = 0; i < len; i++) {
      if (i + 1 < len && s[i] == l && s[i + 1] == r) {
        s[o++] = id;
        i++;
      } else {
        s[o++] = s[i];
      }
    }
    t->w_slen[w] = len = o;
    for (int i = 0; i + 1 < len && !rc; i++) {
      int32_t q = pair_of(t, s[i], s[i + 1]);
      if (q < 0) {
        rc = -1;
        break;
      }
      t->p[q].count += c;
      touch(t, q);
      if ((s[i] == id || s[i + 1] == id) && pair_list_add(t, q, w)) rc = -1;
    }
  }
  free(list);
  for (int i = 0; i < t->n_touched; i++) {
    int32_t q = t->touched[i];
    t->p[q].touched = 0;
    if (!rc && t->p[q].count > 0 && heap_push(t, (heap_item){t->p[q].count, q})) rc = -1;
  }
  t->n_touched = 0;
  return rc;
}

attn_status attn_bpe_train(const char *const *texts, const size_t *lens, int n,
                           const attn_bpe_config *cfg, attn_bpe **out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "bpe_train: NULL out");
  *out = NULL;
  if (n < 0 || (n > 0 && (!texts || !lens)))
    return attn_set_error(ATTN_EINVAL, "bpe_train: NULL texts or lens for %d texts", n);
  attn_bpe_config c;
  attn_bpe_config_default(&c);
  if (cfg) c = *cfg;
  if (c.vocab_size < ATTN_BPE_MERGE0 || c.vocab_size > 1000000)
    return attn_set_error(ATTN_EINVAL, "bpe_train: vocab_size %d is outside [%d, 1000000]",
                          c.vocab_size, ATTN_BPE_MERGE0);
  if (c.max_chunk < 2 || c.max_chunk > 1024)
    return attn_set_error(ATTN_EINVAL, "bpe_train: max_chunk %d is outside 2..1024", c.max_chunk);
  if (c.min_count < 1) c.min_count = 1;

  trainer t;
  memset(&t, 0, sizeof t);
  attn_status st = ATTN_OK;
  int target = c.vocab_size - ATTN_BPE_MERGE0, n_merges = 0;
  int32_t *merges = malloc((size_t)(target ? target : 1) * 2 * sizeof *merges);
  if (!merges) return attn_set_error(ATTN_ENOMEM, "bpe_train: out of memory");

  for (int i = 0; i < n && !st; i++) {
    if (!texts[i] && lens[i]) {
      st = attn_set_error(ATTN_EINVAL, "bpe_train: texts[%d] is NULL", i);
      break;
    }
    size_t len = lens[i];
    if (c.max_text_bytes && len > c.max_text_bytes) len = c.max_text_bytes;
    const unsigned char *s = (const unsigned char *)texts[i];
    for (size_t at = 0; at < len;) {
      size_t e = attn_bpe_chunk_end(s, len, at, c.max_chunk);
      if (add_chunk(&t, s + at, e - at)) {
        st = attn_set_error(ATTN_ENOMEM, "bpe_train: out of memory counting chunks");
        break;
      }
      at = e;
    }
  }
  int vocab = c.vocab_size;
  t.sym = st ? NULL : malloc((t.n_bytes ? t.n_bytes : 1) * sizeof *t.sym);
  t.w_stamp = st ? NULL : calloc((size_t)(t.n_words ? t.n_words : 1), sizeof *t.w_stamp);
  t.t_off = st ? NULL : calloc((size_t)vocab, sizeof *t.t_off);
  t.t_len = st ? NULL : calloc((size_t)vocab, sizeof *t.t_len);
  t.t_cap = 256 + 16 * (size_t)target;
  t.t_bytes = st ? NULL : malloc(t.t_cap);
  if (!st && (!t.sym || !t.w_stamp || !t.t_off || !t.t_len || !t.t_bytes))
    st = attn_set_error(ATTN_ENOMEM, "bpe_train: out of memory");
  if (!st) {
    for (int b = 0; b < 256; b++) {
      t.t_off[ATTN_BPE_BYTE0 + b] = (uint32_t)b;
      t.t_len[ATTN_BPE_BYTE0 + b] = 1;
      t.t_bytes[b] = (char)b;
    }
    t.t_nbytes = 256;
    for (int w = 0; w < t.n_words && !st; w++) {
      const unsigned char *b = (const unsigned char *)t.bytes + t.w_boff[w];
      int32_t *s = t.sym + t.w_soff[w];
      for (int i = 0; i < t.w_slen[w]; i++) s[i] = ATTN_BPE_BYTE0 + b[i];
      for (int i = 0; i + 1 < t.w_slen[w]; i++) {
        int32_t q = pair_of(&t, s[i], s[i + 1]);
        if (q < 0 || pair_list_add(&t, q, w)) {
          st = attn_set_error(ATTN_ENOMEM, "bpe_train: out of memory counting pairs");
          break;
        }
        t.p[q].count += t.w_count[w];
      }
    }
    for (int q = 0; q < t.n_pairs && !st; q++)
      if (heap_push(&t, (heap_item){t.p[q].count, q}))
        st = attn_set_error(ATTN_ENOMEM, "bpe_train: out of memory");
  }
  while (!st && n_merges < target && t.n_heap) {
    heap_item top = heap_pop(&t);
    if (top.count != t.p[top.pair].count || top.count <= 0) continue; /* stale */
    if (top.count < c.min_count) break;
    int32_t l = t.p[top.pair].left, r = t.p[top.pair].right, id = ATTN_BPE_MERGE0 + n_merges;
    uint32_t len = t.t_len[l] + t.t_len[r];
    if (t.t_nbytes + len > t.t_cap) {
      size_t cap = 2 * t.t_cap + len;
      char *nb = realloc(t.t_bytes, cap);
      if (!nb) {
        st = attn_set_error(ATTN_ENOMEM, "bpe_train: out of memory");
        break;
      }
      t.t_bytes = nb;
      t.t_cap = cap;
    }
    memcpy(t.t_bytes + t.t_nbytes, t.t_bytes + t.t_off[l], t.t_len[l]);
    memcpy(t.t_bytes + t.t_nbytes + t.t_len[l], t.t_bytes + t.t_off[r], t.t_len[r]);
    t.t_off[id] = (uint32_t)t.t_nbytes;
    t.t_len[id] = len;
    t.t_nbytes += len;
    merges[2 * n_merges] = l;
    merges[2 * n_merges + 1] = r;
    n_merges++;
    if (apply_merge(&t, top.pair, l, r, id, n_merges))
      st = attn_set_error(ATTN_ENOMEM, "bpe_train: out of memory merging");
  }
  trainer_free(&t);
  if (st) {
    free(merges);
    return st;
  }
  return attn_bpe_from_merges(merges, n_merges, c.max_chunk, out);
}
