/* Attention dropout in the SDPA (attn/sdpa.h dropout_* fields): the keep
 * mask (fraction near 1 - p, every ISA's row kernel the portable one's
 * bits), the flash forward and backward against the math path with the same
 * mask, both against a reference built from the undropped probabilities and
 * attn_sdpa_dropout_keep, finite differences through the fixed mask, 1 vs 2
 * threads bit for bit, p = 0 as no dropout, bad p refused.
 * Tolerances: flash vs math 2e-5 of the largest |value| (f32 rounding in a
 * different order); the reference (double) 2e-5; finite differences (f32
 * forward, eps 1e-2) 3e-3 + 2e-2 |g|. */
#include <stdint.h>

#include "attn/sdpa_bf16.h"
#include "harness.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_dropout.h"
#include "sdpa_problem.h"

#define TOL 2e-5f

static int close_all(const float *a, const float *b, int64_t n, float tol) {
  float m = sdpa_max_abs(b, n), worst = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float e = fabsf(a[i] - b[i]);
    if (!(e <= worst)) worst = e; /* NaN too */
  }
  if (!(worst <= tol * (m > 1.0f ? m : 1.0f))) {
    printf("  max |diff| %g (scale %g)\n", (double)worst, (double)m);
    return 0;
  }
  return 1;
}

static void set_drop(attn_sdpa_desc *d, float p, uint64_t seed) {
  d->dropout_p = p;
  d->dropout_seed = seed;
  d->dropout_offset = 7;
}

/* ---- the mask ------------------------------------------------------------- */

static void test_keep_fraction_near_one_minus_p(void) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 2, 3, 3, 128, 160, 8, 8);
  const int64_t n = 128 * 160;
  uint8_t *m = malloc((size_t)n), *m2 = malloc((size_t)n);
  const float ps[] = {0.1f, 0.5f, 0.9f};
  for (int t = 0; t < 3; t++) {
    set_drop(&d, ps[t], 42);
    int64_t kept = 0;
    for (int b = 0; b < 2; b++)
      for (int h = 0; h < 3; h++) {
        CHECK_OK(attn_sdpa_dropout_mask(&d, b, h, m));
        for (int64_t e = 0; e < n; e++)
          kept += m[e];
      }
    double N = 6.0 * n, frac = kept / N, q = 1.0 - ps[t];
    double sigma = sqrt(q * (1 - q) / N);
    if (!(fabs(frac - q) < 5 * sigma)) printf("  p %g: kept %g\n", (double)ps[t], frac);
    CHECK(fabs(frac - q) < 5 * sigma);
  }
  /* rows, heads, batches, seeds and offsets each draw their own bits */
  set_drop(&d, 0.5f, 42);
  CHECK_OK(attn_sdpa_dropout_mask(&d, 0, 0, m));
  CHECK_OK(attn_sdpa_dropout_mask(&d, 0, 1, m2));
  CHECK(memcmp(m, m2, (size_t)n) != 0);
  CHECK(memcmp(m, m + 160, 160) != 0); /* row 0 vs row 1 */
  CHECK_OK(attn_sdpa_dropout_mask(&d, 1, 0, m2));
  CHECK(memcmp(m, m2, (size_t)n) != 0);
  d.dropout_batch0 = 1; /* batch 0 now draws batch 1's mask */
  uint8_t *m3 = malloc((size_t)n);
  CHECK_OK(attn_sdpa_dropout_mask(&d, 0, 0, m3));
  CHECK(memcmp(m3, m2, (size_t)n) == 0);
  d.dropout_batch0 = 0;
  d.dropout_offset = 8;
  CHECK_OK(attn_sdpa_dropout_mask(&d, 0, 0, m2));
  CHECK(memcmp(m, m2, (size_t)n) != 0);
  d.dropout_offset = 7;
  d.dropout_seed = 43;
  CHECK_OK(attn_sdpa_dropout_mask(&d, 0, 0, m2));
  CHECK(memcmp(m, m2, (size_t)n) != 0);
  CHECK(attn_sdpa_dropout_keep(&d, 0, 0, 3, 5) == m2[3 * 160 + 5]);
  free(m), free(m2), free(m3);
}

/* The active level's row kernel (avx2 / avx512 under make test's levels)
 * gives the portable kernel's bits, tails and wrapping key indices included. */
static void test_row_kernel_matches_portable(void) {
  void (*row)(const uint32_t *, uint32_t, float, int64_t, int64_t, float *) =
      attn_kern_get()->row.sdpa_dropout;
  CHECK(row != NULL);
  if (!row) return;
  const int64_t lens[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100};
  const int64_t j0s[] = {0, 5, 64, 4294967290ll};
  float x[128], a[128], b[128];
  fill_uniform(x, 128, 3, -2, 2);
  x[5] = NAN;
  const uint32_t k[2] = {0x12345678u, 0x9abcdef0u};
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
    for (size_t ji = 0; ji < sizeof j0s / sizeof *j0s; ji++) {
      memcpy(a, x, sizeof x);
      memcpy(b, x, sizeof x);
      uint32_t thr = attn_sdpa_dropout_threshold(0.3f);
      row(k, thr, 1.0f / 0.7f, j0s[ji], lens[li], a);
      attn_sdpa_dropout_row_generic(k, thr, 1.0f / 0.7f, j0s[ji], lens[li], b);
      CHECK(memcmp(a, b, sizeof a) == 0);
      for (int64_t c = lens[li]; c < 128; c++) /* nothing past n */
        CHECK(a[c] == x[c] || (isnan(a[c]) && isnan(x[c])));
    }
}

/* ---- flash vs math vs reference ------------------------------------------- */

/* out from the undropped math probabilities and attn_sdpa_dropout_keep, in
 * double (contiguous layouts) */
static void reference_out(const sdpa_problem *p, float *ref) {
  const attn_sdpa_desc *d = &p->d;
  attn_sdpa_desc u = *d;
  u.dropout_p = 0.0f;
  const int64_t B = d->B, H = d->Hq, Lq = d->Lq, Lk = d->Lk, Dv = d->Dv, G = d->Hq / d->Hkv;
  float *P = sdpa_zeros(B * H * Lq * Lk), *o = sdpa_zeros(p->no), *l = sdpa_zeros(p->nl);
  CHECK_OK(attn_sdpa_forward_f32(&u, ATTN_BACKEND_MATH, p->q, p->k, p->v, o, l, P));
  const double inv = 1.0 / (1.0 - (double)d->dropout_p);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < Lq; i++)
        for (int64_t c = 0; c < Dv; c++) {
          double acc = 0.0;
          for (int64_t j = 0; j < Lk; j++)
            if (attn_sdpa_dropout_keep(d, b, h, i, j))
              acc += (double)P[((b * H + h) * Lq + i) * Lk + j] * inv *
                     p->v[((b * d->Hkv + h / G) * Lk + j) * Dv + c];
          ref[((b * H + h) * Lq + i) * Dv + c] = (float)acc;
        }
  free(P), free(o), free(l);
}

typedef struct {
  float *o, *l, *dq, *dk, *dv;
} run_out;

static void run_alloc(const sdpa_problem *p, run_out *r) {
  r->o = sdpa_zeros(p->no), r->l = sdpa_zeros(p->nl);
  r->dq = sdpa_zeros(p->nq), r->dk = sdpa_zeros(p->nk), r->dv = sdpa_zeros(p->nv);
}

static void run_free(run_out *r) { free(r->o), free(r->l), free(r->dq), free(r->dk), free(r->dv); }

/* a and b hold the same bits */
static void check_same_bits(const sdpa_problem *p, const run_out *a, const run_out *b) {
  CHECK(memcmp(a->o, b->o, (size_t)p->no * sizeof(float)) == 0);
  CHECK(memcmp(a->dq, b->dq, (size_t)p->nq * sizeof(float)) == 0);
  CHECK(memcmp(a->dk, b->dk, (size_t)p->nk * sizeof(float)) == 0);
  CHECK(memcmp(a->dv, b->dv, (size_t)p->nv * sizeof(float)) == 0);
}

static void run_both(const sdpa_problem *p, const attn_sdpa_desc *d, attn_backend be, run_out *r) {
  CHECK_OK(attn_sdpa_forward_f32(d, be, p->q, p->k, p->v, r->o, r->l, NULL));
  CHECK_OK(
      attn_sdpa_backward_f32(d, be, p->q, p->k, p->v, r->o, r->l, p->dout, r->dq, r->dk, r->dv));
}

static void check_case(const sdpa_cfg *c, unsigned seed, float pdrop, int with_ref) {
  sdpa_problem p;
  sdpa_make_problem(c, seed, &p);
  set_drop(&p.d, pdrop, 1000 + seed);
  run_out f, m, z;
  run_alloc(&p, &f), run_alloc(&p, &m), run_alloc(&p, &z);
  run_both(&p, &p.d, ATTN_BACKEND_FLASH, &f);
  run_both(&p, &p.d, ATTN_BACKEND_MATH, &m);
  int ok = close_all(f.o, m.o, p.no, TOL) && close_all(f.l, m.l, p.nl, TOL) &&
           close_all(f.dq, m.dq, p.nq, TOL) && close_all(f.dk, m.dk, p.nk, TOL) &&
           close_all(f.dv, m.dv, p.nv, TOL);
  CHECK(ok);
  /* the mask matters: without dropout out and dv differ */
  attn_sdpa_desc nd = p.d;
  nd.dropout_p = 0.0f;
  run_both(&p, &nd, ATTN_BACKEND_FLASH, &z);
  CHECK(!close_all(z.o, f.o, p.no, 1e-3f) || sdpa_max_abs(f.o, p.no) == 0.0f);
  CHECK(memcmp(z.l, f.l, (size_t)p.nl * sizeof(float)) == 0); /* lse: the undropped one */
  if (with_ref) {
    float *ref = sdpa_zeros(p.no);
    reference_out(&p, ref);
    int rok = close_all(f.o, ref, p.no, TOL) && close_all(m.o, ref, p.no, TOL);
    CHECK(rok);
    ok &= rok;
    free(ref);
  }
  if (!ok) sdpa_print_case("dropout", c, seed);
  run_free(&f), run_free(&m), run_free(&z);
  sdpa_free_problem(&p);
}

static void test_flash_matches_math_same_mask(void) {
  sdpa_cfg c = sdpa_plain(70, 90, 16);
  check_case(&c, 1, 0.2f, 1);
  c.causal = 1;
  check_case(&c, 2, 0.3f, 1);
  c.causal = 0, c.wl = 20, c.wr = 5;
  check_case(&c, 3, 0.1f, 1);
  c.wl = c.wr = -1, c.B = 3, c.key_lens = 1; /* padding */
  check_case(&c, 4, 0.25f, 1);
  c.key_lens = 0, c.B = 2, c.causal = 1, c.q_offset = 20; /* a decoder's queries */
  check_case(&c, 5, 0.2f, 1);
  c.q_offset = 0, c.causal = 0, c.bool_mask = 1, c.add_mask = 1, c.Hq = 4, c.Hkv = 2; /* GQA */
  check_case(&c, 6, 0.5f, 1);
  sdpa_cfg s = sdpa_plain(150, 150, 32); /* whole tiles, strided rows */
  s.strided = 1;
  check_case(&s, 7, 0.1f, 0);
  s.strided = 0, s.Lq = 13, s.Dv = 24;
  check_case(&s, 8, 0.7f, 1);
}

/* per-batch query offsets with ALiBi run as B = 1 pieces: each piece draws
 * its own batch's mask */
static void test_batched_pieces_keep_their_batch(void) {
  sdpa_cfg c = sdpa_plain(20, 30, 8);
  c.B = 3, c.causal = 1;
  sdpa_problem p;
  sdpa_make_problem(&c, 9, &p);
  int64_t offs[3] = {10, 0, 5};
  float slopes[2] = {0.25f, 0.5f};
  p.d.q_offsets = offs;
  p.d.alibi_slopes = slopes;
  set_drop(&p.d, 0.3f, 77);
  float *ref = sdpa_zeros(p.no), *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl);
  reference_out(&p, ref);
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL));
  CHECK(close_all(o, ref, p.no, TOL));
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, NULL));
  CHECK(close_all(o, ref, p.no, TOL));
  free(ref), free(o), free(l);
  sdpa_free_problem(&p);
}

/* The math forward's probs are the dropped ones, as torch's MHA weights. */
static void test_math_probs_are_dropped(void) {
  sdpa_cfg c = sdpa_plain(9, 11, 4);
  sdpa_problem p;
  sdpa_make_problem(&c, 10, &p);
  set_drop(&p.d, 0.4f, 5);
  attn_sdpa_desc u = p.d;
  u.dropout_p = 0.0f;
  const int64_t np = 2 * 9 * 11;
  float *P = sdpa_zeros(np), *PD = sdpa_zeros(np), *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_f32(&u, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, P));
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, PD));
  int dropped = 0;
  for (int64_t e = 0; e < np; e++) {
    int64_t h = e / 99, i = e / 11 % 9, j = e % 11;
    int keep = attn_sdpa_dropout_keep(&p.d, 0, h, i, j);
    dropped += !keep;
    CHECK(PD[e] == (keep ? P[e] * (1.0f / 0.6f) : 0.0f));
  }
  CHECK(dropped > 0);
  free(P), free(PD), free(o), free(l);
  sdpa_free_problem(&p);
}

/* ---- gradients through a fixed mask --------------------------------------- */

static double loss_of(const sdpa_problem *p, attn_backend be, float *o, float *l) {
  CHECK_OK(attn_sdpa_forward_f32(&p->d, be, p->q, p->k, p->v, o, l, NULL));
  double s = 0.0;
  for (int64_t e = 0; e < p->no; e++)
    s += (double)o[e] * p->dout[e];
  return s;
}

static void gradcheck_backend(attn_backend be) {
  sdpa_cfg c = sdpa_plain(5, 7, 4);
  c.Hkv = 1, c.causal = 1, c.q_offset = 2;
  sdpa_problem p;
  sdpa_make_problem(&c, 11, &p);
  set_drop(&p.d, 0.3f, 9);
  run_out g;
  run_alloc(&p, &g);
  run_both(&p, &p.d, be, &g);
  float *o = sdpa_zeros(p.no), *l = sdpa_zeros(p.nl);
  float *x[3] = {p.q, p.k, p.v}, *an[3] = {g.dq, g.dk, g.dv};
  const int64_t n[3] = {p.nq, p.nk, p.nv};
  const float eps = 1e-2f;
  int bad = 0;
  for (int t = 0; t < 3; t++)
    for (int64_t e = 0; e < n[t]; e++) {
      float keep = x[t][e];
      x[t][e] = keep + eps;
      double lp = loss_of(&p, be, o, l);
      x[t][e] = keep - eps;
      double lm = loss_of(&p, be, o, l);
      x[t][e] = keep;
      double num = (lp - lm) / (2.0 * eps);
      if (!(fabs(num - an[t][e]) <= 3e-3 + 2e-2 * fabs(num))) {
        if (bad++ < 5) printf("  input %d [%lld]: numeric %g analytic %g\n", t, (long long)e, num,
                              (double)an[t][e]);
      }
    }
  CHECK(bad == 0);
  free(o), free(l);
  run_free(&g);
  sdpa_free_problem(&p);
}

static void test_gradcheck_flash(void) { gradcheck_backend(ATTN_BACKEND_FLASH); }
static void test_gradcheck_math(void) { gradcheck_backend(ATTN_BACKEND_MATH); }

/* ---- determinism, p = 0, refusals ----------------------------------------- */

static void test_threads_bit_identical(void) {
  sdpa_cfg c = sdpa_plain(300, 300, 32);
  c.B = 2, c.Hq = 4, c.Hkv = 4, c.causal = 1;
  sdpa_problem p;
  sdpa_make_problem(&c, 12, &p);
  set_drop(&p.d, 0.1f, 3);
  run_out a, b;
  run_alloc(&p, &a), run_alloc(&p, &b);
  int nt = attn_get_num_threads();
  attn_set_num_threads(1);
  run_both(&p, &p.d, ATTN_BACKEND_FLASH, &a);
  attn_set_num_threads(2);
  run_both(&p, &p.d, ATTN_BACKEND_FLASH, &b);
  attn_set_num_threads(nt);
  check_same_bits(&p, &a, &b);
  run_free(&a), run_free(&b);
  sdpa_free_problem(&p);
}

static void test_p_zero_is_no_dropout(void) {
  sdpa_cfg c = sdpa_plain(100, 130, 16);
  c.causal = 1;
  sdpa_problem p;
  sdpa_make_problem(&c, 13, &p);
  run_out a, b;
  run_alloc(&p, &a), run_alloc(&p, &b);
  const attn_backend be[2] = {ATTN_BACKEND_FLASH, ATTN_BACKEND_MATH};
  for (int t = 0; t < 2; t++) {
    attn_sdpa_desc z = p.d;
    set_drop(&z, 0.0f, 99); /* a seed, but p = 0 */
    run_both(&p, &p.d, be[t], &a);
    run_both(&p, &z, be[t], &b);
    check_same_bits(&p, &a, &b);
  }
  run_free(&a), run_free(&b);
  sdpa_free_problem(&p);
}

static void test_bad_p_refused(void) {
  sdpa_cfg c = sdpa_plain(4, 4, 4);
  sdpa_problem p;
  sdpa_make_problem(&c, 14, &p);
  run_out r;
  run_alloc(&p, &r);
  const float bad[] = {-0.1f, 1.0f, 1.5f, NAN, -INFINITY};
  const attn_backend be[3] = {ATTN_BACKEND_FLASH, ATTN_BACKEND_MATH, ATTN_BACKEND_AUTO};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int t = 0; t < 3; t++) {
      attn_sdpa_desc d = p.d;
      set_drop(&d, bad[i], 1);
      CHECK_ERR(attn_sdpa_forward_f32(&d, be[t], p.q, p.k, p.v, r.o, r.l, NULL), ATTN_EINVAL);
      CHECK(strstr(attn_last_error(), "dropout_p") != NULL);
      CHECK_ERR(
          attn_sdpa_backward_f32(&d, be[t], p.q, p.k, p.v, r.o, r.l, p.dout, r.dq, r.dk, r.dv),
          ATTN_EINVAL);
    }
  uint8_t m[16];
  attn_sdpa_desc d = p.d;
  set_drop(&d, 2.0f, 1);
  CHECK_ERR(attn_sdpa_dropout_mask(&d, 0, 0, m), ATTN_EINVAL);
  set_drop(&d, 0.5f, 1);
  CHECK_ERR(attn_sdpa_dropout_mask(&d, 0, 2, m), ATTN_EINVAL); /* h outside Hq */
  /* bf16 flash has no dropout; Shaw positions are not combined with it */
  uint16_t h16[64] = {0};
  float o[64], l[16];
  CHECK_ERR(attn_sdpa_forward_bf16(&d, h16, h16, h16, o, l), ATTN_EUNSUPPORTED);
  CHECK(strstr(attn_last_error(), "dropout") != NULL);
  float shaw[7 * 4] = {0};
  d.shaw_k = shaw, d.shaw_max = 4;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, p.q, p.k, p.v, r.o, r.l, NULL),
            ATTN_EUNSUPPORTED);
  run_free(&r);
  sdpa_free_problem(&p);
}

int main(void) {
  RUN(test_keep_fraction_near_one_minus_p);
  RUN(test_row_kernel_matches_portable);
  RUN(test_flash_matches_math_same_mask);
  RUN(test_batched_pieces_keep_their_batch);
  RUN(test_math_probs_are_dropped);
  RUN(test_gradcheck_flash);
  RUN(test_gradcheck_math);
  RUN(test_threads_bit_identical);
  RUN(test_p_zero_is_no_dropout);
  RUN(test_bad_p_refused);
  HARNESS_END();
}
