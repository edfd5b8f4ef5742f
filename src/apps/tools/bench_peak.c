/* `attn bench peak` and attn_bench_peak_gflops: the fp32 FMA throughput of
 * this machine, measured with a register-resident loop of independent FMA
 * chains (enough of them to cover FMA latency x ports). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/tools/bench.h"
#include "attn.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#endif

double attn_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double attn_bench_median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* independent accumulators: >= 2 ports x 4 cycles latency, and all of them
 * (with the two constants) in registers: 16 of AVX-512's 32 zmm, 12 of
 * AVX2's 16 ymm (16 would spill, and the loop would time the spills) */
enum { CHAINS = 16, CHAINS_AVX2 = 12 };

/* Each loop runs `iters` steps of CHAINS independent FMAs acc = acc*m + c
 * (m < 1, so values stay bounded and normal) and returns a sum that the
 * caller keeps, so nothing is optimised away. Flops: iters*CHAINS*lanes*2. */
#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) static float fma_loop_avx512(
    long iters) {
  __m512 acc[CHAINS];
  __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
#pragma GCC unroll 16
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  }
  __m512 s = acc[0];
  for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float fma_loop_avx2(long iters) {
  __m256 acc[CHAINS_AVX2];
  __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
#pragma GCC unroll 12
  for (int i = 0; i < CHAINS_AVX2; i++) acc[i] = _mm256_set1_ps((float)i);
  for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS_AVX2; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  }
  float out[8], sum = 0;
  for (int i = 1; i < CHAINS_AVX2; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  _mm256_storeu_ps(out, acc[0]);
  for (int i = 0; i < 8; i++) sum += out[i];
  return sum;
}
#endif

static float fma_loop_scalar(long iters) {
  float acc[CHAINS];
  for (int i = 0; i < CHAINS; i++) acc[i] = (float)i;
  for (long it = 0; it < iters; it++)
    for (int i = 0; i < CHAINS; i++) acc[i] = acc[i] * 0.999999f + 1e-6f;
  float s = 0;
  for (int i = 0; i < CHAINS; i++) s += acc[i];
  return s;
}

/* lanes of the active ISA level's loop: 16 (AVX-512), 8 (AVX2+FMA), 1 */
static int peak_lanes(void) {
#if defined(__x86_64__)
  attn_isa isa = attn_isa_active();
  if (isa == ATTN_ISA_AVX512) return 16;
  if (isa == ATTN_ISA_AVX2) return 8;
#endif
  return 1;
}

/* accumulators of that loop */
static int peak_chains(void) { return peak_lanes() == 8 ? CHAINS_AVX2 : CHAINS; }

const char *attn_bench_peak_isa(void) {
  int l = peak_lanes();
  return l == 16 ? "avx512" : l == 8 ? "avx2+fma" : "scalar";
}

static float fma_loop(long iters) {
#if defined(__x86_64__)
  int l = peak_lanes();
  if (l == 16) return fma_loop_avx512(iters);
  if (l == 8) return fma_loop_avx2(iters);
#endif
  return fma_loop_scalar(iters);
}

static volatile float peak_sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds for every one of `threads` threads to run `iters` steps; *cpu (if
 * not NULL) gets the CPU seconds the process used meanwhile. */
static double time_loop(int threads, long iters, double *cpu) {
  double c0 = cpu_now();
  double t0 = attn_bench_now();
  float sink = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : sink)
#endif
  sink += fma_loop(iters);
  double t = attn_bench_now() - t0;
  if (cpu) *cpu = cpu_now() - c0;
  peak_sink = sink;
  return t;
}

enum { PEAK_MAX_THREADS = 256 };
/* per ISA level (the loop differs) and thread count */
static double peak_cache[ATTN_ISA_COUNT][PEAK_MAX_THREADS + 1],
    peak_cpu_cache[ATTN_ISA_COUNT][PEAK_MAX_THREADS + 1];

/* the loop's iterations for ~20 ms on one thread at level lv (calibrated
 * once: fastest of 3 tries, so a preempted try cannot shrink the runs) */
static long peak_iters(int lv) {
  static long iters_of[ATTN_ISA_COUNT];
  if (!iters_of[lv]) {
    long n = 1 << 14;
    double t;
    for (;;) {
      t = 1e30;
      for (int r = 0; r < 3; r++) {
        double tr = time_loop(1, n, NULL);
        if (tr < t) t = tr;
      }
      if (t >= 0.002) break;
      n *= 4;
    }
    iters_of[lv] = (long)((double)n * 0.02 / t) + 1;
  }
  return iters_of[lv];
}

/* the loop's flops in iters iterations on each of threads threads */
static double loop_flops(long iters, int threads) {
  return 2.0 * peak_chains() * peak_lanes() * (double)iters * threads;
}

double attn_bench_peak_gflops(int threads) {
  if (threads <= 0) threads = attn_get_num_threads();
  if (threads > PEAK_MAX_THREADS) threads = PEAK_MAX_THREADS;
  const int lv = (int)attn_isa_active();
  if (peak_cache[lv][threads] > 0) return peak_cache[lv][threads];
  /* ~20 ms per run, then best of 10: short runs are more often left alone on
   * a busy machine, and the fastest is the peak */
  const long iters = peak_iters(lv);
  double best = 1e30, best_cpu = 1e30;
  for (int r = 0; r < 10; r++) {
    double cpu, tr = time_loop(threads, iters, &cpu);
    if (tr < best) best = tr;
    if (cpu < best_cpu) best_cpu = cpu;
  }
  const double flops = loop_flops(iters, threads);
  peak_cache[lv][threads] = flops / best * 1e-9;
  peak_cpu_cache[lv][threads] = flops / (best_cpu / threads) * 1e-9;
  return peak_cache[lv][threads];
}

double attn_bench_peak_now_gflops(int threads) {
  if (threads <= 0) threads = attn_get_num_threads();
  if (threads > PEAK_MAX_THREADS) threads = PEAK_MAX_THREADS;
  const long iters = peak_iters((int)attn_isa_active()) / 4 + 1;
  return loop_flops(iters, threads) / time_loop(threads, iters, NULL) * 1e-9;
}

double attn_bench_peak_cpu_gflops(int threads) {
  if (threads <= 0) threads = attn_get_num_threads();
  if (threads > PEAK_MAX_THREADS) threads = PEAK_MAX_THREADS;
  attn_bench_peak_gflops(threads);
  return peak_cpu_cache[attn_isa_active()][threads];
}

static void peak_usage(FILE *out) {
  fprintf(out,
          "usage: attn bench peak [--threads T]\n"
          "  fp32 FMA peak (GFLOP/s) with 1 thread and with all threads (or T), for the\n"
          "  active ISA level, then the other levels' vector loops (AVX2's 8-lane FMA\n"
          "  peak is the target of the avx2 kernels even on an AVX-512 CPU)\n");
}

int attn_bench_peak_main(int argc, char **argv) {
  int threads = attn_get_num_threads();
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1 || threads > PEAK_MAX_THREADS) {
        fprintf(stderr, "attn bench peak: --threads must be in 1..%d\n", PEAK_MAX_THREADS);
        return 2;
      }
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      peak_usage(stdout);
      return 0;
    } else {
      peak_usage(stderr);
      return 2;
    }
  }
  char cpu[256];
  attn_bench_cpu_name(cpu, sizeof cpu);
  printf("CPU: %s\n", cpu);
  double p1 = attn_bench_peak_gflops(1);
  printf("fp32 FMA peak (%s, %d accumulators): 1 thread %.1f GFLOP/s", attn_bench_peak_isa(),
         peak_chains(), p1);
  if (threads > 1)
    printf(", %d threads %.1f GFLOP/s", threads, attn_bench_peak_gflops(threads));
  printf("\n  per CPU-second x threads (the same without time taken by other processes):"
         " 1 thread %.1f",
         attn_bench_peak_cpu_gflops(1));
  if (threads > 1) printf(", %d threads %.1f", threads, attn_bench_peak_cpu_gflops(threads));
  printf("\n");
  /* the other vector levels of this machine, measured in the same run */
  attn_isa active = attn_isa_active();
  for (int i = 0; i < ATTN_ISA_COUNT; i++) {
    if (i == (int)active || i == ATTN_ISA_GENERIC || attn_set_isa((attn_isa)i) != ATTN_OK) continue;
    printf("  level %s (%s): 1 thread %.1f GFLOP/s", attn_isa_name((attn_isa)i),
           attn_bench_peak_isa(), attn_bench_peak_gflops(1));
    if (threads > 1) printf(", %d threads %.1f GFLOP/s", threads, attn_bench_peak_gflops(threads));
    printf("\n");
  }
  attn_set_isa(active);
  return 0;
}
