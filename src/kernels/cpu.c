/* The one place that reads the CPU: feature detection (x86-64 cpuid +
 * xgetbv; arm64 has NEON as baseline), the instruction sets of each ISA
 * level, the choice of level (ATTN_CPU caps it) and the AMX tile permission
 * (arch_prctl on Linux). The tables of micro-kernels per level are
 * dispatch.c's (kern.h), which asks here which levels the CPU has.
 *
 * Levels: generic (portable C, every CPU), avx2 (AVX2 + FMA + F16C: Haswell
 * and later, Zen 1-5; plus AVX-VNNI where the CPU has it: Alder Lake and
 * later, Zen 5), avx512 (F, BW, VL, DQ: Skylake-X and later, Zen 4-5;
 * plus whatever of AVX512_BF16, VNNI and AMX the CPU has), neon (arm64).
 *
 * ATTN_CPU caps the level; the features attn_cpu() reports are those the
 * active level may use, so ATTN_CPU=avx2 also switches off AVX-512's
 * low-precision units. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/arch/amx/amx.h"
#include "kernels/cpu.h"

static int vendor_intel; /* GenuineIntel (detect): the decode's prefetch hint */

#if defined(__x86_64__)
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
  int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  if (!osxsave) return;
  unsigned long long xcr0 = xgetbv0();
  /* the OS saves ymm (bits 1-2), zmm (5-7) and AMX tile (17-18) state */
  int ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
  int tiles = (xcr0 & 0x60000) == 0x60000;
  f->fma = ymm && fma;
  f->f16c = ymm && f16c;
  if (__get_cpuid_max(0, 0) < 7) return;
  __cpuid_count(7, 0, a, b, c, d);
  f->avx2 = ymm && ((b >> 5) & 1);
  f->avx512f = zmm && ((b >> 16) & 1);
  f->avx512dq = f->avx512f && ((b >> 17) & 1);
  f->avx512bw = f->avx512f && ((b >> 30) & 1);
  f->avx512vl = f->avx512f && ((b >> 31) & 1);
  f->avx512_vnni = f->avx512f && ((c >> 11) & 1);
  f->avx512_fp16 = f->avx512f && ((d >> 23) & 1);
  f->amx_bf16 = tiles && ((d >> 22) & 1);
  f->amx_tile = tiles && ((d >> 24) & 1);
  f->amx_int8 = tiles && ((d >> 25) & 1);
  unsigned a1, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f->avx_vnni = ymm && ((a1 >> 4) & 1);
  f->avx512_bf16 = f->avx512f && ((a1 >> 5) & 1);
  (void)b1, (void)c1, (void)d1;
  /* the vendor's rule for VDPBF16PS's rate (attn_cpu_features), then ATTN_BF16_DOT */
  unsigned vb, vc, vd;
  __cpuid(0, a, vb, vc, vd);
  const int amd = vb == 0x68747541u && vd == 0x69746e65u && vc == 0x444d4163u; /* AuthenticAMD */
  vendor_intel = vb == 0x756e6547u && vd == 0x49656e69u && vc == 0x6c65746eu;  /* GenuineIntel */
  f->bf16_dot_fast = f->avx512_bf16 && amd;
  const char *e = getenv("ATTN_BF16_DOT");
  if (e && (!strcmp(e, "0") || !strcmp(e, "1"))) f->bf16_dot_fast = f->avx512_bf16 && *e == '1';
}
#elif defined(__aarch64__)
static void detect(attn_cpu_features *f) {
  memset(f, 0, sizeof *f);
  f->neon = 1; /* Advanced SIMD is part of the arm64 base architecture */
}
#else
static void detect(attn_cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

static const char *const NAMES[ATTN_ISA_COUNT] = {"generic", "avx2", "avx512", "neon"};

static attn_cpu_features detected; /* what the CPU reports */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void detect_once(void) { detect(&detected); }

const attn_cpu_features *attn_cpu_detected(void) {
  pthread_once(&once, detect_once);
  return &detected;
}

const char *attn_isa_name(attn_isa isa) {
  return (unsigned)isa < ATTN_ISA_COUNT ? NAMES[isa] : "?";
}

int attn_cpu_has_level(attn_isa isa, const attn_cpu_features *f) {
  switch (isa) {
  case ATTN_ISA_GENERIC: return 1;
  case ATTN_ISA_AVX2: return f->avx2 && f->fma && f->f16c;
  case ATTN_ISA_AVX512:
    return f->avx2 && f->fma && f->f16c && f->avx512f && f->avx512bw && f->avx512vl &&
           f->avx512dq;
  case ATTN_ISA_NEON: return f->neon;
  }
  return 0;
}

attn_cpu_features attn_cpu_level_features(attn_isa isa) {
  attn_cpu_features f;
  memset(&f, 0, sizeof f);
  if (isa == ATTN_ISA_AVX512) return *attn_cpu_detected();
  if (isa == ATTN_ISA_AVX2) { /* and AVX-VNNI where the CPU has it (the int8 decode) */
    f.avx2 = f.fma = f.f16c = 1;
    f.avx_vnni = attn_cpu_detected()->avx_vnni;
  }
  if (isa == ATTN_ISA_NEON) f.neon = 1;
  return f;
}

attn_isa attn_cpu_best_level(const int *available) {
  attn_isa best = ATTN_ISA_GENERIC;
  for (int i = 0; i < ATTN_ISA_COUNT; i++)
    if (available[i] && i != ATTN_ISA_GENERIC) best = (attn_isa)i;
  return best;
}

void attn_cpu_level_list(const int *available, char *buf, size_t n) {
  buf[0] = '\0';
  for (int i = 0; i < ATTN_ISA_COUNT; i++)
    if (available[i])
      snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", *buf ? ", " : "", NAMES[i]);
}

int attn_cpu_parse_level(const char *name, const int *available, attn_isa *out) {
  if (!strcmp(name, "native")) {
    *out = attn_cpu_best_level(available);
    return 0;
  }
  for (int i = 0; i < ATTN_ISA_COUNT; i++)
    if (!strcmp(name, NAMES[i])) {
      if (!available[i]) return 2;
      *out = (attn_isa)i;
      return 0;
    }
  return 1;
}

attn_isa attn_cpu_pick_level(const int *available, char *reason, size_t n) {
  attn_isa pick = attn_cpu_best_level(available);
  const char *e = getenv("ATTN_CPU");
  int bad = e && *e ? attn_cpu_parse_level(e, available, &pick) : 0;
  if (bad) {
    char have[64];
    attn_cpu_level_list(available, have, sizeof have);
    pick = attn_cpu_best_level(available);
    snprintf(reason, n, "ATTN_CPU=%.40s %s (this CPU and build: %s); using %s", e,
             bad == 1 ? "is not a level" : "is not available", have, NAMES[pick]);
  } else if (e && *e && strcmp(e, "native") != 0) {
    snprintf(reason, n, "ATTN_CPU=%s", e);
  } else {
    snprintf(reason, n, "the best this CPU and build have%s", e && *e ? " (ATTN_CPU=native)" : "");
  }
  return pick;
}

/* ---- AMX tile permission ---------------------------------------------- */
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

/* 0 when the kernel grants XTILEDATA (and confirms it in the permitted set). */
static int request_linux(void) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return -1;
  unsigned long bits = 0;
  if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bits) != 0) return -1;
  return (bits >> XFEATURE_XTILEDATA) & 1 ? 0 : -1;
}

#else
static int request_linux(void) { return -1; }
#endif

static pthread_mutex_t amx_lock = PTHREAD_MUTEX_INITIALIZER;
static int amx_state;                  /* 0 unknown, 1 granted, -1 refused */
static int (*amx_request)(void) = request_linux;

int attn_amx_permission(void) {
  pthread_mutex_lock(&amx_lock);
  if (amx_state == 0) amx_state = amx_request() == 0 ? 1 : -1;
  int ok = amx_state == 1;
  pthread_mutex_unlock(&amx_lock);
  return ok;
}

void attn_amx_set_request_hook(int (*request)(void)) {
  pthread_mutex_lock(&amx_lock);
  amx_request = request ? request : request_linux;
  amx_state = 0;
  pthread_mutex_unlock(&amx_lock);
}

/* ---- cache sizes (attn/kernels.h) ----------------------------------------- */

int64_t attn_cpu_cache_size_parse(const char *s) {
  if (!s) return -1;
  char *end;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno || v > (1ull << 40)) return -1;
  int64_t mul = 1;
  if (*end == 'K') mul = 1024, end++;
  else if (*end == 'M') mul = 1024 * 1024, end++;
  else if (*end == 'G') mul = 1024 * 1024 * 1024, end++;
  while (*end == '\n' || *end == ' ')
    end++;
  return *end ? -1 : (int64_t)v * mul;
}

/* a short sysfs file's first line, or "" */
static void read_line(const char *path, char *buf, size_t n) {
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(buf, (int)n, f)) buf[0] = 0;
  fclose(f);
}

static int64_t cache_bytes[5]; /* [level]: data or unified cache, 0: unknown */
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_detect(void) {
  /* Linux's sysfs, as lscpu reads it: glibc's sysconf computes the sizes
   * from cpuid itself, and on an AMD EPYC Zen 3 VM it gave a 256 MiB L3
   * where the CPU and sysfs say 32 MiB */
  for (int i = 0; i < 16; i++) {
    char path[96], lv[32], type[32], size[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    read_line(path, lv, sizeof lv);
    const int level = atoi(lv);
    if (level < 1 || level > 4) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    read_line(path, type, sizeof type);
    if (!strncmp(type, "Instruction", 11)) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    read_line(path, size, sizeof size);
    const int64_t b = attn_cpu_cache_size_parse(size);
    if (b > cache_bytes[level]) cache_bytes[level] = b;
  }
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) &&                         \
    defined(_SC_LEVEL3_CACHE_SIZE) && defined(_SC_LEVEL4_CACHE_SIZE)
  const int names[5] = {0, _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE,
                        _SC_LEVEL4_CACHE_SIZE};
  for (int level = 1; level <= 4; level++)
    if (cache_bytes[level] <= 0) { /* no sysfs (not Linux, a container without it) */
      const long v = sysconf(names[level]);
      cache_bytes[level] = v > 0 ? (int64_t)v : 0;
    }
#endif
}

int64_t attn_cpu_cache_bytes(int level) {
  if (level < 1 || level > 4) return 0;
  pthread_once(&cache_once, cache_detect);
  return cache_bytes[level];
}

int64_t attn_cpu_llc_bytes(void) {
  for (int level = 4; level >= 2; level--)
    if (attn_cpu_cache_bytes(level) > 0) return attn_cpu_cache_bytes(level);
  return 0;
}

/* ---- the decode's prefetch hint (cpu.h) ---------------------------------- */

int attn_decode_pf_l2_rule(int intel, int64_t llc_bytes, int64_t bytes) {
  return intel && llc_bytes > 0 && bytes > llc_bytes / 3;
}

static int pf_mode = -1; /* -1: the rule, 0: L1, 1: L2 */
static pthread_once_t pf_once = PTHREAD_ONCE_INIT;

static void pf_init(void) {
  attn_cpu_detected(); /* the vendor */
  const char *e = getenv("ATTN_DECODE_PF");
  if (e && !strcmp(e, "l1")) pf_mode = 0;
  if (e && !strcmp(e, "l2")) pf_mode = 1;
}

int attn_cpu_decode_pf_l2(int64_t bytes) {
  pthread_once(&pf_once, pf_init);
  return pf_mode >= 0 ? pf_mode : attn_decode_pf_l2_rule(vendor_intel, attn_cpu_llc_bytes(), bytes);
}

void attn_cpu_set_decode_pf(int mode) {
  pthread_once(&pf_once, pf_init);
  pf_mode = mode < 0 ? -1 : mode > 0;
}
