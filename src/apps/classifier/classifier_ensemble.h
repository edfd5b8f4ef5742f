/* An ensemble of classifiers: K models of one config and one tokenizer,
 * trained with different seeds; its probabilities are the mean of the
 * members' (deep ensembles; `attn train --members K`).
 *
 * One checkpoint file holds it: member 1's tensors under their plain names
 * (so attn_clf_load reads an ensemble file as its first member, e.g. for
 * pictures), member k >= 2's as "member<k>.<name>", and the metadata
 * "ensemble.members" = K. A plain checkpoint is an ensemble of one. */
#ifndef ATTN_APPS_CLASSIFIER_ENSEMBLE_H
#define ATTN_APPS_CLASSIFIER_ENSEMBLE_H

#include "apps/classifier/classifier.h"

typedef struct {
  int n;       /* members */
  attn_clf *m; /* [n] */
} attn_clf_ens;

/* Members a checkpoint holds: 1 without "ensemble.members"; -1 (error set)
 * when the value is not a count in 1..ATTN_CLF_ENS_MAX. */
#define ATTN_CLF_ENS_MAX 64
int attn_clf_ens_count(const attn_st *file);

/* Loads every member of path (any classifier checkpoint); *file (may be
 * NULL) receives the file for its other metadata (attn_st_free). */
attn_status attn_clf_ens_load(const char *path, attn_clf_ens *e, attn_st **file);
/* Writes members[0..n) (one config) with meta's metadata (not "config",
 * "trainer.state"), atomically. */
attn_status attn_clf_ens_save(const char *path, const attn_clf *members, int n, const attn_st *meta);
void attn_clf_ens_free(attn_clf_ens *e);

/* probs [B, classes]: the mean of the members' inference probabilities. */
attn_status attn_clf_ens_predict(const attn_clf_ens *e, const int32_t *ids, const int32_t *lens,
                                 int64_t B, int64_t L, float *probs);
/* The same with an inference ctx (NULL: f32; ctx->precision: bf16 etc.;
 * ctx->training must be 0). */
attn_status attn_clf_ens_predict_ctx(const attn_clf_ens *e, const attn_nn_ctx *ctx,
                                     const int32_t *ids, const int32_t *lens, int64_t B, int64_t L,
                                     float *probs);

#endif
