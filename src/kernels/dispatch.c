/* The one place that reads the CPU: feature detection (x86-64 cpuid +
 * xgetbv; arm64 has NEON as baseline), the choice of ISA level, and the
 * tables of micro-kernels per level (kern.h).
 *
 * Levels: generic (portable C, every CPU), avx2 (AVX2 + FMA + F16C: Haswell
 * and later, Zen 1-5), avx512 (F, BW, VL, DQ: Skylake-X and later, Zen 4-5;
 * plus whatever of AVX512_BF16, VNNI and AMX the CPU has), neon (arm64).
 * A level's table takes each kernel from its own file where it has one and
 * from the level below otherwise (avx512 -> avx2 -> generic; neon ->
 * generic), so a level may start with a few kernels and grow.
 *
 * ATTN_CPU caps the level; the features attn_cpu() reports are those the
 * active level may use, so ATTN_CPU=avx2 also switches off AVX-512's
 * low-precision units. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rows/elementwise_internal.h"
#include "kernels/kern.h"

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

static attn_cpu_features detected;       /* what the CPU reports */
static attn_cpu_features allowed;        /* what the active level may use */
static attn_kern tables[ATTN_ISA_COUNT]; /* filled for the available levels */
static int available[ATTN_ISA_COUNT];
static const attn_kern *active;
static char reason[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The CPU has the level's instructions (the build may still lack its code). */
static int cpu_has(attn_isa isa, const attn_cpu_features *f) {
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

/* The features a level may use: those of its instruction set, and at the
 * AVX-512 level everything the CPU has. */
static attn_cpu_features features_of(attn_isa isa) {
  attn_cpu_features f;
  memset(&f, 0, sizeof f);
  if (isa == ATTN_ISA_AVX512) return detected;
  if (isa == ATTN_ISA_AVX2) f.avx2 = f.fma = f.f16c = 1;
  if (isa == ATTN_ISA_NEON) f.neon = 1;
  return f;
}

/* dst's NULL entries from src */
static void row_fill(attn_row_ops *dst, const attn_row_ops *src) {
#define FILL(e) \
  if (!dst->e) dst->e = src->e
  FILL(vexp);
  FILL(exp_sub_sum);
  FILL(gelu);
  FILL(gelu_backward);
  FILL(dropout);
  FILL(adam);
  FILL(layernorm_row);
  FILL(layernorm_backward_row);
  FILL(minmax_row);
  FILL(quantize_row_u8);
  FILL(dequant_row);
  FILL(f16_to_f32);
  FILL(f32_to_f16);
  FILL(f32_to_bf16);
  FILL(bf16_to_f32);
  FILL(f32_round_bf16);
  FILL(softcap); /* (NULL at generic: the portable loop) */
  FILL(sdpa_dropout);
#undef FILL
}

/* The table of level isa on top of the table below it (or NULL). */
static void build(attn_kern *t, attn_isa isa, const attn_kern *below, const attn_row_ops *row,
                  const attn_gemm_kernel_f32 *gemm, const attn_flash_ops *flash) {
  if (below) *t = *below;
  t->isa = isa;
  t->name = NAMES[isa];
  if (gemm) t->gemm = gemm;
  if (flash) t->flash = flash;
  attn_row_ops r;
  memset(&r, 0, sizeof r);
  if (row) r = *row;
  if (below) row_fill(&r, &below->row);
  r.name = row ? row->name : below->row.name;
  t->row = r;
}

/* The avx2 level's low-precision kernels: bf16 / fp16 widened to f32 while
 * packing on the AVX2 + FMA micro-kernel, int8 widened to 16 bits for
 * VPMADDWD (exact), and the int8 flash's scores, row helpers and bf16 tiles.
 * (AVX-VNNI, the VEX VPDPBUSD of Alder Lake and Zen 5, is detected but has
 * no kernel: neither this machine nor qemu 7.2 runs it, so none could be
 * tested.) */
static void lowp_avx2(attn_lowp_ops *l) {
#if defined(__x86_64__)
  l->interleave = attn_lowp_interleave_avx2;
  l->epi_f32 = attn_lowp_epi_f32_avx2;
  l->f32cvt_simd = attn_lowp_kernel_f32_avx2();
  l->i8_simd = attn_lowp_kernel_i8_avx2();
  l->i8_scores_simd = attn_flash_i8_scores_avx2();
  l->i8_quantize_row = attn_i8_quantize_row_avx2();
  l->i8_dequant = attn_i8_dequant_avx2();
  l->i8_colsum = attn_i8_colsum_avx2();
  /* the int8 flash's softmax and P·V (sdpa_flash_i8.c); the bf16 flash takes
   * these tiles only where a level has a bf16 dot product (sdpa_flash_bf16.c) */
  l->flash_bf16_simd = attn_flash_bf16_ops_avx2();
#else
  (void)l;
#endif
}

/* AVX-512's low-precision units, each where the CPU has it. Entries it does
 * not set come from the avx2 level (an AVX-512 CPU without VNNI runs the
 * avx2 int8 kernels; one without AVX512_BF16 the avx2 bf16 tiles for the
 * int8 flash's softmax and P·V). */
static void lowp_avx512(attn_lowp_ops *l, const attn_cpu_features *f) {
#if defined(__x86_64__)
  l->interleave = attn_lowp_interleave_avx512;
  l->pack_t32 = attn_lowp_pack_t32_avx512;
  l->epi_f32 = attn_lowp_epi_f32_avx512;
  l->bf16_convert_rows = attn_bf16_convert_rows_avx512;
  l->bf16_epi_piece = attn_bf16_epi_piece_avx512;
  l->f32cvt_simd = attn_lowp_kernel_f32_avx512();
  l->i8_quantize_row = attn_i8_quantize_row_avx512();
  l->i8_dequant = attn_i8_dequant_avx512();
  l->i8_colsum = attn_i8_colsum_avx512();
  if (f->avx512_bf16) {
    l->bf16_simd = attn_lowp_kernel_bf16_avx512();
    l->flash_bf16_simd = attn_flash_bf16_ops_avx512();
  }
  if (f->avx512_vnni) {
    l->i8_simd = attn_lowp_kernel_i8_vnni();
    l->i8_scores_simd = attn_flash_i8_scores_vnni();
  }
  if (f->amx_tile && f->amx_bf16) {
    l->bf16_amx = attn_lowp_kernel_bf16_amx();
    if (f->avx512_bf16) l->flash_bf16_amx = attn_flash_bf16_ops_amx();
  }
  if (f->amx_tile && f->amx_int8) {
    l->i8_amx = attn_lowp_kernel_i8_amx();
    if (l->flash_bf16_amx) l->i8_scores_amx = attn_flash_i8_scores_amx();
  }
#else
  (void)l, (void)f;
#endif
}

/* The best available level (generic when no vector level is). */
static attn_isa best_level(void) {
  attn_isa best = ATTN_ISA_GENERIC;
  for (int i = 0; i < ATTN_ISA_COUNT; i++)
    if (available[i] && i != ATTN_ISA_GENERIC) best = (attn_isa)i;
  return best;
}

/* "generic, avx2, avx512": the available levels, for messages */
static void level_list(char *buf, size_t n) {
  buf[0] = '\0';
  for (int i = 0; i < ATTN_ISA_COUNT; i++)
    if (available[i])
      snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", *buf ? ", " : "", NAMES[i]);
}

/* A level by name ("native": the best): 0 with *out set, 1 for an unknown
 * name, 2 for a level this CPU or build lacks. */
static int parse_level(const char *name, attn_isa *out) {
  if (!strcmp(name, "native")) {
    *out = best_level();
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

static void init(void) {
  detect(&detected);
  attn_kern *g = &tables[ATTN_ISA_GENERIC];
  build(g, ATTN_ISA_GENERIC, NULL, attn_row_ops_generic(), attn_gemm_kernel_generic_f32(),
        attn_flash_ops_generic());
  available[ATTN_ISA_GENERIC] = 1;
  /* a level is available when the CPU has it and the build has its code */
  if (cpu_has(ATTN_ISA_AVX2, &detected) && attn_row_ops_avx2()) {
    build(&tables[ATTN_ISA_AVX2], ATTN_ISA_AVX2, g, attn_row_ops_avx2(),
          attn_gemm_kernel_avx2_f32(), attn_flash_ops_avx2());
    lowp_avx2(&tables[ATTN_ISA_AVX2].lowp);
    available[ATTN_ISA_AVX2] = 1;
  }
  if (cpu_has(ATTN_ISA_AVX512, &detected) && attn_row_ops_avx512()) {
    const attn_kern *below = available[ATTN_ISA_AVX2] ? &tables[ATTN_ISA_AVX2] : g;
    build(&tables[ATTN_ISA_AVX512], ATTN_ISA_AVX512, below, attn_row_ops_avx512(),
          attn_gemm_kernel_avx512_f32(), attn_flash_ops_avx512());
    lowp_avx512(&tables[ATTN_ISA_AVX512].lowp, &detected);
    available[ATTN_ISA_AVX512] = 1;
  }
  if (cpu_has(ATTN_ISA_NEON, &detected) && attn_row_ops_neon()) {
    build(&tables[ATTN_ISA_NEON], ATTN_ISA_NEON, g, attn_row_ops_neon(),
          attn_gemm_kernel_neon_f32(), attn_flash_ops_neon());
    available[ATTN_ISA_NEON] = 1;
  }
  attn_isa pick = best_level();
  const char *e = getenv("ATTN_CPU");
  int bad = e && *e ? parse_level(e, &pick) : 0;
  if (bad) {
    char have[64];
    level_list(have, sizeof have);
    pick = best_level();
    snprintf(reason, sizeof reason, "ATTN_CPU=%.40s %s (this CPU and build: %s); using %s", e,
             bad == 1 ? "is not a level" : "is not available", have, NAMES[pick]);
  } else if (e && *e && strcmp(e, "native") != 0) {
    snprintf(reason, sizeof reason, "ATTN_CPU=%s", e);
  } else {
    snprintf(reason, sizeof reason, "the best this CPU and build have%s",
             e && *e ? " (ATTN_CPU=native)" : "");
  }
  active = &tables[pick];
  allowed = features_of(pick);
}

static void ensure(void) { pthread_once(&once, init); }

const attn_kern *attn_kern_get(void) {
  ensure();
  return active;
}

const attn_kern *attn_kern_at(attn_isa isa) {
  ensure();
  return (unsigned)isa < ATTN_ISA_COUNT && available[isa] ? &tables[isa] : NULL;
}

const attn_cpu_features *attn_cpu(void) {
  ensure();
  return &allowed;
}

const attn_cpu_features *attn_cpu_detected(void) {
  ensure();
  return &detected;
}

const char *attn_isa_name(attn_isa isa) {
  return (unsigned)isa < ATTN_ISA_COUNT ? NAMES[isa] : "?";
}

int attn_isa_available(attn_isa isa) { return attn_kern_at(isa) != NULL; }

attn_isa attn_isa_active(void) { return attn_kern_get()->isa; }

const char *attn_isa_reason(void) {
  ensure();
  return reason;
}

attn_status attn_isa_from_name(const char *name, attn_isa *out) {
  ensure();
  if (!name || !out) return attn_set_error(ATTN_EINVAL, "isa: NULL argument");
  int bad = parse_level(name, out);
  if (!bad) return ATTN_OK;
  char have[64];
  level_list(have, sizeof have);
  if (bad == 2)
    return attn_set_error(ATTN_EUNSUPPORTED, "isa '%s' is not available (this CPU and build: %s)",
                          name, have);
  return attn_set_error(ATTN_EINVAL, "isa '%s' is not a level (generic, avx2, avx512, neon, "
                                     "native; this CPU and build: %s)",
                        name, have);
}

attn_status attn_set_isa(attn_isa isa) {
  if (!attn_kern_at(isa))
    return attn_set_error(ATTN_EUNSUPPORTED, "isa '%s' is not available on this CPU or build",
                          attn_isa_name(isa));
  active = &tables[isa];
  allowed = features_of(isa);
  snprintf(reason, sizeof reason, "attn_set_isa(%s)", attn_isa_name(isa));
  return ATTN_OK;
}
