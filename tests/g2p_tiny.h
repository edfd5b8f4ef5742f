/* The tiny G2P dictionary (tests/data/g2p/dict.txt, TINY) loaded as the
 * training tests use it: its graphemes, train and validation sets of words
 * up to 40 letters and phonemes (test_g2p, test_g2p_recipe). */
#ifndef ATTN_TESTS_G2P_TINY_H
#define ATTN_TESTS_G2P_TINY_H

#include "apps/seq2seq/g2p_data.h"
#include "apps/seq2seq/g2p_set.h"
#include "harness.h"

#define TINY "tests/data/g2p/dict.txt"

typedef struct {
  attn_g2p_dict d;
  attn_g2p_set tr, va;
  attn_g2p_graphemes g;
} tiny_data;

static inline void tiny_load(tiny_data *t) {
  CHECK_OK(attn_g2p_dict_load(TINY, &t->d));
  attn_g2p_train_chars(&t->d, &t->g);
  CHECK_OK(attn_g2p_set_make(&t->d, ATTN_G2P_TRAIN, &t->g, 40, 40, &t->tr));
  CHECK_OK(attn_g2p_set_make(&t->d, ATTN_G2P_VAL, &t->g, 40, 40, &t->va));
}

static inline void tiny_free(tiny_data *t) {
  attn_g2p_set_free(&t->tr);
  attn_g2p_set_free(&t->va);
  attn_g2p_dict_free(&t->d);
}

#endif
