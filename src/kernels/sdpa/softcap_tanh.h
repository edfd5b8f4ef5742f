/* tanh for the logit softcap: one rational function, the same formula in
 * every level's code (scoremod_avx2.h, scoremod_avx512.h, softcap_neon.c and
 * the portable loop of mod_softcap.c, the unit).
 *
 * tanh y ~ y P(u) / Q(u), u = min(y^2, 9.1^2), P and Q of degree 4 in u
 * (both with a constant term of 1, so tanh y = y exactly for tiny y), the
 * result clamped to [-1, 1]: a minimax fit of the relative error on
 * [0, 9.1] (2.4e-8 in exact arithmetic; tools/softcap_tanh_fit.py). Past
 * 9.1 tanh rounds to 1 in f32, and the clamp makes it exactly 1 (so an
 * +inf or huge score gives exactly cap). Evaluated in f32 (Horner with FMA
 * in the vector code) the error is at most 5.5 ulp of the result (3.3e-7
 * relative), 6.2 ulp for the portable form below (every float in
 * [1e-30, 12] tried when fitted); tests/test_softcap_tanh.c holds them to
 * 6.5 ulp on a dense grid.
 * NaN stays NaN (the min/max keep it through operand order); -inf gives -1
 * (the callers keep a -inf score, a masked key, as -inf).
 *
 * Cost: 2 multiplies, 8 FMAs, 1 division, 3 min/max: about half of
 * tanh |y| = (1 - e) / (1 + e) on e = e^(-2|y|), which needs the exp, a
 * series below |y| = 1/8 (where 1 - e cancels) and the sign restored. */
#ifndef ATTN_SOFTCAP_TANH_H
#define ATTN_SOFTCAP_TANH_H

#include <stdint.h>

#define ATTN_SOFTCAP_U_MAX (9.1f * 9.1f)
#define ATTN_SOFTCAP_P1 1.337749809e-01f
#define ATTN_SOFTCAP_P2 3.491289215e-03f
#define ATTN_SOFTCAP_P3 2.053407479e-05f
#define ATTN_SOFTCAP_P4 1.324283971e-08f
#define ATTN_SOFTCAP_Q1 4.671081901e-01f
#define ATTN_SOFTCAP_Q2 2.586090937e-02f
#define ATTN_SOFTCAP_Q3 3.278419026e-04f
#define ATTN_SOFTCAP_Q4 7.732454606e-07f

/* The portable form (plain multiplies and adds, no FMA): the generic level. */
static inline float attn_softcap_tanh(float y) {
  float u = y * y;
  u = u > ATTN_SOFTCAP_U_MAX ? ATTN_SOFTCAP_U_MAX : u; /* NaN stays */
  const float p =
      ((((ATTN_SOFTCAP_P4 * u + ATTN_SOFTCAP_P3) * u + ATTN_SOFTCAP_P2) * u + ATTN_SOFTCAP_P1) * u) +
      1.0f;
  const float q =
      ((((ATTN_SOFTCAP_Q4 * u + ATTN_SOFTCAP_Q3) * u + ATTN_SOFTCAP_Q2) * u + ATTN_SOFTCAP_Q1) * u) +
      1.0f;
  const float t = y * p / q;
  return t > 1.0f ? 1.0f : t < -1.0f ? -1.0f : t;
}

/* The levels' vector forms on a row (mod_softcap.c's vec[]: s [n] := cap
 * tanh(s / cap), -inf kept, NaN stays NaN, +inf -> cap; g (NULL or [n]) :=
 * 1 - tanh^2, 0 at -inf). */
#if defined(__x86_64__)
void attn_softcap_row_avx2(float cap, float *s, float *g, int64_t n);   /* softcap_avx2.c */
void attn_softcap_row_avx512(float cap, float *s, float *g, int64_t n); /* softcap_avx512.c */
#endif
#if defined(__aarch64__)
void attn_softcap_row_neon(float cap, float *s, float *g, int64_t n); /* softcap_neon.c */
#endif

#endif
