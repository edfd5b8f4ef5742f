/* The classifier's byte-level BPE tokenizer (apps/bpe.h) as a Hugging Face
 * tokenizers-library tokenizer.json:
 *   model          BPE, vocab (token -> id, attn's ids) and merges in rank
 *                  order ("left right", byte-level strings)
 *   pre_tokenizer  Sequence[Split(a regex equal to attn's chunk rule, with
 *                  max_chunk as the quantifier bound), ByteLevel(no regex,
 *                  no prefix space)]
 *   decoder        ByteLevel
 *   normalizer, post_processor, truncation, padding: null (attn adds no
 *                  special tokens around a text)
 *   added_tokens   [PAD] 0, [CLS] 1, [SEP] 2 (special)
 * Token strings use GPT-2's bytes-to-unicode map (byte 0x20 -> "Ġ", ...).
 * What JSON cannot say (docs/HF.md): a chunk cut at max_chunk bytes inside
 * a multi-byte UTF-8 character (the regex counts characters), and an id
 * whose bytes repeat an earlier token's (tokenizer.json maps bytes to one
 * id; such ids are left out of the vocab and counted in *aliased). */
#ifndef ATTN_APPS_HF_TOKENIZER_H
#define ATTN_APPS_HF_TOKENIZER_H

#include <stddef.h>

#include "apps/text/bpe.h"

/* *json (malloc'd, NUL-terminated, *len bytes) */
attn_status attn_hf_tokenizer_json(const attn_bpe *b, char **json, size_t *len, int *aliased);
/* The same into path (written to a temporary name, then renamed). */
attn_status attn_hf_tokenizer_save(const attn_bpe *b, const char *path, int *aliased);
/* GPT-2's byte -> code point map used for the token strings. */
unsigned attn_hf_byte_to_unicode(unsigned char byte);

#endif
