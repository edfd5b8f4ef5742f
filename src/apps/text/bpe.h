/* Byte-level BPE tokenizer (GPT-2 style), trained on the training split.
 *
 * Token ids: 0 [PAD], 1 [CLS], 2 [SEP] (special: never produced by encode,
 * decode to nothing), then the 256 bytes (id = ATTN_BPE_BYTE0 + byte), then
 * one id per learned merge in the order learned. Every byte string encodes
 * (there is no unknown token) and decode(encode(s)) == s exactly.
 *
 * Pre-tokenisation (merges never cross a chunk boundary): text is cut into
 * chunks like GPT-2's rule: an optional single leading space followed by a
 * run of letters (ASCII letters and all bytes >= 0x80, so UTF-8 stays
 * inside words), or of digits, or of other symbols; whitespace runs form
 * their own chunk (minus a final space that joins the next word). Chunks
 * longer than max_chunk bytes are cut into max_chunk pieces.
 *
 * Training: chunk counts over the texts (each truncated to its first
 * max_text_bytes), then repeatedly merge the most frequent adjacent pair;
 * ties go to the lexicographically smallest (bytes of left token, bytes of
 * right token). Incremental pair counts + a priority queue: a few seconds
 * for ~4,000 mails of 4 KB. Deterministic: same texts and config, same
 * merges.
 *
 * Saved as text (fits a safetensors metadata value):
 *   "attn-bpe 1\nmax_chunk 64\nmerges N\n" + N lines "LEFT RIGHT" (ids).
 *
 * Typical use (texts of the training split from apps/dataset.h):
 *   attn_bpe *tok; attn_bpe_train(train_texts, train_lens, n_train, NULL, &tok);
 *   int32_t ids[512]; size_t n;
 *   attn_bpe_encode(tok, text, len, ids, 512, &n);     first 512 tokens only
 *   char *meta; attn_bpe_save(tok, &meta);  attn_st_set_meta(st, "tokenizer", meta);
 *   attn_bpe_load(attn_st_meta(st, "tokenizer"), &tok2);   the same tokenizer */
#ifndef ATTN_APPS_BPE_H
#define ATTN_APPS_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#define ATTN_BPE_PAD 0
#define ATTN_BPE_CLS 1
#define ATTN_BPE_SEP 2
#define ATTN_BPE_BYTE0 3                     /* id of byte 0 */
#define ATTN_BPE_MERGE0 (ATTN_BPE_BYTE0 + 256) /* id of the first merge */

typedef struct attn_bpe attn_bpe;

typedef struct {
  int vocab_size;        /* total ids incl. specials and bytes; >= ATTN_BPE_MERGE0 (default 8000) */
  size_t max_text_bytes; /* each training text truncated to this (0 = whole; default 4096) */
  int max_chunk;         /* pre-token chunk length cap in bytes, 2..1024 (default 64) */
  int min_count;         /* stop early when the best pair occurs fewer times (default 2) */
} attn_bpe_config;

void attn_bpe_config_default(attn_bpe_config *cfg);

/* Learns merges from texts[i][0..lens[i]), i < n. cfg NULL = defaults. */
attn_status attn_bpe_train(const char *const *texts, const size_t *lens, int n,
                           const attn_bpe_config *cfg, attn_bpe **out);
void attn_bpe_free(attn_bpe *b);

int attn_bpe_vocab_size(const attn_bpe *b);
int attn_bpe_n_merges(const attn_bpe *b);
/* Bytes of token id (len 0 for specials); NULL for an id out of range. */
const char *attn_bpe_token(const attn_bpe *b, int id, size_t *len);

/* Encodes s[0..n) into ids[0..cap): *n_ids tokens written. Stops early
 * (truncating) when cap is reached: encoding only what fits. */
attn_status attn_bpe_encode(const attn_bpe *b, const char *s, size_t n, int32_t *ids, size_t cap,
                            size_t *n_ids);
/* Encodes all of s into a new array (*ids, free()). */
attn_status attn_bpe_encode_alloc(const attn_bpe *b, const char *s, size_t n, int32_t **ids,
                                  size_t *n_ids);
/* Encodes texts[i][0..lens[i]) for i < n, each cut to its first max_tokens
 * tokens (0 = all): ids[i] (malloc'd, free() each), n_ids[i]. Texts are
 * spread over attn_get_num_threads() threads; the result does not depend
 * on the thread count. On failure nothing is left allocated. */
attn_status attn_bpe_encode_many(const attn_bpe *b, const char *const *texts, const size_t *lens,
                                 int n, size_t max_tokens, int32_t **ids, size_t *n_ids);
/* Bytes of ids[0..n) (*out NUL-terminated, free()); specials give nothing.
 * ATTN_EINVAL for an id outside the vocabulary. */
attn_status attn_bpe_decode(const attn_bpe *b, const int32_t *ids, size_t n, char **out,
                            size_t *len);

/* Text form (see above), *text free(). */
attn_status attn_bpe_save(const attn_bpe *b, char **text);
/* Parses the text form; ATTN_EFORMAT naming the line on any inconsistency. */
attn_status attn_bpe_load(const char *text, attn_bpe **out);

#endif
