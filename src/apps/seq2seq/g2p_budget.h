/* How long a G2P training run takes on this machine, and how many epochs
 * fit a time budget (attn g2p train --time-budget, make demo-g2p).
 *
 * The probe times the run's own kind of work on its own data without
 * touching the run: a fresh model of the run's configuration and a fresh
 * AdamW (so the run's bits do not depend on the probe), the training
 * examples in batches sorted by length, four of them at the 1/8, 3/8, 5/8
 * and 7/8 points of that order (short to long words); one untimed step on
 * the middle one, then two rounds of, per batch, a full training step
 * (forward, label-smoothed loss, backward, clipping, AdamW) and a
 * validation forward (forward and loss), the faster round of each kept.
 * Their seconds per token, times the tokens of an epoch and of a validation
 * pass, are an epoch's expected seconds. */
#ifndef ATTN_APPS_G2P_BUDGET_H
#define ATTN_APPS_G2P_BUDGET_H

#include "apps/seq2seq/g2p_train.h"

typedef struct {
  int steps;                      /* optimizer steps per epoch */
  double train_tokens;            /* predicted phonemes per epoch (</s> included) */
  double val_tokens;              /* per validation pass */
  double train_tokens_per_s;      /* full training steps, by the probe */
  double val_tokens_per_s;        /* validation forwards, by the probe */
  double probe_seconds;           /* what the probe took */
} attn_g2p_cost;

/* Measures c for training m's configuration on train (validation on val,
 * may be NULL or empty) with o's batch, precision, learning rate and seed. */
attn_status attn_g2p_cost_probe(const attn_g2p_model *m, const attn_g2p_set *train,
                                const attn_g2p_set *val, const attn_g2p_train_opts *o,
                                attn_g2p_cost *c);
/* One epoch and its validation pass, expected seconds. */
double attn_g2p_cost_epoch_seconds(const attn_g2p_cost *c);
/* The epochs of at most max_epochs that fit in budget seconds, at least 1. */
int attn_g2p_cost_fit(const attn_g2p_cost *c, double budget, int max_epochs);

#endif
