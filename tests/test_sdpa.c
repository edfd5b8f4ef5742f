/* Scaled dot-product attention, math path: PyTorch golden files
 * (tools/golden_sdpa.py, float64 reference), a naive double-precision
 * reference written here, finite differences, grouped heads vs repeated K/V,
 * strided vs contiguous, thread-count determinism, edge cases, bad input.
 *
 * Tolerances (f32 results vs float64 references): |err| <= 1e-5 + 1e-4*|want|.
 * Exceptions, where f32 itself cannot do better (nor can PyTorch's f32 path):
 * - sdpa_large_logits (|logits| ~1e3, one-hot rows): the backward recomputes
 *   P = exp(s - lse) from the f32 lse, off by up to ulp(1000)/2 = 3e-5, so the
 *   (zero) gradients come out ~1e-5: 1e-4 + 1e-4*|want|.
 * - sdpa_large_offset (logits ~1e3 with a spread of ~1): the f32 logits carry
 *   absolute errors of ~ulp(1000) per GEMM step: 2e-3 + 2e-3*|want|. */
#include <stdint.h>

#include "harness.h"
#include "strided_layout.h"
#include "sdpa_golden.h"

#define ATOL 1e-5
#define RTOL 1e-4

static float *falloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* ---- a naive reference: loops in double, contiguous tensors -------------- */

static int naive_allowed(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (d->causal && j > i) return 0;
  if (d->window_left >= 0 && j < i - d->window_left) return 0;
  if (d->window_right >= 0 && j > i + d->window_right) return 0;
  if (d->key_lens && j >= d->key_lens[b]) return 0;
  const int64_t *s = d->bool_mask_stride;
  if (d->bool_mask && !d->bool_mask[b * s[0] + h * s[1] + i * s[2] + j * s[3]]) return 0;
  return 1;
}

/* out, lse, probs (may be NULL) and, when dout != NULL, dq, dk, dv */
static void naive_sdpa(const attn_sdpa_desc *d, const float *q, const float *k, const float *v,
                       const float *dout, float *out, float *lse, float *probs, float *dq,
                       float *dk, float *dv) {
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, Lq = d->Lq, Lk = d->Lk, D = d->D,
                Dv = d->Dv;
  const double scale = d->has_scale ? d->scale : 1.0 / sqrt((double)D);
  double *s = calloc((size_t)Lk + 1, sizeof(double)), *dp = calloc((size_t)Lk + 1, sizeof(double));
  double *dkd = calloc((size_t)(B * Hkv * Lk * D) + 1, sizeof(double));
  double *dvd = calloc((size_t)(B * Hkv * Lk * Dv) + 1, sizeof(double));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      const int64_t g = h / (Hq / Hkv);
      const float *Q = q + (b * Hq + h) * Lq * D, *K = k + (b * Hkv + g) * Lk * D;
      const float *V = v + (b * Hkv + g) * Lk * Dv;
      for (int64_t i = 0; i < Lq; i++) {
        double m = -INFINITY;
        for (int64_t j = 0; j < Lk; j++) {
          s[j] = -INFINITY;
          if (!naive_allowed(d, b, h, i, j)) continue;
          double x = 0;
          for (int64_t c = 0; c < D; c++) x += (double)Q[i * D + c] * K[j * D + c];
          x *= scale;
          if (d->add_mask) {
            const int64_t *a = d->add_mask_stride;
            x += d->add_mask[b * a[0] + h * a[1] + i * a[2] + j * a[3]];
          }
          s[j] = x;
          if (x > m) m = x;
        }
        double sum = 0;
        for (int64_t j = 0; j < Lk; j++) sum += m == -INFINITY ? 0 : exp(s[j] - m);
        const int64_t row = (b * Hq + h) * Lq + i;
        lse[row] = m == -INFINITY ? -INFINITY : (float)(m + log(sum));
        for (int64_t j = 0; j < Lk; j++) s[j] = m == -INFINITY ? 0 : exp(s[j] - m) / sum;
        if (probs)
          for (int64_t j = 0; j < Lk; j++) probs[row * Lk + j] = (float)s[j];
        for (int64_t c = 0; c < Dv; c++) {
          double o = 0;
          for (int64_t j = 0; j < Lk; j++) o += s[j] * V[j * Dv + c];
          out[row * Dv + c] = (float)o;
        }
        if (!dout) continue;
        const float *dO = dout + row * Dv;
        double Di = 0;
        for (int64_t j = 0; j < Lk; j++) {
          dp[j] = 0;
          for (int64_t c = 0; c < Dv; c++) dp[j] += (double)dO[c] * V[j * Dv + c];
          Di += s[j] * dp[j];
        }
        for (int64_t c = 0; c < D; c++) {
          double acc = 0;
          for (int64_t j = 0; j < Lk; j++) acc += s[j] * (dp[j] - Di) * K[j * D + c];
          dq[row * D + c] = (float)(scale * acc);
        }
        for (int64_t j = 0; j < Lk; j++) {
          const int64_t kr = (b * Hkv + g) * Lk + j;
          for (int64_t c = 0; c < D; c++) dkd[kr * D + c] += scale * s[j] * (dp[j] - Di) * Q[i * D + c];
          for (int64_t c = 0; c < Dv; c++) dvd[kr * Dv + c] += s[j] * dO[c];
        }
      }
    }
  if (dout) {
    for (int64_t x = 0; x < B * Hkv * Lk * D; x++) dk[x] = (float)dkd[x];
    for (int64_t x = 0; x < B * Hkv * Lk * Dv; x++) dv[x] = (float)dvd[x];
  }
  free(s);
  free(dp);
  free(dkd);
  free(dvd);
}

/* ---- a problem with random data and owned buffers ------------------------ */

typedef struct {
  attn_sdpa_desc d;
  float *q, *k, *v, *dout, *out, *lse, *dq, *dk, *dv;
  int64_t nq, nk, nv, no, nl;
} problem;

static void problem_init(problem *p, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk,
                         int64_t D, int64_t Dv, unsigned seed) {
  memset(p, 0, sizeof *p);
  attn_sdpa_desc_init(&p->d, B, Hq, Hkv, Lq, Lk, D, Dv);
  p->nq = B * Hq * Lq * D;
  p->nk = B * Hkv * Lk * D;
  p->nv = B * Hkv * Lk * Dv;
  p->no = B * Hq * Lq * Dv;
  p->nl = B * Hq * Lq;
  p->q = falloc(p->nq), p->k = falloc(p->nk), p->v = falloc(p->nv), p->dout = falloc(p->no);
  p->out = falloc(p->no), p->lse = falloc(p->nl);
  p->dq = falloc(p->nq), p->dk = falloc(p->nk), p->dv = falloc(p->nv);
  fill_uniform(p->q, p->nq, seed, -1.5f, 1.5f);
  fill_uniform(p->k, p->nk, seed + 1, -1.5f, 1.5f);
  fill_uniform(p->v, p->nv, seed + 2, -1, 1);
  fill_uniform(p->dout, p->no, seed + 3, -1, 1);
}

static void problem_free(problem *p) {
  free(p->q), free(p->k), free(p->v), free(p->dout), free(p->out), free(p->lse);
  free(p->dq), free(p->dk), free(p->dv);
}

/* forward + backward through the dispatcher; gradients prefilled with NaN to
 * prove they are overwritten */
static void problem_run(problem *p, attn_backend be) {
  for (int64_t i = 0; i < p->nq; i++) p->dq[i] = NAN;
  for (int64_t i = 0; i < p->nk; i++) p->dk[i] = NAN;
  for (int64_t i = 0; i < p->nv; i++) p->dv[i] = NAN;
  CHECK_OK(attn_sdpa_forward_f32(&p->d, be, p->q, p->k, p->v, p->out, p->lse, NULL));
  CHECK_OK(attn_sdpa_backward_f32(&p->d, be, p->q, p->k, p->v, p->out, p->lse, p->dout, p->dq,
                                  p->dk, p->dv));
}

/* compare p's results with the naive reference; returns the worst abs error */
static double problem_check_naive(problem *p, double atol, double rtol) {
  float *out = falloc(p->no), *lse = falloc(p->nl), *dq = falloc(p->nq), *dk = falloc(p->nk),
        *dv = falloc(p->nv);
  naive_sdpa(&p->d, p->q, p->k, p->v, p->dout, out, lse, NULL, dq, dk, dv);
  double e = 0, x;
  x = CHECK_CLOSE("out", p->out, out, p->no, atol, rtol), e = fmax(e, x);
  x = CHECK_CLOSE("lse", p->lse, lse, p->nl, atol, rtol), e = fmax(e, x);
  x = CHECK_CLOSE("dq", p->dq, dq, p->nq, atol, rtol), e = fmax(e, x);
  x = CHECK_CLOSE("dk", p->dk, dk, p->nk, atol, rtol), e = fmax(e, x);
  x = CHECK_CLOSE("dv", p->dv, dv, p->nv, atol, rtol), e = fmax(e, x);
  free(out), free(lse), free(dq), free(dk), free(dv);
  return e;
}

/* ---- golden files --------------------------------------------------------- */

static const float *f32_of(const attn_st *st, const char *name) {
  const attn_tensor *t = attn_st_get(st, name);
  CHECK(t && t->dtype == ATTN_F32);
  return t && t->dtype == ATTN_F32 ? t->data : NULL;
}

static void golden_case(const char *name, double atol, double rtol, attn_backend b) {
  char path[256];
  snprintf(path, sizeof path, "tests/golden/sdpa_%s.safetensors", name);
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(path, &st));
  if (!st) return;
  const attn_tensor *q = attn_st_get(st, "q"), *k = attn_st_get(st, "k"),
                    *v = attn_st_get(st, "v");
  CHECK(q && k && v && q->ndim == 4 && k->ndim == 4 && v->ndim == 4);
  if (!(q && k && v)) goto done;
  attn_sdpa_desc d;
  golden_sdpa_desc(st, &d);
  const int64_t no = d.B * d.Hq * d.Lq * d.Dv, nl = d.B * d.Hq * d.Lq;
  const int64_t nq = d.B * d.Hq * d.Lq * d.D, nk = d.B * d.Hkv * d.Lk * d.D,
                nv = d.B * d.Hkv * d.Lk * d.Dv;
  float *out = falloc(no), *lse = falloc(nl), *dq = falloc(nq), *dk = falloc(nk),
        *dv = falloc(nv);
  const float *dout = f32_of(st, "dout");
  double e[5];
  CHECK_OK(attn_sdpa_forward_f32(&d, b, q->data, k->data, v->data, out, lse, NULL));
  CHECK_OK(attn_sdpa_backward_f32(&d, b, q->data, k->data, v->data, out, lse, dout, dq, dk, dv));
  e[0] = CHECK_CLOSE("out", out, f32_of(st, "out"), no, atol, rtol);
  e[1] = CHECK_CLOSE("lse", lse, f32_of(st, "lse"), nl, atol, rtol);
  e[2] = CHECK_CLOSE("dq", dq, f32_of(st, "dq"), nq, atol, rtol);
  e[3] = CHECK_CLOSE("dk", dk, f32_of(st, "dk"), nk, atol, rtol);
  e[4] = CHECK_CLOSE("dv", dv, f32_of(st, "dv"), nv, atol, rtol);
  /* the naive reference agrees with the file too (it is what the other tests trust) */
  naive_sdpa(&d, q->data, k->data, v->data, dout, out, lse, NULL, dq, dk, dv);
  CHECK_CLOSE("naive out", out, f32_of(st, "out"), no, atol, rtol);
  CHECK_CLOSE("naive dq", dq, f32_of(st, "dq"), nq, atol, rtol);
  CHECK_CLOSE("naive dk", dk, f32_of(st, "dk"), nk, atol, rtol);
  printf("  golden %-5s %-20s max abs err: out %.1e lse %.1e dq %.1e dk %.1e dv %.1e\n",
         attn_backend_name(b), name, e[0], e[1], e[2], e[3], e[4]);
  free(out), free(lse), free(dq), free(dk), free(dv);
done:
  attn_st_free(st);
}

static void golden_all(attn_backend b) {
  static const char *cases[] = {"plain",       "causal",         "causal_lq_lt_lk",
                                "causal_lq_gt_lk", "window",      "window_left_causal",
                                "key_lens",    "bool_mask_2d",   "bool_mask_b11k",
                                "add_mask",    "gqa",            "dv_ne_d",
                                "masked_batch", "scale",
                                "combined",    "big"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    golden_case(cases[i], ATOL, RTOL, b);
  golden_case("large_logits", 1e-4, 1e-4, b);
  golden_case("large_offset", 2e-3, 2e-3, b);
}

static void test_golden_files_math(void) { golden_all(ATTN_BACKEND_MATH); }
/* auto: the flash backend where it runs, else its fallback to math */
static void test_golden_files_auto(void) { golden_all(ATTN_BACKEND_AUTO); }

/* fully masked rows in the golden files: exact zeros and -inf, no NaN */
static void test_golden_masked_rows_are_exact(void) {
  attn_st *st = NULL;
  CHECK_OK(attn_st_load("tests/golden/sdpa_masked_batch.safetensors", &st));
  if (!st) return;
  const attn_tensor *q = attn_st_get(st, "q"), *k = attn_st_get(st, "k"), *v = attn_st_get(st, "v");
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2],
                      q->shape[3], v->shape[3]);
  d.key_lens = attn_st_get(st, "key_lens")->data; /* [8, 0]: batch 1 sees nothing */
  const int64_t half_o = d.Hq * d.Lq * d.Dv, half_q = d.Hq * d.Lq * d.D;
  float *out = falloc(2 * half_o), *lse = falloc(2 * d.Hq * d.Lq), *dq = falloc(2 * half_q),
        *dk = falloc(2 * d.Hkv * d.Lk * d.D), *dv = falloc(2 * d.Hkv * d.Lk * d.Dv);
  CHECK_OK(attn_sdpa_forward_math(&d, q->data, k->data, v->data, out, lse, NULL));
  CHECK_OK(attn_sdpa_backward_math(&d, q->data, k->data, v->data, out, lse,
                                   attn_st_get(st, "dout")->data, dq, dk, dv));
  int exact = 1;
  for (int64_t i = 0; i < half_o; i++) exact &= out[half_o + i] == 0.0f;
  for (int64_t i = 0; i < half_q; i++) exact &= dq[half_q + i] == 0.0f;
  for (int64_t i = 0; i < d.Hq * d.Lq; i++) exact &= lse[d.Hq * d.Lq + i] == -INFINITY;
  for (int64_t i = 0; i < d.Hkv * d.Lk * d.D; i++) exact &= dk[d.Hkv * d.Lk * d.D + i] == 0.0f;
  CHECK(exact);
  free(out), free(lse), free(dq), free(dk), free(dv);
  attn_st_free(st);
}

/* ---- the naive reference on mixed configurations ------------------------ */

static void test_matches_naive_reference(void) {
  struct {
    int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
    int causal, wl, wr, keylens, boolm, addm;
    float scale;
  } cfg[] = {
      {1, 1, 1, 1, 1, 1, 1, 0, -1, -1, 0, 0, 0, 0},
      {2, 3, 3, 5, 7, 4, 6, 0, -1, -1, 0, 0, 0, 0},
      {2, 6, 2, 9, 9, 5, 3, 1, -1, -1, 1, 0, 0, 0},
      {1, 4, 1, 11, 6, 8, 8, 0, 2, 1, 0, 1, 1, 0.7f},
      {2, 4, 2, 7, 13, 3, 5, 1, 3, 0, 1, 1, 1, 0},
      {3, 2, 1, 17, 19, 16, 9, 0, -1, 4, 1, 0, 1, 0},
      {1, 2, 2, 6, 8, 4, 4, 0, 0, 2, 0, 0, 0, 0}, /* window_left 0: self and right */
  };
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    problem p;
    problem_init(&p, cfg[c].B, cfg[c].Hq, cfg[c].Hkv, cfg[c].Lq, cfg[c].Lk, cfg[c].D, cfg[c].Dv,
                 (unsigned)(100 + c));
    p.d.causal = cfg[c].causal;
    p.d.window_left = cfg[c].wl;
    p.d.window_right = cfg[c].wr;
    if (cfg[c].scale != 0) p.d.has_scale = 1, p.d.scale = cfg[c].scale;
    int32_t kl[3] = {(int32_t)cfg[c].Lk, (int32_t)(cfg[c].Lk / 2), 0};
    if (cfg[c].keylens) p.d.key_lens = kl;
    /* bool mask [Lq, Lk] broadcast over b and h; additive mask [B, 1, Lq, Lk] */
    uint8_t *bm = calloc((size_t)(p.d.Lq * p.d.Lk), 1);
    float *am = falloc(p.d.B * p.d.Lq * p.d.Lk);
    for (int64_t i = 0; i < p.d.Lq * p.d.Lk; i++) bm[i] = (i * 7 + 3) % 5 != 0;
    fill_uniform(am, p.d.B * p.d.Lq * p.d.Lk, 77, -2, 2);
    if (p.d.B * p.d.Lq * p.d.Lk > 5) am[5] = -INFINITY;
    if (cfg[c].boolm) {
      p.d.bool_mask = bm;
      p.d.bool_mask_stride[2] = p.d.Lk, p.d.bool_mask_stride[3] = 1;
    }
    if (cfg[c].addm) {
      p.d.add_mask = am;
      p.d.add_mask_stride[0] = p.d.Lq * p.d.Lk;
      p.d.add_mask_stride[2] = p.d.Lk, p.d.add_mask_stride[3] = 1;
    }
    problem_run(&p, ATTN_BACKEND_MATH);
    problem_check_naive(&p, ATOL, RTOL);
    free(bm), free(am);
    problem_free(&p);
  }
}

/* ---- finite differences of L = sum(out * dout) on the f32 forward --------- */

static double loss_of(problem *p) {
  CHECK_OK(attn_sdpa_forward_math(&p->d, p->q, p->k, p->v, p->out, p->lse, NULL));
  double l = 0;
  for (int64_t i = 0; i < p->no; i++) l += (double)p->out[i] * p->dout[i];
  return l;
}

static void fd_check(problem *p, float *x, const float *grad, int64_t n, const char *what) {
  const float eps = 1e-2f; /* O(eps²) truncation, ~1e-5 f32 noise on the quotient */
  for (int64_t i = 0; i < n; i++) {
    float keep = x[i];
    x[i] = keep + eps;
    double lp = loss_of(p);
    x[i] = keep - eps;
    double lm = loss_of(p);
    x[i] = keep;
    float fd = (float)((lp - lm) / (2.0 * eps));
    CHECK_CLOSE(what, &grad[i], &fd, 1, 2e-3, 1e-2);
  }
}

static void test_backward_matches_finite_differences(void) {
  problem p;
  problem_init(&p, 1, 2, 1, 4, 5, 3, 2, 7);
  p.d.causal = 1;
  p.d.window_right = 0;
  float am[5] = {0.5f, -1, 0, 2, -INFINITY}; /* additive [Lk], broadcast */
  p.d.add_mask = am;
  p.d.add_mask_stride[3] = 1;
  problem_run(&p, ATTN_BACKEND_MATH);
  float *dq = falloc(p.nq), *dk = falloc(p.nk), *dv = falloc(p.nv);
  memcpy(dq, p.dq, sizeof(float) * p.nq);
  memcpy(dk, p.dk, sizeof(float) * p.nk);
  memcpy(dv, p.dv, sizeof(float) * p.nv);
  fd_check(&p, p.q, dq, p.nq, "dq");
  fd_check(&p, p.k, dk, p.nk, "dk");
  fd_check(&p, p.v, dv, p.nv, "dv");
  double nz = 0; /* the check is not vacuous */
  for (int64_t i = 0; i < p.nk; i++) nz += fabs(dk[i]);
  CHECK(nz > 1e-2);
  free(dq), free(dk), free(dv);
  problem_free(&p);
}

/* ---- structure: GQA, strides, threads, probs ----------------------------- */

static void test_gqa_equals_repeated_kv(void) {
  problem g, r;
  const int64_t B = 2, Hq = 6, Hkv = 2, Lq = 5, Lk = 7, D = 4, Dv = 3, G = Hq / Hkv;
  problem_init(&g, B, Hq, Hkv, Lq, Lk, D, Dv, 21);
  problem_init(&r, B, Hq, Hq, Lq, Lk, D, Dv, 21);
  memcpy(r.q, g.q, sizeof(float) * g.nq);
  memcpy(r.dout, g.dout, sizeof(float) * g.no);
  for (int64_t b = 0; b < B; b++) /* r's head h is g's head h / G */
    for (int64_t h = 0; h < Hq; h++) {
      memcpy(r.k + (b * Hq + h) * Lk * D, g.k + (b * Hkv + h / G) * Lk * D, sizeof(float) * Lk * D);
      memcpy(r.v + (b * Hq + h) * Lk * Dv, g.v + (b * Hkv + h / G) * Lk * Dv,
             sizeof(float) * Lk * Dv);
    }
  g.d.causal = r.d.causal = 1;
  problem_run(&g, ATTN_BACKEND_MATH);
  problem_run(&r, ATTN_BACKEND_MATH);
  CHECK(memcmp(g.out, r.out, sizeof(float) * g.no) == 0);
  CHECK(memcmp(g.lse, r.lse, sizeof(float) * g.nl) == 0);
  CHECK(memcmp(g.dq, r.dq, sizeof(float) * g.nq) == 0);
  /* dk of a shared head = sum of the repeated heads' dk */
  float *sk = falloc(g.nk), *sv = falloc(g.nv);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      for (int64_t x = 0; x < Lk * D; x++)
        sk[(b * Hkv + h / G) * Lk * D + x] += r.dk[(b * Hq + h) * Lk * D + x];
      for (int64_t x = 0; x < Lk * Dv; x++)
        sv[(b * Hkv + h / G) * Lk * Dv + x] += r.dv[(b * Hq + h) * Lk * Dv + x];
    }
  CHECK_CLOSE("dk", g.dk, sk, g.nk, 1e-6, 1e-6);
  CHECK_CLOSE("dv", g.dv, sv, g.nv, 1e-6, 1e-6);
  free(sk), free(sv);
  problem_free(&g);
  problem_free(&r);
}

/* x [B,H,L,n] as [B, L, H, n+3] (+5 between batches), NaN in the padding */
static float *to_strided(const float *x, int64_t B, int64_t H, int64_t L, int64_t n,
                         int64_t st[3], int64_t *total) {
  return layout_scatter(x, B, H, L, n, 3, 1, st, total);
}

/* gather back from the strided layout; also checks the padding kept its NaN */
static void from_strided(const float *y, float *x, int64_t B, int64_t H, int64_t L, int64_t n,
                         const int64_t st[3], int64_t total) {
  CHECK(layout_gather(y, x, B, H, L, n, st, total)); /* nothing outside the view was touched */
}

static void test_strided_equals_contiguous(void) {
  problem p;
  problem_init(&p, 2, 4, 2, 6, 9, 5, 7, 31);
  p.d.window_left = 3;
  problem_run(&p, ATTN_BACKEND_MATH);
  attn_sdpa_desc d = p.d;
  int64_t tq, tk, tv, to;
  float *q = to_strided(p.q, 2, 4, 6, 5, d.q_stride, &tq);
  float *k = to_strided(p.k, 2, 2, 9, 5, d.k_stride, &tk);
  float *v = to_strided(p.v, 2, 2, 9, 7, d.v_stride, &tv);
  float *dout = to_strided(p.dout, 2, 4, 6, 7, d.o_stride, &to);
  float *out = to_strided(NULL, 2, 4, 6, 7, d.o_stride, &to);
  float *dq = to_strided(NULL, 2, 4, 6, 5, d.q_stride, &tq);
  float *dk = to_strided(NULL, 2, 2, 9, 5, d.k_stride, &tk);
  float *dv = to_strided(NULL, 2, 2, 9, 7, d.v_stride, &tv);
  float *lse = falloc(p.nl);
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, out, lse, NULL));
  CHECK_OK(attn_sdpa_backward_f32(&d, ATTN_BACKEND_MATH, q, k, v, out, lse, dout, dq, dk, dv));
  float *c = falloc(p.nv + p.nq + p.no + p.nk);
  from_strided(out, c, 2, 4, 6, 7, d.o_stride, to);
  CHECK_CLOSE("out", c, p.out, p.no, 1e-6, 1e-6);
  CHECK_CLOSE("lse", lse, p.lse, p.nl, 1e-6, 1e-6);
  from_strided(dq, c, 2, 4, 6, 5, d.q_stride, tq);
  CHECK_CLOSE("dq", c, p.dq, p.nq, 1e-6, 1e-6);
  from_strided(dk, c, 2, 2, 9, 5, d.k_stride, tk);
  CHECK_CLOSE("dk", c, p.dk, p.nk, 1e-6, 1e-6);
  from_strided(dv, c, 2, 2, 9, 7, d.v_stride, tv);
  CHECK_CLOSE("dv", c, p.dv, p.nv, 1e-6, 1e-6);
  free(q), free(k), free(v), free(dout), free(out), free(dq), free(dk), free(dv), free(lse),
      free(c);
  problem_free(&p);
}

static void test_results_do_not_depend_on_threads(void) {
  problem a, b;
  problem_init(&a, 3, 4, 2, 13, 11, 8, 6, 41);
  problem_init(&b, 3, 4, 2, 13, 11, 8, 6, 41);
  a.d.causal = b.d.causal = 1;
  attn_set_num_threads(1);
  problem_run(&a, ATTN_BACKEND_MATH);
  attn_set_num_threads(3);
  problem_run(&b, ATTN_BACKEND_MATH);
  attn_set_num_threads(0);
  CHECK(memcmp(a.out, b.out, sizeof(float) * a.no) == 0);
  CHECK(memcmp(a.lse, b.lse, sizeof(float) * a.nl) == 0);
  CHECK(memcmp(a.dq, b.dq, sizeof(float) * a.nq) == 0);
  CHECK(memcmp(a.dk, b.dk, sizeof(float) * a.nk) == 0);
  CHECK(memcmp(a.dv, b.dv, sizeof(float) * a.nv) == 0);
  problem_free(&a);
  problem_free(&b);
}

static void test_probs_output(void) {
  problem p;
  problem_init(&p, 2, 2, 1, 6, 8, 4, 4, 51);
  int32_t kl[2] = {8, 0};
  p.d.key_lens = kl;
  p.d.causal = 1;
  const int64_t np = p.nl * p.d.Lk;
  float *probs = falloc(np), *want = falloc(np), *out = falloc(p.no), *lse = falloc(p.nl);
  for (int64_t i = 0; i < np; i++) probs[i] = NAN;
  /* auto must fall back to math when probs are requested */
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_AUTO, p.q, p.k, p.v, p.out, p.lse, probs));
  naive_sdpa(&p.d, p.q, p.k, p.v, NULL, out, lse, want, NULL, NULL, NULL);
  CHECK_CLOSE("probs", probs, want, np, ATOL, RTOL);
  int zero_masked = 1; /* causal: probs[.., i, j > i] == 0 exactly; batch 1: all 0 */
  for (int64_t r = 0; r < p.nl; r++)
    for (int64_t j = 0; j < p.d.Lk; j++)
      if (j > r % p.d.Lq || r >= p.nl / 2) zero_masked &= probs[r * p.d.Lk + j] == 0.0f;
  CHECK(zero_masked);
  CHECK_ERR(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, p.out, p.lse, probs),
            ATTN_EUNSUPPORTED);
  free(probs), free(want), free(out), free(lse);
  problem_free(&p);
}

/* ---- edge cases ---------------------------------------------------------- */

static void test_empty_sequences(void) {
  problem p; /* Lk = 0: every row masked */
  problem_init(&p, 2, 2, 1, 3, 0, 4, 5, 61);
  for (int64_t i = 0; i < p.no; i++) p.out[i] = NAN;
  problem_run(&p, ATTN_BACKEND_AUTO);
  int ok = 1;
  for (int64_t i = 0; i < p.no; i++) ok &= p.out[i] == 0.0f;
  for (int64_t i = 0; i < p.nl; i++) ok &= p.lse[i] == -INFINITY;
  for (int64_t i = 0; i < p.nq; i++) ok &= p.dq[i] == 0.0f;
  CHECK(ok);
  problem_free(&p);
  problem_init(&p, 2, 2, 1, 3, 0, 4, 5, 63); /* Lk = 0 on the math path: no scratch at all */
  for (int64_t i = 0; i < p.no; i++) p.out[i] = NAN;
  problem_run(&p, ATTN_BACKEND_MATH);
  ok = 1;
  for (int64_t i = 0; i < p.no; i++) ok &= p.out[i] == 0.0f;
  for (int64_t i = 0; i < p.nl; i++) ok &= p.lse[i] == -INFINITY;
  for (int64_t i = 0; i < p.nq; i++) ok &= p.dq[i] == 0.0f;
  CHECK(ok);
  problem_free(&p);
  problem_init(&p, 2, 2, 1, 0, 4, 4, 5, 62); /* Lq = 0: dk, dv overwritten with 0 */
  problem_run(&p, ATTN_BACKEND_MATH);
  ok = 1;
  for (int64_t i = 0; i < p.nk; i++) ok &= p.dk[i] == 0.0f;
  for (int64_t i = 0; i < p.nv; i++) ok &= p.dv[i] == 0.0f;
  CHECK(ok);
  problem_free(&p);
}

/* a masked row stays exactly 0 even with inf in V and huge dout; NaN in q
 * propagates to its own row only (documented: NaN is not an error) */
static void test_masked_rows_and_nan(void) {
  problem p;
  problem_init(&p, 1, 2, 1, 4, 5, 3, 3, 71);
  uint8_t bm[4 * 5];
  for (int i = 0; i < 20; i++) bm[i] = i / 5 != 2; /* row 2 may attend nowhere */
  p.d.bool_mask = bm;
  p.d.bool_mask_stride[2] = 5, p.d.bool_mask_stride[3] = 1;
  p.v[0] = INFINITY;                                 /* key 0's value */
  for (int c = 0; c < 3; c++) p.dout[2 * 3 + c] = 1e30f; /* head 0, row 2 */
  problem_run(&p, ATTN_BACKEND_MATH);
  int ok = 1;
  for (int h = 0; h < 2; h++) {
    ok &= p.lse[h * 4 + 2] == -INFINITY;
    for (int c = 0; c < 3; c++) ok &= p.out[(h * 4 + 2) * 3 + c] == 0.0f;
    for (int c = 0; c < 3; c++) ok &= p.dq[(h * 4 + 2) * 3 + c] == 0.0f;
  }
  CHECK(ok);
  problem_free(&p);

  problem_init(&p, 1, 2, 2, 3, 4, 2, 2, 72);
  p.q[0] = NAN; /* head 0, row 0 */
  problem_run(&p, ATTN_BACKEND_MATH);
  CHECK(isnan(p.out[0]) && isnan(p.lse[0]));
  int finite = 1; /* head 1 shares nothing with head 0 */
  for (int64_t i = p.no / 2; i < p.no; i++) finite &= isfinite(p.out[i]);
  for (int64_t i = p.nk / 2; i < p.nk; i++) finite &= isfinite(p.dk[i]);
  CHECK(finite);
  problem_free(&p);
}

/* logits of ~1e4: no overflow, probabilities still sum to 1 */
static void test_huge_logits_are_finite(void) {
  problem p;
  problem_init(&p, 1, 1, 1, 3, 6, 2, 2, 81);
  p.d.has_scale = 1;
  p.d.scale = 5000.0f;
  problem_run(&p, ATTN_BACKEND_MATH);
  int ok = 1;
  for (int64_t i = 0; i < p.no; i++) ok &= isfinite(p.out[i]) && fabsf(p.out[i]) <= 1.0f;
  for (int64_t i = 0; i < p.nq; i++) ok &= isfinite(p.dq[i]);
  for (int64_t i = 0; i < p.nl; i++) ok &= isfinite(p.lse[i]);
  CHECK(ok);
  problem_free(&p);
}

/* ---- bad input ------------------------------------------------------------ */

static void test_bad_arguments(void) {
  problem p;
  problem_init(&p, 1, 4, 2, 3, 3, 2, 2, 91);
  attn_sdpa_desc d = p.d;
  float *q = p.q, *k = p.k, *v = p.v, *o = p.out, *l = p.lse;
#define FWD(desc) attn_sdpa_forward_f32(desc, ATTN_BACKEND_MATH, q, k, v, o, l, NULL)
  CHECK_ERR(FWD(NULL), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, NULL, k, v, o, l, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "q") != NULL);
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, NULL, l, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_forward_f32(&d, (attn_backend)7, q, k, v, o, l, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_backward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL, p.dq, p.dk, p.dv),
            ATTN_EINVAL);
  CHECK_ERR(attn_sdpa_backward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, p.dout, p.dq, NULL, p.dv),
            ATTN_EINVAL);
  d = p.d, d.Hkv = 3; /* 4 % 3 != 0 */
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "multiple") != NULL);
  d = p.d, d.D = 0;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  d = p.d, d.Lq = -1;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  d = p.d, d.window_left = -2;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  d = p.d, d.has_scale = 1, d.scale = NAN;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  int32_t kl[1] = {4}; /* > Lk */
  d = p.d, d.key_lens = kl;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "key_lens") != NULL);
  kl[0] = -1;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  d = p.d, d.o_stride[0] = 12, d.o_stride[1] = 2, d.o_stride[2] = 1; /* rows overlap */
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "out") != NULL);
  d = p.d, d.q_stride[0] = -24, d.q_stride[1] = 6, d.q_stride[2] = 2;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  uint8_t bm = 1;
  d = p.d, d.bool_mask = &bm, d.bool_mask_stride[1] = -1;
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
  d = p.d, d.B = INT64_MAX / 2; /* sizes whose extent overflows */
  CHECK_ERR(FWD(&d), ATTN_EINVAL);
#undef FWD
  problem_free(&p);
}

static void test_backend_names(void) {
  for (int b = 0; b < 3; b++) {
    attn_backend x;
    CHECK_OK(attn_backend_from_name(attn_backend_name((attn_backend)b), &x));
    CHECK(x == (attn_backend)b);
  }
  attn_backend x;
  CHECK_ERR(attn_backend_from_name("fast", &x), ATTN_EINVAL);
  CHECK_ERR(attn_backend_from_name(NULL, &x), ATTN_EINVAL);
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, 2, 1, 3, 4, 5, 6);
  CHECK(d.window_left == -1 && d.window_right == -1 && !d.has_scale && !d.causal &&
        !d.key_lens && !d.bool_mask && !d.add_mask && d.q_stride[0] == 0 && d.Dv == 6);
}

int main(void) {
  RUN(test_golden_files_math);
  RUN(test_golden_files_auto);
  RUN(test_golden_masked_rows_are_exact);
  RUN(test_matches_naive_reference);
  RUN(test_backward_matches_finite_differences);
  RUN(test_gqa_equals_repeated_kv);
  RUN(test_strided_equals_contiguous);
  RUN(test_results_do_not_depend_on_threads);
  RUN(test_probs_output);
  RUN(test_empty_sequences);
  RUN(test_masked_rows_and_nan);
  RUN(test_huge_logits_are_finite);
  RUN(test_bad_arguments);
  RUN(test_backend_names);
  HARNESS_END();
}
