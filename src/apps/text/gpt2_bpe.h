/* GPT-2's byte-level BPE tokenizer, read from a Hugging Face checkpoint
 * directory: tokenizer.json (tokenizers' "BPE" model with a "ByteLevel"
 * pre-tokenizer), else vocab.json + merges.txt (OpenAI's encoder.json +
 * vocab.bpe under HF's names). docs/HF.md "Tokenizer".
 *
 * Encoding is OpenAI's encoder.py: the text (UTF-8) is cut into chunks by
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (unicode_classes.h; an invalid UTF-8 byte counts as one "other" character),
 * each chunk's bytes become the tokens of their byte-level characters
 * (bytes_to_unicode: printable Latin-1 as itself, other bytes from U+0100),
 * and the adjacent pair of lowest merge rank is merged until none is left.
 * Added tokens (tokenizer.json's added_tokens, "<|endoftext|>") are in the
 * vocabulary for decoding but are not matched in the text: a prompt's
 * "<|endoftext|>" is encoded as its characters, as encoder.py does.
 *
 * Decoding maps each token's characters back to bytes (characters outside
 * the byte alphabet, in added tokens, are kept as UTF-8). */
#ifndef ATTN_APPS_GPT2_BPE_H
#define ATTN_APPS_GPT2_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

typedef struct attn_gpt2_bpe attn_gpt2_bpe;

/* dir/tokenizer.json if present, else dir/vocab.json + dir/merges.txt.
 * ATTN_EIO naming the files when neither is there; ATTN_EFORMAT naming the
 * file and entry for anything malformed (a merge whose parts or result are
 * not in the vocabulary, a byte without a token, ...); ATTN_EUNSUPPORTED for
 * a tokenizer.json whose model is not BPE or whose pre-tokenizer is not
 * byte-level. */
attn_status attn_gpt2_bpe_load_dir(const char *dir, attn_gpt2_bpe **out);
/* The two forms from memory (names: the files named in messages; NULL for
 * the usual file names). */
attn_status attn_gpt2_bpe_from_tokenizer_json(const char *text, size_t len, const char *name,
                                              attn_gpt2_bpe **out);
attn_status attn_gpt2_bpe_from_vocab_merges(const char *vocab, size_t vocab_len, const char *merges,
                                            size_t merges_len, const char *vocab_name,
                                            const char *merges_name, attn_gpt2_bpe **out);
void attn_gpt2_bpe_free(attn_gpt2_bpe *t);

/* Largest id + 1. */
int32_t attn_gpt2_bpe_vocab_size(const attn_gpt2_bpe *t);
int32_t attn_gpt2_bpe_n_merges(const attn_gpt2_bpe *t);
/* The id of the token whose vocabulary string is s (e.g. "<|endoftext|>",
 * "Ġthe"), or -1. */
int32_t attn_gpt2_bpe_id(const attn_gpt2_bpe *t, const char *s);
/* Bytes of token id (*len); NULL for an id not in the vocabulary. */
const char *attn_gpt2_bpe_token(const attn_gpt2_bpe *t, int32_t id, size_t *len);

/* All of s[0..n) -> *ids (malloc'd, free(); NULL when *n_ids is 0). */
attn_status attn_gpt2_bpe_encode(const attn_gpt2_bpe *t, const char *s, size_t n, int32_t **ids,
                                 size_t *n_ids);
/* Bytes of ids (*out NUL-terminated, free()); ATTN_EINVAL for an id not in
 * the vocabulary. */
attn_status attn_gpt2_bpe_decode(const attn_gpt2_bpe *t, const int32_t *ids, size_t n, char **out,
                                 size_t *len);

/* The pre-tokenizer alone: the end of the chunk that starts at byte i < n
 * (> i). */
size_t attn_gpt2_pretok_next(const char *s, size_t n, size_t i);

#endif
