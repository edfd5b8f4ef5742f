/* Training the language model (attn lm train, docs/LM.md): the tokenizer on
 * the training documents, the n-gram baseline, AdamW with warm-up + cosine,
 * validation perplexity each epoch, checkpoints. */
#ifndef ATTN_APPS_LM_TRAIN_H
#define ATTN_APPS_LM_TRAIN_H

#include <stdint.h>

#include "apps/lm/lm_model.h"
#include "apps/text/bpe.h"

typedef struct {
  int64_t seq, batch; /* window length (tokens), windows per step */
  int epochs;
  double lr, min_lr, weight_decay, clip;
  double warmup_frac; /* of the run's steps */
  uint64_t seed;
  int64_t max_steps;  /* 0: no cap */
  double time_budget; /* seconds for training + validation (0: none) */
  int ngram_order;    /* the baseline's order (2 or 3) */
  const char *out;    /* folder: best.safetensors, last.safetensors */
  int quiet;
} attn_lm_train_opts;

/* seq 128, batch 16, 1 epoch, lr 3e-3, min_lr 3e-4, wd 0.1, clip 1, warm-up 5 %,
 * seed 1, n-gram order 3 */
void attn_lm_train_opts_default(attn_lm_train_opts *o);

/* Token streams of a split corpus, with the tokenizer trained on its training side. */
typedef struct {
  attn_bpe *bpe;
  int32_t *train, *val;
  int64_t n_train, n_val;
  int docs_train, docs_val;
  int64_t bytes_train, bytes_val;
} attn_lm_data;
/* vocab: the BPE's size (specials and bytes included). */
attn_status attn_lm_data_load(const char *path, int vocab, attn_lm_data *d);
void attn_lm_data_free(attn_lm_data *d);

/* Perplexity of the model on tokens[0..n) (targets tokens[1..n)), in windows
 * of seq tokens (the last one shorter), batch windows per forward. */
attn_status attn_lm_perplexity(const attn_lm_model *m, const int32_t *tokens, int64_t n,
                               int64_t seq, int64_t batch, double *ppl);

/* The whole run on d with the model config c (c->vocab = the BPE's). Prints
 * the plan, progress, the baseline and each epoch's validation perplexity on
 * stdout; *best_ppl (may be NULL) the best validation perplexity. */
attn_status attn_lm_train_run(const attn_lm_config *c, const attn_lm_data *d,
                              const attn_lm_train_opts *o, double *best_ppl);

/* The steps a run with a time budget plans at step `step` (re-planned every
 * 100 steps): the steps done plus those of step_s seconds that fit in the
 * `left` seconds with a validation pass of val_s seconds at each epoch end
 * (spe steps) and at the end; at least step + 1, at most max_total. */
int64_t attn_lm_replan(int64_t step, double step_s, double val_s, double left, int64_t spe,
                       int64_t max_total);

#endif
