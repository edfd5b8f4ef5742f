/* int8 flash attention forward (attn/sdpa_i8.h) on every path available
 * (portable, AVX512_VNNI, AMX) against the f32 math path on the same f32
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
 * The scores kernels (portable, VNNI, AMX) give the same f32 bits; the
 * VNNI and portable paths share the softmax and P·V, so their outputs are
 * bit-identical; AMX differs from them in exp and summation order only (it
 * is held to the same tolerances against math). 1 vs 2 threads:
 * bit-identical on every path. */
#include <stdint.h>

#include "attn/sdpa_i8.h"
#include "harness.h"
#include "kernels/amx.h"
#include "kernels/sdpa_flash_i8.h"

typedef struct {
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  int causal, wl, wr;
  int key_lens;  /* 1: per-batch lengths, batch 0 gets 0 when B > 1 */
  int bool_mask; /* [B, 1, Lq, Lk] broadcast over heads */
  int add_mask;  /* [1, Hq, Lq, Lk] broadcast over batch, some -inf */
  int strided;   /* [B, L, H, D] layouts with padding */
  float scale;   /* 0 = default */
  float qmul;    /* q values times this (large logits) */
  int q_offset;
  float koff; /* k[..., e] += koff (1 + cos(e) / 2): a common offset per channel */
} cfg;

typedef struct {
  attn_sdpa_desc d;
  int32_t *kl;
  uint8_t *bm;
  float *am;
  float *q, *k, *v;
  int64_t nq, nk, nv, no, nl;
} problem;

static const attn_lowp_path paths[3] = {ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX};
static const char *path_name[3] = {"portable", "vnni", "amx"};

static int64_t layout(int strided, int64_t B, int64_t H, int64_t L, int64_t X, int64_t st[3]) {
  if (!strided) {
    st[0] = st[1] = st[2] = 0;
    return B * H * L * X;
  }
  int64_t row = X + 3;
  st[2] = H * row;
  st[1] = row;
  st[0] = L * H * row + 5;
  return B * st[0];
}

static void make_problem(const cfg *c, unsigned seed, problem *p) {
  memset(p, 0, sizeof *p);
  attn_sdpa_desc *d = &p->d;
  attn_sdpa_desc_init(d, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv);
  d->causal = c->causal;
  d->window_left = c->wl;
  d->window_right = c->wr;
  d->q_offset = c->q_offset;
  if (c->scale != 0) {
    d->has_scale = 1;
    d->scale = c->scale;
  }
  p->nq = layout(c->strided, c->B, c->Hq, c->Lq, c->D, d->q_stride);
  p->nk = layout(c->strided, c->B, c->Hkv, c->Lk, c->D, d->k_stride);
  p->nv = layout(c->strided, c->B, c->Hkv, c->Lk, c->Dv, d->v_stride);
  p->no = layout(c->strided, c->B, c->Hq, c->Lq, c->Dv, d->o_stride);
  p->nl = (int64_t)c->B * c->Hq * c->Lq;
  p->q = malloc((p->nq + 1) * sizeof(float));
  p->k = malloc((p->nk + 1) * sizeof(float));
  p->v = malloc((p->nv + 1) * sizeof(float));
  fill_uniform(p->q, p->nq, seed, -c->qmul, c->qmul);
  fill_uniform(p->k, p->nk, seed + 1, -1, 1);
  fill_uniform(p->v, p->nv, seed + 2, -1, 1);
  for (int64_t i = 0; i < p->nk && c->koff != 0; i++) /* contiguous layouts only */
    p->k[i] += c->koff * (1.0f + 0.5f * cosf((float)(i % c->D)));
  if (c->key_lens) {
    p->kl = malloc(c->B * sizeof(int32_t));
    for (int b = 0; b < c->B; b++)
      p->kl[b] = (int32_t)((seed * 7 + b * 13) % (c->Lk + 1));
    if (c->B > 1) p->kl[0] = 0;
    p->kl[c->B - 1] = c->Lk;
    if (c->B > 2) p->kl[1] = c->Lk > 0 ? c->Lk - 1 : 0;
    d->key_lens = p->kl;
  }
  int64_t n2 = (int64_t)c->Lq * c->Lk;
  if (c->bool_mask) {
    p->bm = malloc(c->B * n2 + 1);
    float *u = malloc((c->B * n2 + 1) * sizeof(float));
    fill_uniform(u, c->B * n2, seed + 4, 0, 1);
    for (int64_t i = 0; i < c->B * n2; i++)
      p->bm[i] = u[i] > 0.2f;
    free(u);
    d->bool_mask = p->bm;
    d->bool_mask_stride[0] = n2;
    d->bool_mask_stride[2] = c->Lk;
    d->bool_mask_stride[3] = 1;
  }
  if (c->add_mask) {
    p->am = malloc((c->Hq * n2 + 1) * sizeof(float));
    fill_uniform(p->am, c->Hq * n2, seed + 5, -2, 2);
    for (int64_t i = 0; i < c->Hq * n2; i += 7)
      p->am[i] = -INFINITY;
    d->add_mask = p->am;
    d->add_mask_stride[1] = n2;
    d->add_mask_stride[2] = c->Lk;
    d->add_mask_stride[3] = 1;
  }
}

static void free_problem(problem *p) {
  free(p->kl), free(p->bm), free(p->am);
  free(p->q), free(p->k), free(p->v);
}

static float *zeros(int64_t n) { return calloc((size_t)n + 1, sizeof(float)); }

static int any_nan(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (isnan(x[i])) return 1;
  return 0;
}

/* The logit error scale of int8 q and k: |scale|·sqrt(D)·max|q|·max|k - mean| / 127
 * (one quantization step of either operand over a dot product of D random
 * terms); |k - mean| <= 1 in every case here. */
static double logit_err(const attn_sdpa_desc *d, float qmul) {
  double s = d->has_scale ? fabs(d->scale) : 1.0 / sqrt((double)d->D);
  return s * sqrt((double)d->D) * qmul / 127.0;
}

static double worst_out, worst_lse; /* largest error / tolerance seen */

/* Runs the int8 path and math on one problem and compares. */
static void compare_case(int pi, const cfg *c, unsigned seed) {
  problem p;
  make_problem(c, seed, &p);
  float *o0 = zeros(p.no), *o1 = zeros(p.no), *l0 = zeros(p.nl), *l1 = zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, o0, l0, NULL));
  CHECK_OK(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o1, l1));
  int before = h_case_failed;
  h_case_failed = 0;
  const double et = logit_err(&p.d, c->qmul);
  double eo = CHECK_CLOSE("out", o1, o0, p.no, 4e-3 + et, 0);
  double el = CHECK_CLOSE("lse", l1, l0, p.nl, 2e-5 + et, 1e-4);
  if (eo / (4e-3 + et) > worst_out) worst_out = eo / (4e-3 + et);
  if (el / (2e-5 + et) > worst_lse) worst_lse = el / (2e-5 + et);
  CHECK(!any_nan(o1, p.no));
  if (h_case_failed)
    printf("  ^ %s B%d Hq%d Hkv%d Lq%d Lk%d D%d Dv%d causal%d w(%d,%d) kl%d bm%d am%d st%d "
           "qoff%d koff%g seed %u\n",
           path_name[pi], c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv, c->causal, c->wl, c->wr,
           c->key_lens, c->bool_mask, c->add_mask, c->strided, c->q_offset, (double)c->koff, seed);
  h_case_failed |= before;
  free(o0), free(o1), free(l0), free(l1);
  free_problem(&p);
}

static void for_each_path(const cfg *c, unsigned seed) {
  for (int pi = 0; pi < 3; pi++)
    if (attn_sdpa_i8_path_available(paths[pi])) compare_case(pi, c, seed);
}

static cfg plain(int Lq, int Lk, int D) {
  cfg c = {1, 2, 2, Lq, Lk, D, D, 0, -1, -1, 0, 0, 0, 0, 0.0f, 1.0f, 0, 0.0f};
  return c;
}

static void test_head_dims(void) {
  static const int dims[] = {1, 2, 7, 32, 40, 64, 80, 128, 129, 256};
  for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    cfg c = plain(37, 70, dims[i]);
    c.Dv = dims[(i + 3) % 10];
    for_each_path(&c, 100 + i);
    c.Dv = dims[i];
    for_each_path(&c, 200 + i);
  }
}

static void test_lengths_and_tails(void) {
  static const int L[][2] = {{1, 1},    {1, 65},   {5, 3},    {64, 64},  {16, 16},
                             {65, 129}, {130, 63}, {97, 200}, {200, 97}, {17, 300}};
  for (unsigned i = 0; i < sizeof L / sizeof L[0]; i++) {
    cfg c = plain(L[i][0], L[i][1], 64);
    for_each_path(&c, 300 + i);
    c.D = c.Dv = 128;
    for_each_path(&c, 400 + i);
  }
}

static void test_causal_windows_offset(void) {
  static const int W[][3] = {{1, -1, -1}, {0, 5, -1},  {0, 20, 0},
                             {0, -1, 3},  {1, 70, -1}, {0, 0, 0}};
  static const int L[][2] = {{150, 150}, {100, 190}, {190, 100}};
  for (unsigned w = 0; w < sizeof W / sizeof W[0]; w++)
    for (unsigned i = 0; i < 3; i++) {
      cfg c = plain(L[i][0], L[i][1], 64);
      c.causal = W[w][0];
      c.wl = W[w][1];
      c.wr = W[w][2];
      for_each_path(&c, 500 + w * 3 + i);
    }
  cfg c = plain(40, 150, 64); /* decoder: new queries after a cache */
  c.causal = 1;
  c.q_offset = 110;
  for_each_path(&c, 520);
}

static void test_masks_key_lens_gqa(void) {
  cfg c = plain(70, 90, 64);
  c.B = 3;
  c.Hq = 4;
  c.Hkv = 2;
  c.key_lens = 1;
  for_each_path(&c, 600);
  c.bool_mask = 1;
  for_each_path(&c, 601);
  c.add_mask = 1;
  c.causal = 1;
  for_each_path(&c, 602);
  c.Hkv = 1;
  c.Dv = 48;
  c.key_lens = 0;
  for_each_path(&c, 603);
  cfg g = plain(33, 129, 128); /* 8 query heads on 2 K/V heads */
  g.Hq = 8;
  g.Hkv = 2;
  g.Dv = 64;
  for_each_path(&g, 604);
}

static void test_strided_scale_large_logits(void) {
  cfg c = plain(50, 77, 40);
  c.B = 2;
  c.Hq = 4;
  c.Hkv = 2;
  c.strided = 1;
  c.causal = 1;
  for_each_path(&c, 700);
  c.scale = 0.37f;
  c.qmul = 8.0f; /* logits ~ +-40: exercises the lazy max (TAU) */
  for_each_path(&c, 701);
  c.scale = -0.2f; /* a negative scale folds into the query scales as well */
  c.qmul = 1.0f;
  for_each_path(&c, 702);
}

static void test_random_shapes(void) {
  unsigned s = 12345;
  for (int t = 0; t < 24; t++) {
    s = s * 1103515245u + 12345u;
    cfg c = plain(1 + (int)((s >> 8) % 150), 1 + (int)((s >> 16) % 150), 1 + (int)((s >> 4) % 96));
    c.Dv = 1 + (int)((s >> 12) % 96);
    c.B = 1 + (int)((s >> 20) % 2);
    c.Hkv = 1 + (int)((s >> 22) % 2);
    c.Hq = c.Hkv * (1 + (int)((s >> 24) % 3));
    c.causal = (s >> 26) & 1;
    c.key_lens = (s >> 27) & 1;
    c.bool_mask = ((s >> 28) & 3) == 0;
    c.add_mask = ((s >> 29) & 3) == 1;
    c.strided = (s >> 30) & 1;
    if (((s >> 3) & 3) == 0) c.wl = (int)((s >> 5) % 40);
    for_each_path(&c, 800 + t);
  }
}

/* out of math on q, k quantized per row as int8 without smoothing (the same
 * rule as the kernel's: max|x| / 127, round to nearest even), v as is */
static void unsmoothed_reference(const problem *p, float *o, float *l) {
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
    cfg c = plain(80, 150, 64);
    c.koff = 50.0f;
    c.qmul = 2.0f;
    if (m) {
      c.B = 2;
      c.key_lens = 1;
      c.causal = 1;
      c.bool_mask = 1;
    }
    for_each_path(&c, 1200 + m);
    problem p;
    make_problem(&c, 1200 + m, &p);
    float *o0 = zeros(p.no), *l0 = zeros(p.nl), *o1 = zeros(p.no), *l1 = zeros(p.nl);
    float *o2 = zeros(p.no), *l2 = zeros(p.nl);
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
    free_problem(&p);
  }
}

/* The three scores kernels on the same packed operands: the same int32, equal
 * to the int64 sums (values include -128, which the quantizer never makes:
 * the kernels must still be exact); the two dequantizations give the same
 * f32 bits. */
static void test_scores_kernels_identical(void) {
  attn_i8_scores_fn fn[3] = {attn_flash_i8_scores_generic, NULL, NULL};
  if (attn_sdpa_i8_path_available(ATTN_LOWP_SIMD)) fn[1] = attn_flash_i8_scores_vnni();
  if (attn_sdpa_i8_path_available(ATTN_LOWP_AMX)) fn[2] = attn_flash_i8_scores_amx();
  attn_i8_dequant_fn dq = attn_cpu()->avx512f ? attn_i8_dequant_avx512() : NULL;
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
  printf("  scores kernels compared: portable%s%s; dequant%s\n", fn[1] ? ", vnni" : "",
         fn[2] ? ", amx" : "", dq ? " portable = avx512" : " portable only");
}

/* The AVX-512 row quantizer gives attn_quantize_weights_s8's bits, ties,
 * tails, zero rows and non-finite values included; the AVX-512 column sums
 * of the key mean give the scalar loop's bits. */
static void test_quantizer_identical(void) {
  attn_i8_quantize_fn vq = attn_cpu()->avx512f && attn_cpu()->avx512bw && attn_cpu()->avx512vl
                               ? attn_i8_quantize_row_avx512()
                               : NULL;
  if (!vq) {
    printf("  (no AVX-512: skipped)\n");
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
    attn_i8_colsum_avx512()(k + 1, 203, 300, D, a1);
    CHECK(!memcmp(a0, a1, sizeof a0));
  }
}

/* VNNI and portable share everything after the (identical) scores: the
 * outputs are bit-identical. */
static void test_vnni_equals_portable(void) {
  if (!attn_sdpa_i8_path_available(ATTN_LOWP_SIMD)) {
    printf("  (no AVX512_VNNI: skipped)\n");
    return;
  }
  cfg c = plain(90, 140, 96);
  c.B = 2;
  c.Hq = 4;
  c.Hkv = 2;
  c.causal = 1;
  c.add_mask = 1;
  c.koff = 3.0f;
  problem p;
  make_problem(&c, 1300, &p);
  float *o0 = zeros(p.no), *o1 = zeros(p.no), *l0 = zeros(p.nl), *l1 = zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_i8_path(ATTN_LOWP_PORTABLE, &p.d, p.q, p.k, p.v, o0, l0));
  CHECK_OK(attn_sdpa_forward_i8_path(ATTN_LOWP_SIMD, &p.d, p.q, p.k, p.v, o1, l1));
  CHECK(!memcmp(o0, o1, p.no * sizeof(float)));
  CHECK(!memcmp(l0, l1, p.nl * sizeof(float)));
  free(o0), free(o1), free(l0), free(l1);
  free_problem(&p);
}

/* Rows with no allowed key: out 0, lse -inf, never NaN. */
static void test_fully_masked_rows(void) {
  cfg c = plain(40, 50, 64);
  c.B = 2;
  c.key_lens = 1; /* batch 0: no keys at all */
  c.causal = 1;
  for (int pi = 0; pi < 3; pi++) {
    if (!attn_sdpa_i8_path_available(paths[pi])) continue;
    problem p;
    make_problem(&c, 900, &p);
    p.bm = malloc((size_t)(2 * 40 * 50)); /* batch 1's row 3: every key masked */
    memset(p.bm, 1, 2 * 40 * 50);
    memset(p.bm + 40 * 50 + 3 * 50, 0, 50);
    p.d.bool_mask = p.bm;
    p.d.bool_mask_stride[0] = 40 * 50;
    p.d.bool_mask_stride[2] = 50;
    p.d.bool_mask_stride[3] = 1;
    float *o = zeros(p.no), *l = zeros(p.nl);
    for (int64_t i = 0; i < p.no; i++)
      o[i] = NAN;
    CHECK_OK(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o, l));
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < 40; i++) {
        CHECK(l[h * 40 + i] == -INFINITY); /* batch 0 */
        for (int e = 0; e < 64; e++)
          CHECK(o[(h * 40 + i) * 64 + e] == 0.0f);
      }
    CHECK(l[2 * 40 + 3] == -INFINITY && o[(2 * 40 + 3) * 64] == 0.0f);
    CHECK(!any_nan(o, p.no));
    free(o), free(l);
    free_problem(&p);
  }
}

/* NaN/inf that the quantizer never sees (v, the additive mask) propagate as
 * in math (attn/sdpa.h): a NaN or +inf logit from the mask at an allowed key
 * gives the row NaN out and lse (never out 0 / lse -inf); one at a key the
 * causal range hides is ignored; NaN in v reaches the rows attending to it.
 * (Non-finite q or k: ATTN_ENUMERIC, test_errors.) */
static void test_nan_in_v_and_masks(void) {
  cfg c = plain(70, 150, 32);
  c.causal = 1;
  c.add_mask = 1;
  for (int pi = 0; pi < 3; pi++) {
    if (!attn_sdpa_i8_path_available(paths[pi])) continue;
    problem p;
    make_problem(&c, 1400, &p);
    p.am[20 * 150 + 7] = NAN;      /* head 0, row 20, key 7 */
    p.am[30 * 150 + 3] = INFINITY; /* head 0, row 30: +inf logit, inf - inf */
    p.am[5 * 150 + 40] = NAN;      /* row 5 sees keys 0..5 only: ignored */
    p.v[10 * 32 + 2] = NAN;        /* head 0, key 10, column 2 (0·NaN in other rows too) */
    float *o0 = zeros(p.no), *o1 = zeros(p.no), *l0 = zeros(p.nl), *l1 = zeros(p.nl);
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
    ok &= !any_nan(o1 + 70 * 32, 70 * 32); /* head 1 untouched */
    CHECK(ok);
    if (!ok) printf("  ^ %s\n", path_name[pi]);
    free(o0), free(o1), free(l0), free(l1);
    free_problem(&p);
  }
}

static void test_no_keys_no_queries(void) {
  cfg c = plain(5, 0, 64);
  problem p;
  make_problem(&c, 950, &p);
  float o[2 * 5 * 64], l[10];
  for (int i = 0; i < 2 * 5 * 64; i++)
    o[i] = NAN;
  CHECK_OK(attn_sdpa_forward_i8(&p.d, p.q, NULL, NULL, o, l));
  CHECK(o[0] == 0.0f && o[2 * 5 * 64 - 1] == 0.0f && l[9] == -INFINITY);
  free_problem(&p);
  c = plain(0, 7, 64);
  make_problem(&c, 951, &p);
  CHECK_OK(attn_sdpa_forward_i8(&p.d, NULL, p.k, p.v, NULL, NULL));
  free_problem(&p);
}

/* Same results for 1 and 2 threads, bit for bit, on every path. */
static void test_threads_bit_identical(void) {
  cfg c = plain(300, 333, 64);
  c.Hq = 4;
  c.Hkv = 2;
  c.causal = 1;
  c.key_lens = 1;
  c.B = 2;
  c.koff = 2.0f;
  int saved = attn_get_num_threads();
  for (int pi = 0; pi < 3; pi++) {
    if (!attn_sdpa_i8_path_available(paths[pi])) continue;
    problem p;
    make_problem(&c, 990, &p);
    float *o[2], *l[2];
    for (int t = 0; t < 2; t++) {
      attn_set_num_threads(t + 1);
      o[t] = zeros(p.no), l[t] = zeros(p.nl);
      CHECK_OK(attn_sdpa_forward_i8_path(paths[pi], &p.d, p.q, p.k, p.v, o[t], l[t]));
    }
    CHECK(!memcmp(o[0], o[1], p.no * sizeof(float)));
    CHECK(!memcmp(l[0], l[1], p.nl * sizeof(float)));
    for (int t = 0; t < 2; t++)
      free(o[t]), free(l[t]);
    free_problem(&p);
  }
  attn_set_num_threads(saved);
}

static void test_errors(void) {
  cfg c = plain(8, 8, 64);
  problem p;
  make_problem(&c, 1000, &p);
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
  free_problem(&p);
  cfg big = plain(4, 4, 257);
  make_problem(&big, 1001, &p);
  float *ob = zeros(p.no), lb[8];
  CHECK_ERR(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, ob, lb), ATTN_EUNSUPPORTED);
  free(ob);
  free_problem(&p);
}

/* A refused tile permission: AMX is unavailable, AUTO runs VNNI (or
 * portable), bit-identical with the portable path. */
static int refuse(void) { return -1; }
static void test_amx_refused_falls_back(void) {
  cfg c = plain(45, 77, 64);
  c.causal = 1;
  problem p;
  make_problem(&c, 1100, &p);
  float *o0 = zeros(p.no), *o1 = zeros(p.no), *l0 = zeros(p.nl), *l1 = zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_i8_path(ATTN_LOWP_PORTABLE, &p.d, p.q, p.k, p.v, o0, l0));
  attn_amx_set_request_hook(refuse);
  CHECK(!attn_sdpa_i8_path_available(ATTN_LOWP_AMX));
  CHECK_ERR(attn_sdpa_forward_i8_path(ATTN_LOWP_AMX, &p.d, p.q, p.k, p.v, o1, l1),
            ATTN_EUNSUPPORTED);
  CHECK_OK(attn_sdpa_forward_i8(&p.d, p.q, p.k, p.v, o1, l1));
  attn_amx_set_request_hook(NULL);
  CHECK(!memcmp(o0, o1, p.no * sizeof(float)) && !memcmp(l0, l1, p.nl * sizeof(float)));
  free(o0), free(o1), free(l0), free(l1);
  free_problem(&p);
}

int main(void) {
  printf("# int8 flash: paths portable%s%s\n",
         attn_sdpa_i8_path_available(ATTN_LOWP_SIMD) ? ", vnni" : "",
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
  RUN(test_vnni_equals_portable);
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
