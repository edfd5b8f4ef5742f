/* CPU feature detection (x86-64 cpuid + xgetbv; other arches report none)
 * and the kernel thread count. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void) {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((unsigned long long)hi << 32) | lo;
}

static void detect(attn_cpu_features *f) {
  unsigned a, b, c, d;
  memset(f, 0, sizeof *f);
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1;
  if (!osxsave) return;
  unsigned long long xcr0 = xgetbv0();
  int ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
  int tiles = (xcr0 & 0x60000) == 0x60000;
  if (__get_cpuid_max(0, 0) < 7) return;
  __cpuid_count(7, 0, a, b, c, d);
  f->avx2 = ymm && ((b >> 5) & 1);
  f->fma = ymm && fma;
  f->avx512f = zmm && ((b >> 16) & 1);
  f->avx512bw = f->avx512f && ((b >> 30) & 1);
  f->avx512vl = f->avx512f && ((b >> 31) & 1);
  f->avx512_vnni = f->avx512f && ((c >> 11) & 1);
  f->avx512_fp16 = f->avx512f && ((d >> 23) & 1);
  f->amx_bf16 = tiles && ((d >> 22) & 1);
  f->amx_tile = tiles && ((d >> 24) & 1);
  f->amx_int8 = tiles && ((d >> 25) & 1);
  unsigned a1, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f->avx512_bf16 = f->avx512f && ((a1 >> 5) & 1);
  (void)b1;
  (void)c1;
  (void)d1;
}
#else
static void detect(attn_cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

static attn_cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

static void detect_once(void) {
  detect(&features);
  /* ATTN_CPU=generic forces the portable paths (used by tests). */
  const char *e = getenv("ATTN_CPU");
  if (e && !strcmp(e, "generic")) memset(&features, 0, sizeof features);
}

const attn_cpu_features *attn_cpu(void) {
  pthread_once(&features_once, detect_once);
  return &features;
}

static int num_threads;

void attn_set_num_threads(int n) { num_threads = n > 0 ? n : 0; }

int attn_get_num_threads(void) {
  if (num_threads > 0) return num_threads;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
