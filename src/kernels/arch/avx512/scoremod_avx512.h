/* The score-modifier stage in registers, AVX-512 (include only from files
 * built for AVX-512): the tile units the fused forward tiles run
 * (attn_flash_mod, sdpa_stage.h) on a tile of MR x 64 logits held in 24
 * registers. attn_scoremod_tile_avx512 is what sdpa_flash_avx512.c calls.
 *
 * Logit softcap on 16 lanes (mod_softcap.c; its vector op
 * softcap_avx512.c): scoremod_avx2.h's formula (the rational of
 * softcap_tanh.h) with attn_vexp16_avx512 for the derivative, the same
 * code in the vector op and the fused tiles, so the two give the same
 * bits. */
#ifndef ATTN_SCOREMOD_AVX512_H
#define ATTN_SCOREMOD_AVX512_H

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>
#include <math.h>

#include "kernels/arch/avx512/vexp_avx512.h"
#include "kernels/flash/flash_tiles.h"
#include "kernels/sdpa/softcap_tanh.h"

ATTN_AVX512_INLINE __m512 attn_softcap16_avx512(__m512 x, __m512 vinv, __m512 vcap, __m512 *g) {
  const __m512 y = _mm512_mul_ps(x, vinv);
  const __mmask16 masked = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
  if (g) { /* 1 - tanh^2 = 4e / (1 + e)^2, e = e^(-2|y|) */
    const __m512 ay = _mm512_abs_ps(y);
    const __m512 e = attn_vexp16_avx512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), ay));
    const __m512 ope = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
    *g = _mm512_maskz_div_ps((__mmask16)~masked, _mm512_mul_ps(_mm512_set1_ps(4.0f), e),
                             _mm512_mul_ps(ope, ope));
  }
  /* tanh y = y P(u) / Q(u), u = min(y^2, 9.1^2), clamped to [-1, 1]; the
   * min/max keep a NaN (second operand) */
  const __m512 u = _mm512_min_ps(_mm512_set1_ps(ATTN_SOFTCAP_U_MAX), _mm512_mul_ps(y, y));
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(ATTN_SOFTCAP_P4), u, _mm512_set1_ps(ATTN_SOFTCAP_P3));
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(ATTN_SOFTCAP_Q4), u, _mm512_set1_ps(ATTN_SOFTCAP_Q3));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(ATTN_SOFTCAP_P2));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(ATTN_SOFTCAP_Q2));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(ATTN_SOFTCAP_P1));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(ATTN_SOFTCAP_Q1));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(1.0f));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(1.0f));
  __m512 t = _mm512_div_ps(_mm512_mul_ps(y, p), q);
  t = _mm512_max_ps(_mm512_set1_ps(-1.0f), _mm512_min_ps(_mm512_set1_ps(1.0f), t));
  return _mm512_mask_blend_ps(masked, _mm512_mul_ps(vcap, t), _mm512_set1_ps(-INFINITY));
}

/* The fused units (kinds: ATTN_FMOD_* bits, a constant of the instance) on
 * the logits t [MR][4 x 16 columns] of a tile whose row 0 has p_i - j0 =
 * rel, in the stage's order, each over the whole tile: the softcap, then
 * + the ALiBi table's -(slope |p_i - j|) (exact integers as floats). */
ATTN_AVX512_INLINE void attn_scoremod_tile_avx512(const int kinds, const attn_flash_mod *mod,
                                                  float rel, __m512 t[ATTN_FLASH_MR][4]) {
  if (kinds & ATTN_FMOD_CAP) {
    const __m512 vinv = _mm512_set1_ps(1.0f / mod->cap), vcap = _mm512_set1_ps(mod->cap);
#pragma GCC unroll 6
    for (int r = 0; r < ATTN_FLASH_MR; r++)
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++)
        t[r][c] = attn_softcap16_avx512(t[r][c], vinv, vcap, NULL);
  }
  if (kinds & ATTN_FMOD_ALIBI) {
    const __m512 vslope = _mm512_set1_ps(mod->slope), sign = _mm512_set1_ps(-0.0f);
    const __m512 j = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 6
    for (int r = 0; r < ATTN_FLASH_MR; r++) {
      const __m512 vrel = _mm512_set1_ps(rel + (float)r);
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) {
        const __m512 jc = _mm512_add_ps(j, _mm512_set1_ps(16.0f * c));
        const __m512 dist = _mm512_andnot_ps(sign, _mm512_sub_ps(vrel, jc));
        t[r][c] = _mm512_sub_ps(t[r][c], _mm512_mul_ps(vslope, dist));
      }
    }
  }
}
#endif
#endif
