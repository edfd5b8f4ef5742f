/* The G2P Transformer (an encoder-decoder on the nn layer):
 *   enc = EncoderLayer^N(src_embedding(graphemes) * sqrt(E) + PE)      [B, Ls, E]
 *   dec = DecoderLayer^N(tgt_embedding(phonemes) * sqrt(E) + PE, enc)   [B, Lt, E]
 *         (causal self-attention, cross-attention to enc; padded letters masked)
 *   logits = dec · Wᵀ + out.bias, W = out.weight or (tied) tgt_embedding.weight
 * PE: fixed sinusoidal positions. Post-norm layers, ReLU, torch's init.
 * Parameters: src_embedding.weight, tgt_embedding.weight, encoder.layers.<i>.*,
 * decoder.layers.<i>.* (torch's TransformerEncoder/DecoderLayer names),
 * out.weight (untied only), out.bias. */
#ifndef ATTN_APPS_G2P_MODEL_H
#define ATTN_APPS_G2P_MODEL_H

#include <stdint.h>

#include "apps/seq2seq/g2p_vocab.h"
#include "attn/nn.h"
#include "attn/safetensors.h"
#include "attn/train.h"

typedef struct {
  int64_t d_model, heads, ff, enc_layers, dec_layers;
  int64_t max_src; /* longest word, in characters */
  int64_t max_tgt; /* longest pronunciation + 1 (BOS or EOS) */
  float dropout;
  int tied;
  int stress;  /* 1: phonemes with stress digits (73 ids); 0: without (43; --no-stress) */
  int reverse; /* 1: a right-to-left model: it writes a pronunciation last phoneme
                * first (trained on reversed targets; --reverse) */
  int both;    /* 1: trained in both directions (--both-directions): each pronunciation
                * left to right from BOS and right to left from ATTN_G2P_BOS_R2L; it
                * decodes left to right and scores right to left (rescoring its own
                * beam: --rescore with the same file). reverse is then 0. */
} attn_g2p_config;

/* d_model 128, 4 heads, ff 512, 3 + 3 layers, max_src 40, max_tgt 40, dropout 0, tied,
 * stressed, left to right only */
void attn_g2p_config_default(attn_g2p_config *c);

typedef struct {
  attn_g2p_config c;
  attn_g2p_graphemes g;
  int64_t vocab_src, vocab_tgt;
  attn_params p;
  int src_emb, tgt_emb, out_w, out_b;
  attn_encoder_layer *enc;
  attn_decoder_layer *dec;
  float *pe; /* [max(max_src, max_tgt), E] */
} attn_g2p_model;

/* Declares and allocates (zeroed) for the graphemes g; attn_g2p_init draws weights. */
attn_status attn_g2p_create(attn_g2p_model *m, const attn_g2p_config *c,
                            const attn_g2p_graphemes *g);
attn_status attn_g2p_init(attn_g2p_model *m, uint64_t seed);
void attn_g2p_free(attn_g2p_model *m);
/* AdamW rule: no decay for embeddings, biases and norms. */
int attn_g2p_decay_rule(const char *name, void *user);

/* What one forward keeps (reallocated as shapes change; zeroed = empty). */
typedef struct attn_g2p_saved {
  int64_t B, Ls, Lt, cap_s, cap_t, cap_l;
  int32_t *src, *tgt;    /* [B, Ls], [B, Lt] copies */
  uint8_t *src_pad;      /* [B, Ls] 1 = padding */
  float *xs;             /* [enc_layers + 1][B, Ls, E] */
  float *yt;             /* [dec_layers + 1][B, Lt, E] */
  float *logits;         /* [B, Lt, V] */
  float *dlogits, *dmem, *dbuf; /* backward work */
  attn_encoder_saved *es;
  attn_decoder_saved *ds;
  /* attn_g2p_train_step with shards > 1: each shard's own activations
   * (sub [nsub]) and the gradients of shards 1.. (sub_grad [nsub - 1][numel]) */
  int nsub;
  int64_t sub_numel;
  struct attn_g2p_saved *sub;
  float *sub_grad;
} attn_g2p_saved;
void attn_g2p_saved_free(attn_g2p_saved *s);

/* src [B, Ls] grapheme ids padded with ATTN_G2P_PAD after src_lens[b] (>= 1);
 * runs the encoder into the last block of s->xs. */
attn_status attn_g2p_encode(const attn_g2p_model *m, const attn_nn_ctx *ctx, attn_g2p_saved *s,
                            const int32_t *src, const int32_t *src_lens, int64_t B, int64_t Ls);
/* attn_g2p_encode on the W words src [W, Ls], then s holds the encoder output
 * for B decoder rows, row b reading word row_word[b] (0..W-1): several
 * hypotheses of a word are decoded (scored) against one encoding of it. s
 * then serves attn_g2p_decode only: its earlier blocks are the W words', so
 * attn_g2p_loss_backward is not for it. */
attn_status attn_g2p_encode_rows(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                                 attn_g2p_saved *s, const int32_t *src, const int32_t *src_lens,
                                 int64_t W, int64_t Ls, const int32_t *row_word, int64_t B);
/* tgt [B, Lt] phoneme ids (BOS first); after attn_g2p_encode on the same s
 * (same B): s->logits [B, Lt, V]. */
attn_status attn_g2p_decode(const attn_g2p_model *m, const attn_nn_ctx *ctx, attn_g2p_saved *s,
                            const int32_t *tgt, int64_t Lt);
/* The incremental decoder's pieces (g2p_decode.c): x [rows, E] = the
 * phoneme embedding of ids [rows] at position pos (x sqrt(E) + PE[pos]);
 * logits [rows, V] of decoder outputs h [rows, E] (the output projection). */
attn_status attn_g2p_embed_tgt(const attn_g2p_model *m, const int32_t *ids, int64_t rows,
                               int64_t pos, float *x);
attn_status attn_g2p_project(const attn_g2p_model *m, const attn_nn_ctx *ctx, const float *h,
                             int64_t rows, float *logits);
/* Label-smoothed cross-entropy over targets [B, Lt] (-1 = ignore) of the
 * last forward, its mean over norm rows (0: the rows not ignored) in *loss,
 * and the whole backward: gradients ACCUMULATED into m->p.grad. */
attn_status attn_g2p_loss_backward(attn_g2p_model *m, const attn_nn_ctx *ctx, attn_g2p_saved *s,
                                   const int32_t *targets, float smoothing, int64_t norm,
                                   float *loss);

/* ---- model files ------------------------------------------------------------
 * attn_checkpoint_save's file with metadata "g2p.<field>" for the config and
 * "g2p.graphemes"; extra (may be NULL) adds entries (training state).
 * "g2p.stress", "g2p.reverse" and "g2p.both" may be absent (files written
 * before them): a stressed, left-to-right model. */
attn_status attn_g2p_store_meta(const attn_g2p_model *m, attn_st *st);
/* Creates m from the file at path (ATTN_EINVAL for a file that is not a G2P
 * model, e.g. attn train's classifier). *file_out (may be NULL): the file. */
attn_status attn_g2p_load(const char *path, attn_g2p_model *m, attn_st **file_out);
/* Writes m (and opt's state when not NULL) to path (a temporary name, then
 * renamed), kv: NULL or NULL-terminated key, value pairs of extra metadata. */
attn_status attn_g2p_save(const char *path, const attn_g2p_model *m, const attn_adam *opt,
                          const char *const *kv);
/* 1: a and b read the same graphemes and lengths and write the same phonemes
 * (the same inventory: both with stress or both without); the directions are
 * not compared */
int attn_g2p_same_io(const attn_g2p_model *a, const attn_g2p_model *b);
/* m = the element-wise mean of the parameters in the n files (checkpoint
 * averaging); ATTN_EINVAL when they differ in architecture or graphemes. */
attn_status attn_g2p_average(const char *const *paths, int n, attn_g2p_model *m);
/* The first decoder input of m's pass in the direction r2l (0: left to
 * right, 1: right to left): ATTN_G2P_BOS_R2L for a both-directions model's
 * right-to-left pass, else ATTN_G2P_BOS. */
int32_t attn_g2p_start(const attn_g2p_config *c, int r2l);
/* 1: m can score a pronunciation right to left (--reverse or --both-directions) */
int attn_g2p_scores_r2l(const attn_g2p_config *c);

#endif
