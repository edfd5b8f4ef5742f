/* --precision auto: the candidates and the choice (precision_probe.h). */
#include "apps/train/precision_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

/* The kernels bf16 training runs at the active level. */
static const char *bf16_attention_path(void) { return attn_sdpa_bf16_path_name(ATTN_LOWP_AUTO); }

void attn_prec_info_get(attn_precision p, attn_prec_info *out) {
  memset(out, 0, sizeof *out);
  out->prec = p;
  const char *level = attn_isa_name(attn_isa_active());
  if (p == ATTN_PREC_F32) {
    snprintf(out->units, sizeof out->units, "f32 GEMM and flash attention (%s level)", level);
    snprintf(out->why, sizeof out->why, "the reference and the fallback");
    return;
  }
  if (p == ATTN_PREC_BF16) {
    const char *gemm = attn_lowp_path_name(ATTN_LOWP_AUTO, "bf16");
    snprintf(out->units, sizeof out->units, "GEMM %s, attention %s", gemm, bf16_attention_path());
    /* a bf16 dot-product unit runs the GEMMs (else bf16 is widened onto f32
     * FMAs, avx2_f32fma, or runs portable C: never faster than f32) */
    out->candidate = !strcmp(gemm, "amx") || !strcmp(gemm, "avx512_bf16");
    if (out->candidate)
      snprintf(out->why, sizeof out->why, "a bf16 unit (%s) runs its GEMMs; picked when the probe "
               "measures >= %.2fx f32", !strcmp(gemm, "amx") ? "AMX-BF16" : "AVX512_BF16",
               ATTN_PREC_AUTO_MARGIN);
    else if (attn_cpu()->avx512_bf16 && !attn_cpu()->bf16_dot_fast)
      snprintf(out->why, sizeof out->why,
               "no fast bf16 unit at the %s level (AVX512_BF16 not faster than f32 "
               "here: bf16_dot_fast 0): bf16 storage on f32 FMAs (%s), about f32's speed",
               level, gemm);
    else if (strcmp(gemm, "portable"))
      snprintf(out->why, sizeof out->why, "no bf16 unit (AVX512_BF16 or AMX-BF16) at the %s level: "
               "bf16 storage on f32 FMAs (%s), about f32's speed, never faster", level, gemm);
    else
      snprintf(out->why, sizeof out->why, "no bf16 unit (AVX512_BF16 or AMX-BF16) at the %s level: "
               "the portable path, correct but several times slower than f32", level);
    return;
  }
  snprintf(out->units, sizeof out->units, "fp16 operands, f32 FMAs (%s)",
           attn_lowp_path_name(ATTN_LOWP_AUTO, "f16"));
  snprintf(out->why, sizeof out->why, "never: no fp16 arithmetic (converted to f32 FMAs: not faster "
           "than f32) and loss scaling; --precision fp16 picks it");
}

const attn_prec_timing *attn_prec_probe_timing(const attn_prec_probe_result *r, attn_precision p) {
  for (int i = 0; r && i < r->n; i++)
    if (r->t[i].prec == p && r->t[i].rounds > 0) return &r->t[i];
  return NULL;
}

double attn_prec_probe_ratio(const attn_prec_probe_result *r, attn_precision p) {
  const attn_prec_timing *f = attn_prec_probe_timing(r, ATTN_PREC_F32), *t = attn_prec_probe_timing(r, p);
  return f && t && t->fb_seconds > 0 ? f->fb_seconds / t->fb_seconds : 0;
}

double attn_prec_probe_cpu_ratio(const attn_prec_probe_result *r, attn_precision p) {
  const attn_prec_timing *f = attn_prec_probe_timing(r, ATTN_PREC_F32), *t = attn_prec_probe_timing(r, p);
  return f && t && t->fb_cpu_seconds > 0 ? f->fb_cpu_seconds / t->fb_cpu_seconds : 0;
}

attn_precision attn_prec_auto_choose(const attn_prec_probe_result *r, int qat, char *why,
                                     size_t why_cap) {
  const char *level = attn_isa_name(attn_isa_active());
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  if (qat) {
    snprintf(why, why_cap, "auto: f32 with --qat (bf16 + QAT is not validated)");
    return ATTN_PREC_F32;
  }
  if (!bf.candidate) {
    snprintf(why, why_cap,
             "auto: no candidate but f32 at the %s level (bf16: no %sAVX512_BF16 or "
             "AMX-BF16 unit)",
             level, attn_cpu()->avx512_bf16 ? "fast " : "");
    return ATTN_PREC_F32;
  }
  double ratio = attn_prec_probe_ratio(r, ATTN_PREC_BF16);
  double cpu = attn_prec_probe_cpu_ratio(r, ATTN_PREC_BF16);
  if (ratio <= 0) {
    snprintf(why, why_cap, "auto: f32 (bf16 not probed)");
    return ATTN_PREC_F32;
  }
  if (ratio >= ATTN_PREC_AUTO_MARGIN && cpu >= ATTN_PREC_AUTO_MARGIN) {
    snprintf(why, why_cap, "auto: probe %.2fx f32 tokens/s on this CPU (%.2fx per CPU-second), "
             "%s level, %s", ratio, cpu, level, bf.units);
    return ATTN_PREC_BF16;
  }
  snprintf(why, why_cap, "auto: bf16 %.2fx f32 here (probe; %.2fx per CPU-second; %s level, %s), "
           "under the %.2fx margin", ratio, cpu, level, bf.units, ATTN_PREC_AUTO_MARGIN);
  return ATTN_PREC_F32;
}
