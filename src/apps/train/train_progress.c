#include "apps/train/train_progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/train/train_plan.h"

double attn_train_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double attn_train_eta_left(const attn_train_eta *e, int64_t done) {
  if (!e) return 0;
  int64_t timed = done - e->steps_at_t0, left = e->steps_total - done;
  if (left <= 0) return 0;
  if (timed <= 0 || e->t0 <= 0) return e->predicted_s;
  return (attn_train_now() - e->t0) / (double)timed * (double)left;
}

void attn_train_eta_start(attn_train_eta *e, int64_t done) {
  if (!e || e->t0 > 0) return;
  e->t0 = attn_train_now();
  e->steps_at_t0 = done;
}

void attn_train_progress_show_eta(attn_train_progress *pg, const attn_train_eta *e, int64_t done,
                                  int epoch, int epochs, int b, int nb, double avg_loss,
                                  int final) {
  char all[32];
  if (e) attn_fmt_duration(all, sizeof all, attn_train_eta_left(e, done));
  attn_train_progress_show(pg, epoch, epochs, b, nb, avg_loss, e ? all : NULL, final);
}

void attn_train_progress_init(attn_train_progress *pg, int mode) {
  memset(pg, 0, sizeof *pg);
  pg->mode = mode >= 0 ? mode : isatty(fileno(stderr)) ? 1 : 0;
}

void attn_train_progress_epoch(attn_train_progress *pg) {
  pg->t_epoch = attn_train_now();
  pg->tokens = 0;
  pg->done = 0;
  pg->next_line = 0;
}

void attn_train_progress_show(attn_train_progress *pg, int epoch, int epochs, int b, int nb,
                              double avg_loss, const char *all, int final) {
  if (pg->mode == 2) return;
  if (pg->mode == 0) { /* plain: about ten lines per epoch */
    if (!final && b < pg->next_line) return;
    pg->next_line = b + (nb + 9) / 10;
  }
  double el = attn_train_now() - pg->t_epoch, tps = el > 0 ? pg->tokens / el : 0;
  char e[64];
  attn_fmt_duration(e, sizeof e, pg->done > 0 ? el / pg->done * (nb - b) : 0);
  if (all) snprintf(e + strlen(e), sizeof e - strlen(e), ", all %s", all);
  if (pg->mode == 1) {
    int w = 30, fill = nb ? (int)((long)w * b / nb) : w;
    char bar[64];
    for (int i = 0; i < w; i++)
      bar[i] = i < fill ? '#' : '.';
    bar[w] = 0;
    fprintf(stderr, "\r  epoch %d/%d [%s] %d/%d loss %.4f %.0f tok/s ETA %s   ", epoch + 1, epochs,
            bar, b, nb, avg_loss, tps, e);
    if (final) fprintf(stderr, "\n");
  } else {
    fprintf(stderr, "  epoch %d/%d step %d/%d loss %.4f %.0f tok/s ETA %s\n", epoch + 1, epochs, b,
            nb, avg_loss, tps, e);
  }
  fflush(stderr);
}
