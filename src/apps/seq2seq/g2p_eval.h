/* Evaluating a G2P model on a side of the data: greedy decoding of every
 * word (g2p_decode.h: greedy or beam, batched, words sorted by length; the
 * beam's n-best optionally rescored by right-to-left models, g2p_rescore.h),
 * WER and PER with and without stress, and a table of the worst errors.
 * A stress-free model (m->c.stress 0) is scored with stress removed only:
 * its outputs are compared with the references' vowels without their digits. */
#ifndef ATTN_APPS_G2P_EVAL_H
#define ATTN_APPS_G2P_EVAL_H

#include <stdio.h>

#include "apps/seq2seq/g2p_data.h"
#include "apps/seq2seq/g2p_decode.h"
#include "apps/seq2seq/g2p_metrics.h"
#include "apps/seq2seq/g2p_set.h"

typedef struct {
  int nwords;
  int *first;    /* [nwords] the word's first example in the set */
  int *nrefs;    /* [nwords] its pronunciations */
  int32_t *hyp;  /* [nwords, max_tgt] */
  int *hyp_len;  /* [nwords] */
  int *dist;     /* [nwords] edits to the nearest reference, with stress (a
                  * stress-free model: without) */
  int stress;    /* 1: the model writes stress (`stress` is its score); 0: only no_stress */
  attn_g2p_score stress_score, no_stress;
  double decode_seconds; /* wall time of the decoding alone (encoder + search) */
} attn_g2p_eval_result;

/* Decodes every word of set with o (its best hypothesis; n_best ignored)
 * under ctx (NULL: f32, default backend); limit > 0: only the first limit
 * words of the set. */
attn_status attn_g2p_evaluate(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                              const attn_g2p_decode_opts *o, const attn_g2p_set *set, int limit,
                              attn_g2p_eval_result *r);
/* ... with an ensemble of nm models (attn_g2p_search_ensemble; set made for ms[0]) */
attn_status attn_g2p_evaluate_ensemble(const attn_g2p_model *const *ms, int nm,
                                       const attn_nn_ctx *ctx, const attn_g2p_decode_opts *o,
                                       const attn_g2p_set *set, int limit,
                                       attn_g2p_eval_result *r);
/* ... the ensemble's beam of o->beam hypotheses rescored by the right-to-left
 * models rs[0..nr) with weight w (attn_g2p_rescore; nr = 0: not rescored) */
attn_status attn_g2p_evaluate_rescored(const attn_g2p_model *const *ms, int nm,
                                       const attn_g2p_model *const *rs, int nr, float w,
                                       const attn_nn_ctx *ctx, const attn_g2p_decode_opts *o,
                                       const attn_g2p_set *set, int limit, attn_g2p_eval_result *r);
void attn_g2p_eval_result_free(attn_g2p_eval_result *r);
/* "word  predicted  reference(s)  edits" for the n words with the most edits
 * relative to their length (ties: dictionary order). */
void attn_g2p_print_worst(FILE *f, const attn_g2p_eval_result *r, const attn_g2p_set *set,
                          const attn_g2p_dict *d, int64_t max_tgt, int n);
/* ids as "K AE1 T" into buf; stress 0: ids of the stress-free inventory ("K AE T") */
void attn_g2p_phones_format(const int32_t *ids, int n, int stress, char *buf, size_t cap);

#endif
