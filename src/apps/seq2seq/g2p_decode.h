/* G2P decoding, batched over words: greedy and beam search (beam.h) with the
 * incremental decoder (attn_decoder_step, include/attn/nn.h).
 *
 * Per batch of W words: the encoder runs once on the W words; the cross-
 * attention K/V of every decoder layer are projected once from its output
 * (attn_decoder_cache_set_memory: one copy per word, shared by the word's K
 * hypotheses); then each step feeds every hypothesis's last phoneme (W*K
 * rows, position t) through the decoder layers, appending one position to
 * the self-attention K/V cache, and projects to logits. The next-phoneme
 * log-probabilities are log-softmax(logits) over all phonemes with <pad>,
 * <unk> and <s> then set to -inf (never written; the others keep the
 * model's probability, not renormalised). The beam keeps, per word, the K
 * best continuations and tells the cache which hypothesis each row now
 * continues (attn_decoder_cache_reorder).
 *
 * Length normalisation ranks the finished hypotheses (--length-penalty A):
 *   score = logp / ((5 + len) / 6)^A   (GNMT, Wu et al. 2016; len = phonemes + </s>)
 * A = 0: the plain sum of log-probabilities. K = 1 is greedy decoding (the
 * argmax each step, the lower id on ties; </s> wins a tie). A word stops at
 * </s> or after max_tgt - 1 tokens (then without </s>).
 *
 * Phoneme ids are the model's inventory (with stress or without:
 * m->c.stress). A right-to-left model (m->c.reverse) writes the last phoneme
 * first; the search returns its outputs in reading order (first phoneme
 * first), as a left-to-right model's. */
#ifndef ATTN_APPS_G2P_DECODE_H
#define ATTN_APPS_G2P_DECODE_H

#include "apps/seq2seq/g2p_model.h"

typedef struct {
  int beam;    /* K >= 1 hypotheses per word (1: greedy) */
  int n_best;  /* hypotheses returned per word, 1..beam */
  float alpha; /* length penalty exponent (0.6); 0: none */
  int batch;   /* words decoded together (128) */
} attn_g2p_decode_opts;
void attn_g2p_decode_opts_default(attn_g2p_decode_opts *o);

typedef struct {
  int n, n_best;
  int64_t max_tgt;
  int32_t *ph;  /* [n, n_best, max_tgt] phoneme ids (no </s>) */
  int *len;     /* [n, n_best] */
  float *score; /* [n, n_best] after length normalisation, best first */
  float *logp;  /* [n, n_best] sums of log-probabilities (</s> included) */
  int *count;   /* [n] hypotheses of word i (n_best unless fewer exist) */
} attn_g2p_hyps;
void attn_g2p_hyps_free(attn_g2p_hyps *h);

/* src[i][0..src_lens[i]) grapheme ids of word i (1..max_src), i < n; words
 * go o->batch at a time in the given order. On error *out is empty. */
attn_status attn_g2p_search(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                            const attn_g2p_decode_opts *o, const int32_t *const *src,
                            const int32_t *src_lens, int n, attn_g2p_hyps *out);

/* An ensemble of nm models (1..ATTN_G2P_MAX_MODELS): each step's next-phoneme
 * log-probability is the log of the mean of the models' probabilities; each
 * model encodes the words itself and keeps its own decoder cache. The models
 * must read the same graphemes and lengths (max_src, max_tgt), write the same
 * inventory (stress) in the same direction (a both-directions model decodes
 * left to right); their sizes may differ. nm = 1
 * is attn_g2p_search, bit for bit. */
#define ATTN_G2P_MAX_MODELS 16
attn_status attn_g2p_ensemble_check(const attn_g2p_model *const *ms, int nm);
/* The same for models that score sequences together (attn_g2p_sequence_logp):
 * the direction compared is the one they score in, so a both-directions
 * model (right to left there) goes with right-to-left models. */
attn_status attn_g2p_scoring_check(const attn_g2p_model *const *ms, int nm);
attn_status attn_g2p_search_ensemble(const attn_g2p_model *const *ms, int nm,
                                     const attn_nn_ctx *ctx, const attn_g2p_decode_opts *o,
                                     const int32_t *const *src, const int32_t *src_lens, int n,
                                     attn_g2p_hyps *out);

/* Greedy (beam 1): out [n, max_tgt] receives word i's phoneme ids at
 * out + i * max_tgt, out_len[i] their count (</s> excluded). */
attn_status attn_g2p_greedy(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                            const int32_t *const *src, const int32_t *src_lens, int n, int batch,
                            int32_t *out, int *out_len);

/* The incremental decoder alone (tests, g2p_attention.h): rows = B * group decoder rows
 * over the B words last encoded in s (attn_g2p_encode); step t's logits
 * [rows, V] for tokens [rows] at position t. */
typedef struct {
  const attn_g2p_model *m;
  attn_nn_ctx ctx;
  attn_decoder_cache cache;
  int64_t rows;
  float *x, *y, *logits; /* [rows, E], [rows, E], [rows, V] */
  int64_t rows_cap;      /* rows x, y, logits and the cache hold */
} attn_g2p_stepper;
attn_status attn_g2p_stepper_init(attn_g2p_stepper *d, const attn_g2p_model *m,
                                  const attn_nn_ctx *ctx, const attn_g2p_saved *s, int64_t group);
attn_status attn_g2p_stepper_step(attn_g2p_stepper *d, const int32_t *tokens, int64_t t);
/* ... and cross [dec_layers, rows, heads, Ls] (may be NULL) the step's
 * cross-attention probabilities of every decoder layer (Ls: the encoded
 * batch's source length; 0 at padded letters). */
attn_status attn_g2p_stepper_step_cross(attn_g2p_stepper *d, const int32_t *tokens, int64_t t,
                                        float *cross);
void attn_g2p_stepper_free(attn_g2p_stepper *d);

#endif
