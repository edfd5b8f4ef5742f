/* The logit softcap as a score-modifier unit (sdpa_stage.h; attn/sdpa.h's
 * softcap field, docs/VARIANTS.md): t = cap tanh(t / cap) on the scaled
 * logits, before the additive mask and ALiBi (FlashAttention's softcap,
 * ggml's logit_softcap: the same place). Nothing of size Lq x Lk is stored:
 * the unit works on a tile of logits and, in the backward, keeps its
 * derivative 1 - tanh^2 for that tile only.
 *
 * tanh: the rational of softcap_tanh.h (within 6 ulp), as the active
 * level's vector op (vec[] below: softcap_avx2.c, softcap_avx512.c,
 * softcap_neon.c; the stage runs it) where it has one, else the portable
 * loop here; the derivative from e^(-2|y|) (the level's vexp). The fused forward tiles
 * (tile_forward_mod, attn_flash_mod.cap) run the same vector code
 * (scoremod_avx2.h, scoremod_avx512.h), so fused and step-by-step tiles
 * agree to the bit. */
#include <math.h>

#include "kernels/flash/flash_tiles.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/softcap_tanh.h"

enum { BC = ATTN_FLASH_BC };

static attn_status validate(const attn_sdpa_desc *d) {
  if (!(d->softcap > 0.0f && isfinite(d->softcap)))
    return attn_set_error(ATTN_EINVAL, "sdpa: softcap = %g: must be 0 (off) or a finite value > 0",
                          (double)d->softcap);
  if (d->rel_bias || d->shaw_k || d->shaw_v)
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa: softcap with T5 rel_bias or Shaw positions is not supported "
                          "(ALiBi, masks, causal and windows are)");
  return ATTN_OK;
}

/* s [R, n] := cap tanh(s / cap) where s != -inf (-inf stays; NaN stays NaN;
 * +inf -> cap); g := 1 - tanh^2 (0 at -inf); the portable loop (the levels'
 * vector forms: vec[] below, run by the stage) */
static void tile(const attn_sdpa_desc *d, int64_t h, int R, int n, float *s, int64_t lds, float *g,
                 int64_t ldg) {
  const float cap = d->softcap;
  const float inv = 1.0f / cap;
  float e[BC];
  for (int r = 0; r < R; r++) {
    float *sr = s + r * lds, *gr = g ? g + r * ldg : NULL;
    for (int c0 = 0; c0 < n; c0 += BC) {
      const int m = n - c0 < BC ? n - c0 : BC;
      float *x = sr + c0;
      if (gr) { /* 1 - tanh^2 = 4e / (1 + e)^2, e = e^(-2|y|): no cancellation near |tanh| = 1 */
        for (int c = 0; c < m; c++)
          e[c] = -2.0f * fabsf(x[c] * inv); /* -inf for +-inf, NaN for NaN */
        attn_kern_get()->row.vexp(e, e, m);
        for (int c = 0; c < m; c++)
          gr[c0 + c] = x[c] == -INFINITY ? 0.0f : 4.0f * e[c] / ((1.0f + e[c]) * (1.0f + e[c]));
      }
      for (int c = 0; c < m; c++)
        if (x[c] != -INFINITY) x[c] = cap * attn_softcap_tanh(x[c] * inv);
    }
  }
}

static void row_exact(const attn_sdpa_desc *d, int64_t h, float *s, int64_t n, float *g) {
  const double cap = d->softcap;
  for (int64_t j = 0; j < n; j++) {
    if (s[j] == -INFINITY) {
      if (g) g[j] = 0.0f;
      continue;
    }
    const double t = tanh((double)s[j] / cap);
    s[j] = (float)(cap * t);
    if (g) g[j] = (float)(1.0 - t * t);
  }
}

static float param(const attn_sdpa_desc *d, int64_t h) { return d->softcap; }

static void fuse(const attn_sdpa_desc *d, int64_t h, attn_flash_mod *mod) { mod->cap = d->softcap; }

const attn_score_unit attn_unit_softcap = {
    .name = "softcap",
    .validate = validate,
    .tile = tile,
    .param = param,
    .row_exact = row_exact,
    .fuse = fuse,
    .shift_invariant = 0,
#if defined(__x86_64__)
    .vec = {[ATTN_ISA_AVX2] = attn_softcap_row_avx2, [ATTN_ISA_AVX512] = attn_softcap_row_avx512},
#elif defined(__aarch64__)
    .vec = {[ATTN_ISA_NEON] = attn_softcap_row_neon},
#endif
};
