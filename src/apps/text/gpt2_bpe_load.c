/* Reading GPT-2's tokenizer (gpt2_bpe.h): vocab.json + merges.txt, or
 * tokenizer.json, into the token bytes, a bytes -> id table and the merge
 * ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/gpt2_bpe_internal.h"
#include "apps/text/utf8_text.h"
#include "io/json.h"

#define MAX_ITEMS (1u << 24) /* vocabulary entries or merges: GPT-2 has 50,257 / 50,000 */

/* bytes_to_unicode: printable Latin-1 ('!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF) stands for its own byte; the other bytes, in order, are
 * U+0100 + k. The byte of code point cp, or -1. */
static int byte_of_cp(uint32_t cp) {
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
    return (int)cp;
  if (cp < 0x100 || cp >= 0x100 + 68) return -1;
  int k = (int)(cp - 0x100);
  for (int b = 0; b < 256; b++) {
    int own = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (!own && k-- == 0) return b;
  }
  return -1;
}

static uint32_t decode_cp(const unsigned char *u, int k) {
  return k == 1   ? u[0]
         : k == 2 ? (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F)
         : k == 3 ? (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F)
                  : (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
                        (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
}

/* The bytes a vocabulary string stands for, into out [n] (as long as the
 * string at most); *m the count. -1 for invalid UTF-8. */
int attn_gpt2_str_bytes(const char *s, size_t n, char *out, size_t *m) {
  size_t j = 0;
  for (size_t i = 0; i < n;) {
    const unsigned char *u = (const unsigned char *)s + i;
    int k = attn_utf8_seq_len(u, n - i);
    if (!k) return -1;
    int b = byte_of_cp(decode_cp(u, k));
    if (b >= 0)
      out[j++] = (char)b;
    else
      for (int t = 0; t < k; t++)
        out[j++] = s[i + t];
    i += (size_t)k;
  }
  *m = j;
  return 0;
}

static uint64_t fnv(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

int32_t attn_gpt2_lookup(const attn_gpt2_bpe *t, const char *b, size_t n) {
  if (!t->slots) return -1;
  for (size_t i = (size_t)fnv(b, n) & (t->n_slots - 1);; i = (i + 1) & (t->n_slots - 1)) {
    int32_t id = t->slots[i];
    if (id < 0) return -1;
    if (t->len[id] == n && !memcmp(t->blob + t->off[id], b, n)) return id;
  }
}

void attn_gpt2_bpe_free(attn_gpt2_bpe *t) {
  if (!t) return;
  free(t->off);
  free(t->len);
  free(t->blob);
  free(t->slots);
  free(t->merged);
  attn_u64map_free(&t->ranks);
  free(t);
}

/* ---- building ---------------------------------------------------------------- */
typedef struct {
  const char *name; /* the file, for messages */
  attn_gpt2_bpe *t;
  size_t blob_cap;
} builder;

static attn_status oom(void) { return attn_set_error(ATTN_ENOMEM, "tokenizer: out of memory"); }

/* ids [0, n_ids) with no bytes yet */
static attn_status reserve_ids(builder *b, int32_t n_ids) {
  attn_gpt2_bpe *t = b->t;
  t->off = calloc((size_t)n_ids, sizeof *t->off);
  t->len = malloc((size_t)n_ids * sizeof *t->len);
  if (!t->off || !t->len) return oom();
  for (int32_t i = 0; i < n_ids; i++)
    t->len[i] = ATTN_GPT2_ABSENT;
  t->n_ids = n_ids;
  t->n_slots = 16;
  while (t->n_slots < 2 * (size_t)n_ids)
    t->n_slots *= 2;
  t->slots = malloc(t->n_slots * sizeof *t->slots);
  if (!t->slots) return oom();
  memset(t->slots, 0xFF, t->n_slots * sizeof *t->slots);
  return ATTN_OK;
}

/* id gets vocabulary string s; the bytes -> id table keeps the first id of
 * equal bytes */
static attn_status set_token(builder *b, int32_t id, const char *s, size_t n) {
  attn_gpt2_bpe *t = b->t;
  if (t->len[id] != ATTN_GPT2_ABSENT)
    return attn_set_error(ATTN_EFORMAT, "%s: id %d is given to two tokens", b->name, (int)id);
  if (t->blob_n + n > b->blob_cap) {
    size_t cap = b->blob_cap ? b->blob_cap : 4096;
    while (cap < t->blob_n + n)
      cap *= 2;
    char *nb = realloc(t->blob, cap);
    if (!nb) return oom();
    t->blob = nb;
    b->blob_cap = cap;
  }
  size_t m;
  if (attn_gpt2_str_bytes(s, n, t->blob + t->blob_n, &m))
    return attn_set_error(ATTN_EFORMAT, "%s: token %d is not valid UTF-8", b->name, (int)id);
  t->off[id] = t->blob_n;
  t->len[id] = (uint32_t)m;
  if (attn_gpt2_lookup(t, t->blob + t->blob_n, m) < 0) {
    size_t i = (size_t)fnv(t->blob + t->blob_n, m) & (t->n_slots - 1);
    while (t->slots[i] >= 0)
      i = (i + 1) & (t->n_slots - 1);
    t->slots[i] = id;
  }
  t->blob_n += m;
  return ATTN_OK;
}

static int is_id(const json_value *v) {
  return v->type == JSON_NUMBER && v->is_uint && v->uint < (uint64_t)INT32_MAX;
}

/* a JSON object {token: id} (vocab.json, tokenizer.json's model.vocab) and
 * added tokens [{id, content}] (may be NULL) */
static attn_status read_vocab(builder *b, const json_value *vocab, const json_value *added) {
  if (!vocab || vocab->type != JSON_OBJECT || !vocab->count)
    return attn_set_error(ATTN_EFORMAT, "%s: the vocabulary is not a non-empty object {token: id}",
                          b->name);
  uint64_t top = 0;
  for (size_t i = 0; i < vocab->count; i++) {
    if (!is_id(&vocab->items[i]))
      return attn_set_error(ATTN_EFORMAT, "%s: token '%s' has no id (a non-negative integer)",
                            b->name, vocab->keys[i]);
    if (vocab->items[i].uint + 1 > top) top = vocab->items[i].uint + 1;
  }
  for (size_t i = 0; added && i < added->count; i++) {
    const json_value *id = attn_json_get(&added->items[i], "id");
    const json_value *content = attn_json_get(&added->items[i], "content");
    if (!id || !is_id(id) || !content || content->type != JSON_STRING)
      return attn_set_error(ATTN_EFORMAT, "%s: added_tokens[%zu] needs an id and a content",
                            b->name, i);
    if (id->uint + 1 > top) top = id->uint + 1;
  }
  const uint64_t given = vocab->count + (added ? added->count : 0);
  if (top > 2 * given + 1024)
    return attn_set_error(ATTN_EFORMAT,
                          "%s: token id %llu for %llu tokens (ids this sparse are "
                          "not a vocabulary)",
                          b->name, (unsigned long long)(top - 1), (unsigned long long)given);
  attn_status st = reserve_ids(b, (int32_t)top);
  for (size_t i = 0; !st && i < vocab->count; i++)
    st = set_token(b, (int32_t)vocab->items[i].uint, vocab->keys[i], vocab->key_lens[i]);
  for (size_t i = 0; !st && added && i < added->count; i++) {
    const json_value *id = attn_json_get(&added->items[i], "id");
    const json_value *content = attn_json_get(&added->items[i], "content");
    if (b->t->len[id->uint] == ATTN_GPT2_ABSENT) /* else the vocabulary has it already */
      st = set_token(b, (int32_t)id->uint, content->str, content->str_len);
  }
  for (int c = 0; !st && c < 256; c++) {
    char one = (char)c;
    b->t->byte_id[c] = attn_gpt2_lookup(b->t, &one, 1);
  }
  return st;
}

static attn_status grow_merges(builder *b, size_t *cap) {
  attn_gpt2_bpe *t = b->t;
  if ((size_t)t->n_merges < *cap) return ATTN_OK;
  if (t->n_merges >= (int32_t)MAX_ITEMS)
    return attn_set_error(ATTN_EFORMAT, "%s: more than %u merges", b->name, MAX_ITEMS);
  *cap = *cap ? *cap * 2 : 1024;
  int32_t *m = realloc(t->merged, *cap * sizeof *m);
  if (!m) return oom();
  t->merged = m;
  return ATTN_OK;
}

/* merge n_merges: left l, right r (vocabulary strings) */
static attn_status add_merge(builder *b, const char *l, size_t ln, const char *r, size_t rn,
                             size_t *cap) {
  attn_gpt2_bpe *t = b->t;
  attn_status st = grow_merges(b, cap);
  if (st) return st;
  char *buf = malloc(ln + rn + 1);
  if (!buf) return oom();
  size_t lb, rb;
  int32_t li = -1, ri = -1, mi = -1;
  if (!attn_gpt2_str_bytes(l, ln, buf, &lb)) li = attn_gpt2_lookup(t, buf, lb);
  if (li >= 0 && !attn_gpt2_str_bytes(r, rn, buf + lb, &rb)) {
    ri = attn_gpt2_lookup(t, buf + lb, rb);
    mi = attn_gpt2_lookup(t, buf, lb + rb);
  }
  free(buf);
  if (li < 0 || ri < 0 || mi < 0)
    return attn_set_error(ATTN_EFORMAT, "%s: merge %d ('%.*s %.*s'): %s is not in the vocabulary",
                          b->name, (int)t->n_merges + 1, (int)ln, l, (int)rn, r,
                          li < 0   ? "its left part"
                          : ri < 0 ? "its right part"
                                   : "the merged token");
  uint64_t key = (uint64_t)(uint32_t)li << 32 | (uint32_t)ri;
  if (attn_u64map_get(&t->ranks, key) < 0 && attn_u64map_put(&t->ranks, key, t->n_merges))
    return oom();
  t->merged[t->n_merges++] = mi;
  return ATTN_OK;
}

/* "LEFT RIGHT" (one space) */
static attn_status add_merge_line(builder *b, const char *s, size_t n, size_t *cap) {
  const char *sp = memchr(s, ' ', n);
  if (!sp || sp == s || sp + 1 == s + n || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
    return attn_set_error(ATTN_EFORMAT, "%s: merge %d '%.*s' is not 'LEFT RIGHT'", b->name,
                          (int)b->t->n_merges + 1, (int)(n > 60 ? 60 : n), s);
  return add_merge(b, s, (size_t)(sp - s), sp + 1, (size_t)(s + n - sp - 1), cap);
}

static attn_status parse_json(const char *text, size_t len, const char *name, json_value **v) {
  char err[160];
  int rc = attn_json_parse_limited(text, len, MAX_ITEMS, v, err, sizeof err);
  if (rc == JSON_ENOMEM) return oom();
  if (rc) return attn_set_error(ATTN_EFORMAT, "%s: %s", name, err);
  return ATTN_OK;
}

static attn_status start(builder *b, const char *name, attn_gpt2_bpe **out) {
  *out = NULL;
  memset(b, 0, sizeof *b);
  b->name = name ? name : "tokenizer";
  b->t = calloc(1, sizeof *b->t);
  return b->t ? ATTN_OK : oom();
}

static attn_status finish(builder *b, attn_status st, attn_gpt2_bpe **out) {
  if (st) {
    attn_gpt2_bpe_free(b->t);
    return st;
  }
  *out = b->t;
  return ATTN_OK;
}

attn_status attn_gpt2_bpe_from_vocab_merges(const char *vocab, size_t vocab_len, const char *merges,
                                            size_t merges_len, const char *vocab_name,
                                            const char *merges_name, attn_gpt2_bpe **out) {
  if (!vocab || !merges || !out) return attn_set_error(ATTN_EINVAL, "tokenizer: NULL argument");
  builder b;
  attn_status st = start(&b, vocab_name ? vocab_name : "vocab.json", out);
  if (st) return st;
  json_value *v = NULL;
  st = parse_json(vocab, vocab_len, b.name, &v);
  if (!st) st = read_vocab(&b, v, NULL);
  attn_json_free(v);
  b.name = merges_name ? merges_name : "merges.txt";
  size_t cap = 0;
  for (size_t i = 0; !st && i < merges_len;) {
    const char *nl = memchr(merges + i, '\n', merges_len - i);
    size_t end = nl ? (size_t)(nl - merges) : merges_len, e = end;
    if (e > i && merges[e - 1] == '\r') e--;
    int header = b.t->n_merges == 0 && e - i >= 9 && !memcmp(merges + i, "#version:", 9);
    if (e > i && !header) st = add_merge_line(&b, merges + i, e - i, &cap);
    i = end + 1;
  }
  return finish(&b, st, out);
}

static int is_type(const json_value *v, const char *type) {
  const json_value *t = attn_json_get(v, "type");
  return t && t->type == JSON_STRING && !strcmp(t->str, type);
}

/* the ByteLevel pre-tokenizer (itself or inside a Sequence), or NULL */
static const json_value *byte_level(const json_value *pre) {
  if (!pre || pre->type != JSON_OBJECT) return NULL;
  if (is_type(pre, "ByteLevel")) return pre;
  const json_value *seq = attn_json_get(pre, "pretokenizers");
  for (size_t i = 0; is_type(pre, "Sequence") && seq && seq->type == JSON_ARRAY && i < seq->count;
       i++)
    if (is_type(&seq->items[i], "ByteLevel")) return &seq->items[i];
  return NULL;
}

attn_status attn_gpt2_bpe_from_tokenizer_json(const char *text, size_t len, const char *name,
                                              attn_gpt2_bpe **out) {
  if (!text || !out) return attn_set_error(ATTN_EINVAL, "tokenizer: NULL argument");
  builder b;
  attn_status st = start(&b, name, out);
  if (st) return st;
  json_value *v = NULL;
  st = parse_json(text, len, b.name, &v);
  const json_value *model = st ? NULL : attn_json_get(v, "model");
  const json_value *pre = st ? NULL : byte_level(attn_json_get(v, "pre_tokenizer"));
  if (!st && (!model || model->type != JSON_OBJECT))
    st = attn_set_error(ATTN_EFORMAT, "%s: no \"model\" object", b.name);
  if (!st && attn_json_get(model, "type") && !is_type(model, "BPE"))
    st =
        attn_set_error(ATTN_EUNSUPPORTED, "%s: model type '%s' is not BPE", b.name,
                       attn_json_get(model, "type")->str ? attn_json_get(model, "type")->str : "?");
  if (!st && !pre)
    st = attn_set_error(ATTN_EUNSUPPORTED,
                        "%s: the pre-tokenizer is not ByteLevel (attn reads GPT-2's byte-level "
                        "BPE only)",
                        b.name);
  const json_value *added = st ? NULL : attn_json_get(v, "added_tokens");
  if (added && added->type != JSON_ARRAY) added = NULL;
  if (!st) st = read_vocab(&b, attn_json_get(model, "vocab"), added);
  if (!st) {
    const json_value *aps = attn_json_get(pre, "add_prefix_space");
    b.t->add_prefix_space = aps && aps->type == JSON_BOOL && aps->boolean;
  }
  const json_value *merges = st ? NULL : attn_json_get(model, "merges");
  if (!st && (!merges || merges->type != JSON_ARRAY))
    st = attn_set_error(ATTN_EFORMAT, "%s: model.merges is not an array", b.name);
  size_t cap = 0;
  for (size_t i = 0; !st && i < merges->count; i++) {
    const json_value *m = &merges->items[i];
    if (m->type == JSON_STRING)
      st = add_merge_line(&b, m->str, m->str_len, &cap);
    else if (m->type == JSON_ARRAY && m->count == 2 && m->items[0].type == JSON_STRING &&
             m->items[1].type == JSON_STRING)
      st = add_merge(&b, m->items[0].str, m->items[0].str_len, m->items[1].str, m->items[1].str_len,
                     &cap);
    else
      st = attn_set_error(ATTN_EFORMAT, "%s: merge %zu is neither \"LEFT RIGHT\" nor [LEFT, RIGHT]",
                          b.name, i + 1);
  }
  attn_json_free(v);
  return finish(&b, st, out);
}

static attn_status read_file(const char *path, char **text, size_t *len) {
  *text = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return attn_set_error(ATTN_EIO, "cannot open %s", path);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n < cap) break;
    char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2) : NULL;
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  int err = ferror(f);
  fclose(f);
  if (!buf) return attn_set_error(ATTN_ENOMEM, "%s: out of memory (or over 1 GiB)", path);
  if (err) {
    free(buf);
    return attn_set_error(ATTN_EIO, "cannot read %s", path);
  }
  *text = buf;
  *len = n;
  return ATTN_OK;
}

static char *join(const char *dir, const char *file) {
  size_t n = strlen(dir) + strlen(file) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, file);
  return p;
}

attn_status attn_gpt2_bpe_load_dir(const char *dir, attn_gpt2_bpe **out) {
  if (!dir || !out) return attn_set_error(ATTN_EINVAL, "tokenizer: NULL argument");
  *out = NULL;
  char *tj = join(dir, "tokenizer.json"), *vj = join(dir, "vocab.json"),
       *mt = join(dir, "merges.txt");
  char *a = NULL, *m = NULL;
  size_t an = 0, mn = 0;
  attn_status st = !tj || !vj || !mt ? oom() : ATTN_OK;
  FILE *probe = st ? NULL : fopen(tj, "rb");
  if (probe) {
    fclose(probe);
    if (!(st = read_file(tj, &a, &an))) st = attn_gpt2_bpe_from_tokenizer_json(a, an, tj, out);
  } else if (!st) {
    FILE *pv = fopen(vj, "rb"), *pm = fopen(mt, "rb");
    if (pv) fclose(pv);
    if (pm) fclose(pm);
    if (!pv || !pm)
      st = attn_set_error(
          ATTN_EIO, "%s has no tokenizer: neither tokenizer.json nor vocab.json + merges.txt", dir);
    if (!st) st = read_file(vj, &a, &an);
    if (!st) st = read_file(mt, &m, &mn);
    if (!st) st = attn_gpt2_bpe_from_vocab_merges(a, an, m, mn, vj, mt, out);
  }
  free(a);
  free(m);
  free(tj);
  free(vj);
  free(mt);
  return st;
}
