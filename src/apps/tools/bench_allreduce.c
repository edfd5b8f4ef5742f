/* attn bench allreduce: bandwidth of summing a flat f32 buffer over the
 * processes of mpirun (apps/dist.h), for the classifier's gradient buffer
 * (attn train's default model) and a few sizes. Two ways each:
 *   attn  the trainer's rank-ordered sum (buckets, reduce-scatter by
 *         MPI_Ialltoallv, the fold in rank order, MPI_Iallgatherv): what a
 *         training step pays, the same bits on every rank;
 *   mpi   MPI_Allreduce (MPI_SUM), the library's own algorithm (order not
 *         fixed): the reference for the network.
 * Time: the median of --iters runs, each after a barrier, the slowest rank's
 * (max over ranks). algbw = bytes / time; busbw = algbw * 2 (P - 1) / P,
 * the bytes each link carries in a ring (nccl-tests' convention), comparable
 * across P with the link's speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/tools/bench.h"
#include "apps/classifier/classifier.h"
#include "apps/train/dist_run.h"

static int usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np P attn bench allreduce [--iters N] [--mb X,Y,...]\n"
          "  the classifier's gradient buffer (attn train's default model), then X, Y, ... MB\n"
          "  (default 1,4,16,64); --iters N timed runs per size (default 20; median)\n"
          "  1 process: nothing is exchanged (runs, says so)\n");
  return f == stdout ? 0 : 2;
}

/* The gradient floats of attn train's default classifier (cli_train.c's defaults). */
static int64_t classifier_floats(void) {
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = 8000;
  c.max_len = 512;
  attn_clf m;
  if (attn_clf_create(&m, &c)) return 0;
  int64_t n = m.p.numel;
  attn_clf_free(&m);
  return n;
}

/* Median seconds (the slowest rank's) of iters sums of x[n]; way 0: attn's, 1: MPI_Allreduce. */
static attn_status time_sum(attn_dist *d, float *x, int64_t n, int way, int iters, double *sec) {
  double *t = malloc((size_t)iters * sizeof *t);
  if (!t) return attn_set_error(ATTN_ENOMEM, "bench allreduce: out of memory");
  attn_status st = ATTN_OK;
  for (int k = -1; !st && k < iters; k++) {  // k = -1: warm-up
    st = attn_dist_barrier(d);
    double t0 = attn_bench_now(), loss = 0;
    if (!st && way == 1) st = attn_dist_allreduce_sum(d, x, n);
    if (!st && way == 0) st = attn_dist_step_begin(d, x, n);
    if (!st && way == 0) st = attn_dist_grad_ready(d, 0);
    if (!st && way == 0) st = attn_dist_shard_done(d, 0.0);
    if (!st && way == 0) st = attn_dist_step_end(d, &loss);
    int64_t ns = (int64_t)((attn_bench_now() - t0) * 1e9);  // the slowest rank's
    if (!st) st = attn_dist_max_i64(d, &ns);
    if (k >= 0) t[k] = (double)ns * 1e-9;
    for (int64_t i = 0; i < n; i++) x[i] = 1.0f;  // keep the values finite
  }
  if (!st) *sec = attn_bench_median(t, iters);
  free(t);
  return st;
}

static int bench(attn_dist *d, int iters, const double *mb, int nmb) {
  int P = attn_dist_size(d);
  if (P == 1)
    printf("1 process: nothing to exchange (run it as mpirun -np P attn bench allreduce)\n");
  int64_t sizes[17];
  sizes[0] = classifier_floats();
  for (int i = 0; i < nmb; i++) sizes[i + 1] = (int64_t)(mb[i] * 1e6 / 4);
  printf("%d processes (%s), median of %d; busbw = algbw x 2(P-1)/P\n", P, attn_dist_kind(d), iters);
  printf("%-22s %10s  %12s %12s  %12s %12s\n", "buffer", "MB", "attn ms", "attn busbw",
         "mpi ms", "mpi busbw");
  for (int i = 0; i <= nmb; i++) {
    int64_t n = sizes[i];
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    if (!x) return attn_set_error(ATTN_ENOMEM, "bench allreduce: %lld floats", (long long)n), 1;
    for (int64_t k = 0; k < n; k++) x[k] = 1.0f;
    double s[2] = {0, 0};
    attn_status st = ATTN_OK;
    for (int way = 0; way < 2 && !st; way++) st = time_sum(d, x, n, way, iters, &s[way]);
    free(x);
    if (st) {
      fprintf(stderr, "attn bench allreduce: %s\n", attn_last_error());
      return 1;
    }
    double bytes = 4.0 * (double)n, f = P > 1 ? 2.0 * (P - 1) / P : 1.0;
    printf("%-22s %10.2f  %12.3f %9.2f GB/s %9.3f %9.2f GB/s\n",
           i == 0 ? "classifier gradient" : "flat buffer", bytes / 1e6, 1e3 * s[0],
           s[0] > 0 ? bytes * f / s[0] / 1e9 : 0.0, 1e3 * s[1], s[1] > 0 ? bytes * f / s[1] / 1e9 : 0.0);
    fflush(stdout);
  }
  return 0;
}

int attn_bench_allreduce_main(int argc, char **argv) {
  int iters = 20, nmb = 4;
  double mb[16] = {1, 4, 16, 64};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
    if (!v) return usage(stderr);
    i++;
    char *end = NULL;
    if (!strcmp(a, "--iters")) {
      iters = (int)strtol(v, &end, 10);
      if (*end || iters < 1 || iters > 100000) return usage(stderr);
    } else if (!strcmp(a, "--mb")) {
      nmb = 0;
      for (const char *p = v; *p && nmb < 16; p = *end == ',' ? end + 1 : end) {
        mb[nmb] = strtod(p, &end);
        if (end == p || !(mb[nmb] > 0 && mb[nmb] <= 4096) || (*end && *end != ',')) return usage(stderr);
        nmb++;
      }
    } else {
      return usage(stderr);
    }
  }
  attn_dist *d = NULL;
  if (attn_dist_run_open(&d, 0, "bench allreduce")) return 1;
  return attn_dist_run_close(d, bench(d, iters, mb, nmb), "bench allreduce");
}
