/* Tokenised G2P sides (g2p_set.h). */
#include "apps/seq2seq/g2p_set.h"

#include <stdlib.h>
#include <string.h>

void attn_g2p_set_free(attn_g2p_set *s) {
  if (!s) return;
  free(s->src);
  free(s->src_len);
  free(s->tgt);
  free(s->tgt_len);
  free(s->word);
  free(s->r2l);
  free(s->arena);
  free(s->arena2);
  memset(s, 0, sizeof *s);
}

static int same_target(const attn_g2p_set *s, int i, int j) {
  return s->tgt_len[i] == s->tgt_len[j] &&
         !memcmp(s->tgt[i], s->tgt[j], (size_t)s->tgt_len[i] * sizeof *s->tgt[i]);
}

void attn_g2p_set_targets(attn_g2p_set *s, int stress, int reverse, int *merged) {
  int n = 0, first = 0; /* first: the current word's first kept example */
  if (merged) *merged = 0;
  for (int i = 0; i < s->n; i++) {
    int32_t *t = (int32_t *)s->tgt[i]; /* the set's own arena */
    const int len = s->tgt_len[i];
    for (int k = 0; !stress && k < len; k++)
      t[k] = attn_g2p_phone_strip(t[k]);
    for (int k = 0; reverse && k < len / 2; k++) {
      const int32_t x = t[k];
      t[k] = t[len - 1 - k];
      t[len - 1 - k] = x;
    }
    if (n == 0 || s->word[i] != s->word[n - 1]) first = n;
    s->src[n] = s->src[i], s->src_len[n] = s->src_len[i];
    s->tgt[n] = s->tgt[i], s->tgt_len[n] = s->tgt_len[i], s->word[n] = s->word[i];
    int dup = 0;
    for (int j = first; !stress && j < n && !dup; j++)
      dup = same_target(s, j, n);
    if (dup && merged) (*merged)++;
    if (!dup) n++;
  }
  s->n = n;
}

attn_status attn_g2p_set_both(attn_g2p_set *s) {
  if (s->r2l) /* its second half would point into the arena freed below */
    return attn_set_error(ATTN_EINVAL, "g2p data: the set already holds both directions");
  const int n = s->n;
  size_t cells = 0;
  for (int i = 0; i < n; i++)
    cells += (size_t)s->tgt_len[i];
  const size_t m = (size_t)(2 * n > 0 ? 2 * n : 1);
  const int32_t **src = malloc(m * sizeof *src), **tgt = malloc(m * sizeof *tgt);
  int32_t *src_len = malloc(m * sizeof *src_len), *tgt_len = malloc(m * sizeof *tgt_len);
  int *word = malloc(m * sizeof *word);
  uint8_t *r2l = malloc(m);
  int32_t *a = malloc((cells ? cells : 1) * sizeof *a);
  if (!src || !tgt || !src_len || !tgt_len || !word || !r2l || !a) {
    free(src), free(tgt), free(src_len), free(tgt_len), free(word), free(r2l), free(a);
    return attn_set_error(ATTN_ENOMEM, "g2p data: out of memory");
  }
  int32_t *p = a;
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < n; i++) {
      const int j = h * n + i, len = s->tgt_len[i];
      src[j] = s->src[i], src_len[j] = s->src_len[i], word[j] = s->word[i];
      tgt_len[j] = len;
      r2l[j] = (uint8_t)h;
      if (!h) {
        tgt[j] = s->tgt[i];
        continue;
      }
      for (int k = 0; k < len; k++)
        p[k] = s->tgt[i][len - 1 - k];
      tgt[j] = p;
      p += len;
    }
  free(s->src), free(s->tgt), free(s->src_len), free(s->tgt_len), free(s->word), free(s->r2l);
  free(s->arena2);
  s->src = src, s->tgt = tgt, s->src_len = src_len, s->tgt_len = tgt_len, s->word = word;
  s->r2l = r2l, s->arena2 = a, s->n = 2 * n;
  return ATTN_OK;
}

void attn_g2p_train_chars(const attn_g2p_dict *d, attn_g2p_graphemes *g) {
  char seen[256] = {0}, chars[256];
  int n = 0;
  for (int w = 0; w < d->nwords; w++)
    if (d->split[w] == ATTN_G2P_TRAIN)
      for (const unsigned char *c = (const unsigned char *)d->words[w]; *c; c++)
        if (!seen[*c]) {
          seen[*c] = 1;
          chars[n++] = (char)*c;
        }
  attn_g2p_graphemes_make(g, chars, n);
}

attn_status attn_g2p_set_make(const attn_g2p_dict *d, int split, const attn_g2p_graphemes *g,
                              int64_t max_src, int64_t max_tgt, attn_g2p_set *s) {
  memset(s, 0, sizeof *s);
  int n = 0;
  size_t cells = 0;
  for (int w = 0; w < d->nwords; w++)
    if (d->split[w] == split)
      for (int p = d->pron_start[w]; p < d->pron_start[w + 1]; p++) {
        n++;
        cells += strlen(d->words[w]) + strlen(d->prons[p]);  // >= letters + phonemes
      }
  s->src = malloc((size_t)(n ? n : 1) * sizeof *s->src);
  s->tgt = malloc((size_t)(n ? n : 1) * sizeof *s->tgt);
  s->src_len = malloc((size_t)(n ? n : 1) * sizeof *s->src_len);
  s->tgt_len = malloc((size_t)(n ? n : 1) * sizeof *s->tgt_len);
  s->word = malloc((size_t)(n ? n : 1) * sizeof *s->word);
  s->arena = malloc((cells ? cells : 1) * sizeof *s->arena);
  if (!s->src || !s->tgt || !s->src_len || !s->tgt_len || !s->word || !s->arena) {
    attn_g2p_set_free(s);
    return attn_set_error(ATTN_ENOMEM, "g2p data: out of memory");
  }
  int32_t *a = s->arena;
  for (int w = 0; w < d->nwords; w++) {
    if (d->split[w] != split) continue;
    int ls = (int)strlen(d->words[w]);
    for (int p = d->pron_start[w]; p < d->pron_start[w + 1]; p++) {
      int nt = 0;
      attn_status st = attn_g2p_phones_encode(d->prons[p], a + ls, (int)strlen(d->prons[p]) + 1, &nt);
      if (st) {
        attn_g2p_set_free(s);
        return attn_set_error(st, "%s: %s", d->words[w], attn_last_error());
      }
      if (ls > max_src || nt + 1 > max_tgt || nt == 0) {
        s->skipped++;
        continue;
      }
      attn_g2p_graphemes_encode(g, d->words[w], ls, a);
      int i = s->n++;
      s->src[i] = a;
      s->src_len[i] = ls;
      s->tgt[i] = a + ls;
      s->tgt_len[i] = nt;
      s->word[i] = w;
      a += ls + nt;
    }
  }
  return ATTN_OK;
}

void attn_g2p_batch_free(attn_g2p_batch *bt) {
  free(bt->src);
  free(bt->src_len);
  free(bt->tin);
  free(bt->tout);
  memset(bt, 0, sizeof *bt);
}

static int grow(int32_t **p, int64_t n) {
  int32_t *q = realloc(*p, (size_t)(n ? n : 1) * sizeof *q);
  if (!q) return 0;
  *p = q;
  return 1;
}

attn_status attn_g2p_batch_gather(const attn_g2p_set *set, const int *idx, int B,
                                  attn_g2p_batch *bt) {
  int64_t Ls = 1, Lt = 2;
  for (int b = 0; b < B; b++) {
    if (set->src_len[idx[b]] > Ls) Ls = set->src_len[idx[b]];
    if (set->tgt_len[idx[b]] + 1 > Lt) Lt = set->tgt_len[idx[b]] + 1;
  }
  if (B * Ls > bt->cap_s) {
    if (!grow(&bt->src, B * Ls)) return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
    bt->cap_s = B * Ls;
  }
  if (B * Lt > bt->cap_t) {
    if (!grow(&bt->tin, B * Lt) || !grow(&bt->tout, B * Lt) || !grow(&bt->src_len, B * Lt))
      return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
    bt->cap_t = B * Lt;
  }
  bt->B = B;
  bt->Ls = Ls;
  bt->Lt = Lt;
  bt->tokens = 0;
  for (int b = 0; b < B; b++) {
    int i = idx[b], ls = set->src_len[i], lt = set->tgt_len[i];
    const int32_t start = set->r2l && set->r2l[i] ? ATTN_G2P_BOS_R2L : ATTN_G2P_BOS;
    bt->src_len[b] = ls;
    for (int64_t t = 0; t < Ls; t++) bt->src[b * Ls + t] = t < ls ? set->src[i][t] : ATTN_G2P_PAD;
    for (int64_t t = 0; t < Lt; t++) {
      bt->tin[b * Lt + t] = t == 0 ? start : t <= lt ? set->tgt[i][t - 1] : ATTN_G2P_PAD;
      bt->tout[b * Lt + t] = t < lt ? set->tgt[i][t] : t == lt ? ATTN_G2P_EOS : -1;
    }
    bt->tokens += lt + 1;
  }
  return ATTN_OK;
}
