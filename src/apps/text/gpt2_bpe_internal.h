/* GPT-2 tokenizer internals shared by gpt2_bpe_load.c and gpt2_bpe.c. */
#ifndef ATTN_APPS_GPT2_BPE_INTERNAL_H
#define ATTN_APPS_GPT2_BPE_INTERNAL_H

#include "apps/text/gpt2_bpe.h"
#include "apps/text/u64map.h"

#define ATTN_GPT2_ABSENT UINT32_MAX /* len of an id the vocabulary skips */

struct attn_gpt2_bpe {
  int32_t n_ids; /* largest id + 1 */
  size_t *off;   /* [n_ids] token bytes at blob + off */
  uint32_t *len; /* [n_ids] their length, ATTN_GPT2_ABSENT for a hole */
  char *blob;
  size_t blob_n;
  int32_t *slots;       /* bytes -> id, open addressing by FNV-1a; -1 empty */
  size_t n_slots;       /* power of two */
  int32_t byte_id[256]; /* each byte's one-byte token, -1 if none */
  attn_u64map ranks;    /* left << 32 | right -> merge rank */
  int32_t *merged;      /* [n_merges] the id each merge makes */
  int32_t n_merges;
  int add_prefix_space; /* tokenizer.json ByteLevel option */
};

/* The id of the token of bytes b[0..n), or -1. */
int32_t attn_gpt2_lookup(const attn_gpt2_bpe *t, const char *b, size_t n);
/* The bytes vocabulary string s[0..n) stands for, into out (n bytes at
 * most), *m of them; -1 for invalid UTF-8. */
int attn_gpt2_str_bytes(const char *s, size_t n, char *out, size_t *m);

#endif
