/* int8 flash attention forward (attn/sdpa_i8.h) on every path available
 * (portable, SIMD: the level's scores kernel — AVX512_VNNI, or VPMADDWD at
 * avx2 — with its bf16 tiles, AMX) against the f32 math path on the same f32
 * inputs, so the whole error of the method is measured: int8 q and k (per
 * row, after the k smoothing), bf16 P and v.
 *
 * Tolerances: with e_t = |scale|·sqrt(D)·max|q|·max|k - mean| / 127, the
 * size of the logit error one int8 step of q or k makes over a dot product
 * of D random terms (~8e-3 at the default scale, q, k in [-1, 1]):
 *   out: 4e-3 (bf16 v and P, 2^-9 relative each, |v| <= 1) + e_t (p moves
 *        by about e_t relative);
 *   lse: e_t + 1e-4·|lse| (f32, and the shift q·mean added back).
 * Measured: worst error / tolerance ~0.4 (out), ~0.75 (lse); main prints it.
 * The scores kernels (portable, SIMD, AMX) give the same int32 and f32
 * bits; where the SIMD path runs the portable softmax and P·V its outputs
 * equal the portable path's bit for bit, else (the level's vector tiles,
 * sdpa_flash_bf16_avx2.c or _avx512.c) they differ in exp, FMA and
 * summation order only:
 * within 2e-3 (out; a p moving by one bf16 step) and 1e-5 relative (lse) of
 * the portable path, and held to the same tolerances against math, as AMX.
 * The vector bf16 tiles are also compared with the portable tiles op by op
 * (test_bf16_tiles_match_portable). 1 vs 2 threads: bit-identical on every
 * path. */
#include <stdint.h>

#include "attn/sdpa_i8.h"
#include "harness.h"
#include "kernels/arch/amx/amx.h"
#include "kernels/kern.h"
#include "kernels/flash/sdpa_flash_i8.h"
#include "sdpa_cases.h"
#include "sdpa_problem.h"

static const attn_lowp_path paths[3] = {ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX};
static const char *path_name[3] = {"portable", "simd", "amx"};

/* The logit error scale of int8 q and k: |scale|·sqrt(D)·max|q|·max|k - mean| / 127
 * (one quantization step of either operand over a dot product of D random
 * terms); |k - mean| <= 1 in every case here. */
static double logit_err(const attn_sdpa_desc *d, float qmul) {
  double s = d->has_scale ? fabs(d->scale) : 1.0 / sqrt((double)d->D);
  return s * sqrt((double)d->D) * qmul / 127.0;
}

static double worst_out, worst_lse; /* largest error / tolerance seen */

/* Runs the int8 path and math on one problem and compares. */
static void compare_case(int pi, const sdpa_cfg *c, unsigned seed) {
  sdpa_problem p;
  sdpa_make_problem(c, seed, &p);
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o1, l1));
  int before = h_case_failed;
  h_case_failed = 0;
  const double et = logit_err(&p.d, c->qmul);
  double eo = CHECK_CLOSE("out", o1, o0, p.no, 4e-3 + et, 0);
  double el = CHECK_CLOSE("lse", l1, l0, p.nl, 2e-5 + et, 1e-4);
  if (eo / (4e-3 + et) > worst_out) worst_out = eo / (4e-3 + et);
  if (el / (2e-5 + et) > worst_lse) worst_lse = el / (2e-5 + et);
  CHECK(!sdpa_any_nan(o1, p.no));
  if (h_case_failed) sdpa_print_case(path_name[pi], c, seed);
  h_case_failed |= before;
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

static void for_each_path(const sdpa_cfg *c, unsigned seed) {
  if (!h_sample()) return; /* ATTN_TEST_SAMPLE (tests/harness.h) */
  for (int pi = 0; pi < 3; pi++)
    if (attn_sdpa_i8_path_available(paths[pi])) compare_case(pi, c, seed);
}

/* the shape suite (tests/sdpa_cases.h) */
static void test_head_dims(void) { sdpa_cases_head_dims(for_each_path); }
static void test_lengths_and_tails(void) { sdpa_cases_lengths_and_tails(for_each_path); }
static void test_causal_windows_offset(void) { sdpa_cases_causal_windows_offset(for_each_path); }
static void test_masks_key_lens_gqa(void) { sdpa_cases_masks_key_lens_gqa(for_each_path); }
static void test_random_shapes(void) { sdpa_cases_random(for_each_path, 12345, 24, 800); }

static void test_strided_scale_large_logits(void) {
  sdpa_cases_strided_scale(for_each_path);
  sdpa_cfg c = sdpa_strided_cfg();
  c.scale = -0.2f; /* a negative scale folds into the query scales as well */
  for_each_path(&c, 702);
}

/* out of math on q, k quantized per row as int8 without smoothing (the same
 * rule as the kernel's: max|x| / 127, round to nearest even), v as is */
static void unsmoothed_reference(const sdpa_problem *p, float *o, float *l) {
  const attn_sdpa_desc *d = &p->d;
  float *qd = malloc(p->nq * sizeof(float)), *kd = malloc(p->nk * sizeof(float));
  int8_t row[256];
  const float *src[2] = {p->q, p->k};
  float *dst[2] = {qd, kd};
  int64_t rows[2] = {p->nq / d->D, p->nk / d->D};
  for (int t = 0; t < 2; t++)
    for (int64_t r = 0; r < rows[t]; r++) {
      float s;
      CHECK_OK(attn_quantize_weights_s8(src[t] + r * d->D, 1, d->D, row, &s));
      for (int64_t e = 0; e < d->D; e++)
        dst[t][r * d->D + e] = s * row[e];
    }
  CHECK_OK(attn_sdpa_forward_math(d, qd, kd, p->v, o, l, NULL));
  free(qd), free(kd);
}

static double max_err(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++)
    if (fabs((double)a[i] - b[i]) > m) m = fabs((double)a[i] - b[i]);
  return m;
}

/* Keys with a common offset per channel of 25..75 (25-75x their spread of
 * +-1; trained models' keys have such channel offsets): with the smoothing
 * the int8 result is within the usual tolerance of math (as without the
 * offset); int8 keys without it (simulated here) are 2x past that and 10x
 * the smoothed error, so the check can tell. The key_lens / causal case
 * takes the mean over all Lk keys, masked ones included. lse is compared by
 * for_each_path (it needs the shift q·mean added back). */
static void test_k_smoothing(void) {
  for (int m = 0; m < 2; m++) {
    sdpa_cfg c = sdpa_plain(80, 150, 64);
    c.koff = 50.0f;
    c.qmul = 2.0f;
    if (m) {
      c.B = 2;
      c.key_lens = 1;
      c.causal = 1;
      c.bool_mask = 1;
    }
    for_each_path(&c, 1200 + m);
    sdpa_problem p;
    sdpa_make_problem(&c, 1200 + m, &p);
    float *o0 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl), *o1 = sdpa_zeros(p.no),
          *l1 = sdpa_zeros(p.nl);
    float *o2 = sdpa_zeros(p.no), *l2 = sdpa_zeros(p.nl);
    CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
    CHECK_OK(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, o1, l1));
    unsmoothed_reference(&p, o2, l2);
    double e1 = max_err(o1, o0, p.no), e2 = max_err(o2, o0, p.no);
    printf("  koff %g%s: max |out - math| %.2e smoothed, %.2e unsmoothed int8\n",
           (double)c.koff, m ? " (key_lens, causal, bool mask)" : "", e1, e2);
    const double tol = 4e-3 + logit_err(&p.d, c.qmul);
    CHECK(e1 < tol);
    CHECK(e2 > 2 * tol && e2 > 10 * e1); /* what the smoothing saves */
    free(o0), free(l0), free(o1), free(l1), free(o2), free(l2);
    sdpa_free_problem(&p);
  }
}

/* The three scores kernels on the same packed operands: the same int32, equal
 * to the int64 sums (values include -128, which the quantizer never makes:
 * the kernels must still be exact); the two dequantizations give the same
 * f32 bits. */
static void test_scores_kernels_identical(void) {
  attn_i8_scores_fn fn[3] = {attn_flash_i8_scores_generic, NULL, NULL};
  /* the active level's (VNNI at avx512, VPMADDWD at avx2) */
  if (attn_sdpa_i8_path_available(ATTN_LOWP_SIMD)) fn[1] = attn_kern_get()->lowp.i8_scores_simd;
  if (attn_sdpa_i8_path_available(ATTN_LOWP_AMX)) fn[2] = attn_flash_i8_scores_amx();
  attn_i8_dequant_fn dq = attn_kern_get()->lowp.i8_dequant; /* the active level's (or none) */
  for (int dc = 1; dc <= 4; dc++) {
    const int64_t ldk = 64 * dc + 64 * (dc & 1); /* padded rows on odd dc */
    int8_t *k = malloc(64 * ldk), *qp = aligned_alloc(64, ATTN_I8_QP_BYTES(4));
    int32_t s[3][64 * 16];
    float sk[64], sq[16], st[2][64 * 16];
    unsigned z = 77u + dc;
    for (int64_t i = 0; i < 64 * ldk; i++)
      k[i] = (int8_t)((z = z * 1664525u + 1013904223u) >> 24);
    int32_t *qsum = (int32_t *)(void *)(qp + dc * 1024);
    memset(qsum, 0, 16 * sizeof(int32_t));
    for (int64_t e = 0; e < 64 * dc; e++)
      for (int r = 0; r < 16; r++) {
        int8_t v = (int8_t)((z = z * 1664525u + 1013904223u) >> 24);
        qp[(e >> 6) * 1024 + ((e & 63) >> 2) * 64 + r * 4 + (e & 3)] = v;
        qsum[r] += v;
      }
    for (int f = 0; f < 3; f++) {
      if (!fn[f]) continue;
      if (f == 2) attn_amx_config_tiles();
      fn[f](k, ldk, dc, qp, s[f]);
      if (f == 2) attn_amx_release_tiles();
      CHECK(!memcmp(s[f], s[0], sizeof s[0]));
    }
    for (int j = 0; j < 64; j++)
      for (int r = 0; r < 16; r++) {
        int64_t sum = 0;
        for (int64_t e = 0; e < 64 * dc; e++)
          sum += (int64_t)k[j * ldk + e] * qp[(e >> 6) * 1024 + ((e & 63) >> 2) * 64 + r * 4 + (e & 3)];
        CHECK(s[0][j * 16 + r] == sum);
      }
    fill_uniform(sk, 64, 90 + dc, 0.001f, 0.02f);
    fill_uniform(sq, 16, 95 + dc, -0.02f, 0.02f);
    attn_i8_dequant_generic(s[0], sk, sq, st[0]);
    CHECK(st[0][17] == (float)s[0][17] * (sk[1] * sq[1]));
    if (dq) {
      dq(s[0], sk, sq, st[1]);
      CHECK(!memcmp(st[0], st[1], sizeof st[0]));
    }
    free(k), free(qp);
  }
  printf("  scores kernels compared: portable%s%s%s; dequant%s %s\n", fn[1] ? ", simd at " : "",
         fn[1] ? attn_kern_get()->name : "", fn[2] ? ", amx" : "", dq ? " portable =" : " portable only",
         dq ? attn_kern_get()->name : "");
}

/* The active level's row quantizer (AVX-512) gives attn_quantize_weights_s8's bits, ties,
 * tails, zero rows and non-finite values included; the AVX-512 column sums
 * of the key mean give the scalar loop's bits. */
static void test_quantizer_identical(void) {
  attn_i8_quantize_fn vq = attn_kern_get()->lowp.i8_quantize_row;
  attn_i8_colsum_fn vc = attn_kern_get()->lowp.i8_colsum;
  if (!vq || !vc) {
    SKIP("level %s: portable quantizer only", attn_isa_name(attn_isa_active()));
    return;
  }
  float x[256];
  int8_t q0[256], q1[256];
  for (int n = 1; n <= 256; n += (n < 40 ? 1 : 37)) {
    for (int t = 0; t < 4; t++) {
      fill_uniform(x, n, 1400 + n * 4 + t, -3, 3);
      if (t == 1) /* max 127: step 1, and every other value a tie (k + 1/2) */
        for (int i = 0; i < n; i++)
          x[i] = i == 0 ? 127.0f : (float)(i % 50 - 25) + 0.5f;
      if (t == 2) memset(x, 0, sizeof x);
      if (t == 3) x[n / 2] = (n & 1) ? NAN : INFINITY;
      float s0 = -1, s1 = -1;
      int b0 = attn_i8_quantize_row_generic(x, n, q0, &s0);
      int b1 = vq(x, n, q1, &s1);
      CHECK(b0 == b1 && b0 == (t == 3));
      if (!b0) CHECK(s0 == s1 && !memcmp(q0, q1, (size_t)n));
    }
  }
  static float k[300 * 203];
  fill_uniform(k, 300 * 203, 1500, -1, 60);
  for (int D = 1; D <= 200; D += 13) {
    double a0[256] = {0}, a1[256] = {0};
    attn_i8_colsum_generic(k + 1, 203, 300, D, a0);
    vc(k + 1, 203, 300, D, a1);
    CHECK(!memcmp(a0, a1, sizeof a0));
  }
}

/* SIMD and portable share the (identical) scores: with the portable tiles
 * the outputs are bit-identical, with the level's vector tiles close. */
static void test_simd_matches_portable(void) {
  if (!attn_sdpa_i8_path_available(ATTN_LOWP_SIMD)) {
    SKIP("no int8 scores kernel at level %s", attn_kern_get()->name);
    return;
  }
  sdpa_cfg c = sdpa_plain(90, 140, 96);
  c.B = 2;
  c.Hq = 4;
  c.Hkv = 2;
  c.causal = 1;
  c.add_mask = 1;
  c.koff = 3.0f;
  sdpa_problem p;
  sdpa_make_problem(&c, 1300, &p);
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_i8_path(ATTN_LOWP_PORTABLE, &p.d, p.q, p.k, p.v, o0, l0));
  CHECK_OK(attn_sdpa_forward_i8_path(ATTN_LOWP_SIMD, &p.d, p.q, p.k, p.v, o1, l1));
  if (!attn_kern_get()->lowp.flash_bf16_simd) {
    CHECK(!memcmp(o0, o1, p.no * sizeof(float)));
    CHECK(!memcmp(l0, l1, p.nl * sizeof(float)));
  } else {
    double eo = CHECK_CLOSE("out", o1, o0, p.no, 2e-3, 0);
    double el = CHECK_CLOSE("lse", l1, l0, p.nl, 1e-6, 1e-5);
    printf("  %s tiles vs portable: max |out| diff %.2e, |lse| %.2e\n",
           attn_kern_get()->lowp.flash_bf16_simd->name, eo, el);
  }
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

/* |got - want| <= tol_abs + rel * ref[i] elementwise (ref: a magnitude) */
static int close_to(const float *got, const float *want, const float *ref, int n, double tol_abs,
                    double rel, const char *what) {
  for (int i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    if (isnan(g) || isnan(w) ? !(isnan(g) && isnan(w))
                             : !(fabs(g - w) <= tol_abs + rel * (ref ? ref[i] : fabs(w)))) {
      printf("  %s[%d] = %.9g, portable %.9g\n", what, i, g, w);
      return 0;
    }
  }
  return 1;
}

static float bf16f(uint16_t h) { return attn_bf16_to_f32(h); }

/* The level's vector bf16 tiles (lowp.flash_bf16_simd) op by op against the
 * portable tiles on the same packed operands: products within 2^-20 of
 * sum |a||b| (f32, FMA, another order), exp within 1e-6 relative, bf16
 * roundings (p, ds) within one bf16 step (2^-8 relative); m and the
 * "moved" flag exact. Lane ranges, a fully masked lane, -inf / NaN logits
 * and lse = -inf included. */
static void test_bf16_tiles_match_portable(void) {
  const attn_flash_bf16_ops *v = attn_kern_get()->lowp.flash_bf16_simd,
                            *g = attn_flash_bf16_ops_generic();
  if (!v) {
    SKIP("level %s: no vector bf16 tiles", attn_kern_get()->name);
    return;
  }
  enum { DC = 3, D = 32 * DC, DVT = 5, NTC = 3, NQC = 2 };
  static uint16_t k[64 * (D + 8)], qp[DC * 512], vt[DVT * 16 * 64], p0[2 * 512], p1[2 * 512];
  static uint16_t a[64 * (NQC * 32 + 4)], bt[NQC * NTC * 512];
  static uint16_t pt0[64 * 20], pt1[64 * 20], ds0[64 * 20], ds1[64 * 20], dv0[1024], dv1[1024];
  static float st0[64 * 16], st1[64 * 16], ref[64 * 16], ot0[DVT * 256], ot1[DVT * 256],
      oref[DVT * 256], acc0[4 * NTC * 256], acc1[4 * NTC * 256], aref[4 * NTC * 256], tmp[8192];
  fill_uniform(tmp, 8192, 2001, -2, 2);
  for (int i = 0; i < 64 * (D + 8); i++) k[i] = attn_f32_to_bf16(tmp[i % 8192]);
  for (int i = 0; i < DC * 512; i++) qp[i] = attn_f32_to_bf16(tmp[(i * 7 + 3) % 8192]);
  for (int i = 0; i < DVT * 16 * 64; i++) vt[i] = attn_f32_to_bf16(tmp[(i * 5 + 1) % 8192]);
  for (int i = 0; i < 64 * (NQC * 32 + 4); i++) a[i] = attn_f32_to_bf16(tmp[(i * 3 + 2) % 8192]);
  for (int i = 0; i < NQC * NTC * 512; i++) bt[i] = attn_f32_to_bf16(tmp[(i * 11 + 5) % 8192]);
  int ok = 1;
  /* scores */
  g->scores(k, D + 8, DC, (D + 1) / 2, qp, st0);
  v->scores(k, D + 8, DC, (D + 1) / 2, qp, st1);
  for (int j = 0; j < 64; j++)
    for (int q = 0; q < 16; q++) {
      double s = 0;
      for (int e = 0; e < D; e++)
        s += fabs(bf16f(k[j * (D + 8) + e]) *
                  bf16f(qp[(e >> 5) * 512 + ((e & 31) >> 1) * 32 + q * 2 + (e & 1)]));
      ref[j * 16 + q] = (float)(s * ldexp(1, -20));
    }
  ok &= close_to(st1, st0, ref, 64 * 16, 0, 1, "scores");
  /* softmax: lanes 0-3 full, 4-11 ranges, 12 empty, 13 a -inf logit, 14 a NaN logit */
  int lo[16], hi[16];
  for (int q = 0; q < 16; q++) lo[q] = q < 4 ? 0 : (q * 5) % 30, hi[q] = q < 4 ? 64 : 30 + q * 2;
  lo[12] = hi[12] = 0;
  st0[7 * 16 + 13] = -INFINITY;
  st0[9 * 16 + 14] = NAN;
  for (int round = 0; round < 2; round++) {
    float m0[16], m1[16], l0[16], l1[16], al0[16], al1[16];
    for (int q = 0; q < 16; q++) { /* round 1: m already high in half the lanes (no move) */
      m0[q] = m1[q] = round && (q & 1) ? 50.0f : -INFINITY;
      l0[q] = l1[q] = round ? 2.0f : 0.0f;
    }
    for (int s = 0; s < 2; s++) { /* a second block: m moves by less / more than TAU */
      const float scale = s ? 1.7f : 0.9f;
      int mv0 = g->softmax(st0, scale, round ? lo : NULL, round ? hi : NULL, m0, l0, al0, p0);
      int mv1 = v->softmax(st0, scale, round ? lo : NULL, round ? hi : NULL, m1, l1, al1, p1);
      ok &= mv0 == mv1 && !memcmp(m0, m1, sizeof m0);
      ok &= close_to(al1, al0, NULL, 16, 0, 1e-6, "alpha") && close_to(l1, l0, NULL, 16, 0, 1e-5, "l");
      float pf0[1024], pf1[1024];
      for (int i = 0; i < 1024; i++) pf0[i] = bf16f(p0[i]), pf1[i] = bf16f(p1[i]);
      ok &= close_to(pf1, pf0, NULL, 1024, 1e-30, 1.0 / 256, "p");
    }
  }
  /* accum, with and without alpha */
  float alpha[16];
  fill_uniform(alpha, 16, 2002, 0.1f, 1.0f);
  fill_uniform(ot0, DVT * 256, 2003, -1, 1);
  memcpy(ot1, ot0, sizeof ot0);
  for (int t = 0; t < 2; t++) {
    g->accum(ot0, DVT, t ? alpha : NULL, vt, p0);
    v->accum(ot1, DVT, t ? alpha : NULL, vt, p0);
  }
  for (int i = 0; i < DVT * 256; i++) oref[i] = 2 * 64 * 2.0f * 6e3f * (float)ldexp(1, -20) + 1e-5f;
  ok &= close_to(ot1, ot0, oref, DVT * 256, 0, 1, "accum");
  /* probs_grad: lse finite, -inf (lane 12) and NaN (lane 15); lane ranges */
  float lse[16], di[16], dpt[64 * 16];
  fill_uniform(lse, 16, 2004, 1, 3);
  fill_uniform(di, 16, 2005, -0.5f, 0.5f);
  fill_uniform(dpt, 64 * 16, 2006, -1, 1);
  lse[12] = -INFINITY, lse[15] = NAN;
  st0[9 * 16 + 14] = 0.5f;
  g->probs_grad(st0, dpt, 0.7f, lo, hi, lse, di, 1.3f, pt0, ds0, 20, dv0);
  v->probs_grad(st0, dpt, 0.7f, lo, hi, lse, di, 1.3f, pt1, ds1, 20, dv1);
  {
    static float f0[64 * 20], f1[64 * 20];
    for (int i = 0; i < 64 * 20; i++) f0[i] = bf16f(pt0[i]), f1[i] = bf16f(pt1[i]);
    for (int j = 0; j < 64; j++) /* only columns < 16 are written */
      for (int q = 16; q < 20; q++) f0[j * 20 + q] = f1[j * 20 + q] = 0;
    ok &= close_to(f1, f0, NULL, 64 * 20, 1e-30, 1.0 / 256, "pt");
    for (int i = 0; i < 64 * 20; i++) f0[i] = bf16f(ds0[i]), f1[i] = bf16f(ds1[i]);
    for (int j = 0; j < 64; j++)
      for (int q = 16; q < 20; q++) f0[j * 20 + q] = f1[j * 20 + q] = 0;
    ok &= close_to(f1, f0, NULL, 64 * 20, 1e-30, 1.0 / 128, "dst");
    for (int i = 0; i < 1024; i++) f0[i] = bf16f(dv0[i]), f1[i] = bf16f(dv1[i]);
    ok &= close_to(f1, f0, NULL, 1024, 1e-30, 1.0 / 128, "dsv");
  }
  /* accum_t */
  fill_uniform(acc0, 4 * NTC * 256, 2007, -1, 1);
  memcpy(acc1, acc0, sizeof acc0);
  g->accum_t(acc0, NTC, a, NQC * 32 + 4, bt, NQC);
  v->accum_t(acc1, NTC, a, NQC * 32 + 4, bt, NQC);
  for (int i = 0; i < 4 * NTC * 256; i++) aref[i] = NQC * 32 * 4.0f * (float)ldexp(1, -20) + 1e-6f;
  ok &= close_to(acc1, acc0, aref, 4 * NTC * 256, 0, 1, "accum_t");
  CHECK(ok);
  printf("  %s tiles = portable tiles (within tolerance) at level %s\n", v->name,
         attn_kern_get()->name);
}

/* Rows with no allowed key: out 0, lse -inf, never NaN. */
static void test_fully_masked_rows(void) {
  sdpa_cfg c = sdpa_masked_rows_cfg();
  for (int pi = 0; pi < 3; pi++) {
    if (!attn_sdpa_i8_path_available(paths[pi])) continue;
    sdpa_problem p;
    sdpa_make_problem(&c, 900, &p);
    sdpa_hide_row(&p, 1, 3); /* batch 1's row 3: every key masked */
    float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl);
    for (int64_t i = 0; i < p.no; i++)
      o[i] = NAN;
    CHECK_OK(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o, l));
    sdpa_check_masked_rows(o, l, p.no);
    free(o), free(l);
    sdpa_free_problem(&p);
  }
}

/* NaN/inf that the quantizer never sees (v, the additive mask) propagate as
 * in math (attn/sdpa.h): a NaN or +inf logit from the mask at an allowed key
 * gives the row NaN out and lse (never out 0 / lse -inf); one at a key the
 * causal range hides is ignored; NaN in v reaches the rows attending to it.
 * (Non-finite q or k: ATTN_ENUMERIC, test_errors.) */
static void test_nan_in_v_and_masks(void) {
  sdpa_cfg c = sdpa_plain(70, 150, 32);
  c.causal = 1;
  c.add_mask = 1;
  for (int pi = 0; pi < 3; pi++) {
    if (!attn_sdpa_i8_path_available(paths[pi])) continue;
    sdpa_problem p;
    sdpa_make_problem(&c, 1400, &p);
    p.am[20 * 150 + 7] = NAN;      /* head 0, row 20, key 7 */
    p.am[30 * 150 + 3] = INFINITY; /* head 0, row 30: +inf logit, inf - inf */
    p.am[5 * 150 + 40] = NAN;      /* row 5 sees keys 0..5 only: ignored */
    p.v[10 * 32 + 2] = NAN;        /* head 0, key 10, column 2 (0·NaN in other rows too) */
    float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
          *l1 = sdpa_zeros(p.nl);
    CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
    CHECK_OK(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o1, l1));
    const double et = logit_err(&p.d, c.qmul);
    CHECK_CLOSE("lse", l1, l0, p.nl, 2e-5 + et, 1e-4); /* NaN exactly where math has it */
    int ok = isnan(l1[20]) && isnan(l1[30]) && isfinite(l1[5]);
    for (int e = 0; e < 32; e++)
      ok &= isnan(o1[20 * 32 + e]) && isnan(o1[30 * 32 + e]) &&
            (e == 2 || isfinite(o1[5 * 32 + e]));
    for (int i = 10; i < 70; i++) /* rows attending key 10 */
      if (i != 20 && i != 30 && p.am[i * 150 + 10] != -INFINITY)
        ok &= isnan(o1[i * 32 + 2]) && isfinite(o1[i * 32 + 3]) && isfinite(l1[i]);
    ok &= !sdpa_any_nan(o1 + 70 * 32, 70 * 32); /* head 1 untouched */
    CHECK(ok);
    if (!ok) printf("  ^ %s\n", path_name[pi]);
    free(o0), free(o1), free(l0), free(l1);
    sdpa_free_problem(&p);
  }
}

static void test_no_keys_no_queries(void) {
  sdpa_cfg c = sdpa_plain(5, 0, 64);
  sdpa_problem p;
  sdpa_make_problem(&c, 950, &p);
  float o[2 * 5 * 64], l[10];
  for (int i = 0; i < 2 * 5 * 64; i++)
    o[i] = NAN;
  CHECK_OK(attn_sdpa_forward_i8(&p.d, p.q, NULL, NULL, o, l));
  CHECK(o[0] == 0.0f && o[2 * 5 * 64 - 1] == 0.0f && l[9] == -INFINITY);
  sdpa_free_problem(&p);
  c = sdpa_plain(0, 7, 64);
  sdpa_make_problem(&c, 951, &p);
  CHECK_OK(attn_sdpa_forward_i8(&p.d, NULL, p.k, p.v, NULL, NULL));
  sdpa_free_problem(&p);
}

/* Same results for 1 and 2 threads, bit for bit, on every path. */
static void test_threads_bit_identical(void) {
  sdpa_cfg c = sdpa_plain(300, 333, 64);
  c.Hq = 4;
  c.Hkv = 2;
  c.causal = 1;
  c.key_lens = 1;
  c.B = 2;
  c.koff = 2.0f;
  int saved = attn_get_num_threads();
  for (int pi = 0; pi < 3; pi++) {
    if (!attn_sdpa_i8_path_available(paths[pi])) continue;
    sdpa_problem p;
    sdpa_make_problem(&c, 990, &p);
    float *o[2], *l[2];
    for (int t = 0; t < 2; t++) {
      attn_set_num_threads(t + 1);
      o[t] = sdpa_zeros(p.no), l[t] = sdpa_zeros(p.nl);
      CHECK_OK(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o[t], l[t]));
    }
    CHECK(!memcmp(o[0], o[1], p.no * sizeof(float)));
    CHECK(!memcmp(l[0], l[1], p.nl * sizeof(float)));
    for (int t = 0; t < 2; t++)
      free(o[t]), free(l[t]);
    sdpa_free_problem(&p);
  }
  attn_set_num_threads(saved);
}

static void test_errors(void) {
  sdpa_cfg c = sdpa_plain(8, 8, 64);
  sdpa_problem p;
  sdpa_make_problem(&c, 1000, &p);
  float o[2 * 8 * 64], l[16];
  CHECK_ERR(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, NULL, l), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, o, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_i8_path((attn_lowp_path)9, &p.d, p.q, p.k, p.v, o, l),
            ATTN_EUNSUPPORTED);
  for (int pi = 1; pi < 3; pi++)
    if (!attn_sdpa_i8_path_available(paths[pi]))
      CHECK_ERR(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o, l), ATTN_EUNSUPPORTED);
  attn_sdpa_desc d = p.d;
  float slopes[2] = {0.5f, 0.25f};
  d.alibi_slopes = slopes;
  CHECK_ERR(attn_sdpa_forward_i8(&d, p.q, p.k, p.v, o, l), ATTN_EUNSUPPORTED);
  d = p.d;
  d.Hkv = 3; /* 2 % 3 */
  CHECK_ERR(attn_sdpa_forward_i8(&d, p.q, p.k, p.v, o, l), ATTN_EINVAL);
  float keep = p.q[70];
  p.q[70] = NAN;
  CHECK_ERR(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, o, l), ATTN_ENUMERIC);
  p.q[70] = keep;
  p.k[9] = INFINITY;
  CHECK_ERR(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, o, l), ATTN_ENUMERIC);
  sdpa_free_problem(&p);
  sdpa_cfg big = sdpa_plain(4, 4, 257);
  sdpa_make_problem(&big, 1001, &p);
  float *ob = sdpa_zeros(p.no), lb[8];
  CHECK_ERR(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, ob, lb), ATTN_EUNSUPPORTED);
  free(ob);
  sdpa_free_problem(&p);
}

/* A refused tile permission: AMX is unavailable, AUTO runs the SIMD path
 * (or portable), bit-identical with that path forced. */
static int refuse(void) { return -1; }
static void test_amx_refused_falls_back(void) {
  sdpa_cfg c = sdpa_plain(45, 77, 64);
  c.causal = 1;
  sdpa_problem p;
  sdpa_make_problem(&c, 1100, &p);
  float *o0 = sdpa_zeros(p.no), *o1 = sdpa_zeros(p.no), *l0 = sdpa_zeros(p.nl),
        *l1 = sdpa_zeros(p.nl);
  attn_amx_set_request_hook(refuse);
  attn_lowp_path next = attn_sdpa_i8_path_available(ATTN_LOWP_SIMD) ? ATTN_LOWP_SIMD
                                                                    : ATTN_LOWP_PORTABLE;
  CHECK_OK(attn_sdpa_forward_i8_path(next, &p.d, p.q, p.k, p.v, o0, l0));
  CHECK(!attn_sdpa_i8_path_available(ATTN_LOWP_AMX));
  CHECK_ERR(attn_sdpa_forward_i8_path(ATTN_LOWP_AMX, &p.d, p.q, p.k, p.v, o1, l1),
            ATTN_EUNSUPPORTED);
  CHECK_OK(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, o1, l1));
  attn_amx_set_request_hook(NULL);
  CHECK(!memcmp(o0, o1, p.no * sizeof(float)) && !memcmp(l0, l1, p.nl * sizeof(float)));
  free(o0), free(o1), free(l0), free(l1);
  sdpa_free_problem(&p);
}

int main(void) {
  printf("# int8 flash: paths portable%s%s\n",
         attn_sdpa_i8_path_available(ATTN_LOWP_SIMD) ? ", simd" : "",
         attn_sdpa_i8_path_available(ATTN_LOWP_AMX) ? ", amx" : "");
  attn_set_num_threads(1); /* many small calls; test_threads_bit_identical runs 1 and 2 */
  RUN(test_scores_kernels_identical);
  RUN(test_quantizer_identical);
  RUN(test_head_dims);
  RUN(test_lengths_and_tails);
  RUN(test_causal_windows_offset);
  RUN(test_masks_key_lens_gqa);
  RUN(test_strided_scale_large_logits);
  RUN(test_random_shapes);
  RUN(test_k_smoothing);
  RUN(test_simd_matches_portable);
  RUN(test_bf16_tiles_match_portable);
  RUN(test_fully_masked_rows);
  RUN(test_nan_in_v_and_masks);
  RUN(test_no_keys_no_queries);
  RUN(test_threads_bit_identical);
  RUN(test_errors);
  RUN(test_amx_refused_falls_back);
  printf("# worst error / tolerance over the comparisons with math: out %.2f, lse %.2f\n", worst_out,
         worst_lse);
  HARNESS_END();
}
