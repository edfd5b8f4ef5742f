/* The classifier's data: a mail corpus (dataset.h) split and read,
 * tokenised with the BPE tokenizer (apps/text/bpe.h) to at most max_len tokens
 * per message, as token sets per split (classifier_train.h); and the test
 * report: accuracy, precision, recall, F1 and confusion matrix of the model
 * next to the Naive Bayes baseline (naive_bayes.h) on the same split. */
#ifndef ATTN_APPS_CLASSIFIER_DATA_H
#define ATTN_APPS_CLASSIFIER_DATA_H

#include <stdio.h>

#include "apps/text/bpe.h"
#include "apps/classifier/classifier_train.h"
#include "apps/classifier/dataset.h"

typedef struct {
  attn_corpus *c;      /* borrowed */
  const attn_bpe *bpe; /* borrowed */
  int n;
  int32_t **ids;       /* [n] first max_len tokens of each message */
  int32_t *lens;       /* [n] (at least 1: an empty text gives one token) */
  int cnt[ATTN_SPLIT_COUNT];
  int *idx[ATTN_SPLIT_COUNT]; /* message index of each split member */
  const int32_t **sids[ATTN_SPLIT_COUNT];
  int32_t *slens[ATTN_SPLIT_COUNT];
  int *slabels[ATTN_SPLIT_COUNT];
} attn_clf_data;

/* Scans dir, reads the split file split_path if it exists, else makes the
 * stratified split (split_seed, 80/10/10) and writes it there; reads every
 * message with the ATTN_MAIL_* mail_flags (mail.h; attn_clf_mail_flags
 * of a model's config). Prints counts and the parse report to log. */
attn_status attn_clf_corpus_open(const char *dir, const char *split_path, uint64_t split_seed,
                                 unsigned mail_flags, FILE *log, attn_corpus **out);
/* The mail flags a classifier config reads its input with. */
unsigned attn_clf_mail_flags(const attn_clf_config *c);
/* ids[0..*n) = the tokens of text[0..len) the model sees: all of them up to
 * max_len; of a longer text the first max_len - tail and the last tail.
 * An empty text gives one space token. ids holds max_len. */
attn_status attn_clf_encode(const attn_bpe *bpe, const char *text, size_t len, int64_t max_len,
                            int64_t tail, int32_t *ids, size_t *n);
/* The same, and *gap: the index of the first of the last tail tokens when
 * tokens were left out before it (a break in the text), else 0. */
attn_status attn_clf_encode_gap(const attn_bpe *bpe, const char *text, size_t len, int64_t max_len,
                                int64_t tail, int32_t *ids, size_t *n, size_t *gap);
/* Trains the tokenizer on the training split (first 4096 bytes of each). */
attn_status attn_clf_bpe_train(const attn_corpus *c, int vocab, attn_bpe **out);
/* Every message encoded with attn_clf_encode(max_len, tail). */
attn_status attn_clf_data_make(attn_clf_data *d, attn_corpus *c, const attn_bpe *bpe,
                               int64_t max_len, int64_t tail);
attn_tok_set attn_clf_data_set(const attn_clf_data *d, int split);
void attn_clf_data_free(attn_clf_data *d);

/* Test-split report of the model m[0..n) (n > 1: an ensemble, the mean of
 * its members' probabilities; each member's figures follow) next to Naive
 * Bayes (BPE presence features of the first 64 KB, alpha 1, trained on the
 * training split). p_spam (may be NULL) receives the model's P(spam) per
 * test member. */
attn_status attn_clf_report_test(const attn_clf *m, int n, const attn_clf_data *d, int batch,
                                 FILE *out, float *p_spam);
/* The same with the model's forwards under ctx (NULL: f32). */
attn_status attn_clf_report_test_ctx(const attn_clf *m, int n, const attn_nn_ctx *ctx,
                                     const attn_clf_data *d, int batch, FILE *out, float *p_spam);

#endif
