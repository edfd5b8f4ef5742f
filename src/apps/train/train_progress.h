/* The per-step progress of a training loop (attn train, attn g2p train): a
 * bar redrawn in place on a terminal, about ten plain lines per epoch
 * otherwise, or nothing; tokens/s and the epoch's ETA, plus an optional
 * whole-run ETA. Written to stderr. */
#ifndef ATTN_APPS_TRAIN_PROGRESS_H
#define ATTN_APPS_TRAIN_PROGRESS_H

#include <stdint.h>

typedef struct {
  int mode;       /* 0 plain lines, 1 bar, 2 quiet */
  double t_epoch; /* when the epoch began (attn_train_now) */
  double tokens;  /* tokens trained on this epoch */
  int done;       /* steps done this epoch */
  int next_line;  /* plain mode: the next step that prints */
} attn_train_progress;

/* Monotonic seconds (the clock of the progress and the ETA). */
double attn_train_now(void);

/* mode: -1 auto (a bar when stderr is a terminal, else plain lines), 0, 1, 2. */
void attn_train_progress_init(attn_train_progress *pg, int mode);
/* A new epoch: the clock, tokens and steps start again. */
void attn_train_progress_epoch(attn_train_progress *pg);
/* Step b of nb of epoch (0-based) of epochs; all: NULL or the whole run's ETA
 * text (appended as ", all ..."); final: the epoch's last redraw of the bar. */
void attn_train_progress_show(attn_train_progress *pg, int epoch, int epochs, int b, int nb,
                              double avg_loss, const char *all, int final);

/* The whole run's progress, for an overall ETA across its epochs and, in
 * attn train, the members of an ensemble: steps_total of the plan,
 * steps_before done by the members before this one; t0 (monotonic seconds,
 * attn_train_now) and steps_at_t0 are set by the first training run
 * (attn_train_run, attn_g2p_train_run) that sees t0 == 0. Until a step is
 * timed the ETA is predicted_s (the plan's prediction, 0: none). */
typedef struct {
  int64_t steps_total, steps_before, steps_at_t0;
  double t0, predicted_s;
} attn_train_eta;
/* Seconds left of the whole run at global step `done` (steps_before + the
 * member's step), from the time per step measured since t0. */
double attn_train_eta_left(const attn_train_eta *e, int64_t done);
/* Sets e's clock at global step `done` unless already set (e may be NULL). */
void attn_train_eta_start(attn_train_eta *e, int64_t done);
/* attn_train_progress_show with the whole run's ETA at global step `done`
 * when e is given (NULL: the epoch's only). */
void attn_train_progress_show_eta(attn_train_progress *pg, const attn_train_eta *e, int64_t done,
                                  int epoch, int epochs, int b, int nb, double avg_loss,
                                  int final);

#endif
