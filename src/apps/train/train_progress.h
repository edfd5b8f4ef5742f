/* The per-step progress of a training loop (attn train, attn g2p train): a
 * bar redrawn in place on a terminal, about ten plain lines per epoch
 * otherwise, or nothing; tokens/s and the epoch's ETA, plus an optional
 * whole-run ETA. Written to stderr. */
#ifndef ATTN_APPS_TRAIN_PROGRESS_H
#define ATTN_APPS_TRAIN_PROGRESS_H

typedef struct {
  int mode;       /* 0 plain lines, 1 bar, 2 quiet */
  double t_epoch; /* when the epoch began (attn_train_now) */
  double tokens;  /* tokens trained on this epoch */
  int done;       /* steps done this epoch */
  int next_line;  /* plain mode: the next step that prints */
} attn_train_progress;

/* mode: -1 auto (a bar when stderr is a terminal, else plain lines), 0, 1, 2. */
void attn_train_progress_init(attn_train_progress *pg, int mode);
/* A new epoch: the clock, tokens and steps start again. */
void attn_train_progress_epoch(attn_train_progress *pg);
/* Step b of nb of epoch (0-based) of epochs; all: NULL or the whole run's ETA
 * text (appended as ", all ..."); final: the epoch's last redraw of the bar. */
void attn_train_progress_show(attn_train_progress *pg, int epoch, int epochs, int b, int nb,
                              double avg_loss, const char *all, int final);

#endif
