/* Shared between bpe.c (encode/decode/save/load) and bpe_train.c. */
#ifndef ATTN_APPS_BPE_INTERNAL_H
#define ATTN_APPS_BPE_INTERNAL_H

#include "apps/text/bpe.h"
#include "apps/text/u64map.h"

struct attn_bpe {
  int max_chunk;
  int n_merges;
  int32_t *merges;    /* [n_merges][2]: merge i joins (left, right) into id MERGE0 + i */
  uint32_t *tok_off;  /* [vocab] offset of each token's bytes in tok_bytes */
  uint32_t *tok_len;  /* [vocab] */
  char *tok_bytes;
  attn_u64map rank;   /* (left << 32 | right) -> merge index */
};

static inline uint64_t bpe_pair_key(int32_t a, int32_t b) {
  return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

/* End (exclusive) of the pre-token chunk that starts at s[i], i < n. */
size_t attn_bpe_chunk_end(const unsigned char *s, size_t n, size_t i, int max_chunk);

/* Builds a tokenizer from a merge list (validated: ids defined before use);
 * takes ownership of merges on success and on failure. */
attn_status attn_bpe_from_merges(int32_t *merges, int n_merges, int max_chunk, attn_bpe **out);

#endif
