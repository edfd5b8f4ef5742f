/* `attn bench membw` and attn_bench_membw_gbs: the memory read bandwidth of
 * this machine, STREAM-style: a buffer much larger than the caches, split
 * in equal slices over the threads, each summing its slice with independent
 * vector accumulators (AVX-512, AVX2, NEON or plain C); bytes read over the
 * wall time of the slowest thread, best of several runs. The ceiling of
 * decode attention, which reads its whole KV cache once per token
 * (`attn bench decode`). Also the CPU's name for the benches' headers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#include "apps/tools/bench.h"
#include "attn.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

/* the value of a /proc/cpuinfo line whose key (before the tabs and ':') is
 * key, or NULL */
static const char *cpuinfo_value(const char *line, const char *key) {
  const size_t k = strlen(key);
  if (strncmp(line, key, k)) return NULL;
  const char *c = line + k;
  while (*c == ' ' || *c == '\t')
    c++;
  if (*c != ':') return NULL;
  c++;
  while (*c == ' ' || *c == '\t')
    c++;
  return c;
}

/* The CPU's name, its family and model (x86) or implementer and part (arm64)
 * where /proc/cpuinfo gives them (a name such as "Intel(R) Xeon(R)
 * Processor" does not tell the generations apart), and the logical CPUs. */
void attn_bench_cpu_name(char *buf, size_t n) {
  snprintf(buf, n, "unknown CPU");
  char name[256] = "", fam[32] = "", model[32] = "", impl[32] = "", part[32] = "";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    /* the first processor's lines (x86: "model name"; arm64: "Model" where the kernel
     * gives it, and "CPU implementer", "CPU part") */
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\n")] = '\0';
      const char *v;
      if (!name[0] &&
          ((v = cpuinfo_value(line, "model name")) || (v = cpuinfo_value(line, "Model"))))
        snprintf(name, sizeof name, "%s", v);
      else if (!fam[0] && (v = cpuinfo_value(line, "cpu family")))
        snprintf(fam, sizeof fam, "%s", v);
      else if (!model[0] && (v = cpuinfo_value(line, "model")))
        snprintf(model, sizeof model, "%s", v);
      else if (!impl[0] && (v = cpuinfo_value(line, "CPU implementer")))
        snprintf(impl, sizeof impl, "%s", v);
      else if (!part[0] && (v = cpuinfo_value(line, "CPU part")))
        snprintf(part, sizeof part, "%s", v);
    }
    fclose(f);
  }
  if (name[0]) snprintf(buf, n, "%s", name);
  size_t l = strlen(buf);
  if (fam[0] && model[0])
    snprintf(buf + l, n - l, " (family %s model %s)", fam, model);
  else if (impl[0] && part[0])
    snprintf(buf + l, n - l, " (implementer %s part %s)", impl, part);
  long cpus = 0;
#ifdef _SC_NPROCESSORS_ONLN
  cpus = sysconf(_SC_NPROCESSORS_ONLN);
#endif
  if (cpus > 0) {
    l = strlen(buf);
    snprintf(buf + l, n - l, ", %ld logical CPUs", cpus);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float read_avx512(const float *x, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(x + i + 48));
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; i++)
    s += x[i];
  return s;
}

__attribute__((target("avx2"))) static float read_avx2(const float *x, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
  }
  float t[8], s = 0;
  _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (int k = 0; k < 8; k++)
    s += t[k];
  for (; i < n; i++)
    s += x[i];
  return s;
}
#endif

static float read_plain(const float *x, size_t n) {
  float a[8] = {0};
  size_t i = 0;
#if defined(__aarch64__)
  float32x4_t v0 = vdupq_n_f32(0), v1 = v0, v2 = v0, v3 = v0;
  for (; i + 16 <= n; i += 16) {
    v0 = vaddq_f32(v0, vld1q_f32(x + i));
    v1 = vaddq_f32(v1, vld1q_f32(x + i + 4));
    v2 = vaddq_f32(v2, vld1q_f32(x + i + 8));
    v3 = vaddq_f32(v3, vld1q_f32(x + i + 12));
  }
  a[0] = vaddvq_f32(vaddq_f32(vaddq_f32(v0, v1), vaddq_f32(v2, v3)));
#endif
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++)
      a[k] += x[i + k];
  float s = 0;
  for (int k = 0; k < 8; k++)
    s += a[k];
  for (; i < n; i++)
    s += x[i];
  return s;
}

static float read_slice(const float *x, size_t n) {
#if defined(__x86_64__)
  const attn_isa isa = attn_isa_active();
  if (isa == ATTN_ISA_AVX512) return read_avx512(x, n);
  if (isa == ATTN_ISA_AVX2) return read_avx2(x, n);
#endif
  return read_plain(x, n);
}

/* This thread's share [lo, hi) of n items inside a parallel region: equal
 * slices of a multiple of `mult` items, the rest to the last thread. */
static void my_slice(size_t n, size_t mult, size_t *lo, size_t *hi) {
#ifdef _OPENMP
  const int id = omp_get_thread_num(), nt = omp_get_num_threads();
#else
  const int id = 0, nt = 1;
#endif
  const size_t per = n / (size_t)nt / mult * mult;
  *lo = per * (size_t)id;
  *hi = id == nt - 1 ? n : *lo + per;
}

static void *alloc_huge(size_t bytes);

enum { MEMBW_MAX_THREADS = 256 };
static size_t membw_bytes = (size_t)512 << 20;
static double membw_cache[MEMBW_MAX_THREADS + 1];
typedef struct {
  int64_t chunk, ahead, region;
} chunked_key;
static double chunked_cache[MEMBW_MAX_THREADS + 1]; /* for chunked_cache_key */
static chunked_key chunked_cache_key[MEMBW_MAX_THREADS + 1];
static volatile float membw_sink;

void attn_bench_membw_set_mib(int mib) {
  if (mib > 0) membw_bytes = (size_t)mib << 20;
  memset(membw_cache, 0, sizeof membw_cache);
  memset(chunked_cache, 0, sizeof chunked_cache);
  memset(chunked_cache_key, 0, sizeof chunked_cache_key);
}

double attn_bench_membw_gbs(int threads) {
  if (threads <= 0) threads = attn_get_num_threads();
  if (threads > MEMBW_MAX_THREADS) threads = MEMBW_MAX_THREADS;
  if (membw_cache[threads] > 0) return membw_cache[threads];
  /* huge pages, as the KV pools'; first touch by the threads that read
   * (their pages, their NUMA node) */
  float *x = attn_bench_read_buffer(membw_bytes, threads);
  if (!x) return 0;
  double best = 1e30;
  for (int r = 0; r < 8; r++) {
    const double t = attn_bench_read_once(x, membw_bytes, threads);
    if (t < best) best = t;
  }
  free(x);
  return membw_cache[threads] = (double)membw_bytes / best * 1e-9;
}

float *attn_bench_read_buffer(size_t bytes, int threads) {
  if (threads <= 0) threads = attn_get_num_threads();
  const size_t n = (bytes + 255) / 256 * 64;
  float *x = alloc_huge(n * sizeof(float));
  if (!x) return NULL;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t i = 0; i < n; i++)
    x[i] = (float)(i & 7);
  return x;
}

double attn_bench_read_once(const float *x, size_t bytes, int threads) {
  if (threads <= 0) threads = attn_get_num_threads();
  const size_t n = (bytes + 255) / 256 * 64;
  float sink = 0;
  const double t0 = attn_bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    size_t lo, hi;
    my_slice(n, 64, &lo, &hi);
    sink += read_slice(x + lo, hi - lo);
  }
  const double t = attn_bench_now() - t0;
  membw_sink = sink;
  return t;
}

/* The KV pools' allocation (kvc.c): 2 MiB-aligned, transparent huge pages
 * asked for; freed with free(). */
static void *alloc_huge(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, (size_t)2 << 20, bytes)) return NULL;
#if defined(MADV_HUGEPAGE)
  (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* This thread's chunks [lo, hi) of x in the shuffled order, read as one
 * stream as the decode loop reads a paged cache (decode.c): in pieces of at
 * most 1 KiB, the bytes `ahead` further along prefetched before each, and
 * the first 4 lines of each region (`region` bytes of a chunk; 0: none)
 * once, 2 ahead further along. */
static float read_chunks(const char *x, const size_t *order, size_t lo, size_t hi, int64_t chunk,
                         int64_t ahead, int64_t region) {
  const int64_t piece = chunk < 1024 ? chunk : 1024;
  const int64_t rpc = region > 0 ? (chunk + region - 1) / region : 0; /* regions a chunk */
  const int64_t n = (int64_t)(hi - lo) * chunk;                       /* stream bytes */
  int64_t g = 0;                                                      /* the next region to warm */
  float sink = 0;
  for (size_t i = lo; i < hi; i++) {
    const char *c = x + order[i] * (size_t)chunk;
    for (int64_t o = 0; o < chunk; o += piece) {
      const int64_t pos = (int64_t)(i - lo) * chunk + o,
                    len = chunk - o < piece ? chunk - o : piece;
      for (int64_t t = pos + ahead; t < pos + ahead + len && t < n; t += 64)
        __builtin_prefetch(x + order[lo + (size_t)(t / chunk)] * (size_t)chunk + t % chunk);
      for (; rpc && g < (int64_t)(hi - lo) * rpc; g++) {
        const int64_t off = g % rpc * region;
        if (g / rpc * chunk + off >= pos + 2 * ahead + len) break;
        const char *a = x + order[lo + (size_t)(g / rpc)] * (size_t)chunk + off;
        for (int64_t l = 0; l < 4 * 64 && off + l < chunk; l += 64)
          __builtin_prefetch(a + l);
      }
      sink += read_slice((const float *)(c + o), (size_t)len / sizeof(float));
    }
  }
  return sink;
}

double attn_bench_membw_chunked_gbs(int threads, int64_t chunk, int64_t ahead, int64_t region) {
  if (threads <= 0) threads = attn_get_num_threads();
  if (threads > MEMBW_MAX_THREADS) threads = MEMBW_MAX_THREADS;
  chunk = (chunk + 63) & ~(int64_t)63;
  if (chunk < 64) chunk = 64;
  if (ahead <= 0) ahead = chunk;
  if (region < 0 || region > chunk) region = chunk;
  const chunked_key key = {chunk, ahead, region};
  if (!memcmp(&chunked_cache_key[threads], &key, sizeof key) && chunked_cache[threads] > 0)
    return chunked_cache[threads];
  const size_t nch = membw_bytes / (size_t)chunk, bytes = nch * (size_t)chunk;
  if (nch < 2) return 0;
  char *x = alloc_huge(bytes);
  size_t *order = malloc(nch * sizeof(size_t));
  if (!x || !order) {
    free(x), free(order);
    return 0;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t i = 0; i < bytes / sizeof(float); i++)
    ((float *)x)[i] = (float)(i & 7);
  uint64_t st = 12345;
  for (size_t i = 0; i < nch; i++)
    order[i] = i;
  for (size_t i = nch - 1; i > 0; i--) { /* a shuffled order, the same every run */
    const size_t j = (size_t)(splitmix64(&st) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  double best = 1e30;
  for (int r = 0; r < 8; r++) {
    float sink = 0;
    const double t0 = attn_bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      size_t lo, hi;
      my_slice(nch, 1, &lo, &hi);
      sink += read_chunks(x, order, lo, hi, chunk, ahead, region);
    }
    const double t = attn_bench_now() - t0;
    membw_sink = sink;
    if (t < best) best = t;
  }
  free(x), free(order);
  chunked_cache_key[threads] = key;
  return chunked_cache[threads] = (double)bytes / best * 1e-9;
}

static void membw_usage(FILE *out) {
  fprintf(out, "usage: attn bench membw [--threads T] [--mib M] [--chunk BYTES]\n"
               "  memory read bandwidth (GB/s), STREAM-style: a buffer of M MiB (default 512)\n"
               "  read once per run by 1 thread and by T (default all), best of 8 runs;\n"
               "  with --chunk also read in chunks of BYTES in a shuffled order (the pages\n"
               "  of a paged KV cache), huge pages, prefetched as decode prefetches an f32\n"
               "  cache of head dim 128: 16 KiB ahead, and the first lines of each 4 KiB\n"
               "  region (or chunk) 32 KiB ahead\n");
}

int attn_bench_membw_main(int argc, char **argv) {
  int threads = attn_get_num_threads(), mib = 512;
  long long chunk = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      if ((threads = atoi(argv[++i])) < 1 || threads > MEMBW_MAX_THREADS) goto bad;
    } else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
      if ((mib = atoi(argv[++i])) < 1 || mib > (1 << 20)) goto bad;
    } else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) {
      if ((chunk = atoll(argv[++i])) < 64 || chunk > (1LL << 30)) goto bad;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      membw_usage(stdout);
      return 0;
    } else {
      goto bad;
    }
  }
  attn_bench_membw_set_mib(mib);
  char cpu[256];
  attn_bench_cpu_name(cpu, sizeof cpu);
  printf("CPU: %s\n", cpu);
  printf("memory read bandwidth (%d MiB buffer, %s loop): 1 thread %.1f GB/s", mib,
         attn_isa_name(attn_isa_active()), attn_bench_membw_gbs(1));
  if (threads > 1) printf(", %d threads %.1f GB/s", threads, attn_bench_membw_gbs(threads));
  printf("\n");
  if (chunk) {
    const long long region = chunk < 4096 ? chunk : 4096; /* decode's warmed regions */
    printf("in shuffled chunks of %lld bytes: 1 thread %.1f GB/s", chunk,
           attn_bench_membw_chunked_gbs(1, chunk, 16384, region));
    if (threads > 1)
      printf(", %d threads %.1f GB/s", threads,
             attn_bench_membw_chunked_gbs(threads, chunk, 16384, region));
    printf("\n");
  }
  return 0;
bad:
  membw_usage(stderr);
  return 2;
}
