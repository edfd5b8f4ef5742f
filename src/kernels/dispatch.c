/* The tables of micro-kernels per ISA level (kern.h): one per level the
 * CPU and the build have, and the active one. What the CPU has and which
 * level runs (ATTN_CPU) is cpu.c's, the one place that reads the CPU.
 *
 * A level's table takes each kernel from its own file where it has one and
 * from the level below otherwise (avx512 -> avx2 -> generic; neon ->
 * generic), so a level may start with a few kernels and grow. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kernels/arch/amx/amx.h"
#include "kernels/cpu.h"
#include "kernels/kern.h"
#include "kernels/rows/elementwise_internal.h"

static attn_cpu_features allowed;        /* what the active level may use */
static attn_kern tables[ATTN_ISA_COUNT]; /* filled for the available levels */
static int available[ATTN_ISA_COUNT];
/* the active table; NULL until init has built the tables (kern.h's inline
 * attn_kern_get reads it) */
_Atomic(const attn_kern *) attn_kern_active_;
static char reason[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

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
  FILL(gemv_nt);
  FILL(f16_to_f32);
  FILL(f32_to_f16);
  FILL(f32_to_bf16);
  FILL(bf16_to_f32);
  FILL(f32_round_bf16);
  FILL(sdpa_dropout);
#undef FILL
}

/* The table of level isa on top of the table below it (or NULL). */
static void build(attn_kern *t, attn_isa isa, const attn_kern *below, const attn_row_ops *row,
                  const attn_gemm_kernel_f32 *gemm, const attn_flash_ops *flash,
                  const attn_decode_ops *decode) {
  if (below) *t = *below;
  t->isa = isa;
  t->name = attn_isa_name(isa);
  if (gemm) t->gemm = gemm;
  if (flash) t->flash = flash;
  if (decode) t->decode = decode;
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
 * (AVX-VNNI, the VEX VPDPBUSD of Alder Lake and Zen 5, serves the decode
 * kernel's int8 cache where the CPU has it: decode_avx2_vnni.c; not these.) */
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
    l->bf16_dot_auto = f->bf16_dot_fast;
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

static void init(void) {
  const attn_cpu_features *detected = attn_cpu_detected();
  attn_kern *g = &tables[ATTN_ISA_GENERIC];
  build(g, ATTN_ISA_GENERIC, NULL, attn_row_ops_generic(), attn_gemm_kernel_generic_f32(),
        attn_flash_ops_generic(), attn_decode_ops_generic());
  available[ATTN_ISA_GENERIC] = 1;
  /* a level is available when the CPU has it and the build has its code */
  if (attn_cpu_has_level(ATTN_ISA_AVX2, detected) && attn_row_ops_avx2()) {
    const attn_decode_ops *dv = detected->avx_vnni ? attn_decode_ops_avx2_vnni() : NULL;
    build(&tables[ATTN_ISA_AVX2], ATTN_ISA_AVX2, g, attn_row_ops_avx2(),
          attn_gemm_kernel_avx2_f32(), attn_flash_ops_avx2(), dv ? dv : attn_decode_ops_avx2());
    lowp_avx2(&tables[ATTN_ISA_AVX2].lowp);
    available[ATTN_ISA_AVX2] = 1;
  }
  if (attn_cpu_has_level(ATTN_ISA_AVX512, detected) && attn_row_ops_avx512()) {
    const attn_kern *below = available[ATTN_ISA_AVX2] ? &tables[ATTN_ISA_AVX2] : g;
    const attn_decode_ops *dec =
        detected->avx512_vnni ? attn_decode_ops_avx512_vnni() : attn_decode_ops_avx512();
    const attn_decode_ops *bf = detected->avx512_bf16 ? attn_decode_ops_avx512_bf16(dec) : NULL;
    if (bf) dec = bf;
    build(&tables[ATTN_ISA_AVX512], ATTN_ISA_AVX512, below, attn_row_ops_avx512(),
          attn_gemm_kernel_avx512_f32(), attn_flash_ops_avx512(), dec);
    lowp_avx512(&tables[ATTN_ISA_AVX512].lowp, detected);
    available[ATTN_ISA_AVX512] = 1;
  }
  if (attn_cpu_has_level(ATTN_ISA_NEON, detected) && attn_row_ops_neon()) {
    build(&tables[ATTN_ISA_NEON], ATTN_ISA_NEON, g, attn_row_ops_neon(),
          attn_gemm_kernel_neon_f32(), attn_flash_ops_neon(), attn_decode_ops_neon());
    available[ATTN_ISA_NEON] = 1;
  }
  attn_isa pick = attn_cpu_pick_level(available, reason, sizeof reason);
  atomic_store_explicit(&attn_kern_active_, &tables[pick], memory_order_release);
  allowed = attn_cpu_level_features(pick);
}

static void ensure(void) { pthread_once(&once, init); }

const attn_kern *attn_kern_get_slow(void) {
  ensure();
  return atomic_load_explicit(&attn_kern_active_, memory_order_acquire);
}

const attn_kern *attn_kern_at(attn_isa isa) {
  ensure();
  return (unsigned)isa < ATTN_ISA_COUNT && available[isa] ? &tables[isa] : NULL;
}

const attn_cpu_features *attn_cpu(void) {
  ensure();
  return &allowed;
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
  int bad = attn_cpu_parse_level(name, available, out);
  if (!bad) return ATTN_OK;
  char have[64];
  attn_cpu_level_list(available, have, sizeof have);
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
  atomic_store_explicit(&attn_kern_active_, &tables[isa], memory_order_release);
  allowed = attn_cpu_level_features(isa);
  snprintf(reason, sizeof reason, "attn_set_isa(%s)", attn_isa_name(isa));
  return ATTN_OK;
}

/* The CPU has AMX tiles at the active level (the table has AMX kernels). */
static int amx_tiles_present(void) {
  const attn_lowp_ops *l = &attn_kern_get()->lowp;
  return l->bf16_amx || l->i8_amx;
}

int attn_amx_ready(void) {
  if (!amx_tiles_present()) return 0;
  return attn_amx_permission();
}
