/* Timing a case against its references interleaved (A B A B ...): each
 * round runs every case once, so a busy spell of the machine hits all of
 * them alike, and the ratios are of the minimum CPU time per run (the run
 * least disturbed by other processes), which a loaded machine moves far
 * less than a median or a mean. */
#ifndef ATTN_APPS_TOOLS_BENCH_INTERLEAVE_H
#define ATTN_APPS_TOOLS_BENCH_INTERLEAVE_H

enum { ATTN_BENCH_MAX_ROUNDS = 64 };

/* One case's figures over the timed rounds. */
typedef struct {
  double wall_med;  /* median wall seconds per run */
  double cpu_mean;  /* mean CPU seconds per run (all threads) */
  double cpu_min;   /* minimum CPU seconds of one run */
} attn_bench_timing;

/* Runs run(ctx, c) for c = 0 .. ncases-1, round after round: one untimed
 * warm-up round, then timed rounds until at least min_rounds are done and
 * budget_s of wall time has passed, or max_rounds (<= ATTN_BENCH_MAX_ROUNDS)
 * are done. With one case whose warm-up took over 2 s, the warm-up is the
 * only run (min_rounds then matters for references only). run returns
 * nonzero on failure (it prints why); then this returns -1, else the
 * number of timed rounds, with out[c] filled. */
int attn_bench_interleave(int ncases, int (*run)(void *ctx, int c), void *ctx, int min_rounds,
                          int max_rounds, double budget_s, attn_bench_timing *out);

/* CPU seconds of the whole process (all threads), nanosecond clock. */
double attn_bench_cpu_now(void);

#endif
