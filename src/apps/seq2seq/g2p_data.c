/* CMUdict loading, grouping and the word-level split (g2p_data.h). */
#include "apps/seq2seq/g2p_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/seq2seq/g2p_vocab.h"
#include "io/tmpname.h"

typedef struct {
  char *word, *pron;
  int line;
} entry;

static int cmp_entry(const void *a, const void *b) {
  const entry *x = a, *y = b;
  int c = strcmp(x->word, y->word);
  return c ? c : (x->line > y->line) - (x->line < y->line);
}

static char *dup_n(const char *s, size_t n) {
  char *r = malloc(n + 1);
  if (r) {
    memcpy(r, s, n);
    r[n] = 0;
  }
  return r;
}

void attn_g2p_dict_free(attn_g2p_dict *d) {
  if (!d) return;
  for (int i = 0; i < d->nwords; i++) free(d->words[i]);
  for (int i = 0; i < d->nprons; i++) free(d->prons[i]);
  free(d->words);
  free(d->prons);
  free(d->pron_start);
  free(d->split);
  memset(d, 0, sizeof *d);
}

/* One line "WORD[(n)]  PH PH ..." into e (malloc'd strings), or an error. */
static attn_status parse_line(const char *s, size_t n, int line, entry *e) {
  size_t w = 0;
  while (w < n && s[w] != ' ' && s[w] != '\t') w++;
  size_t wend = w;
  if (wend > 0 && s[wend - 1] == ')') {  // an alternate: WORD(1)
    size_t o = wend - 1;
    while (o > 0 && s[o - 1] >= '0' && s[o - 1] <= '9') o--;
    if (o > 1 && o < wend - 1 && s[o - 1] == '(') wend = o - 1;
  }
  if (wend == 0 || wend > ATTN_G2P_MAX_WORD)
    return attn_set_error(ATTN_EINVAL, "line %d: a word of 1 to %d characters expected", line,
                          ATTN_G2P_MAX_WORD);
  for (size_t i = 0; i < wend; i++)
    if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) return ATTN_OK;  // skipped
  while (w < n && (s[w] == ' ' || s[w] == '\t')) w++;
  size_t p = n;
  while (p > w && (s[p - 1] == ' ' || s[p - 1] == '\r' || s[p - 1] == '\t')) p--;
  if (p == w) return attn_set_error(ATTN_EINVAL, "line %d: no pronunciation", line);
  e->word = dup_n(s, wend);
  e->pron = dup_n(s + w, p - w);
  e->line = line;
  if (!e->word || !e->pron) return attn_set_error(ATTN_ENOMEM, "dictionary: out of memory");
  for (char *c = e->pron; *c; c++)
    if (*c == '\t') *c = ' ';
  int32_t ids[256];
  int k;
  if (attn_g2p_phones_encode(e->pron, ids, 256, &k))
    return attn_set_error(ATTN_EINVAL, "line %d: %s", line, attn_last_error());
  return ATTN_OK;
}

attn_status attn_g2p_dict_parse(const char *text, size_t len, attn_g2p_dict *d) {
  memset(d, 0, sizeof *d);
  size_t cap = 1024;
  int n = 0, line = 0;
  entry *es = malloc(cap * sizeof *es);
  attn_status st = es ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "dictionary: out of memory");
  for (size_t i = 0; !st && i < len;) {
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    line++;
    size_t ln = j - i;
    const char *s = text + i;
    i = j + 1;
    if (ln == 0 || (ln == 1 && s[0] == '\r') || s[0] == '#' || (ln >= 3 && !memcmp(s, ";;;", 3)))
      continue;
    if (n == (int)cap) {
      entry *g = realloc(es, 2 * cap * sizeof *es);
      if (!g) {
        st = attn_set_error(ATTN_ENOMEM, "dictionary: out of memory");
        break;
      }
      es = g;
      cap *= 2;
    }
    memset(&es[n], 0, sizeof es[n]);
    st = parse_line(s, ln, line, &es[n]);
    if (!st && !es[n].word) {
      if (!d->skipped++) d->skipped_line = line;
      continue;
    }
    n++;
  }
  if (!st && n == 0) st = attn_set_error(ATTN_EINVAL, "dictionary: no entries");
  if (!st) {
    // group: sort by (word, line); words then listed by their first line
    qsort(es, (size_t)n, sizeof *es, cmp_entry);
    d->prons = malloc((size_t)n * sizeof *d->prons);
    d->words = malloc((size_t)n * sizeof *d->words);
    d->pron_start = malloc((size_t)(n + 1) * sizeof *d->pron_start);
    d->split = malloc((size_t)n);
    if (!d->prons || !d->words || !d->pron_start || !d->split)
      st = attn_set_error(ATTN_ENOMEM, "dictionary: out of memory");
  }
  if (!st) {
    for (int i = 0; i < n; i++) {
      if (i == 0 || strcmp(es[i].word, d->words[d->nwords - 1])) {
        d->pron_start[d->nwords] = i;
        d->split[d->nwords] = (uint8_t)attn_g2p_split_of(es[i].word);
        d->words[d->nwords++] = es[i].word;
      } else {
        free(es[i].word);
      }
      es[i].word = NULL;
      d->prons[d->nprons++] = es[i].pron;
      es[i].pron = NULL;
    }
    d->pron_start[d->nwords] = n;
  }
  for (int i = 0; es && i < n; i++) {
    free(es[i].word);
    free(es[i].pron);
  }
  free(es);
  if (st) attn_g2p_dict_free(d);
  return st;
}

attn_status attn_g2p_dict_load(const char *path, attn_g2p_dict *d) {
  memset(d, 0, sizeof *d);
  FILE *f = fopen(path, "rb");
  if (!f) return attn_set_error(ATTN_EIO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 20, len = 0;
  char *buf = malloc(cap);
  attn_status st = buf ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "%s: out of memory", path);
  while (!st) {
    if (len == cap) {
      char *g = realloc(buf, cap * 2);
      if (!g) {
        st = attn_set_error(ATTN_ENOMEM, "%s: out of memory", path);
        break;
      }
      buf = g;
      cap *= 2;
    }
    size_t r = fread(buf + len, 1, cap - len, f);
    len += r;
    if (r == 0) {
      if (ferror(f)) st = attn_set_error(ATTN_EIO, "%s: read error", path);
      break;
    }
  }
  fclose(f);
  if (!st) {
    st = attn_g2p_dict_parse(buf, len, d);
    if (st) st = attn_set_error(st, "%s: %s", path, attn_last_error());
  }
  free(buf);
  return st;
}

int attn_g2p_split_of(const char *word) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *s = (const unsigned char *)word; *s; s++) {
    h ^= *s;
    h *= 1099511628211ull;
  }
  int r = (int)(h % 100);
  return r < 90 ? ATTN_G2P_TRAIN : r < 95 ? ATTN_G2P_VAL : ATTN_G2P_TEST;
}

const char *attn_g2p_split_name(int split) {
  return split == ATTN_G2P_TRAIN ? "train" : split == ATTN_G2P_VAL ? "val" : "test";
}

void attn_g2p_split_counts(const attn_g2p_dict *d, int words[3], int prons[3]) {
  for (int k = 0; k < 3; k++) words[k] = prons[k] = 0;
  for (int w = 0; w < d->nwords; w++) {
    words[d->split[w]]++;
    prons[d->split[w]] += d->pron_start[w + 1] - d->pron_start[w];
  }
}

attn_status attn_g2p_split_write(const attn_g2p_dict *d, const char *path) {
  char *tmp = attn_tmp_name(path);
  if (!tmp) return attn_set_error(ATTN_ENOMEM, "out of memory");
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    attn_status st = attn_set_error(ATTN_EIO, "cannot create '%s': %s", tmp, strerror(errno));
    free(tmp);
    return st;
  }
  int bad = 0;
  for (int w = 0; w < d->nwords; w++)
    if (fprintf(f, "%s\t%s\n", d->words[w], attn_g2p_split_name(d->split[w])) < 0) bad = 1;
  if (fclose(f)) bad = 1;
  attn_status st = ATTN_OK;
  if (bad || rename(tmp, path)) {
    st = attn_set_error(ATTN_EIO, "cannot write '%s': %s", path, strerror(errno));
    remove(tmp);
  }
  free(tmp);
  return st;
}
