/* Beam search over any autoregressive model given as a step callback,
 * batched over B source sequences of K hypotheses each.
 *
 * Rows: hypothesis k of source s is row s*K + k (the layout of
 * attn_decoder_cache with B_mem = B sources: the K rows of a source share its
 * cross-attention memory). Every step runs all B*K rows; the rows of a
 * finished source are fed eos and their output ignored.
 *
 * One step t (t = 0, 1, ... < max_len): the model gets each row's last token
 * (bos at t = 0) and fills logp [B*K, V] with the log-probabilities of the
 * next token. Then, per unfinished source, the candidates (live hypothesis k,
 * token v) with score(k) + logp[k, v] are ranked, best first, ties broken by
 * the lower k, then the lower v (deterministic); scanning them in order: an
 * eos candidate among the first K becomes a finished hypothesis; any other
 * candidate continues as a live one until K are live. A source is done when
 * K hypotheses have finished, or at max_len (its live hypotheses are then
 * finished as they stand, without eos). The model is told to reorder its
 * state: new row r continues old row src[r] (always within the source's K
 * rows). At t = 0 only hypothesis 0 of each source is live (the others
 * would repeat it).
 *
 * Length normalisation ranks the finished hypotheses (the live ones are
 * ranked by their plain sums): with len = output tokens including the eos
 *   ATTN_BEAM_NORM_NONE:   score = sum of log-probabilities
 *   ATTN_BEAM_NORM_LENGTH: score = sum / len
 *   ATTN_BEAM_NORM_GNMT:   score = sum / ((5 + len) / 6)^alpha (Wu et al. 2016)
 * K = 1 is greedy decoding (argmax each step, lower token id on ties). */
#ifndef ATTN_APPS_SEQ2SEQ_BEAM_H
#define ATTN_APPS_SEQ2SEQ_BEAM_H

#include <stdint.h>

#include "attn/status.h"

typedef struct {
  void *user;
  /* logp [rows, V] := log P(next token | the row's tokens so far), the
   * row's last token being tokens[row]; t = the step (0 with bos). */
  attn_status (*step)(void *user, const int32_t *tokens, int64_t rows, int64_t t, float *logp);
  /* The model's per-row state (caches): new row r := old row src[r]. */
  attn_status (*reorder)(void *user, const int64_t *src, int64_t rows);
  /* Optional (NULL: every row computed to the end): called after a step in
   * which sources finished, done [B] (1 = finished). The rows of a finished
   * source are not read from then on (their tokens are eos, their reorder
   * the identity): the model may stop computing them. */
  attn_status (*retire)(void *user, const int *done, int64_t B);
} attn_beam_model;

typedef enum {
  ATTN_BEAM_NORM_NONE = 0,
  ATTN_BEAM_NORM_LENGTH = 1,
  ATTN_BEAM_NORM_GNMT = 2
} attn_beam_norm;

typedef struct {
  int K;       /* beam width >= 1 */
  int max_len; /* most output tokens (eos included) >= 1 */
  int n_best;  /* hypotheses returned per source, 1..K */
  int64_t V;   /* vocabulary size */
  int32_t bos, eos;
  attn_beam_norm norm;
  float alpha; /* GNMT exponent (0.6 in Wu et al.) */
} attn_beam_config;

/* K 1, max_len 64, n_best 1, GNMT with alpha 0.6 (V, bos, eos to set). */
void attn_beam_config_default(attn_beam_config *c);

typedef struct {
  int32_t *tokens; /* output tokens, without bos and eos */
  int len;         /* tokens in `tokens` */
  int finished;    /* 1: ended with eos; 0: stopped at max_len */
  float logp;      /* sum of the log-probabilities (eos included) */
  float score;     /* after length normalisation */
} attn_beam_hyp;

typedef struct {
  int64_t B;
  int n_best;
  attn_beam_hyp *hyps; /* [B * n_best], source s's best first at s * n_best */
  int *count;          /* [B] hypotheses of source s (n_best unless fewer exist) */
  int32_t *store;      /* the tokens of every hypothesis */
} attn_beam_result;

/* The search over B sources (see above). On error *out is empty. */
attn_status attn_beam_search(const attn_beam_config *c, const attn_beam_model *m, int64_t B,
                             attn_beam_result *out);
void attn_beam_result_free(attn_beam_result *r);

#endif
