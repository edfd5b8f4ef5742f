/* The bytes of a sequence of tokens (a byte-level BPE's, or any tokenizer's
 * tokens as UTF-8), as pictures need them to label tokens by character and
 * to merge tokens into characters or words (apps/text/token_chars.h).
 *
 * Token i is data[off[i] .. off[i+1]). brk marks where the text is not
 * contiguous: brk[i] != 0 when token i does not follow token i - 1 in the
 * text (a classifier keeps a long message's first and last tokens: the
 * first of the last ones starts a new stretch), so no character or word is
 * read across it.
 *
 * In a safetensors file (attn predict --save-attention, attn.viz) they are
 * metadata: "token_bytes", a JSON array of one string per token, its bytes
 * in lower-case hex ("e4bc" for the bytes E4 BC, "" for a special token of
 * no bytes), and "token_breaks", the token indices where brk is set,
 * comma-separated ("52"; absent: none). Cross attention has
 * "query_token_bytes" / "key_token_bytes" (and "..._breaks") instead. */
#ifndef ATTN_APPS_TOKEN_BYTES_H
#define ATTN_APPS_TOKEN_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

typedef struct {
  int64_t n;          /* tokens */
  int64_t *off;       /* [n + 1], off[0] = 0 */
  char *data;         /* off[n] bytes (not NUL-terminated) */
  unsigned char *brk; /* [n] or NULL: none */
} attn_tok_bytes;

/* Copies tok[i][0..len[i]) for i < n (tok[i] may be NULL when len[i] is 0)
 * and brk [n] (NULL: none) into *out. */
attn_status attn_tok_bytes_make(attn_tok_bytes *out, const char *const *tok, const size_t *len,
                                int64_t n, const unsigned char *brk);
/* Frees what make or from_json allocated; a zeroed struct is a valid empty one. */
void attn_tok_bytes_free(attn_tok_bytes *t);

/* The metadata values above (malloc'd; *breaks NULL when there is no break). */
attn_status attn_tok_bytes_to_json(const attn_tok_bytes *t, char **json, char **breaks);
/* Parses them (breaks may be NULL); ATTN_EFORMAT naming `what` (e.g.
 * "metadata 'token_bytes'") and the byte or index that is wrong. */
attn_status attn_tok_bytes_from_json(const char *json, const char *breaks, const char *what,
                                     attn_tok_bytes *out);

#endif
