/* Training the G2P model: teacher forcing, label smoothing, AdamW, linear
 * warm-up + cosine decay or inverse square root, gradient clipping, dropout,
 * length-bucketed batches of a number of words or of a token budget (the
 * batch plans of apps/train/batch_plan.h), checkpoints and exact resume.
 *
 * Reproducibility: the batch order is a pure function of (seed, epoch), the
 * dropout masks of (seed, global step), and every kernel is thread-count
 * independent: the same seed gives the same bits for any thread count, and a
 * run resumed from OUT/last.safetensors continues exactly as the
 * uninterrupted run (given the same options). */
#ifndef ATTN_APPS_G2P_TRAIN_H
#define ATTN_APPS_G2P_TRAIN_H

#include <stdio.h>

#include "apps/seq2seq/g2p_model.h"
#include "apps/seq2seq/g2p_set.h"
#include "apps/train/batch_plan.h"
#include "apps/train/train_progress.h"
#include "attn/train.h"

typedef struct {
  int epochs, batch;
  int64_t batch_tokens;     /* > 0: batches by this token budget instead of `batch`
                             * words (attn_g2p_plan) */
  attn_sched_kind schedule; /* ATTN_SCHED_WARMUP_COSINE (default) or _INV_SQRT */
  double lr, min_lr, weight_decay, clip;
  int64_t warmup;    /* steps; -1: 4 % of the run */
  float smoothing;
  uint64_t seed;
  int progress;      /* -1 auto (bar on a TTY), 0 plain lines, 1 bar, 2 quiet */
  const char *out_dir; /* NULL: no files; else last.safetensors (with optimizer and
                        * state) and best.safetensors (the best validation loss) */
  int64_t stop_after;  /* stop (as if interrupted) after this global step; <= 0 never */
  int64_t save_every;  /* also write last.safetensors every N steps (0: per epoch) */
  int keep_epochs;     /* also write each epoch's model as epoch_NNN.safetensors (for
                        * selection by decoding and checkpoint averaging) */
  FILE *log;           /* epoch lines (NULL: stdout) */
  attn_precision precision; /* Linears and attention (f32 master weights; g2p_precision.h) */
  int shards;               /* > 1: each batch cut into this many shards of consecutive words,
                             * each shard's gradient computed on its own (one thread each
                             * where there are threads: data parallelism) and added in shard
                             * order; the loss normalised by the whole batch's tokens. The
                             * same bits for any thread count; other bits than 1 shard's
                             * (the order of the sums). 0, 1: the whole batch at once */
  attn_train_eta *eta; /* the whole run's ETA in the progress lines (steps_total set by
                        * the caller; t0 by the run); NULL: the epoch's only */
} attn_g2p_train_opts;
void attn_g2p_train_opts_default(attn_g2p_train_opts *o);

typedef struct {
  int epoch, batch; /* the next batch to run */
  int64_t step;     /* global steps done */
  double loss_sum;  /* this epoch's so far */
  double best_val;  /* best validation loss (0: none yet) */
  int best_epoch;
} attn_g2p_train_state;

/* An epoch's batches of set: o->batch words each (sorted by source length in
 * chunks of 50 batches), or with o->batch_tokens > 0 by that budget: every
 * example costs the longer of its letters and its phonemes + 1, sorted over
 * the whole set (attn_batch_plan_tokens). shuffle 1: epoch `epoch` of seed
 * o->seed; 0: sorted by length (timing, validation). Thread-count independent. */
attn_status attn_g2p_plan(const attn_g2p_set *set, const attn_g2p_train_opts *o, int shuffle,
                          int64_t epoch, attn_batch_plan *plan);
/* The run's learning-rate schedule for steps_per_epoch batches per epoch. */
attn_status attn_g2p_schedule(const attn_g2p_train_opts *o, int steps_per_epoch,
                              attn_schedule *sch);

/* The teacher-forced cross-entropy (no smoothing) of one batch, forward only. */
attn_status attn_g2p_batch_loss(const attn_g2p_model *m, attn_precision precision,
                                attn_g2p_saved *sv, const attn_g2p_batch *bt, float *loss);
/* Mean teacher-forced cross-entropy (no smoothing) over set. */
attn_status attn_g2p_eval_loss(const attn_g2p_model *m, const attn_g2p_set *set, int batch,
                               attn_precision precision, double *loss);

/* Trains from state s (zeroed for a new run; opt initialised for m->p).
 * losses (may be NULL): the loss of global step k at losses[k] for k <
 * nlosses. Returns ATTN_OK also when stopped by stop_after. */
attn_status attn_g2p_train_run(attn_g2p_model *m, attn_adam *opt, attn_g2p_train_state *s,
                               const attn_g2p_set *train, const attn_g2p_set *val,
                               const attn_g2p_train_opts *o, float *losses, int64_t nlosses);

/* The training throughput (make bench-g2p, tools/bench_g2p_torch.py): steps
 * + 1 optimizer steps of the run (the first untimed: warm-up) on the first
 * batches of epoch 0's plan at the constant rate o->lr; *tokens and
 * *seconds of the timed ones (forward, loss, backward, clipping, AdamW).
 * dump (may be NULL): every batch written there (int32 little-endian:
 * "G2PB" magic, count; per batch B, Ls, Lt, src [B, Ls], src_len [B],
 * tin [B, Lt], tout [B, Lt]) for the PyTorch script to train on. */
attn_status attn_g2p_train_bench(attn_g2p_model *m, attn_adam *opt, const attn_g2p_set *train,
                                 const attn_g2p_train_opts *o, int steps, const char *dump,
                                 double *tokens, double *seconds);

/* The gradient of batch bt's label-smoothed loss (o->smoothing; its mean over
 * the batch's target tokens in *loss) ACCUMULATED into m->p.grad, in
 * o->shards shards (their gradients added in shard order), dropout seeded by
 * global step `step`. sv: the activations (and the shards'). */
attn_status attn_g2p_batch_grad(attn_g2p_model *m, attn_g2p_saved *sv, const attn_g2p_batch *bt,
                                const attn_g2p_train_opts *o, int64_t step, float *loss);

/* One optimizer step on batch bt: forward, loss (o->smoothing), backward,
 * clipping (o->clip), AdamW at learning rate lr; global step `step` seeds
 * the dropout masks (the same masks with or without o->shards); the
 * gradients are zeroed after. sv: the activations (and the shards'). */
attn_status attn_g2p_train_step(attn_g2p_model *m, attn_adam *opt, attn_g2p_saved *sv,
                                const attn_g2p_batch *bt, const attn_g2p_train_opts *o, double lr,
                                int64_t step, float *loss);

/* Creates m, opt and s from a checkpoint written by attn_g2p_train_run. */
attn_status attn_g2p_train_resume(const char *path, const attn_g2p_train_opts *o,
                                  attn_g2p_model *m, attn_adam *opt, attn_g2p_train_state *s);
/* An AdamW optimizer for m with o's weight decay and attn_g2p_decay_rule. */
attn_status attn_g2p_adam_init(attn_adam *opt, const attn_g2p_model *m,
                               const attn_g2p_train_opts *o);

#endif
