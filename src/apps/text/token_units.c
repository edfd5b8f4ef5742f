/* The characters or words a token sequence makes up, and each token's share
 * of bytes in each of them (apps/text/token_chars.h has the rules). */
#include <stdlib.h>
#include <string.h>

#include "apps/text/token_chars_internal.h"
#include "apps/text/utf8_text.h"

attn_status attn_unit_kind_from_name(const char *name, attn_unit_kind *out) {
  if (name && !strcmp(name, "chars")) return *out = ATTN_UNITS_CHARS, ATTN_OK;
  if (name && !strcmp(name, "words")) return *out = ATTN_UNITS_WORDS, ATTN_OK;
  return attn_set_error(ATTN_EINVAL, "'%.60s' is not chars or words", name ? name : "(null)");
}

const char *attn_unit_kind_noun(attn_unit_kind kind) {
  return kind == ATTN_UNITS_CHARS ? "characters" : kind == ATTN_UNITS_WORDS ? "words" : "tokens";
}

enum { C_WORD, C_SPACE, C_CJK, C_PUNCT, C_MARK };

static int in(int32_t c, int32_t a, int32_t b) { return c >= a && c <= b; }

/* The class of code point c (-1: a stray byte, part of a word). */
static int char_class(int32_t c) {
  if (c == ' ' || in(c, 9, 13) || c == 0x85 || c == 0xA0 || c == 0x1680 || in(c, 0x2000, 0x200A) ||
      c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000)
    return C_SPACE;
  if (in(c, 0x0300, 0x036F) || in(c, 0x1AB0, 0x1AFF) || in(c, 0x1DC0, 0x1DFF) ||
      in(c, 0x200C, 0x200D) || in(c, 0x20D0, 0x20FF) || in(c, 0xFE00, 0xFE0F) ||
      in(c, 0xFE20, 0xFE2F) || in(c, 0x1F3FB, 0x1F3FF) || in(c, 0xE0020, 0xE007F) ||
      in(c, 0xE0100, 0xE01EF))
    return C_MARK;
  if (in(c, 0x21, 0x2F) || in(c, 0x3A, 0x40) || in(c, 0x5B, 0x60) || in(c, 0x7B, 0x7E) ||
      (in(c, 0xA1, 0xBF) && c != 0xAA && c != 0xB2 && c != 0xB3 && c != 0xB5 && c != 0xB9 &&
       c != 0xBA && !in(c, 0xBC, 0xBE)) ||
      c == 0xD7 || c == 0xF7 || in(c, 0x2010, 0x2027) || in(c, 0x2030, 0x205E) ||
      in(c, 0x20A0, 0x20CF) || in(c, 0x2190, 0x2BFF) || in(c, 0x3001, 0x3004) ||
      in(c, 0x3008, 0x3020) || c == 0x3030 || c == 0x303D || c == 0x30FB || in(c, 0xFE10, 0xFE1F) ||
      in(c, 0xFE30, 0xFE6F) || in(c, 0xFF01, 0xFF0F) || in(c, 0xFF1A, 0xFF20) ||
      in(c, 0xFF3B, 0xFF40) || in(c, 0xFF5B, 0xFF65) || in(c, 0x1F000, 0x1FAFF))
    return C_PUNCT;
  if (in(c, 0x2E80, 0x31FF) || in(c, 0x3400, 0x4DBF) || in(c, 0x4E00, 0x9FFF) ||
      in(c, 0xF900, 0xFAFF) || in(c, 0x20000, 0x3FFFF))
    return C_CJK;
  return C_WORD;
}

typedef struct {
  int64_t start, end; /* its bytes [start, end) in the sequence */
  int64_t lab0, lab1; /* the bytes its label shows */
  int cls;            /* the class of its first character */
  int32_t cp;         /* its first character */
  int64_t empty;      /* the token of no bytes it is, or -1 */
} span;

typedef struct {
  span *u;
  int64_t n;
  int64_t pending; /* start of whitespace waiting for the next unit; -1: none */
  int64_t seg_end; /* end of the last character of the stretch */
  int open;        /* u[n - 1] may still grow */
  int join;        /* the last character was a zero-width joiner */
} builder;

static void add(builder *b, int64_t start, int64_t lab0, int64_t end, int cls, int32_t cp,
                int64_t empty) {
  b->u[b->n++] = (span){start, end, lab0, end, cls, cp, empty};
  b->open = empty < 0;
}

/* The end of a stretch of text (a break, a token of no bytes, the end):
 * whitespace left joins the unit before it, or is one of its own. */
static void end_stretch(builder *b) {
  if (b->pending >= 0) {
    if (b->open)
      b->u[b->n - 1].end = b->seg_end;
    else
      add(b, b->pending, b->pending, b->seg_end, C_SPACE, ' ', -1);
  }
  b->pending = -1, b->open = 0, b->join = 0;
}

/* Character ch of class cls, by the rules for words. */
static void word_char(builder *b, const tc_char *ch, int cls) {
  int64_t end = ch->start + ch->len;
  b->seg_end = end;
  if (cls == C_SPACE) {
    if (b->pending < 0) b->pending = ch->start;
    b->join = 0;
    return;
  }
  span *last = b->open ? &b->u[b->n - 1] : NULL;
  int grow = last && b->pending < 0 &&
             (b->join || cls == C_MARK || (cls == C_WORD && last->cls == C_WORD) ||
              (cls == C_PUNCT && last->cls == C_PUNCT && last->cp == ch->cp));
  if (grow)
    last->end = last->lab1 = end;
  else
    add(b, b->pending >= 0 ? b->pending : ch->start, ch->start, end, cls == C_MARK ? C_WORD : cls,
        ch->cp, -1);
  b->pending = -1;
  b->join = ch->cp == 0x200D;
}

/* The units' spans, in the order of the text, at most one per character
 * and token. */
static attn_status spans(const attn_tok_bytes *t, const tc_char *c, int64_t nc, attn_unit_kind kind,
                         builder *b) {
  b->u = malloc((size_t)(nc + t->n + 1) * sizeof *b->u);
  if (!b->u) return attn_set_error(ATTN_ENOMEM, "token units: out of memory");
  b->n = 0, b->pending = -1, b->open = 0, b->join = 0, b->seg_end = 0;
  int64_t k = 0;
  for (int64_t i = 0; i < t->n; i++) {
    int64_t ts = t->off[i], te = t->off[i + 1];
    if (i > 0 && t->brk && t->brk[i]) end_stretch(b);
    if (ts == te) {
      end_stretch(b);
      add(b, ts, ts, ts, C_WORD, 0, i);
      continue;
    }
    for (; k < nc && c[k].start < te; k++) { /* the characters that start in token i */
      int cls = c[k].cp < 0 ? C_WORD : char_class(c[k].cp);
      if (kind == ATTN_UNITS_CHARS)
        add(b, c[k].start, c[k].start, c[k].start + c[k].len, cls, c[k].cp, -1);
      else
        word_char(b, &c[k], cls);
    }
  }
  end_stretch(b);
  return ATTN_OK;
}

void attn_tok_units_free(attn_tok_units *u) {
  if (!u) return;
  if (u->labels)
    for (int64_t i = 0; i < u->n_units; i++)
      free(u->labels[i]);
  free(u->labels);
  free(u->off);
  free(u->unit);
  free(u->share);
  memset(u, 0, sizeof *u);
}

/* Each token's pieces: the units its bytes fall in and its share of them. */
static attn_status pieces(const attn_tok_bytes *t, const builder *b, attn_tok_units *out) {
  int64_t cap = t->n + b->n; /* a token's pieces after its first each start a unit */
  out->off = calloc((size_t)t->n + 1, sizeof *out->off);
  out->unit = malloc((size_t)(cap ? cap : 1) * sizeof *out->unit);
  out->share = malloc((size_t)(cap ? cap : 1) * sizeof *out->share);
  if (!out->off || !out->unit || !out->share)
    return attn_set_error(ATTN_ENOMEM, "token units: out of memory");
  int64_t p = 0, u = 0;
  for (int64_t i = 0; i < t->n; i++) {
    int64_t ts = t->off[i], te = t->off[i + 1];
    if (ts == te) {
      int64_t e = u; /* its own unit, made in token order after u (u stays: a
                      * character may go on over this token) */
      while (e < b->n - 1 && b->u[e].empty != i)
        e++;
      out->unit[p] = e, out->share[p++] = 1.0f;
    } else {
      while (u < b->n && (b->u[u].end <= ts || b->u[u].empty >= 0))
        u++;
      for (int64_t v = u; v < b->n && b->u[v].start < te; v++) {
        if (b->u[v].empty >= 0) continue;
        int64_t lo = b->u[v].start > ts ? b->u[v].start : ts,
                hi = b->u[v].end < te ? b->u[v].end : te;
        if (hi > lo)
          out->unit[p] = v, out->share[p++] = (float)((double)(hi - lo) / (double)(te - ts));
      }
    }
    out->off[i + 1] = p;
  }
  return ATTN_OK;
}

attn_status attn_tok_units_make(const attn_tok_bytes *t, attn_unit_kind kind, int max_chars,
                                attn_tok_units *out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "token units: NULL result");
  memset(out, 0, sizeof *out);
  if (!t || t->n < 0 || !t->off) return attn_set_error(ATTN_EINVAL, "token units: no tokens");
  if (kind != ATTN_UNITS_CHARS && kind != ATTN_UNITS_WORDS)
    return attn_set_error(ATTN_EINVAL, "token units: kind %d is not chars or words", (int)kind);
  tc_char *c = NULL;
  int64_t nc = 0;
  builder b = {0};
  attn_status st = tc_decode(t, &c, &nc);
  if (!st) st = spans(t, c, nc, kind, &b);
  out->kind = kind, out->n_tokens = t->n, out->n_units = b.n;
  if (!st) st = pieces(t, &b, out);
  if (!st && !(out->labels = calloc((size_t)(b.n ? b.n : 1), sizeof *out->labels)))
    st = attn_set_error(ATTN_ENOMEM, "token units: out of memory");
  for (int64_t u = 0; !st && u < b.n; u++) {
    attn_textbuf tb = {0};
    const span *s = &b.u[u];
    int bad = s->empty >= 0
                  ? attn_textbuf_puts(&tb, "[pad]")
                  : attn_utf8_visible(&tb, t->data + s->lab0, (size_t)(s->lab1 - s->lab0));
    if (bad) attn_textbuf_free(&tb);
    if (bad || !(out->labels[u] = tc_take_label(&tb, max_chars)))
      st = attn_set_error(ATTN_ENOMEM, "token units: out of memory");
  }
  free(c);
  free(b.u);
  if (st) attn_tok_units_free(out);
  return st;
}
