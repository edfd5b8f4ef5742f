/* User modifiers (attn/sdpa_mods.h): FlexAttention's score_mod / mask_mod in
 * C, forward and backward, on math and on both flash kernel sets of this
 * level (portable and the level's own; tests/run.sh runs every level).
 *
 * Built-ins written as callbacks must give the built-in's numbers: causal
 * (with q_offset), sliding windows, ALiBi and document masking (packed
 * documents, against a bool mask), each with and without a block mask.
 * Tolerance between two ways of masking on one backend, and flash vs math:
 * as tests/test_flash.c (1e-5 + 1e-4 |want| forward, twice that for the
 * gradients). Softcap (cap * tanh(s / cap)) against a float64 reference of
 * the formula: 2e-5 + 2e-4 |ref| (f32 rounding of O(Lk) sums). Learnable
 * ALiBi slopes: the gradient from score_mod_param_grad against central
 * differences of the float64 loss (1e-3 relative: the f32 backward against
 * a float64 derivative). Plus: thread count does not change a bit (with the
 * parameter gradient), the block mask skips calls, NaN from a callback
 * follows the NaN contract, fp16 flash takes mods, bad descriptors are
 * refused. bf16 flash (every path here; forward and backward) and int8 flash
 * (forward) against f32 math with the same mods, at the tolerances of
 * tests/test_sdpa_bf16.c and tests/test_sdpa_i8.c. */
#include <stdatomic.h>
#include <stdint.h>

#include "attn/sdpa_f16.h"
#include "attn/sdpa_bf16.h"
#include "attn/sdpa_i8.h"
#include "attn/sdpa_mods.h"
#include "harness.h"
#include "kernels/kern.h"
#include "kernels/flash/sdpa_flash.h"
#include "flash_ops_list.h"
#include "sdpa_problem.h"
#include "usermod_callbacks.h"
#include "usermod_run.h"

/* ---- the mask callbacks of these tests (usermod_callbacks.h has the rest) */
static int window_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  const mctx *c = u;
  (void)b, (void)h;
  const int64_t p = q + c->q_offset;
  return (c->wl < 0 || kv >= p - c->wl) && (c->wr < 0 || kv <= p + c->wr);
}

static int doc_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)h;
  const mctx *c = u;
  return c->doc[b * 1000 + q] == c->doc[b * 1000 + kv];
}

static int counting_causal(int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  atomic_fetch_add(&((mctx *)u)->calls, 1);
  return causal_mask(b, h, q, kv, u);
}

static int nothing_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  atomic_fetch_add(&((mctx *)u)->calls, 1);
  return 0;
}

static float nan_score(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  const mctx *c = u;
  return b == c->nan_b && h == c->nan_h && q == c->nan_q && kv == c->nan_kv ? NAN : s;
}

static float counting_score(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  atomic_fetch_add(&((mctx *)u)->calls, 1);
  return s;
}

/* causal as mask_mod, also decode-like (q_offset = Lk - Lq) */
static void test_causal_mask_mod(void) {
  for (int t = 0; t < 2; t++) {
    sdpa_problem p;
    make(&p, t ? 70 : 150, 150, 0, t ? 80 : 0, 100 + t);
    mctx u = {.q_offset = p.d.q_offset};
    attn_sdpa_mods mods = {.mask_mod = causal_mask, .user = &u};
    attn_sdpa_desc builtin = p.d;
    builtin.causal = 1;
    against_builtin("causal mask_mod", &p, &builtin, &mods, 0, 0);
    against_builtin("causal mask_mod, block mask 64x64", &p, &builtin, &mods, 64, 64);
    against_builtin("causal mask_mod, block mask 5x40", &p, &builtin, &mods, 5, 40);
    sdpa_free_problem(&p);
  }
}

/* sliding windows (left only, both sides) as mask_mod */
static void test_window_mask_mod(void) {
  static const int w[3][2] = {{20, -1}, {30, 7}, {-1, 0}};
  for (int t = 0; t < 3; t++) {
    sdpa_problem p;
    make(&p, 130, 170, 0, t == 1 ? 40 : 0, 200 + t);
    mctx u = {.q_offset = p.d.q_offset, .wl = w[t][0], .wr = w[t][1]};
    attn_sdpa_mods mods = {.mask_mod = window_mask, .user = &u};
    attn_sdpa_desc builtin = p.d;
    builtin.window_left = w[t][0], builtin.window_right = w[t][1];
    against_builtin("window mask_mod", &p, &builtin, &mods, 0, 0);
    against_builtin("window mask_mod, block mask 64x64", &p, &builtin, &mods, 64, 64);
    sdpa_free_problem(&p);
  }
}

/* ALiBi as score_mod (an additive bias: derivative 1), with causal built in */
static void test_alibi_score_mod(void) {
  for (int t = 0; t < 2; t++) {
    sdpa_problem p;
    make(&p, 110, 140, t, t ? 30 : 0, 300 + t);
    float slopes[4];
    CHECK_OK(attn_alibi_slopes(4, slopes));
    mctx u = {.q_offset = p.d.q_offset, .slopes = slopes, .H = 4};
    attn_sdpa_mods mods = {.score_mod = alibi_score, .score_mod_grad = one_grad, .user = &u};
    attn_sdpa_desc builtin = p.d;
    builtin.alibi_slopes = slopes;
    against_builtin("alibi score_mod", &p, &builtin, &mods, 0, 0);
    sdpa_free_problem(&p);
  }
}

/* packed documents: mask_mod doc[q] == doc[kv] against the same bool mask,
 * plus causal built in; block mask 32x32 (blocks inside one document FULL) */
static void test_document_mask_mod(void) {
  sdpa_problem p;
  make(&p, 160, 160, 1, 0, 400);
  int32_t doc[2000];
  attn_sdpa_desc builtin = p.d;
  uint8_t *bm = usermod_documents(doc, &builtin);
  mctx u = {.doc = doc};
  attn_sdpa_mods mods = {.mask_mod = doc_mask, .user = &u};
  against_builtin("document mask_mod", &p, &builtin, &mods, 0, 0);
  against_builtin("document mask_mod, block mask 32x32", &p, &builtin, &mods, 32, 32);
  free(bm);
  sdpa_free_problem(&p);
}

/* ---- float64 reference of a score_mod (contiguous problem) -------------- */
typedef double (*mod64_fn)(double s, int64_t h, int64_t q, int64_t kv, const mctx *c,
                           double *deriv);

static double softcap64(double s, int64_t h, int64_t q, int64_t kv, const mctx *c, double *deriv) {
  (void)h, (void)q, (void)kv;
  const double t = tanh(s / c->cap);
  *deriv = 1.0 - t * t;
  return c->cap * t;
}

static double alibi64(double s, int64_t h, int64_t q, int64_t kv, const mctx *c, double *deriv) {
  *deriv = 1.0;
  return s - (double)c->slopes[h] * dist(c, q, kv);
}

/* out, dq, dk, dv (each NULL or sized as p's) and the loss sum(out * dout),
 * causal when p->d.causal (q_offset 0); no other masks. */
static double ref64(const sdpa_problem *p, mod64_fn f, const mctx *c, double *out, double *dq,
                    double *dk, double *dv) {
  const attn_sdpa_desc *d = &p->d;
  const int64_t Lq = d->Lq, Lk = d->Lk, D = d->D, Dv = d->Dv, G = d->Hq / d->Hkv;
  const double scale = 1.0 / sqrt((double)D);
  double loss = 0, *s = malloc(Lk * sizeof(double)), *dr = malloc(Lk * sizeof(double));
  if (dk) memset(dk, 0, p->nk * sizeof(double));
  if (dv) memset(dv, 0, p->nv * sizeof(double));
  for (int64_t b = 0; b < d->B; b++)
    for (int64_t h = 0; h < d->Hq; h++) {
      const int64_t g = h / G;
      const float *Q = p->q + (b * d->Hq + h) * Lq * D, *K = p->k + (b * d->Hkv + g) * Lk * D;
      const float *V = p->v + (b * d->Hkv + g) * Lk * Dv, *dO = p->dout + (b * d->Hq + h) * Lq * Dv;
      for (int64_t i = 0; i < Lq; i++) {
        const int64_t hi = d->causal ? i + 1 : Lk;
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < hi; j++) {
          double x = 0;
          for (int64_t e = 0; e < D; e++)
            x += (double)Q[i * D + e] * K[j * D + e];
          s[j] = f(scale * x, h, i, j, c, &dr[j]);
          if (s[j] > m) m = s[j];
        }
        for (int64_t j = 0; j < hi; j++)
          sum += exp(s[j] - m);
        double o[64] = {0}, dpo = 0; /* Dv <= 64 */
        for (int64_t j = 0; j < hi; j++) {
          s[j] = exp(s[j] - m) / sum; /* p */
          for (int64_t e = 0; e < Dv; e++)
            o[e] += s[j] * V[j * Dv + e];
        }
        for (int64_t e = 0; e < Dv; e++) {
          loss += o[e] * dO[i * Dv + e];
          dpo += o[e] * dO[i * Dv + e];
          if (out) out[((b * d->Hq + h) * Lq + i) * Dv + e] = o[e];
        }
        if (!dq) continue;
        double *dqi = dq + ((b * d->Hq + h) * Lq + i) * D;
        memset(dqi, 0, D * sizeof(double));
        for (int64_t j = 0; j < hi; j++) {
          double dp = 0;
          for (int64_t e = 0; e < Dv; e++) {
            dp += (double)dO[i * Dv + e] * V[j * Dv + e];
            dv[((b * d->Hkv + g) * Lk + j) * Dv + e] += s[j] * dO[i * Dv + e];
          }
          const double ds = s[j] * (dp - dpo) * dr[j] * scale;
          for (int64_t e = 0; e < D; e++) {
            dqi[e] += ds * K[j * D + e];
            dk[((b * d->Hkv + g) * Lk + j) * D + e] += ds * Q[i * D + e];
          }
        }
      }
    }
  free(s), free(dr);
  return loss;
}

static void close64(const char *what, const float *got, const double *want, int64_t n) {
  float *w = malloc((n + 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    w[i] = (float)want[i];
  CHECK_CLOSE(what, got, w, n, 2e-5, 2e-4);
  free(w);
}

/* softcap (Gemma 2) as score_mod with its derivative, against float64 */
static void test_softcap_vs_float64(void) {
  for (int t = 0; t < 2; t++) {
    sdpa_cfg c = shape(70, t ? 70 : 90);
    c.causal = t;
    c.qmul = 4.0f; /* logits up to ~ +-10: the cap matters */
    sdpa_problem p;
    sdpa_make_problem(&c, 500 + t, &p);
    mctx u = {.cap = t ? 2.0f : 5.0f};
    attn_sdpa_mods mods = {.score_mod = softcap_score, .score_mod_grad = softcap_grad, .user = &u};
    attn_sdpa_desc d = p.d;
    d.mods = &mods;
    double *o = malloc(p.no * sizeof(double)), *dq = malloc(p.nq * sizeof(double));
    double *dk = malloc(p.nk * sizeof(double)), *dv = malloc(p.nv * sizeof(double));
    ref64(&p, softcap64, &u, o, dq, dk, dv);
    for (int be = MATH; be < n_ops; be++) {
      results r;
      run(be, &d, &p, &r);
      int before = h_case_failed;
      h_case_failed = 0;
      close64("out", r.x[0], o, p.no);
      close64("dq", r.x[2], dq, p.nq);
      close64("dk", r.x[3], dk, p.nk);
      close64("dv", r.x[4], dv, p.nv);
      if (h_case_failed) printf("  ^ softcap %g causal %d, %s\n", (double)u.cap, t, be_name(be));
      h_case_failed |= before;
      release(&r);
    }
    free(o), free(dq), free(dk), free(dv);
    sdpa_free_problem(&p);
  }
}

/* learnable ALiBi slopes: sum over (b, h) partials of score_mod_param_grad
 * against central differences of the float64 loss sum(out * dout) */
static void test_alibi_slope_gradient(void) {
  sdpa_problem p;
  make(&p, 60, 60, 1, 0, 600);
  float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f}, partial[8];
  mctx u = {.slopes = slopes, .B = 2, .H = 4, .slope_grad = partial};
  attn_sdpa_mods mods = {.score_mod = alibi_score,
                         .score_mod_grad = one_grad,
                         .score_mod_param_grad = alibi_param_grad,
                         .user = &u};
  attn_sdpa_desc d = p.d;
  d.mods = &mods;
  double fd[4];
  for (int h = 0; h < 4; h++) {
    const float keep = slopes[h], eps = 1e-3f;
    slopes[h] = keep + eps;
    double up = ref64(&p, alibi64, &u, NULL, NULL, NULL, NULL);
    slopes[h] = keep - eps;
    double down = ref64(&p, alibi64, &u, NULL, NULL, NULL, NULL);
    slopes[h] = keep;
    fd[h] = (up - down) / (2.0 * (double)eps);
  }
  for (int be = MATH; be < n_ops; be++) {
    memset(partial, 0, sizeof partial);
    results r;
    run(be, &d, &p, &r);
    for (int h = 0; h < 4; h++) {
      const double g = (double)partial[h] + partial[4 + h]; /* batches in order */
      if (!(fabs(g - fd[h]) <= 1e-4 + 1e-3 * fabs(fd[h]))) {
        printf("  slope %d: %s gives %.7g, finite differences %.7g\n", h, be_name(be), g, fd[h]);
        h_case_failed = 1;
      }
    }
    release(&r);
  }
  sdpa_free_problem(&p);
}

/* 1 and 2 threads: the same bits, the parameter gradient partials included */
static void test_threads_bit_identical(void) {
  sdpa_problem p;
  make(&p, 150, 200, 0, 0, 700);
  float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
  mctx u = {.slopes = slopes, .B = 2, .H = 4};
  attn_sdpa_mods mods = {.score_mod = alibi_score,
                         .score_mod_grad = one_grad,
                         .score_mod_param_grad = alibi_param_grad,
                         .mask_mod = causal_mask,
                         .user = &u};
  attn_block_mask bm;
  CHECK_OK(attn_block_mask_from_mask_mod(causal_mask, &u, 1, 1, 150, 200, 64, 64, &bm));
  mods.block_mask = &bm;
  attn_sdpa_desc d = p.d;
  d.mods = &mods;
  usermod_threads_identical(&p, &d, &u.slope_grad);
  attn_block_mask_free(&bm);
  sdpa_free_problem(&p);
}

/* the block mask: its states, and the calls it saves in flash (full blocks
 * call no mask_mod, empty ones nothing at all) */
static void test_block_mask_skips(void) {
  mctx u = {0};
  attn_block_mask bm;
  CHECK_OK(attn_block_mask_from_mask_mod(causal_mask, &u, 1, 1, 130, 130, 64, 64, &bm));
  CHECK(bm.nq == 3 && bm.nkv == 3);
  const uint8_t want[9] = {2, 0, 0, 1, 2, 0, 1, 1, 2};
  CHECK(!memcmp(bm.state, want, 9));
  attn_block_mask_free(&bm);
  sdpa_cfg c = shape(256, 256);
  c.B = 1, c.Hq = c.Hkv = 1;
  sdpa_problem p;
  sdpa_make_problem(&c, 800, &p);
  float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl);
  attn_sdpa_mods mods = {.mask_mod = counting_causal, .user = &u};
  attn_sdpa_desc d = p.d;
  d.mods = &mods;
  for (int o_ = 0; o_ < n_ops; o_++) {
    long calls[2];
    for (int t = 0; t < 2; t++) {
      CHECK_OK(attn_block_mask_from_mask_mod(causal_mask, &u, 1, 1, 256, 256, 64, 64, &bm));
      mods.block_mask = t ? &bm : NULL;
      atomic_store(&u.calls, 0);
      CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[o_], &d, p.q, p.k, p.v, o, l));
      calls[t] = atomic_load(&u.calls);
      attn_block_mask_free(&bm);
    }
    /* no block mask: every pair of the lower-left tiles; with it, the
     * diagonal 64 x 64 blocks only */
    CHECK(calls[0] >= 256L * 257 / 2);
    CHECK(calls[1] == 4L * 64 * 64);
  }
  /* a mask_mod that excludes everything: with its block mask no call at all,
   * every row out 0 and lse -inf */
  mods.mask_mod = nothing_mask;
  mods.score_mod = counting_score, mods.score_mod_grad = one_grad;
  CHECK_OK(attn_block_mask_from_mask_mod(nothing_mask, &u, 1, 1, 256, 256, 64, 64, &bm));
  mods.block_mask = &bm;
  for (int o_ = 0; o_ < n_ops; o_++) {
    atomic_store(&u.calls, 0);
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[o_], &d, p.q, p.k, p.v, o, l));
    CHECK(atomic_load(&u.calls) == 0);
    CHECK(sdpa_max_abs(o, p.no) == 0.0f && l[0] == -INFINITY && l[255] == -INFINITY);
  }
  attn_block_mask_free(&bm);
  free(o), free(l);
  sdpa_free_problem(&p);
}

/* score_mod NaN at one pair: that row's out, lse, dq NaN, the other rows
 * finite, no crash; -inf from score_mod excludes the key */
static void test_nan_contract(void) {
  mctx u = {.nan_b = 1, .nan_h = 2, .nan_q = 3, .nan_kv = 5};
  attn_sdpa_mods mods = {.score_mod = nan_score, .score_mod_grad = one_grad, .user = &u};
  usermod_nan_contract(&mods);
}

/* fp16 flash runs the f32 loop: mods work there too */
static void test_f16_flash(void) {
  sdpa_problem p;
  make(&p, 100, 120, 0, 0, 1000);
  sdpa_problem_to_f16(&p);
  mctx u = {0};
  attn_sdpa_mods mods = {.mask_mod = causal_mask, .user = &u};
  attn_sdpa_desc d = p.d, builtin = p.d;
  d.mods = &mods;
  builtin.causal = 1;
  results a, b;
  run(F16, &d, &p, &a);
  run(F16, &builtin, &p, &b);
  same("f16 causal mask_mod", F16, &p, &a, &b, 1);
  release(&a), release(&b);
  sdpa_free_problem(&p);
}

static const attn_lowp_path LOWP[] = {ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX,
                                      ATTN_LOWP_F32};

/* bf16: causal as mask_mod (with its block mask) + ALiBi as score_mod, and
 * softcap, against f32 math with the built-ins / the same mods on the
 * bf16-valued inputs. Tolerances (test_sdpa_bf16.c): out 2.5e-3, lse 2e-5 +
 * 2e-5 |lse|, gradients 2^-7 of the tensor's largest magnitude + 1e-4. The
 * slope gradient sums g |i - j| over ~10^4 pairs of both signs, and g holds
 * D_i = rowsum(dout out) with out's bf16 error (2^-9): within 2e-2 of the
 * largest slope gradient (measured: 0.15 on 21, the head with the widest
 * attention; 0 on the f32 path). */
static void test_bf16_paths(void) {
  sdpa_cfg c = shape(100, 140);
  c.qmul = 2.0f;
  sdpa_problem p;
  sdpa_make_problem(&c, 1200, &p);
  sdpa_problem_to_bf16(&p);
  float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f}, partial[8], want_slope[4], slope_max = 0;
  mctx u = {.slopes = slopes, .B = 2, .H = 4, .slope_grad = partial, .cap = 3.0f};
  attn_block_mask bm;
  CHECK_OK(attn_block_mask_from_mask_mod(causal_mask, &u, 1, 1, 100, 140, 64, 64, &bm));
  attn_sdpa_mods alibi = {.score_mod = alibi_score,
                          .score_mod_grad = one_grad,
                          .score_mod_param_grad = alibi_param_grad,
                          .mask_mod = causal_mask,
                          .user = &u,
                          .block_mask = &bm};
  attn_sdpa_mods cap = {.score_mod = softcap_score, .score_mod_grad = softcap_grad, .user = &u};
  for (int t = 0; t < 2; t++) {
    attn_sdpa_desc d = p.d, ref = p.d;
    d.mods = t ? &cap : &alibi;
    if (t) ref.mods = &cap;
    else ref.causal = 1, ref.alibi_slopes = slopes;
    results want;
    run(MATH, &ref, &p, &want);
    memset(partial, 0, sizeof partial);
    if (!t) { /* math with the mods: the slope gradient to compare with */
      results mm;
      attn_sdpa_desc dm = d;
      run(MATH, &dm, &p, &mm);
      release(&mm);
      for (int h = 0; h < 4; h++) {
        want_slope[h] = partial[h] + partial[4 + h];
        slope_max = fmaxf(slope_max, fabsf(want_slope[h]));
      }
    }
    const int64_t n[5] = {p.no, p.nl, p.nq, p.nk, p.nv};
    for (unsigned pa = 0; pa < sizeof LOWP / sizeof LOWP[0]; pa++) {
      if (!attn_sdpa_bf16_path_available(LOWP[pa])) continue;
      results r;
      for (int i = 0; i < 5; i++)
        r.x[i] = sdpa_zeros(n[i]);
      memset(partial, 0, sizeof partial);
      CHECK_OK(attn_sdpa_forward_bf16_path(LOWP[pa], &d, p.qh, p.kh, p.vh, r.x[0], r.x[1]));
      CHECK_OK(attn_sdpa_backward_bf16_path(LOWP[pa], &d, p.qh, p.kh, p.vh, r.x[0], r.x[1], p.dout,
                                            r.x[2], r.x[3], r.x[4]));
      int before = h_case_failed;
      h_case_failed = 0;
      CHECK_CLOSE("out", r.x[0], want.x[0], p.no, 2.5e-3, 0);
      CHECK_CLOSE("lse", r.x[1], want.x[1], p.nl, 2e-5, 2e-5);
      CHECK_CLOSE("dq", r.x[2], want.x[2], p.nq, sdpa_max_abs(want.x[2], p.nq) / 128 + 1e-4, 0);
      CHECK_CLOSE("dk", r.x[3], want.x[3], p.nk, sdpa_max_abs(want.x[3], p.nk) / 128 + 1e-4, 0);
      CHECK_CLOSE("dv", r.x[4], want.x[4], p.nv, sdpa_max_abs(want.x[4], p.nv) / 128 + 1e-4, 0);
      for (int h = 0; h < 4 && !t; h++) /* see the test's comment */
        CHECK(fabsf(partial[h] + partial[4 + h] - want_slope[h]) <= 2e-2f * slope_max);
      if (h_case_failed) printf("  ^ bf16 %s, %s\n", t ? "softcap" : "causal + alibi",
                                attn_sdpa_bf16_path_name(LOWP[pa]));
      h_case_failed |= before;
      release(&r);
    }
    release(&want);
  }
  attn_block_mask_free(&bm);
  sdpa_free_problem(&p);
}

/* int8 forward: causal mask_mod + softcap against f32 math with the same
 * mods, k offset per channel (a large shift scale q·mean(k) that the int8
 * scores leave out and score_mod must see added back). Tolerances
 * (test_sdpa_i8.c): out 4e-3 + e_t, lse e_t + 1e-4 |lse| with e_t the logit
 * error of one int8 step, scale sqrt(D) max|q| max|k - mean| / 127. */
static void test_i8_paths(void) {
  sdpa_cfg c = shape(90, 130);
  c.koff = 1.5f;
  sdpa_problem p;
  sdpa_make_problem(&c, 1300, &p);
  mctx u = {.cap = 4.0f};
  attn_sdpa_mods mods = {.score_mod = softcap_score,
                         .score_mod_grad = softcap_grad,
                         .mask_mod = causal_mask,
                         .user = &u};
  attn_sdpa_desc d = p.d;
  d.mods = &mods;
  float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl), *wo = sdpa_zeros(p.no), *wl = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&d, p.q, p.k, p.v, wo, wl, NULL));
  const double et = 1.0 * 2.0 / 127.0; /* scale sqrt(D) = 1, |q| <= 1, |k - mean| <= 2 */
  for (unsigned pa = 0; pa < sizeof LOWP / sizeof LOWP[0]; pa++) {
    if (!attn_sdpa_i8_path_available(LOWP[pa])) continue;
    CHECK_OK(attn_sdpa_forward_i8_path(LOWP[pa], &d, p.q, p.k, p.v, o, l));
    int before = h_case_failed;
    h_case_failed = 0;
    CHECK_CLOSE("out", o, wo, p.no, 4e-3 + et, 0);
    CHECK_CLOSE("lse", l, wl, p.nl, et, 1e-4);
    if (h_case_failed) printf("  ^ i8 path %d\n", (int)LOWP[pa]);
    h_case_failed |= before;
  }
  free(o), free(l), free(wo), free(wl);
  sdpa_free_problem(&p);
}

/* bad descriptors: clear errors, nothing run */
static void test_bad_input(void) {
  sdpa_problem p;
  make(&p, 20, 30, 0, 0, 1100);
  float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl), *g[3];
  g[0] = sdpa_zeros(p.nq), g[1] = sdpa_zeros(p.nk), g[2] = sdpa_zeros(p.nv);
  mctx u = {0};
  attn_block_mask bm, wrong;
  CHECK_OK(attn_block_mask_from_mask_mod(causal_mask, &u, 1, 1, 20, 30, 8, 8, &bm));
  CHECK_OK(attn_block_mask_from_mask_mod(causal_mask, &u, 1, 1, 20, 31, 8, 8, &wrong));
  attn_sdpa_mods mods = {.score_mod = softcap_score, .user = &u};
  attn_sdpa_desc d = p.d;
  d.mods = &mods;
  u.cap = 5;
  /* score_mod without its derivative: the forward runs, the backward refuses */
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_AUTO, p.q, p.k, p.v, o, l, NULL));
  for (int be = 0; be < 3; be++)
    CHECK_ERR(
        attn_sdpa_backward_f32(&d, (attn_backend)be, p.q, p.k, p.v, o, l, p.dout, g[0], g[1], g[2]),
        ATTN_EINVAL);
  attn_sdpa_mods pg = {.score_mod_param_grad = alibi_param_grad, .user = &u};
  d.mods = &pg; /* a parameter gradient without score_mod */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, NULL), ATTN_EINVAL);
  attn_sdpa_mods nomask = {.block_mask = &bm, .user = &u};
  d.mods = &nomask; /* a block mask without mask_mod */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL), ATTN_EINVAL);
  attn_sdpa_mods badbm = {.mask_mod = causal_mask, .block_mask = &wrong, .user = &u};
  d.mods = &badbm; /* a block mask for another Lk */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL), ATTN_EINVAL);
  badbm.block_mask = &bm;
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL));
  /* score_mod with Shaw keys; the probs recomputation refuses mods */
  float shaw[3 * 24] = {0};
  attn_sdpa_mods sm = {.score_mod = softcap_score, .score_mod_grad = softcap_grad, .user = &u};
  d.mods = &sm;
  d.shaw_k = shaw, d.shaw_max = 2;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, NULL),
            ATTN_EUNSUPPORTED);
  d.shaw_k = NULL, d.shaw_max = 0;
  CHECK_ERR(attn_sdpa_probs_f32(&d, p.q, p.k, l, 0, 0, 0, 1, g[1]), ATTN_EUNSUPPORTED);
  attn_block_mask none;
  CHECK_ERR(attn_block_mask_from_mask_mod(NULL, &u, 1, 1, 4, 4, 2, 2, &none), ATTN_EINVAL);
  CHECK_ERR(attn_block_mask_from_mask_mod(causal_mask, &u, 1, 1, 4, 4, 0, 2, &none), ATTN_EINVAL);
  CHECK(none.state == NULL);
  attn_block_mask_free(&bm);
  attn_block_mask_free(&wrong);
  free(o), free(l), free(g[0]), free(g[1]), free(g[2]);
  sdpa_free_problem(&p);
}

int main(void) {
  attn_set_num_threads(1); /* see test_threads_bit_identical */
  n_ops = flash_ops_portable_and_level(ops_list);
  RUN(test_causal_mask_mod);
  RUN(test_window_mask_mod);
  RUN(test_alibi_score_mod);
  RUN(test_document_mask_mod);
  RUN(test_softcap_vs_float64);
  RUN(test_alibi_slope_gradient);
  RUN(test_threads_bit_identical);
  RUN(test_block_mask_skips);
  RUN(test_nan_contract);
  RUN(test_f16_flash);
  RUN(test_bf16_paths);
  RUN(test_i8_paths);
  RUN(test_bad_input);
  HARNESS_END();
}
