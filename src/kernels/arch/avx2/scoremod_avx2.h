/* The score-modifier stage in registers, AVX2 + FMA (include only from
 * files built for AVX2): the tile units the fused forward tiles run
 * (attn_flash_mod, sdpa_stage.h), on 8 lanes. attn_scoremod8_avx2 is what
 * sdpa_flash_avx2.c calls; the units' own forms below it are shared with
 * their vector ops, so fused and step-by-step tiles give the same bits.
 *
 * Logit softcap (mod_softcap.c; its vector op softcap_avx2.c): y = x / cap (as x * (1/cap)), tanh y
 * by the rational of softcap_tanh.h (Horner with FMA), result cap * tanh y; -inf kept (a masked
 * key), NaN stays NaN, +inf -> cap. *g (when g is not NULL: the backward) := 1 - tanh^2 = 4e / (1 +
 * e)^2 with e = e^(-2|y|) (attn_vexp8_avx2; no cancellation near |tanh| = 1), 0 at -inf. */
#ifndef ATTN_SCOREMOD_AVX2_H
#define ATTN_SCOREMOD_AVX2_H

#if defined(__x86_64__)
#include "kernels/arch/isa_targets.h"
#include <immintrin.h>
#include <math.h>

#include "kernels/arch/avx2/vexp_avx2.h"
#include "kernels/flash/flash_tiles.h"
#include "kernels/sdpa/softcap_tanh.h"

/* tanh y (softcap_tanh.h); y = -inf gives -1 */
ATTN_AVX2_INLINE __m256 attn_softcap_tanh8_avx2(__m256 y) {
  const __m256 u = _mm256_min_ps(_mm256_set1_ps(ATTN_SOFTCAP_U_MAX), _mm256_mul_ps(y, y));
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(ATTN_SOFTCAP_P4), u, _mm256_set1_ps(ATTN_SOFTCAP_P3));
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(ATTN_SOFTCAP_Q4), u, _mm256_set1_ps(ATTN_SOFTCAP_Q3));
  p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(ATTN_SOFTCAP_P2));
  q = _mm256_fmadd_ps(q, u, _mm256_set1_ps(ATTN_SOFTCAP_Q2));
  p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(ATTN_SOFTCAP_P1));
  q = _mm256_fmadd_ps(q, u, _mm256_set1_ps(ATTN_SOFTCAP_Q1));
  p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(1.0f));
  q = _mm256_fmadd_ps(q, u, _mm256_set1_ps(1.0f));
  const __m256 t = _mm256_div_ps(_mm256_mul_ps(y, p), q);
  return _mm256_max_ps(_mm256_set1_ps(-1.0f), _mm256_min_ps(_mm256_set1_ps(1.0f), t));
}

ATTN_AVX2_INLINE __m256 attn_softcap8_avx2(__m256 x, __m256 vinv, __m256 vcap, __m256 *g) {
  const __m256 y = _mm256_mul_ps(x, vinv);
  const __m256 masked = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
  if (g) {
    const __m256 ay = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), y);
    const __m256 e = attn_vexp8_avx2(_mm256_mul_ps(_mm256_set1_ps(-2.0f), ay));
    const __m256 ope = _mm256_add_ps(_mm256_set1_ps(1.0f), e);
    *g = _mm256_andnot_ps(
        masked, _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(4.0f), e), _mm256_mul_ps(ope, ope)));
  }
  return _mm256_blendv_ps(_mm256_mul_ps(vcap, attn_softcap_tanh8_avx2(y)),
                          _mm256_set1_ps(-INFINITY), masked);
}

/* ALiBi on columns 8c..8c+7 of a row: x - slope |rel - j| (rel = p_i -
 * j0, j the column; exact integers as floats), which is x + the ALiBi
 * table's -(slope |p_i - j|) to the bit (the sign of a zero aside). */
ATTN_AVX2_INLINE __m256 attn_alibi8_avx2(__m256 x, __m256 vslope, __m256 vrel, int c) {
  const __m256 j = _mm256_add_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_ps(8.0f * c));
  const __m256 dist = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(vrel, j));
  return _mm256_sub_ps(x, _mm256_mul_ps(vslope, dist));
}

/* The stage's constants for a call (kinds: ATTN_FMOD_* bits, a constant
 * of the instance). */
typedef struct {
  __m256 inv, cap, slope;
} attn_scoremod_avx2;

ATTN_AVX2_INLINE attn_scoremod_avx2 attn_scoremod_init_avx2(const int kinds,
                                                            const attn_flash_mod *mod) {
  const float cap = kinds & ATTN_FMOD_CAP ? mod->cap : 1.0f;
  attn_scoremod_avx2 k = {_mm256_set1_ps(1.0f / cap), _mm256_set1_ps(cap),
                          _mm256_set1_ps(kinds & ATTN_FMOD_ALIBI ? mod->slope : 0.0f)};
  return k;
}

/* Logits x (scale q·k, -inf where masked) of columns 8c..8c+7 of a row whose
 * p_i - j0 is rel (vrel): the fused units in the stage's order. */
ATTN_AVX2_INLINE __m256 attn_scoremod8_avx2(const int kinds, const attn_scoremod_avx2 *k, __m256 x,
                                            __m256 vrel, int c) {
  if (kinds & ATTN_FMOD_CAP) x = attn_softcap8_avx2(x, k->inv, k->cap, NULL);
  if (kinds & ATTN_FMOD_ALIBI) x = attn_alibi8_avx2(x, k->slope, vrel, c);
  return x;
}
#endif
#endif
