/* A small random G2P model for the decoding tests (test_g2p_decode,
 * test_g2p_attention): d_model 16, 4 heads, ff 24, 2 encoder layers,
 * dec_layers decoder layers, words of up to 12 of the 8 letters "'ABCDEFG"
 * (ids 4..11), dropout 0.1 (never applied when decoding). */
#ifndef ATTN_TESTS_G2P_SMALL_H
#define ATTN_TESTS_G2P_SMALL_H

#include "apps/seq2seq/g2p_model.h"
#include "harness.h"

static inline void g2p_small_model(attn_g2p_model *m, int64_t max_tgt, int dec_layers, uint64_t seed) {
  attn_g2p_config c;
  attn_g2p_config_default(&c);
  c.d_model = 16;
  c.heads = 4;
  c.ff = 24;
  c.enc_layers = 2;
  c.dec_layers = dec_layers;
  c.max_src = 12;
  c.max_tgt = max_tgt;
  c.dropout = 0.1f;
  attn_g2p_graphemes g;
  attn_g2p_graphemes_make(&g, "ABCDEFG'", 8);
  CHECK_OK(attn_g2p_create(m, &c, &g));
  CHECK_OK(attn_g2p_init(m, seed));
}

#endif
