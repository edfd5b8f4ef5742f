/* Greedy G2P decoding, batched over words: each word's encoder runs once;
 * the decoder reruns on the growing prefix (full recompute per step) and
 * picks the most probable phoneme until EOS or max_tgt - 1 phonemes. */
#ifndef ATTN_APPS_G2P_DECODE_H
#define ATTN_APPS_G2P_DECODE_H

#include "apps/seq2seq/g2p_model.h"

/* src[i][0..src_lens[i]) grapheme ids of word i (1..max_src), i < n; words
 * go batch at a time in the given order. out [n, max_tgt] receives word i's
 * phoneme ids at out + i * max_tgt, out_len[i] their count (EOS excluded). */
attn_status attn_g2p_greedy(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                            const int32_t *const *src, const int32_t *src_lens, int n, int batch,
                            int32_t *out, int *out_len);

#endif
