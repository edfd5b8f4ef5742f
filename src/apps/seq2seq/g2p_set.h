/* A tokenised side of the G2P data: one example per (word, pronunciation),
 * the pronunciations of a word contiguous. */
#ifndef ATTN_APPS_G2P_SET_H
#define ATTN_APPS_G2P_SET_H

#include <stdint.h>

#include "apps/seq2seq/g2p_data.h"
#include "apps/seq2seq/g2p_vocab.h"

typedef struct {
  int n;
  const int32_t **src; /* grapheme ids [src_len[i]] */
  int32_t *src_len;
  const int32_t **tgt; /* phoneme ids [tgt_len[i]], no BOS/EOS */
  int32_t *tgt_len;
  int *word; /* the word's index in the dictionary */
  uint8_t *r2l; /* NULL, or [n] 1: example i is read right to left, from
                 * ATTN_G2P_BOS_R2L (attn_g2p_set_both) */
  int32_t *arena, *arena2;
  int skipped; /* examples left out: word longer than max_src, or
                * pronunciation longer than max_tgt - 1 */
} attn_g2p_set;

/* The examples of d's side `split` (ATTN_G2P_TRAIN ...), graphemes encoded
 * with g (unknown characters as UNK). */
attn_status attn_g2p_set_make(const attn_g2p_dict *d, int split, const attn_g2p_graphemes *g,
                              int64_t max_src, int64_t max_tgt, attn_g2p_set *s);
void attn_g2p_set_free(attn_g2p_set *s);
/* The targets as a model of that kind learns them, in place: stress 0
 * (--no-stress): every vowel's stress dropped (attn_g2p_phone_strip), and a
 * pronunciation that then equals an earlier one of its word left out
 * (counted in *merged, may be NULL); reverse 1 (--reverse): each
 * pronunciation last phoneme first. stress 1, reverse 0: unchanged. */
void attn_g2p_set_targets(attn_g2p_set *s, int stress, int reverse, int *merged);
/* For a both-directions model (--both-directions), after
 * attn_g2p_set_targets: the n examples, then each of them again with its
 * phonemes last first and s->r2l[i] = 1 (2n in all; a word's examples are
 * contiguous within each half). ATTN_ENOMEM leaves s as it was; a set
 * already doubled is refused (ATTN_EINVAL). */
attn_status attn_g2p_set_both(attn_g2p_set *s);
/* The characters of the training side's words (for attn_g2p_graphemes_make). */
void attn_g2p_train_chars(const attn_g2p_dict *d, attn_g2p_graphemes *g);

/* One teacher-forced batch: src [B, Ls] (PAD after src_len), tin [B, Lt] =
 * BOS (ATTN_G2P_BOS_R2L for an example of set->r2l) + phonemes (PAD after), tout [B, Lt] = phonemes
 * + EOS (-1 after), tokens = the targets not ignored. Buffers of attn_g2p_batch_alloc. */
typedef struct {
  int64_t B, Ls, Lt, tokens, cap_s, cap_t;
  int32_t *src, *src_len, *tin, *tout;
} attn_g2p_batch;
/* examples idx[0..B) of set into bt (buffers grown as needed). */
attn_status attn_g2p_batch_gather(const attn_g2p_set *set, const int *idx, int B,
                                  attn_g2p_batch *bt);
void attn_g2p_batch_free(attn_g2p_batch *bt);

#endif
