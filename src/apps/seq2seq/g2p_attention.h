/* Seeing a G2P model's cross attention (docs/G2P.md, "Seeing cross
 * attention"): for one word and an output of the model (the greedy or best
 * beam phonemes), the cross-attention probabilities of every decoder layer
 * and head, replayed through the incremental decoder that produced the
 * output (g2p_decode.h):
 *   probs [layers, heads, l_out, l_src]
 *   row t     the decoder step that emits output token t: phoneme t, and
 *             with eos a last row for </s> (l_out = len + eos); its input is
 *             <s> at t = 0, else phoneme t-1 (teacher forcing on the output)
 *   column j  letter j of the word (l_src = its letters)
 * Each row sums to 1 over the letters. They equal the probabilities of the
 * full teacher-forced forward (attn_g2p_decode) on <s> + phonemes within
 * float rounding (tests/test_g2p_attention.c). Saved in the file format of
 * attn viz / attn diagnose (apps/viz/viz.h) with metadata "attention" =
 * "cross", "query_tokens" = the output labels (phonemes, "</s>"),
 * "key_tokens" = the letters as the model reads them (upper case). */
#ifndef ATTN_APPS_G2P_ATTENTION_H
#define ATTN_APPS_G2P_ATTENTION_H

#include "apps/seq2seq/g2p_decode.h"

typedef struct {
  int64_t layers, heads, l_out, l_src;
  float *probs;              /* [layers, heads, l_out, l_src] */
  const char **out_labels;   /* [l_out] phoneme names (static strings), "</s>" */
  const char **src_labels;   /* [l_src] into letters */
  char *letters;             /* [2 * l_src] "A\0T\0..." */
} attn_g2p_cross;

/* src [src_len] the word's grapheme ids (1..max_src), ph [len] the output's
 * phoneme ids (0..max_tgt-1 of them, no specials; the model's inventory, in
 * the order its decoder writes them: last first for a right-to-left model;
 * labelled with or without stress as the model writes), eos 1 when the output
 * ended with </s> (a decoded output stops without it only after max_tgt - 1
 * phonemes). ctx: backend and precision (f32 or bf16 Linears); never trains.
 * On error *out is empty. */
attn_status attn_g2p_cross_attention(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                                     const int32_t *src, int32_t src_len, const int32_t *ph,
                                     int len, int eos, attn_g2p_cross *out);
void attn_g2p_cross_free(attn_g2p_cross *c); /* a zeroed struct is a valid empty one */

/* Writes c to path atomically (attn_viz_save_f32) with metadata "attention"
 * = "cross", "model.kind" = "g2p" and the pairs kv (may be NULL). */
attn_status attn_g2p_cross_save(const char *path, const attn_g2p_cross *c, const char *const *kv);

#endif
