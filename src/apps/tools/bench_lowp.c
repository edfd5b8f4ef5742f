/* `attn bench lowp`: low-precision peaks and GEMMs.
 *   peaks: register-resident loops per precision — f32 FMA (bench_peak.c),
 *   bf16 VDPBF16PS and int8 VPDPBUSD on 16 independent zmm accumulators, and
 *   AMX TDPBF16PS / TDPBUSD on four resident accumulator tiles (no loads);
 *   GEMM: square n x n x n per dtype and path — median time, GFLOP/s (GOP/s
 *   for int8) and % of that precision's measured peak, speed-up over f32;
 *   Linear: the int8 quantized Linear (quantize x + u8s8 GEMM + dequant) and
 *   the bf16 Linear against the f32 Linear, y [rows, out] = x · Wᵀ + b. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/tools/bench.h"
#include "attn.h"
#include "kernels/arch/amx/amx.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum { CHAINS = 16 };
static volatile float sink_f;
static volatile int sink_i;

/* Each loop runs `iters` steps and returns ops done (multiply-adds x 2). */
#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static double loop_bf16_avx512(long iters) {
  __m512 acc[CHAINS];
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3a80), b = (__m512bh)_mm512_set1_epi16(0x3a80);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  for (int i = 1; i < CHAINS; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  sink_f = _mm512_reduce_add_ps(acc[0]);
  return 2.0 * 32 * CHAINS * (double)iters; /* 16 lanes x 2 pairs */
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double loop_vnni_avx512(long iters) {
  __m512i acc[CHAINS];
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_epi32(i);
  for (long it = 0; it < iters; it++) {
#pragma GCC unroll 16
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  for (int i = 1; i < CHAINS; i++) acc[0] = _mm512_add_epi32(acc[0], acc[i]);
  sink_i = _mm512_reduce_add_epi32(acc[0]);
  return 2.0 * 64 * CHAINS * (double)iters; /* 16 lanes x 4 */
}

static uint8_t tile_src[16 * 64] __attribute__((aligned(64)));
static float tile_dst[16 * 16] __attribute__((aligned(64)));

__attribute__((target("amx-tile,amx-bf16"))) static double loop_amx_bf16(long iters) {
  attn_amx_config_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, tile_src, 64);
  _tile_loadd(5, tile_src, 64);
  _tile_loadd(6, tile_src, 64);
  _tile_loadd(7, tile_src, 64);
  for (long it = 0; it < iters; it++) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, tile_dst, 64);
  attn_amx_release_tiles();
  return 2.0 * 16 * 16 * 32 * 4 * (double)iters;
}

__attribute__((target("amx-tile,amx-int8"))) static double loop_amx_i8(long iters) {
  attn_amx_config_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, tile_src, 64);
  _tile_loadd(5, tile_src, 64);
  _tile_loadd(6, tile_src, 64);
  _tile_loadd(7, tile_src, 64);
  for (long it = 0; it < iters; it++) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  _tile_stored(0, tile_dst, 64);
  attn_amx_release_tiles();
  return 2.0 * 16 * 16 * 64 * 4 * (double)iters;
}
#endif

typedef enum { PK_BF16, PK_VNNI, PK_AMX_BF16, PK_AMX_I8, PK_COUNT } peak_kind;
static const char *PK_NAME[PK_COUNT] = {"bf16 avx512_bf16", "int8 avx512_vnni", "bf16 amx",
                                        "int8 amx"};

static int peak_available(peak_kind k) {
#if defined(__x86_64__)
  const attn_cpu_features *f = attn_cpu();
  switch (k) {
  case PK_BF16:
    return f->avx512_bf16 && f->avx512bw;
  case PK_VNNI:
    return f->avx512_vnni && f->avx512bw;
  case PK_AMX_BF16:
    return f->amx_bf16 && attn_amx_ready();
  case PK_AMX_I8:
    return f->amx_int8 && attn_amx_ready();
  default:
    return 0;
  }
#else
  (void)k;
  return 0;
#endif
}

static double run_loop(peak_kind k, long iters) {
#if defined(__x86_64__)
  switch (k) {
  case PK_BF16: return loop_bf16_avx512(iters);
  case PK_VNNI: return loop_vnni_avx512(iters);
  case PK_AMX_BF16:
    return loop_amx_bf16(iters);
  case PK_AMX_I8:
    return loop_amx_i8(iters);
  default:
    break;
  }
#endif
  (void)k, (void)iters;
  return 0;
}

/* GOP/s of `threads` threads each running the loop: ~10 ms runs
 * (calibrated on one thread), best of 7. 0 when not available. */
static double peak_gops(peak_kind k, int threads) {
  static double cache[PK_COUNT][65];
  if (!peak_available(k)) return 0;
  if (threads > 64) threads = 64;
  if (cache[k][threads] > 0) return cache[k][threads];
  long n = 1 << 10;
  double t;
  for (;;) {
    double t0 = attn_bench_now();
    run_loop(k, n);
    t = attn_bench_now() - t0;
    if (t >= 0.002) break;
    n *= 4;
  }
  long iters = (long)((double)n * 0.01 / t) + 1;
  double best = 0;
  for (int r = 0; r < 7; r++) {
    double ops = 0, t0 = attn_bench_now();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : ops)
#endif
    ops += run_loop(k, iters);
    double g = ops / (attn_bench_now() - t0) * 1e-9;
    best = g > best ? g : best;
  }
  return cache[k][threads] = best;
}

double attn_bench_amx_bf16_peak_gflops(int threads) { return peak_gops(PK_AMX_BF16, threads); }
double attn_bench_avx512_bf16_peak_gflops(int threads) { return peak_gops(PK_BF16, threads); }

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

/* Process CPU seconds of the cheapest run in the last time_median call: on
 * a loaded machine wall time includes waiting for a core, CPU time does not
 * (divided by the threads, it estimates the time on an idle machine). */
static double last_cpu_best;

/* Median seconds of `runs` calls of fn(ctx) after one warm-up. */
typedef int (*bench_fn)(void *ctx);
static double time_median(bench_fn fn, void *ctx, int *ok) {
  double t0 = attn_bench_now();
  *ok = fn(ctx) == 0;
  double first = attn_bench_now() - t0;
  int runs = first > 0 ? (int)(0.4 / first) : 15;
  runs = runs < 3 ? 3 : runs > 15 ? 15 : runs;
  double t[15];
  last_cpu_best = 1e30;
  for (int i = 0; i < runs && *ok; i++) {
    double c0 = cpu_now();
    t0 = attn_bench_now();
    *ok = fn(ctx) == 0;
    t[i] = attn_bench_now() - t0;
    double c = cpu_now() - c0;
    last_cpu_best = c < last_cpu_best ? c : last_cpu_best;
  }
  return attn_bench_median(t, runs);
}

typedef struct {
  const char *kind; /* f32, bf16, bf16_f32in, f16, i8 */
  attn_lowp_path path;
  int64_t M, N, K;
  float *A, *B, *C;
  uint16_t *Ah, *Bh;
  uint8_t *Au;
  int8_t *Bs;
  int32_t *Ci;
} gemm_ctx;

static int gemm_once(void *p) {
  gemm_ctx *g = p;
  attn_status st;
  if (!strcmp(g->kind, "f32"))
    st = attn_gemm_f32(0, 0, g->M, g->N, g->K, 1, g->A, g->K, g->B, g->N, 0, g->C, g->N);
  else if (!strcmp(g->kind, "bf16"))
    st = attn_gemm_bf16_path(g->path, 0, 0, g->M, g->N, g->K, 1, g->Ah, g->K, g->Bh, g->N, 0,
                             g->C, g->N);
  else if (!strcmp(g->kind, "bf16_f32in"))
    st = attn_gemm_bf16_f32in_path(g->path, 0, 0, g->M, g->N, g->K, 1, g->A, g->K, g->B, g->N,
                                   0, g->C, g->N);
  else if (!strcmp(g->kind, "f16"))
    st = attn_gemm_f16_path(g->path, 0, 0, g->M, g->N, g->K, 1, g->Ah, g->K, g->Bh, g->N, 0,
                            g->C, g->N);
  else
    st = attn_gemm_u8s8s32_path(g->path, 0, 0, g->M, g->N, g->K, g->Au, g->K, g->Bs, g->N,
                                g->Ci, g->N);
  if (st != ATTN_OK) fprintf(stderr, "attn bench lowp: %s\n", attn_last_error());
  return st != ATTN_OK;
}

/* The peak a GEMM of `kind` on `path` is measured against. */
static double peak_for(const char *kind, attn_lowp_path path, int threads) {
  const char *name = attn_lowp_path_name(path, !strcmp(kind, "i8") ? "i8" : "bf16");
  /* f32 FMA on widened operands, and the avx2 level's int8 (VPMADDWD: 16
   * multiply-adds per instruction, as many as an 8-wide FMA) */
  if (!strcmp(kind, "f32") || !strcmp(kind, "f16") || path == ATTN_LOWP_PORTABLE ||
      strstr(name, "f32fma") || !strncmp(name, "avx2", 4))
    return attn_bench_peak_gflops(threads);
  int amx = !strcmp(name, "amx");
  if (!strcmp(kind, "i8")) return peak_gops(amx ? PK_AMX_I8 : PK_VNNI, threads);
  return peak_gops(amx ? PK_AMX_BF16 : PK_BF16, threads);
}

static int bench_gemms(const long long *ns, int nn, int threads) {
  printf("\nGEMM C = A·B (NN), %d thread(s); %% of the peak of the path's precision\n", threads);
  printf("%-6s %-11s %-14s %10s %10s %8s %8s %11s\n", "n", "dtype", "path", "median ms",
         "GFLOP/s", "% peak", "vs f32", "cpu GFLOP/s");
  static const char *kinds[] = {"f32", "bf16", "bf16_f32in", "f16", "i8"};
  /* F32: bf16 widened to f32 (AUTO's where the bf16 dot product is slow),
   * shown where the level also has a bf16 dot product */
  static const attn_lowp_path paths[] = {ATTN_LOWP_AMX, ATTN_LOWP_SIMD, ATTN_LOWP_F32};
  const int bf16dot = strcmp(attn_lowp_path_name(ATTN_LOWP_SIMD, "bf16"),
                             attn_lowp_path_name(ATTN_LOWP_F32, "bf16")) != 0;
  int rc = 0;
  for (int s = 0; s < nn; s++) {
    int64_t n = ns[s];
    size_t e = (size_t)(n * n);
    gemm_ctx g = {"f32", ATTN_LOWP_AUTO, n, n, n, malloc(4 * e), malloc(4 * e), malloc(4 * e),
                  malloc(2 * e), malloc(2 * e), malloc(e), malloc(e), malloc(4 * e)};
    if (!g.A || !g.B || !g.C || !g.Ah || !g.Bh || !g.Au || !g.Bs || !g.Ci) {
      fprintf(stderr, "attn bench lowp: out of memory for n=%lld\n", (long long)n);
      rc = 1;
      goto next;
    }
    fill(g.A, e, 1), fill(g.B, e, 2);
    attn_f32_to_bf16_n(g.A, g.Ah, (int64_t)e);
    attn_f32_to_bf16_n(g.B, g.Bh, (int64_t)e);
    for (size_t i = 0; i < e; i++) g.Au[i] = (uint8_t)(i * 37 + 11), g.Bs[i] = (int8_t)(i * 13);
    double f32_s = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
      for (int p = 0; p < 3; p++) {
        const char *dt = !strcmp(kinds[k], "i8") ? "i8" : !strcmp(kinds[k], "f16") ? "f16" : "bf16";
        if (!strcmp(kinds[k], "f32") && p) continue;
        if (paths[p] == ATTN_LOWP_F32 && (strcmp(dt, "bf16") || !bf16dot)) continue;
        if (strcmp(kinds[k], "f32") && !attn_lowp_path_available(paths[p], dt)) continue;
        g.kind = kinds[k];
        g.path = paths[p];
        int ok;
        double t = time_median(gemm_once, &g, &ok);
        if (!ok) {
          rc = 1;
          continue;
        }
        if (!strcmp(kinds[k], "f32")) f32_s = t;
        double gf = 2.0 * (double)n * (double)n * (double)n / t * 1e-9;
        double cgf = 2.0 * (double)n * (double)n * (double)n / (last_cpu_best / threads) * 1e-9;
        double peak = peak_for(kinds[k], paths[p], threads);
        printf("%-6lld %-11s %-14s %10.2f %10.1f %7.1f%% %7.2fx %11.1f\n", (long long)n, kinds[k],
               !strcmp(kinds[k], "f32") ? attn_isa_name(attn_isa_active())
                                        : attn_lowp_path_name(paths[p], dt),
               1e3 * t, gf, peak > 0 ? 100 * gf / peak : 0, f32_s / t, cgf);
      }
    }
  next:
    free(g.A), free(g.B), free(g.C), free(g.Ah), free(g.Bh), free(g.Au), free(g.Bs), free(g.Ci);
  }
  return rc;
}

typedef struct {
  int kind; /* 0 f32 Linear, 1 int8 quantized, 2 bf16 */
  attn_lowp_path path;
  int64_t rows, in, out;
  const float *x, *W, *b;
  float *y;
  const attn_qlinear *q;
} linear_ctx;

static int linear_once(void *p) {
  linear_ctx *l = p;
  attn_status st;
  if (l->kind == 0) {
    st = attn_dense_forward_f32(l->x, l->W, l->b, l->y, l->rows, l->in, l->out);
  } else if (l->kind == 1) {
    st = attn_qlinear_forward_path(l->path, l->q, l->x, l->rows, l->y);
  } else {
    for (int64_t r = 0; r < l->rows; r++) memcpy(l->y + r * l->out, l->b, 4 * (size_t)l->out);
    st = attn_gemm_bf16_f32in(0, 1, l->rows, l->out, l->in, 1, l->x, l->in, l->W, l->in, 1, l->y,
                              l->out);
  }
  if (st != ATTN_OK) fprintf(stderr, "attn bench lowp: %s\n", attn_last_error());
  return st != ATTN_OK;
}

static int bench_linear(int64_t rows, int64_t in, int64_t out, int threads) {
  printf("\nLinear y[%lld,%lld] = x[%lld,%lld]·Wᵀ + b, %d thread(s)\n", (long long)rows,
         (long long)out, (long long)rows, (long long)in, threads);
  float *x = malloc(sizeof(float) * (size_t)(rows * in)), *W = malloc(sizeof(float) * (size_t)(out * in));
  float *b = malloc(sizeof(float) * (size_t)out), *y = malloc(sizeof(float) * (size_t)(rows * out));
  attn_qlinear q;
  memset(&q, 0, sizeof q);
  int rc = 1;
  if (!x || !W || !b || !y) goto done;
  fill(x, (size_t)(rows * in), 4), fill(W, (size_t)(out * in), 5), fill(b, (size_t)out, 6);
  if (attn_qlinear_quantize(&q, W, b, out, in) != ATTN_OK) goto done;
  linear_ctx l = {0, ATTN_LOWP_AUTO, rows, in, out, x, W, b, y, &q};
  int ok;
  double f32 = time_median(linear_once, &l, &ok);
  if (!ok) goto done;
  double work = 2.0 * (double)rows * (double)in * (double)out;
  double f32_cpu = last_cpu_best;
  printf("%-26s %10s %10s %8s %11s %8s\n", "", "median ms", "GOP/s", "vs f32", "cpu GOP/s",
         "cpu vs");
  printf("%-26s %10.2f %10.1f %7.2fx %11.1f %7.2fx\n", "f32 Linear", 1e3 * f32, work / f32 * 1e-9,
         1.0, work / (f32_cpu / threads) * 1e-9, 1.0);
  static const attn_lowp_path paths[] = {ATTN_LOWP_AMX, ATTN_LOWP_SIMD};
  for (int p = 0; p < 2; p++) {
    if (!attn_lowp_path_available(paths[p], "i8")) continue;
    l.kind = 1, l.path = paths[p];
    double t = time_median(linear_once, &l, &ok);
    if (!ok) goto done;
    char name[64];
    snprintf(name, sizeof name, "int8 quantized (%s)", attn_lowp_path_name(paths[p], "i8"));
    printf("%-26s %10.2f %10.1f %7.2fx %11.1f %7.2fx\n", name, 1e3 * t, work / t * 1e-9, f32 / t,
           work / (last_cpu_best / threads) * 1e-9, f32_cpu / last_cpu_best);
  }
  l.kind = 2;
  double t = time_median(linear_once, &l, &ok);
  if (!ok) goto done;
  char name[64];
  snprintf(name, sizeof name, "bf16 from f32 (%s)", attn_lowp_path_name(ATTN_LOWP_AUTO, "bf16"));
  printf("%-26s %10.2f %10.1f %7.2fx %11.1f %7.2fx\n", name, 1e3 * t, work / t * 1e-9, f32 / t,
         work / (last_cpu_best / threads) * 1e-9, f32_cpu / last_cpu_best);
  printf("weights: f32 %lld bytes, int8 %lld bytes (%.2fx smaller)\n",
         (long long)(4 * (out * in + out)), (long long)attn_qlinear_bytes(&q),
         (double)(4 * (out * in + out)) / (double)attn_qlinear_bytes(&q));
  rc = 0;
done:
  attn_qlinear_free(&q);
  free(x), free(W), free(b), free(y);
  return rc;
}

static void print_peaks(int threads) {
  printf("peaks (register-resident loops; 1 thread / %d threads):\n", threads);
  printf("  %-18s %9.1f / %9.1f GFLOP/s\n", "fp32 fma", attn_bench_peak_gflops(1),
         attn_bench_peak_gflops(threads));
  for (int k = 0; k < PK_COUNT; k++) {
    if (!peak_available((peak_kind)k)) {
      printf("  %-18s not available\n", PK_NAME[k]);
      continue;
    }
    double p1 = peak_gops((peak_kind)k, 1), pt = peak_gops((peak_kind)k, threads);
    printf("  %-18s %9.1f / %9.1f G%s/s (%.1fx fp32)\n", PK_NAME[k], p1, pt,
           k == PK_VNNI || k == PK_AMX_I8 ? "OP" : "FLOP", pt / attn_bench_peak_gflops(threads));
  }
}

static void lowp_usage(FILE *out) {
  fprintf(out,
          "usage: attn bench lowp [peak|gemm|linear|all] [--n N...] [--threads T]\n"
          "                       [--linear ROWS,IN,OUT]\n"
          "  peak    bf16 / int8 peaks (AVX512_BF16, VNNI, AMX) next to the fp32 FMA peak\n"
          "  gemm    n x n x n GEMM per dtype (f32, bf16, bf16_f32in, f16, i8) and path\n"
          "  linear  int8 quantized and bf16 Linear vs f32 (default 4096,512,2048)\n"
          "  all     the three (default); --n sizes default 1024 2048\n");
}

int attn_bench_lowp_main(int argc, char **argv) {
  int threads = attn_get_num_threads(), what = 0; /* 1 peak, 2 gemm, 4 linear; 0: all */
  long long ns[16] = {1024, 2048};
  int nn = 2;
  long long rows = 4096, in = 512, out = 2048;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      lowp_usage(stdout);
      return 0;
    } else if (!strcmp(a, "peak")) {
      what |= 1;
    } else if (!strcmp(a, "gemm")) {
      what |= 2;
    } else if (!strcmp(a, "linear")) {
      what |= 4;
    } else if (!strcmp(a, "all")) {
      what |= 7;
    } else if (!strcmp(a, "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1 || threads > 64) goto bad;
    } else if (!strcmp(a, "--n")) {
      nn = 0;
      while (i + 1 < argc && argv[i + 1][0] != '-' && nn < 16) {
        long long v = atoll(argv[++i]);
        if (v <= 0 || v > 16384) goto bad;
        ns[nn++] = v;
      }
      if (!nn) goto bad;
    } else if (!strcmp(a, "--linear") && i + 1 < argc) {
      if (sscanf(argv[++i], "%lld,%lld,%lld", &rows, &in, &out) != 3 || rows <= 0 || in <= 0 ||
          out <= 0 || rows * in > (1LL << 28) || in * out > (1LL << 28) || rows * out > (1LL << 28))
        goto bad;
    } else {
      goto bad;
    }
  }
  if (!what) what = 7;
  attn_set_num_threads(threads);
  printf("CPU: avx512_bf16 %d, avx512_fp16 %d, avx512_vnni %d, amx bf16 %d int8 %d (permission %s)\n",
         attn_cpu()->avx512_bf16, attn_cpu()->avx512_fp16, attn_cpu()->avx512_vnni,
         attn_cpu()->amx_bf16, attn_cpu()->amx_int8, attn_amx_ready() ? "granted" : "no");
  int rc = 0;
  if (what & 1) print_peaks(threads);
  if (what & 2) rc |= bench_gemms(ns, nn, threads);
  if (what & 4) rc |= bench_linear(rows, in, out, threads);
  return rc;
bad:
  lowp_usage(stderr);
  return 2;
}
