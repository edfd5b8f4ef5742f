/* `attn bench gemm`: f32 GEMM timings per shape — median of several runs,
 * GFLOP/s, % of the FMA peak measured in the same run, and the speed-up over
 * the reference triple loop for small shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/tools/bench.h"
#include "attn.h"
#include "kernels/gemm/gemm_internal.h"

enum { MAX_SHAPES = 64 };

typedef struct {
  long long M, N, K;
  int ta, tb;
} gemm_shape;

typedef struct {
  gemm_shape s;
  double median_s, gflops, pct_peak, ref_speedup; /* ref_speedup 0: not measured */
  double pct_cpu_peak; /* cpu_gflops as % of the peak measured the same way */
  double best_gflops; /* from the fastest run: less sensitive to a busy machine */
  double cpu_gflops;  /* per CPU second x threads (fastest run): what the cores did while
                         they ran, i.e. without the time other processes took */
  int runs;
} gemm_result;

/* Reference timed only below this many multiply-adds (it runs ~1 GFLOP/s). */
static const double REF_MAX_WORK = 64.0 * 1024 * 1024;

static void gemm_usage(FILE *out) {
  fprintf(out,
          "usage: attn bench gemm [--n N...] [--shape M,N,K[,TRANS]]... [--transformer BL]\n"
          "                       [--threads T] [--trans NN|NT|TN|TT]\n"
          "                       [--path auto|packed|generic|small] [--json FILE]\n"
          "  --n N...         square sizes (default 256 512 1024 2048)\n"
          "  --shape M,N,K    any shape; TRANS as for --trans (default: --trans)\n"
          "  --transformer BL the Linear shapes of a 512/2048 Transformer with BL rows:\n"
          "                   forward x·Wᵀ (NT), backward dX = dY·W (NN), dW = dYᵀ·X (TN)\n"
          "  --layer BL       all 12 Linear products of one training step of\n"
          "                   TransformerEncoderLayer(512, 8, 2048) on BL rows (q, k, v\n"
          "                   counted as one 1536-wide product), and their total time\n"
          "  --threads T      threads for GEMM and peak (default: all)\n"
          "  --trans          transposes (A then B) for --n shapes (default NN)\n"
          "  --path P         packed: the ISA level's micro-kernel (ATTN_CPU picks the level);\n"
          "                   generic: the portable one; small: unpacked; auto: as attn_gemm_f32\n"
          "  --json FILE      also write the results as JSON\n");
}

static int parse_trans(const char *s, int *ta, int *tb) {
  if (strlen(s) != 2) return 0;
  if ((s[0] != 'N' && s[0] != 'T') || (s[1] != 'N' && s[1] != 'T')) return 0;
  *ta = s[0] == 'T';
  *tb = s[1] == 'T';
  return 1;
}

static int parse_pos(const char *s, long long *v) {
  char *end;
  long long x = strtoll(s, &end, 10);
  if (end == s || *end || x <= 0 || x > (1LL << 20)) return 0;
  *v = x;
  return 1;
}

static int parse_path(const char *s, attn_gemm_path *p) {
  static const char *names[] = {"auto", "small", "generic", "packed"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, names[i])) {
      *p = (attn_gemm_path)i;
      return 1;
    }
  return 0;
}

static void fill(float *x, size_t n, unsigned seed) {
  unsigned s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Times one shape; returns 0 on success, 1 on failure (message printed). */
static int run_shape(gemm_shape s, attn_gemm_path path, int threads, double peak,
                     gemm_result *r) {
  long long lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
  size_t na = (size_t)(s.M * s.K), nb = (size_t)(s.K * s.N), nc = (size_t)(s.M * s.N);
  float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb);
  float *C = malloc(sizeof(float) * nc);
  if (!A || !B || !C) {
    free(A), free(B), free(C);
    fprintf(stderr, "attn bench gemm: out of memory for %lldx%lldx%lld\n", s.M, s.N, s.K);
    return 1;
  }
  fill(A, na, 1), fill(B, nb, 2), fill(C, nc, 3);
  double work = (double)s.M * (double)s.N * (double)s.K;
  attn_set_num_threads(threads);
  double t0 = attn_bench_now();
  attn_status st = attn_gemm_f32_path(path, s.ta, s.tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb,
                                      0.0f, C, s.N); /* warm-up */
  double first = attn_bench_now() - t0;
  if (st != ATTN_OK) {
    free(A), free(B), free(C);
    fprintf(stderr, "attn bench gemm: %s\n", attn_last_error());
    return 1;
  }
  /* ~0.3 s of runs, at least 3, at most 25 */
  int runs = first > 0 ? (int)(0.3 / first) : 25;
  runs = runs < 3 ? 3 : runs > 25 ? 25 : runs;
  double times[25], cpu_best = 1e30;
  for (int i = 0; i < runs; i++) {
    double c0 = cpu_now();
    t0 = attn_bench_now();
    attn_gemm_f32_path(path, s.ta, s.tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb, 0.0f, C, s.N);
    times[i] = attn_bench_now() - t0;
    double c = cpu_now() - c0;
    if (c < cpu_best) cpu_best = c;
  }
  r->s = s;
  r->runs = runs;
  r->median_s = attn_bench_median(times, runs); /* sorts times */
  r->best_gflops = 2.0 * work / times[0] * 1e-9;
  r->cpu_gflops = 2.0 * work / (cpu_best / threads) * 1e-9;
  r->pct_cpu_peak = 100.0 * r->cpu_gflops / attn_bench_peak_cpu_gflops(threads);
  r->gflops = 2.0 * work / r->median_s * 1e-9;
  r->pct_peak = 100.0 * r->gflops / peak;
  r->ref_speedup = 0;
  if (work <= REF_MAX_WORK) {
    int rr = work < 1e6 ? 5 : 1;
    double rt[5];
    for (int i = 0; i < rr; i++) {
      t0 = attn_bench_now();
      attn_gemm_f32_ref(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb, 0.0f, C, s.N);
      rt[i] = attn_bench_now() - t0;
    }
    r->ref_speedup = attn_bench_median(rt, rr) / r->median_s;
  }
  free(A), free(B), free(C);
  return 0;
}

static const char *trans_name(int ta, int tb) {
  return ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN");
}

static int write_json(const char *file, const gemm_result *r, int n, int threads, double peak,
                      const char *path) {
  FILE *f = fopen(file, "w");
  if (!f) {
    perror(file);
    return 1;
  }
  fprintf(f, "{\"bench\": \"gemm\", \"threads\": %d, \"path\": \"%s\", \"peak_gflops\": %.2f,"
             " \"peak_cpu_gflops\": %.2f, \"peak_isa\": \"%s\", \"results\": [\n",
          threads, path, peak, attn_bench_peak_cpu_gflops(threads), attn_bench_peak_isa());
  for (int i = 0; i < n; i++)
    fprintf(f,
            "  {\"trans\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"runs\": %d, "
            "\"median_ms\": %.4f, \"gflops\": %.2f, \"pct_peak\": %.1f, \"best_gflops\": %.2f, "
            "\"cpu_gflops\": %.2f, \"pct_cpu_peak\": %.1f, \"ref_speedup\": %.2f}%s\n",
            trans_name(r[i].s.ta, r[i].s.tb), r[i].s.M, r[i].s.N, r[i].s.K, r[i].runs,
            1e3 * r[i].median_s, r[i].gflops, r[i].pct_peak, r[i].best_gflops, r[i].cpu_gflops,
            r[i].pct_cpu_peak, r[i].ref_speedup,
            i + 1 < n ? "," : "");
  fprintf(f, "]}\n");
  return fclose(f) ? 1 : 0;
}

int attn_bench_gemm_main(int argc, char **argv) {
  gemm_shape shapes[MAX_SHAPES];
  int nshapes = 0, ta = 0, tb = 0, threads = attn_get_num_threads();
  long long sq[MAX_SHAPES];
  int nsq = 0;
  const char *json = NULL, *path_name = "auto";
  int layer_total = 0; /* --layer: print the sum over the shapes */
  attn_gemm_path path = ATTN_GEMM_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      gemm_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--n")) {
      int got = 0;
      while (i + 1 < argc && argv[i + 1][0] != '-' && nsq < MAX_SHAPES) {
        if (!parse_pos(argv[++i], &sq[nsq])) goto bad;
        nsq++, got++;
      }
      if (!got) goto bad;
    } else if (!strcmp(a, "--shape") && i + 1 < argc && nshapes < MAX_SHAPES) {
      gemm_shape s = {0, 0, 0, -1, -1};
      char tr[3] = "";
      int k = sscanf(argv[++i], "%lld,%lld,%lld,%2s", &s.M, &s.N, &s.K, tr);
      if (k < 3 || s.M <= 0 || s.N <= 0 || s.K <= 0) goto bad;
      if (k == 4 && !parse_trans(tr, &s.ta, &s.tb)) goto bad;
      shapes[nshapes++] = s; /* ta = -1: take --trans */
    } else if (!strcmp(a, "--transformer") && i + 1 < argc && nshapes + 4 <= MAX_SHAPES) {
      long long bl;
      if (!parse_pos(argv[++i], &bl)) goto bad;
      shapes[nshapes++] = (gemm_shape){bl, 2048, 512, 0, 1};  /* h = x·W1ᵀ, W1 [2048,512] */
      shapes[nshapes++] = (gemm_shape){bl, 512, 2048, 0, 1};  /* y = h·W2ᵀ, W2 [512,2048] */
      shapes[nshapes++] = (gemm_shape){bl, 512, 2048, 0, 0};  /* dx = dh·W1 */
      shapes[nshapes++] = (gemm_shape){2048, 512, bl, 1, 0};  /* dW1 = dhᵀ·x */
    } else if (!strcmp(a, "--layer") && i + 1 < argc && nshapes + 12 <= MAX_SHAPES) {
      long long bl;
      if (!parse_pos(argv[++i], &bl)) goto bad;
      /* in, out of the q|k|v, out, FFN1, FFN2 Linears */
      static const long long io[4][2] = {{512, 1536}, {512, 512}, {512, 2048}, {2048, 512}};
      for (int l = 0; l < 4; l++) shapes[nshapes++] = (gemm_shape){bl, io[l][1], io[l][0], 0, 1};
      for (int l = 0; l < 4; l++) shapes[nshapes++] = (gemm_shape){bl, io[l][0], io[l][1], 0, 0};
      for (int l = 0; l < 4; l++) shapes[nshapes++] = (gemm_shape){io[l][1], io[l][0], bl, 1, 0};
      layer_total = 1;
    } else if (!strcmp(a, "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1 || threads > 256) goto bad;
    } else if (!strcmp(a, "--trans") && i + 1 < argc) {
      if (!parse_trans(argv[++i], &ta, &tb)) goto bad;
    } else if (!strcmp(a, "--path") && i + 1 < argc) {
      path_name = argv[++i];
      if (!parse_path(path_name, &path)) goto bad;
    } else if (!strcmp(a, "--json") && i + 1 < argc) {
      json = argv[++i];
    } else {
      goto bad;
    }
  }
  for (int i = 0; i < nshapes; i++)
    if (shapes[i].ta < 0) shapes[i].ta = ta, shapes[i].tb = tb;
  if (!nsq && !nshapes) {
    static const long long def[] = {256, 512, 1024, 2048};
    for (int i = 0; i < 4; i++) sq[nsq++] = def[i];
  }
  /* square sizes first, then the explicit shapes */
  gemm_shape all[2 * MAX_SHAPES];
  int n = 0;
  for (int i = 0; i < nsq; i++) all[n++] = (gemm_shape){sq[i], sq[i], sq[i], ta, tb};
  for (int i = 0; i < nshapes; i++) all[n++] = shapes[i];

  int saved = attn_get_num_threads();
  double peak = attn_bench_peak_gflops(threads);
  char cpu[256];
  attn_bench_cpu_name(cpu, sizeof cpu);
  printf("CPU: %s\n", cpu);
  printf("level %s (%s)\n", attn_isa_name(attn_isa_active()), attn_isa_reason());
  printf("f32 GEMM, path %s, %d thread%s; fp32 FMA peak (%s) measured now: %.1f GFLOP/s "
         "(per CPU-second x threads: %.1f)\n",
         path_name, threads, threads > 1 ? "s" : "", attn_bench_peak_isa(), peak,
         attn_bench_peak_cpu_gflops(threads));
  printf("GFLOP/s from the median run; best_GF/s from the fastest; cpu_GF/s per CPU-second x\n"
         "threads (fastest run), %%cpu of the peak measured that way: on a busy machine the\n"
         "last two show what the kernel does while it runs\n");
  printf("%-5s %6s %6s %6s %5s %10s %9s %6s %9s %8s %5s %8s\n", "trans", "M", "N", "K", "runs",
         "median_ms", "GFLOP/s", "%peak", "best_GF/s", "cpu_GF/s", "%cpu", "vs_ref");
  gemm_result res[2 * MAX_SHAPES];
  int rc = 0;
  for (int i = 0; i < n; i++) {
    if (run_shape(all[i], path, threads, peak, &res[i])) {
      rc = 1;
      n = i;
      break;
    }
    gemm_result *r = &res[i];
    char vs[32] = "-";
    if (r->ref_speedup > 0) snprintf(vs, sizeof vs, "x%.1f", r->ref_speedup);
    printf("%-5s %6lld %6lld %6lld %5d %10.3f %9.1f %6.1f %9.1f %8.1f %5.1f %8s\n",
           trans_name(r->s.ta, r->s.tb), r->s.M, r->s.N, r->s.K, r->runs, 1e3 * r->median_s,
           r->gflops, r->pct_peak, r->best_gflops, r->cpu_gflops, r->pct_cpu_peak, vs);
    fflush(stdout);
  }
  if (layer_total && !rc) {
    double ms = 0, cpu_s = 0, work = 0;
    for (int i = 0; i < n; i++) {
      double w = 2.0 * (double)res[i].s.M * (double)res[i].s.N * (double)res[i].s.K;
      work += w;
      ms += 1e3 * res[i].median_s;
      cpu_s += w * 1e-9 / res[i].cpu_gflops;
    }
    printf("total %.2f GFLOP: %.2f ms (sum of medians, %.1f GFLOP/s); per CPU-second x "
           "threads %.1f GFLOP/s, %.1f%% of peak\n",
           work * 1e-9, ms, work * 1e-6 / ms, work * 1e-9 / cpu_s,
           100.0 * work * 1e-9 / cpu_s / attn_bench_peak_cpu_gflops(threads));
  }
  attn_set_num_threads(saved);
  if (json && write_json(json, res, n, threads, peak, path_name)) rc = 1;
  return rc;
bad:
  gemm_usage(stderr);
  return 2;
}
