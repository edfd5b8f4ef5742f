/* Interleaved timing of a case and its references (bench_interleave.h). */
#include <time.h>

#include "apps/tools/bench.h"
#include "apps/tools/bench_interleave.h"

double attn_bench_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { MAX_CASES = 8 };

int attn_bench_interleave(int ncases, int (*run)(void *ctx, int c), void *ctx, int min_rounds,
                          int max_rounds, double budget_s, attn_bench_timing *out) {
  double wall[MAX_CASES][ATTN_BENCH_MAX_ROUNDS];
  double cpu_sum[MAX_CASES] = {0}, cpu_min[MAX_CASES], first[MAX_CASES];
  if (ncases < 1 || ncases > MAX_CASES) return -1;
  if (max_rounds > ATTN_BENCH_MAX_ROUNDS) max_rounds = ATTN_BENCH_MAX_ROUNDS;
  if (max_rounds < 1) max_rounds = 1;
  if (min_rounds > max_rounds) min_rounds = max_rounds;
  for (int c = 0; c < ncases; c++) { /* warm-up; its figures stand in for a lone slow case */
    double t0 = attn_bench_now(), c0 = attn_bench_cpu_now();
    if (run(ctx, c)) return -1;
    wall[c][0] = attn_bench_now() - t0;
    first[c] = attn_bench_cpu_now() - c0;
  }
  if (ncases == 1 && wall[0][0] > 2.0) {
    out[0].wall_med = wall[0][0];
    out[0].cpu_mean = out[0].cpu_min = first[0];
    return 1;
  }
  for (int c = 0; c < ncases; c++)
    cpu_min[c] = 1e300;
  const double start = attn_bench_now();
  int rounds = 0;
  while (rounds < max_rounds && (rounds < min_rounds || attn_bench_now() - start < budget_s)) {
    for (int c = 0; c < ncases; c++) {
      double t0 = attn_bench_now(), c0 = attn_bench_cpu_now();
      if (run(ctx, c)) return -1;
      double cpu = attn_bench_cpu_now() - c0;
      wall[c][rounds] = attn_bench_now() - t0;
      cpu_sum[c] += cpu;
      if (cpu < cpu_min[c]) cpu_min[c] = cpu;
    }
    rounds++;
  }
  for (int c = 0; c < ncases; c++) {
    out[c].wall_med = attn_bench_median(wall[c], rounds);
    out[c].cpu_mean = cpu_sum[c] / rounds;
    out[c].cpu_min = cpu_min[c];
  }
  return rounds;
}
