/* The picture `attn bench sdpa --plot FILE.png` draws: time and peak memory
 * against sequence length for the flash and math backends (log-log). */
#ifndef ATTN_APPS_BENCH_SDPA_PLOT_H
#define ATTN_APPS_BENCH_SDPA_PLOT_H

typedef struct {
  long long n;
  double ms[2];  /* median ms: [0] flash (or the chosen backend), [1] math; <= 0: not run */
  double mib[2]; /* peak resident MiB, same order; <= 0: not measured */
} attn_sdpa_plot_point;

/* Writes a PNG, SVG or PDF (by path's extension); returns 0, or 1 with a
 * message on stderr (also when the build has no cairo). */
int attn_bench_sdpa_plot(const char *path, const char *title, const char *name0,
                         const attn_sdpa_plot_point *p, int n);

#endif
