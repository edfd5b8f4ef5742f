/* Tokens read as the text they make up: a label per token by character, and
 * the characters or words that tokens make up (the units a person reads),
 * for pictures of attention (apps/viz.h: attn_viz_merge_f32).
 *
 * The characters are read from the bytes of the whole sequence (every
 * token's bytes one after the other, restarting at each break of
 * apps/text/token_bytes.h), not token by token: a byte-level BPE cuts most
 * Chinese characters and every emoji into 2-4 tokens, and a token may hold
 * the end of one character and the start of the next. Bytes that are not
 * valid UTF-8 there are characters of their own, shown as \xNN.
 *
 * The label of a token: each character it holds a byte of, in order, as
 * attn_utf8_visible shows it (space U+2423 '␣', newline U+21B5 '↵', tab '⇥',
 * a stray byte \xNN), with U+00B7 '·' where the token cuts the character:
 * before it when the character began in an earlier token, after it when it
 * goes on in a later one. 会 (E4 BC 9A) cut as E4 BC | 9A is `会·` then
 * `·会`; 🎉 (F0 9F 8E 89) cut as F0 | 9F 8E | 89 is `🎉·`, `·🎉·`, `·🎉`;
 * a token 9A E8 AE (the end of 会, the start of 议) is `·会议·`. A token of
 * no bytes (a special token) is "[pad]". Labels longer than max_chars
 * characters (0: no limit) keep max_chars - 1 and an ellipsis '…'.
 *
 * Units (attn_tok_units_make):
 *   chars  every character is a unit (a space, a newline and a stray byte too);
 *   words  a word is a run of characters between whitespace, except that
 *          each CJK character (Han, kana, bopomofo: U+2E80-U+31FF,
 *          U+3400-U+4DBF, U+4E00-U+9FFF, U+F900-U+FAFF, U+20000-U+3FFFF)
 *          is a word of its own (no segmenter: 会议记录 is four words), and
 *          punctuation and symbols (ASCII punctuation, U+00A1-U+00BF's,
 *          general punctuation, currency, arrows to dingbats U+2190-U+2BFF,
 *          CJK and full-width punctuation, emoji) are units of their own, a
 *          run of one repeated mark being one unit ("...", "----", "!!!");
 *          combining marks, variation selectors, emoji skin tones and what
 *          a zero-width joiner joins stay with the character before them.
 *          Hangul is not CJK here: Korean writes spaces between words.
 *          Whitespace belongs to the unit after it (as a byte-level BPE's
 *          " word" tokens do), whitespace at the end of the text (or before
 *          a break) to the unit before it; a word's label leaves its
 *          whitespace out ("会", not "␣会"), a unit of whitespace alone
 *          shows it ("↵↵").
 * A token of no bytes is a unit of its own; no unit spans a break.
 *
 * Each token is split over the units its bytes fall in, by share of bytes:
 * share(token, unit) = its bytes in the unit / its bytes (1 for a token of
 * no bytes), so the shares of a token add up to 1. */
#ifndef ATTN_APPS_TOKEN_CHARS_H
#define ATTN_APPS_TOKEN_CHARS_H

#include <stdint.h>

#include "apps/text/token_bytes.h"

/* Labels [t->n] as above (malloc'd strings in a malloc'd array; free each
 * and the array). */
attn_status attn_tok_char_labels(const attn_tok_bytes *t, int max_chars, char ***labels);

typedef enum {
  ATTN_UNITS_TOKENS = 0, /* no merging */
  ATTN_UNITS_CHARS,
  ATTN_UNITS_WORDS
} attn_unit_kind;

/* "chars" / "words" -> kind; ATTN_EINVAL saying what is accepted otherwise. */
attn_status attn_unit_kind_from_name(const char *name, attn_unit_kind *out);
/* "tokens", "characters", "words": the plural noun a picture's title uses. */
const char *attn_unit_kind_noun(attn_unit_kind kind);

typedef struct {
  attn_unit_kind kind;
  int64_t n_tokens, n_units;
  int64_t *off;  /* [n_tokens + 1]: token i's pieces are [off[i], off[i + 1]) */
  int64_t *unit; /* [pieces]: the unit of each piece, ascending within a token */
  float *share;  /* [pieces]: share(token, unit) as above */
  char **labels; /* [n_units] */
} attn_tok_units;

/* The units of kind CHARS or WORDS of the tokens t, their labels cut to
 * max_chars characters (0: no limit). */
attn_status attn_tok_units_make(const attn_tok_bytes *t, attn_unit_kind kind, int max_chars,
                                attn_tok_units *out);
void attn_tok_units_free(attn_tok_units *u); /* a zeroed struct is a valid empty one */

#endif
