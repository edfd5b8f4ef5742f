/* Training the TextClassifier (classifier.h): length-bucketed batches
 * with padding, AdamW + warm-up/cosine + clipping, per-epoch validation
 * ("Epoch 1/5 | Train Loss: ... | Val Loss: ... | Val Acc: ...% | 47 s (total
 * 94 s)" as the seed prints, with the epoch's own time and the run's), best and last checkpoints, and exact resume.
 *
 * Reproducibility: the batch order is a pure function of (seed, epoch), the
 * dropout masks of (seed, global step) and every kernel is thread-count
 * independent, so the same seed gives bit-identical losses for any thread
 * count, and a run resumed from a checkpoint continues exactly as the
 * uninterrupted run would have. */
#ifndef ATTN_APPS_CLASSIFIER_TRAIN_H
#define ATTN_APPS_CLASSIFIER_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "apps/classifier/classifier.h"
#include "apps/train/batch_plan.h"
#include "apps/train/dist.h"
#include "apps/train/train_progress.h"

/* A tokenised data set: n examples, ids[i][0..lens[i]) (lens in 1..max_len
 * of the model), labels[i] in [0, classes). Borrowed, not owned. */
typedef struct {
  int n;
  const int32_t *const *ids;
  const int32_t *lens;
  const int *labels;
} attn_tok_set;

/* ---- batches -----------------------------------------------------------------
 * An epoch's plan: attn_batch_plan_make (apps/train/batch_plan.h) of the
 * set's lens. */

/* Gathers batch b of the plan into ids [B, L] (padded with 0) and lens [B];
 * L = the longest in the batch. Buffers sized batch * max_len. */
void attn_batch_gather(const attn_tok_set *set, const attn_batch_plan *plan, int b, int32_t *ids,
                       int32_t *lens, int *labels, int64_t *B, int64_t *L);

/* Token dropout (word dropout; data augmentation): in a gathered batch
 * ids [B, L] (rows L apart, lens [B]), each token is left out with
 * probability p, drawn from (seed, step, row, position) alone, so a run is
 * reproducible and resumes identically; a row keeps at least one token (its
 * first when all would go). The rows are compacted in place to the new
 * stride *L (the longest kept row), the rest padded with 0. p in [0, 1). */
attn_status attn_token_dropout(int32_t *ids, int32_t *lens, int64_t B, int64_t *L, float p,
                               uint64_t seed, int64_t step);

/* ---- evaluation ------------------------------------------------------------- */
/* Mean cross-entropy (no smoothing) and accuracy over set; pred[n] and
 * p_pos[n] (probability of class 1) may be NULL. */
attn_status attn_clf_evaluate(const attn_clf *m, const attn_tok_set *set, int batch, double *loss,
                              double *acc, int *pred, float *p_pos);
/* The same with an inference ctx (NULL: as above; e.g. QAT's fake
 * quantization with training = 0). */
attn_status attn_clf_evaluate_ctx(const attn_clf *m, const attn_nn_ctx *ctx,
                                  const attn_tok_set *set, int batch, double *loss, double *acc,
                                  int *pred, float *p_pos);

/* The same for an ensemble m[0..n) (classifier_ensemble.h): the mean
 * of the members' probabilities. */
attn_status attn_clf_evaluate_members(const attn_clf *m, int n, const attn_tok_set *set, int batch,
                                      double *loss, double *acc, int *pred, float *p_pos);
/* ... with every member's forward under ctx (its precision: attn eval
 * --precision); NULL: f32. */
attn_status attn_clf_evaluate_members_ctx(const attn_clf *m, int n, const attn_nn_ctx *ctx,
                                          const attn_tok_set *set, int batch, double *loss,
                                          double *acc, int *pred, float *p_pos);

/* ---- training ----------------------------------------------------------------- */
/* What an epoch measured (attn_train_opts.epoch_end). */
typedef struct {
  int epochs_done;                /* of this run, the epoch just ended included */
  double train_tokens;            /* tokens trained on in the epoch (after token dropout) */
  double train_seconds;           /* its steps' wall time */
  double val_tokens, val_seconds; /* its validation (0: none) */
} attn_train_epoch_info;

typedef struct {
  int epochs, batch, eval_batch, chunk_batches;
  double lr, min_lr, weight_decay, warmup_frac, clip;
  float label_smoothing;
  float token_dropout; /* each training token left out with this probability per step
                        * (attn_token_dropout; 0: off) */
  uint64_t seed;
  int ckpt_acts;       /* gradient checkpointing */
  attn_backend backend;
  attn_precision precision; /* Linear GEMMs: f32, or bf16/fp16 with f32 master weights */
  int qat;             /* fake quantization in every Linear (QAT; export with attn quantize);
                        * validation then runs the fake-quantized model too */
  attn_qat_act qat_act; /* QAT activations: per tensor (observer) or per row (as int8 runs) */
  int eval_start;      /* validate the model before the first step; it competes for best
                        * (best_epoch ATTN_TRAIN_BEST_START): fine-tuning (--init) never
                        * leaves a best checkpoint worse on validation than its start */
  int select_by_acc;   /* best checkpoint by val accuracy (else val loss) */
  int progress;        /* -1 auto (bar on a TTY), 0 plain lines, 1 bar, 2 quiet */
  const char *out_dir; /* NULL: no checkpoints; else out_dir/last.safetensors, best.safetensors */
  int64_t stop_after;  /* stop (as if interrupted) after this global step; <= 0: never */
  int64_t save_every;  /* also write last.safetensors every N steps (0: per epoch only) */
  float loss_scale;    /* fp16: initial loss scale (0: 65536, torch's default) */
  int64_t loss_scale_interval; /* fp16: good steps before the scale grows (0: 2000) */
  double ema;          /* > 0: keep an EMA of the weights with this decay (attn_ema, updated
                        * after every step); validation, the best checkpoint and the final
                        * model use the average, and each epoch line adds the raw weights'
                        * figures. 0: off, unless the state resumed holds an average (it goes
                        * on with the checkpoint's decay) */
  int members;         /* attn train --members K: K models trained one after another with
                        * seeds seed + 1000 k (k < K) and averaged (classifier_ensemble.h);
                        * 1 (the default): one model. attn_train_run trains one model */
  attn_dist *dist;     /* data parallelism (apps/train/dist.h): every batch cut into its shards,
                        * their gradients summed in shard order; only rank 0 writes
                        * checkpoints. NULL: one process, one shard */
  FILE *log;           /* epoch lines (NULL: stdout) */
  attn_train_eta *eta; /* the overall ETA (progress lines); NULL: per epoch only */
  /* Called at every epoch end (after its checkpoints; not on a stop); returns the epoch
   * count the run ends at: o->epochs (the schedule's) or fewer, to end early (never
   * more: the learning-rate schedule is o->epochs'; apps/train/train_replan.h). NULL: none.
   * Not in the JSON (it does not shape the numbers of the epochs trained). */
  int (*epoch_end)(void *user, const attn_train_epoch_info *e);
  void *epoch_end_user;
  int varlen;          /* packed batches (ATTN_CLF_VARLEN_*, classifier.h): set as
                        * m->varlen for the run's steps and validation (0: padded) */
} attn_train_opts;
void attn_train_opts_default(attn_train_opts *o);
/* The options that shape a run's numbers (epochs, batch, chunk_batches, lr,
 * min_lr, weight_decay, warmup_frac, clip, label_smoothing, token_dropout,
 * ema, seed, precision, qat, qat_act, select_by_acc, loss scaling) as a JSON
 * object, exactly (doubles %.17g, floats %.9g, the seed a decimal string);
 * attn train saves it as checkpoint metadata "train.options". */
attn_status attn_train_opts_to_json(const attn_train_opts *o, char **json);
/* Sets those fields of *o from json; keys absent keep *o's values; a bad
 * type or value leaves *o unchanged (ATTN_EFORMAT). */
attn_status attn_train_opts_from_json(const char *json, attn_train_opts *o);

enum { ATTN_TRAIN_BEST_START = -2 };

/* Where a run stands; saved in checkpoints as JSON metadata "trainer.state". */
typedef struct {
  int64_t step;        /* optimizer steps done */
  int epoch;           /* current epoch (0-based) */
  int batch;           /* batches of it done */
  double loss_sum;     /* sum of this epoch's batch losses so far */
  double best;         /* best val metric so far (loss: lower; acc: higher) */
  int best_epoch;      /* 0-based; -1: none; ATTN_TRAIN_BEST_START: the starting model */
  double seconds;      /* training time so far, validation included */
  int shards;          /* shards of each batch (processes, apps/train/dist.h) the run was trained
                          with so far (1: whole batches); "shards" in the JSON */
  attn_loss_scaler scaler; /* fp16 dynamic loss scaling (enabled: an fp16 run; saved as
                              "loss_scale", "loss_scale_tracker", "loss_scale_steps",
                              "loss_scale_skipped" and restored on resume) */
  attn_ema ema;        /* the weight average (opts.ema; avg NULL: none), saved as "ema.<name>"
                          tensors with metadata "ema.decay", "ema.updates" */
} attn_train_state;
void attn_train_state_init(attn_train_state *s);
void attn_train_state_free(attn_train_state *s); /* the average */
attn_status attn_train_state_to_json(const attn_train_state *s, char **json);
attn_status attn_train_state_from_json(const char *json, attn_train_state *s);

/* Trains m from state s (fresh: attn_train_state_init; resumed: from the
 * checkpoint) with opt (bound to m->p). meta: metadata copied into every
 * checkpoint (config, tokenizer, ...; may be NULL). losses (may be NULL)
 * receives the loss of global step k at losses[k] for k < losses_cap. */
attn_status attn_train_run(attn_clf *m, attn_adam *opt, const attn_train_opts *o,
                           const attn_tok_set *train, const attn_tok_set *val,
                           attn_train_state *s, const attn_st *meta, float *losses,
                           int64_t losses_cap);

/* Writes a checkpoint: parameters, opt state (opt may be NULL), meta's
 * metadata, "config" and, when s != NULL, "trainer.state" and the state's
 * weight average. Atomic. */
attn_status attn_clf_save(const char *path, const attn_clf *m, const attn_adam *opt,
                          const attn_train_state *s, const attn_st *meta);
/* Restores opt (initialised for m->p) and s (with its weight average, if
 * the file holds one) from a training checkpoint. s is overwritten, not freed
 * (it may be uninitialised); attn_train_state_free it after use. */
attn_status attn_clf_load_train_state(const char *path, attn_clf *m, attn_adam *opt,
                                      attn_train_state *s);

#endif
