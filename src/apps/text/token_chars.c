/* Labels of tokens by character: the characters are read from the whole
 * sequence's bytes, and each token shows the characters it holds a byte of,
 * '·' marking where it cuts one (apps/text/token_chars.h). */
#include <stdlib.h>
#include <string.h>

#include "apps/text/token_chars_internal.h"
#include "apps/text/utf8_text.h"

#define MIDDLE_DOT "\xC2\xB7"
#define ELLIPSIS "\xE2\x80\xA6"

/* Code point of the valid sequence s[0..len). */
static int32_t code_point(const unsigned char *s, int len) {
  static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  int32_t cp = s[0] & lead_mask[len];
  for (int i = 1; i < len; i++)
    cp = cp << 6 | (s[i] & 0x3f);
  return cp;
}

attn_status tc_decode(const attn_tok_bytes *t, tc_char **chars, int64_t *n) {
  *chars = NULL, *n = 0;
  int64_t total = t->off[t->n];
  if (total == 0) return ATTN_OK;
  tc_char *c = malloc((size_t)total * sizeof *c); /* at most one per byte */
  if (!c)
    return attn_set_error(ATTN_ENOMEM, "token characters: out of memory for %lld bytes",
                          (long long)total);
  const unsigned char *s = (const unsigned char *)t->data;
  int64_t k = 0, seg_end = 0;
  for (int64_t i = 0, p = 0; p < total;) {
    while (i < t->n && t->off[i] <= p)
      i++;              /* token i - 1 holds byte p */
    if (p >= seg_end) { /* the stretch of text up to the next break */
      int64_t j = i;
      while (j < t->n && !(t->brk && t->brk[j]))
        j++;
      seg_end = t->off[j];
    }
    int len = attn_utf8_seq_len(s + p, (size_t)(seg_end - p));
    c[k].start = p;
    c[k].len = len > 0 ? len : 1;
    c[k].cp = len > 0 ? code_point(s + p, len) : -1;
    p += c[k++].len;
  }
  *chars = c, *n = k;
  return ATTN_OK;
}

char *tc_take_label(attn_textbuf *b, int max_chars) {
  size_t chars = 0, cut = 0;
  for (size_t i = 0; i < b->len; i++)
    if (((unsigned char)b->data[i] & 0xC0) != 0x80 && ++chars == (size_t)max_chars) cut = i;
  if (max_chars > 0 && chars > (size_t)max_chars) {
    b->len = cut; /* max_chars - 1 characters, then the ellipsis */
    if (attn_textbuf_puts(b, ELLIPSIS)) {
      attn_textbuf_free(b);
      return NULL;
    }
  }
  char *s = attn_textbuf_take(b, NULL);
  attn_textbuf_free(b);
  return s;
}

attn_status attn_tok_char_labels(const attn_tok_bytes *t, int max_chars, char ***labels) {
  if (!labels) return attn_set_error(ATTN_EINVAL, "token labels: NULL result");
  *labels = NULL;
  if (!t || t->n < 0 || !t->off) return attn_set_error(ATTN_EINVAL, "token labels: no tokens");
  tc_char *c = NULL;
  int64_t nc = 0;
  attn_status st = tc_decode(t, &c, &nc);
  char **lab = st ? NULL : calloc((size_t)(t->n ? t->n : 1), sizeof *lab);
  if (!st && !lab) st = attn_set_error(ATTN_ENOMEM, "token labels: out of memory");
  int64_t k = 0; /* the first character that ends after the token's start */
  for (int64_t i = 0; !st && i < t->n; i++) {
    int64_t ts = t->off[i], te = t->off[i + 1];
    attn_textbuf b = {0};
    int bad = 0;
    while (k < nc && c[k].start + c[k].len <= ts)
      k++;
    if (ts == te) bad = attn_textbuf_puts(&b, "[pad]");
    for (int64_t j = k; !bad && j < nc && c[j].start < te; j++) {
      bad |= c[j].start < ts && attn_textbuf_puts(&b, MIDDLE_DOT);
      bad |= attn_utf8_visible(&b, t->data + c[j].start, (size_t)c[j].len);
      bad |= c[j].start + c[j].len > te && attn_textbuf_puts(&b, MIDDLE_DOT);
    }
    if (bad) attn_textbuf_free(&b);
    if (bad || !(lab[i] = tc_take_label(&b, max_chars)))
      st = attn_set_error(ATTN_ENOMEM, "token labels: out of memory");
  }
  free(c);
  if (st && lab) {
    for (int64_t i = 0; i < t->n; i++)
      free(lab[i]);
    free(lab);
    lab = NULL;
  }
  *labels = lab;
  return st;
}
