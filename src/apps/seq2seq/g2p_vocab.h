/* G2P vocabularies. Phonemes: a fixed inventory (PAD, UNK, BOS, EOS, the 24
 * ARPAbet consonants, the 15 vowels each with stress 0, 1, 2: 73 ids), or,
 * for a model trained without stress (attn g2p train --no-stress), the
 * stress-free inventory (the same specials and consonants, then the 15
 * vowels without a digit: 43 ids; a consonant has the same id in both).
 * Graphemes:
 * PAD, UNK, BOS, EOS and the characters of the training words (sorted
 * bytes), saved with the model as a string. */
#ifndef ATTN_APPS_G2P_VOCAB_H
#define ATTN_APPS_G2P_VOCAB_H

#include <stdint.h>

#include "attn/status.h"

/* BOS_R2L: the first decoder input of a both-directions model's right-to-left
 * pass (attn g2p train --both-directions): UNK, which the phoneme side never
 * writes or reads otherwise, so its embedding row is free to say "right to
 * left" (the left-to-right pass starts from BOS, as every other model). */
enum {
  ATTN_G2P_PAD = 0,
  ATTN_G2P_UNK = 1,
  ATTN_G2P_BOS = 2,
  ATTN_G2P_EOS = 3,
  ATTN_G2P_SPECIAL = 4,
  ATTN_G2P_BOS_R2L = ATTN_G2P_UNK
};

/* Phoneme ids */
int attn_g2p_phone_count(void); /* the whole vocabulary, specials included */
const char *attn_g2p_phone_name(int id); /* "AH0"; "<pad>" ... for specials */
/* The id of a symbol ("AH0", "K"); -1 if it is not in the inventory. */
int attn_g2p_phone_id(const char *sym, int len);
/* 1 if sym (len bytes) is a vowel symbol without stress digit ("AH") */
int attn_g2p_is_vowel(const char *sym, int len);
/* The id with the stress removed (vowels map to stress 1's id; others to themselves). */
int attn_g2p_phone_unstressed(int id);
/* The stress-free inventory (stress 0) beside the stressed one (stress 1):
 * its size, and a symbol's name ("AH"). */
int attn_g2p_phone_count_for(int stress);
const char *attn_g2p_phone_name_for(int id, int stress);
/* A stressed id in the stress-free inventory (AH0, AH1, AH2 -> AH); and back,
 * a stress-free id as the stressed inventory's stress-1 id (the id
 * attn_g2p_phone_unstressed gives, so that scores with stress removed see
 * the two inventories alike). Other ids map to themselves. */
int attn_g2p_phone_strip(int id);
int attn_g2p_phone_restore(int id);
/* Encodes "EY1 Z" into ids[0..*n) (max ids); ATTN_EINVAL naming a bad symbol. */
attn_status attn_g2p_phones_encode(const char *pron, int32_t *ids, int max, int *n);

/* Graphemes: chars[0..n) sorted distinct bytes; id of chars[i] is SPECIAL + i. */
typedef struct {
  int n;
  char chars[256];
  int16_t id[256]; /* byte -> id, ATTN_G2P_UNK if absent */
} attn_g2p_graphemes;
/* From the given string of characters (distinct or not). */
void attn_g2p_graphemes_make(attn_g2p_graphemes *g, const char *chars, int len);
/* Upper-cases ASCII letters (the dictionary's case) and encodes word into
 * ids[0..len); returns the number of characters that are not in g (0: all known). */
int attn_g2p_graphemes_encode(const attn_g2p_graphemes *g, const char *word, int len,
                              int32_t *ids);

#endif
