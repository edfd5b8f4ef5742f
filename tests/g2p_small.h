/* A small random G2P model for the decoding tests (test_g2p_decode,
 * test_g2p_attention): d_model 16, 4 heads, ff 24, 2 encoder layers,
 * dec_layers decoder layers, words of up to 12 of the 8 letters "'ABCDEFG"
 * (ids 4..11), dropout 0.1 (never applied when decoding). */
#ifndef ATTN_TESTS_G2P_SMALL_H
#define ATTN_TESTS_G2P_SMALL_H

#include <string.h>

#include "apps/seq2seq/g2p_model.h"
#include "harness.h"

/* the small model's sizes (c's other fields: attn_g2p_config_default) */
static inline void g2p_small_config(attn_g2p_config *c, int64_t max_tgt, int dec_layers) {
  attn_g2p_config_default(c);
  c->d_model = 16;
  c->heads = 4;
  c->ff = 24;
  c->enc_layers = 2;
  c->dec_layers = dec_layers;
  c->max_src = 12;
  c->max_tgt = max_tgt;
  c->dropout = 0.1f;
}

/* c's model over the graphemes chars, initialised from seed */
static inline void g2p_small_create(attn_g2p_model *m, const attn_g2p_config *c, const char *chars,
                                    uint64_t seed) {
  attn_g2p_graphemes g;
  attn_g2p_graphemes_make(&g, chars, (int)strlen(chars));
  CHECK_OK(attn_g2p_create(m, c, &g));
  CHECK_OK(attn_g2p_init(m, seed));
}

static inline void g2p_small_model(attn_g2p_model *m, int64_t max_tgt, int dec_layers, uint64_t seed) {
  attn_g2p_config c;
  g2p_small_config(&c, max_tgt, dec_layers);
  g2p_small_create(m, &c, "ABCDEFG'", seed);
}

#endif
