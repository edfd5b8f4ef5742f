/* G2P metrics: word error rate (a word is right when its prediction equals
 * any of its reference pronunciations) and phoneme error rate (the edit
 * distance to the nearest reference / that reference's length, summed over
 * words: sum of distances / sum of lengths), with stress or without (every
 * vowel's stress digit dropped before comparing). */
#ifndef ATTN_APPS_G2P_METRICS_H
#define ATTN_APPS_G2P_METRICS_H

#include <stdint.h>

/* Levenshtein distance between a[0..na) and b[0..nb) (unit costs). */
int attn_g2p_edit_distance(const int32_t *a, int na, const int32_t *b, int nb);

typedef struct {
  long words, word_errors;
  long phones, phone_errors; /* reference phonemes, edits */
} attn_g2p_score;

/* Scores one word: hyp[0..nh) against refs[r][0..ref_len[r]) for r < nrefs;
 * the best reference has the fewest edits (ties: the shorter). stress 0:
 * compare with stress removed. Returns that reference's edit count. */
int attn_g2p_score_word(attn_g2p_score *s, const int32_t *hyp, int nh, const int32_t *const *refs,
                        const int *ref_len, int nrefs, int stress);
double attn_g2p_wer(const attn_g2p_score *s); /* in [0, 1]; 0 when no words */
double attn_g2p_per(const attn_g2p_score *s);

#endif
