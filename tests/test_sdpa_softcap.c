/* Logit softcap and attention sinks (attn/sdpa.h, kernels/sdpa/mod_softcap.c, mod_sinks.c):
 * the math path against a naive double-precision reference written here
 * (softcap before the additive mask and ALiBi; the sink in the denominator
 * and lse); flash (the generic kernel set and the active level's) against
 * math, forward and backward with d sinks, alone and with causal, windows,
 * key_lens, masks, ALiBi, GQA, Dv != D, q_offset; d sinks and softcap's dq
 * against finite differences; rows with no allowed key; the NaN contract;
 * bad input; the PyTorch golden files (tests/golden/cap_sdpa_*) through math
 * and both kernel sets; bf16, fp16 and int8 flash.
 *
 * Tolerances: math vs the double reference 2e-6 + 2e-5 |ref|; flash vs math
 * as tests/test_flash.c (1e-5 + 1e-4 |math| forward, twice for gradients;
 * d sinks, a sum over every row of the head, 1e-4 + 1e-3 |math|); finite
 * differences (central, h = 1e-2 on f32) 2e-3 + 1e-2 |fd|. */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flash_ops_list.h"
#include "harness.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "sdpa_golden.h"

static const attn_flash_ops *ops_list[2];
static int n_ops;

typedef struct {
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  float cap;  /* 0 off */
  int sinks;  /* per-head sinks */
  int causal, wl, wr, key_lens, add_mask, bool_mask, alibi, q_offset;
} ccfg;

typedef struct {
  attn_sdpa_desc d;
  float *q, *k, *v, *dout, *sinks, *slopes, *am;
  uint8_t *bm;
  int32_t *kl;
  int64_t nq, nk, nv, no, nl;
} cprob;

static void make(const ccfg *c, unsigned seed, cprob *p) {
  memset(p, 0, sizeof *p);
  attn_sdpa_desc *d = &p->d;
  attn_sdpa_desc_init(d, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv);
  d->causal = c->causal;
  d->window_left = c->wl;
  d->window_right = c->wr;
  d->q_offset = c->q_offset;
  d->softcap = c->cap;
  p->nq = (int64_t)c->B * c->Hq * c->Lq * c->D;
  p->nk = (int64_t)c->B * c->Hkv * c->Lk * c->D;
  p->nv = (int64_t)c->B * c->Hkv * c->Lk * c->Dv;
  p->no = (int64_t)c->B * c->Hq * c->Lq * c->Dv;
  p->nl = (int64_t)c->B * c->Hq * c->Lq;
  p->q = malloc((p->nq + 1) * sizeof(float));
  p->k = malloc((p->nk + 1) * sizeof(float));
  p->v = malloc((p->nv + 1) * sizeof(float));
  p->dout = malloc((p->no + 1) * sizeof(float));
  /* large scores (|q·k| scale up to ~3 D^0.5) so that the cap matters */
  fill_uniform(p->q, p->nq, seed, -3.0f, 3.0f);
  fill_uniform(p->k, p->nk, seed + 1, -3.0f, 3.0f);
  fill_uniform(p->v, p->nv, seed + 2, -1, 1);
  fill_uniform(p->dout, p->no, seed + 3, -1, 1);
  if (c->sinks) {
    p->sinks = malloc(c->Hq * sizeof(float));
    fill_uniform(p->sinks, c->Hq, seed + 4, -2.0f, 4.0f);
    d->sinks = p->sinks;
  }
  if (c->key_lens) {
    p->kl = malloc(c->B * sizeof(int32_t));
    for (int b = 0; b < c->B; b++)
      p->kl[b] = (int32_t)((seed * 7 + b * 13) % (c->Lk + 1));
    p->kl[0] = 0; /* a batch whose rows see no key: out 0, lse = the sink */
    p->kl[c->B - 1] = c->Lk;
    d->key_lens = p->kl;
  }
  if (c->bool_mask) { /* [Lq, Lk] broadcast */
    int64_t n2 = (int64_t)c->Lq * c->Lk;
    p->bm = malloc(n2 + 1);
    for (int64_t e = 0; e < n2; e++)
      p->bm[e] = (e * 2654435761u + seed) % 5 != 0;
    d->bool_mask = p->bm;
    d->bool_mask_stride[2] = c->Lk;
    d->bool_mask_stride[3] = 1;
  }
  if (c->add_mask) { /* [B, 1, Lq, Lk], some -inf */
    int64_t n2 = (int64_t)c->B * c->Lq * c->Lk;
    p->am = malloc((n2 + 1) * sizeof(float));
    fill_uniform(p->am, n2, seed + 5, -2.0f, 2.0f);
    for (int64_t e = 0; e < n2; e += 7)
      p->am[e] = -INFINITY;
    d->add_mask = p->am;
    d->add_mask_stride[0] = (int64_t)c->Lq * c->Lk;
    d->add_mask_stride[2] = c->Lk;
    d->add_mask_stride[3] = 1;
  }
  if (c->alibi) {
    p->slopes = malloc(c->Hq * sizeof(float));
    CHECK_OK(attn_alibi_slopes(c->Hq, p->slopes));
    d->alibi_slopes = p->slopes;
  }
}

static void unmake(cprob *p) {
  free(p->q), free(p->k), free(p->v), free(p->dout), free(p->sinks), free(p->slopes);
  free(p->am), free(p->bm), free(p->kl);
}

/* out, lse, dq, dk, dv, dsinks */
typedef struct {
  float *x[6];
  int64_t n[6];
} results;

static void alloc_results(const cprob *p, results *r) {
  const int64_t n[6] = {p->no, p->nl, p->nq, p->nk, p->nv, p->d.Hq};
  for (int i = 0; i < 6; i++) {
    r->n[i] = n[i];
    r->x[i] = calloc(n[i] + 1, sizeof(float));
  }
}

static void release(results *r) {
  for (int i = 0; i < 6; i++)
    free(r->x[i]);
}

/* ops NULL: the math path */
static void run(const attn_flash_ops *ops, cprob *p, results *r) {
  alloc_results(p, r);
  attn_sdpa_desc d = p->d;
  d.sinks_grad = d.sinks ? r->x[5] : NULL;
  float **x = r->x;
  if (ops) {
    CHECK_OK(attn_sdpa_forward_flash_ops(ops, &d, p->q, p->k, p->v, x[0], x[1]));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops, &d, p->q, p->k, p->v, x[0], x[1], p->dout, x[2],
                                          x[3], x[4]));
  } else {
    CHECK_OK(attn_sdpa_forward_math(&d, p->q, p->k, p->v, x[0], x[1], NULL));
    CHECK_OK(attn_sdpa_backward_math(&d, p->q, p->k, p->v, x[0], x[1], p->dout, x[2], x[3], x[4]));
  }
}

static const char *const names[6] = {"out", "lse", "dq", "dk", "dv", "dsinks"};

static void compare(const ccfg *c, unsigned seed) {
  if (!h_sample()) return; /* ATTN_TEST_SAMPLE (tests/harness.h) */
  cprob p;
  make(c, seed, &p);
  results m, f;
  run(NULL, &p, &m);
  for (int o = 0; o < n_ops; o++) {
    int before = h_case_failed;
    h_case_failed = 0;
    run(ops_list[o], &p, &f);
    for (int i = 0; i < 6; i++) {
      if (i == 5 && !c->sinks) continue;
      const double a = i < 2 ? 1e-5 : i < 5 ? 2e-5 : 1e-4, rt = i < 2 ? 1e-4 : i < 5 ? 2e-4 : 1e-3;
      CHECK_CLOSE(names[i], f.x[i], m.x[i], f.n[i], a, rt);
    }
    if (h_case_failed)
      printf("  ^ %s: B%d Hq%d Hkv%d Lq%d Lk%d D%d Dv%d cap %g sinks %d causal %d w(%d,%d) kl %d "
             "am %d bm %d alibi %d off %d\n",
             ops_list[o]->name, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv, (double)c->cap,
             c->sinks, c->causal, c->wl, c->wr, c->key_lens, c->add_mask, c->bool_mask, c->alibi,
             c->q_offset);
    h_case_failed |= before;
    release(&f);
  }
  release(&m);
  unmake(&p);
}

/* The formulas written out in double, one (b, h, i) row at a time. */
static void naive_forward(const cprob *p, double *out, double *lse) {
  const attn_sdpa_desc *d = &p->d;
  const double scale = 1.0 / sqrt((double)d->D);
  const int64_t G = d->Hq / d->Hkv;
  double *t = malloc((d->Lk + 1) * sizeof(double));
  for (int64_t b = 0; b < d->B; b++)
    for (int64_t h = 0; h < d->Hq; h++)
      for (int64_t i = 0; i < d->Lq; i++) {
        const float *qi = p->q + ((b * d->Hq + h) * d->Lq + i) * d->D;
        const int64_t pi = i + d->q_offset;
        double m = d->sinks ? d->sinks[h] : -INFINITY;
        int any = 0;
        for (int64_t j = 0; j < d->Lk; j++) {
          const float *kj = p->k + ((b * d->Hkv + h / G) * d->Lk + j) * d->D;
          int ok = (!d->causal || j <= pi) && (d->window_left < 0 || j >= pi - d->window_left) &&
                   (d->window_right < 0 || j <= pi + d->window_right) &&
                   (!d->key_lens || j < d->key_lens[b]) &&
                   (!d->bool_mask || d->bool_mask[i * d->Lk + j]);
          double s = 0;
          for (int64_t c = 0; c < d->D; c++)
            s += (double)qi[c] * kj[c];
          s *= scale;
          if (d->softcap > 0) s = d->softcap * tanh(s / d->softcap);
          if (d->add_mask) s += d->add_mask[(b * d->Lq + i) * d->Lk + j];
          if (d->alibi_slopes) s -= d->alibi_slopes[h] * (double)(pi > j ? pi - j : j - pi);
          t[j] = ok ? s : -INFINITY;
          if (t[j] > m) m = t[j];
          any |= t[j] != -INFINITY;
        }
        double *o = out + ((b * d->Hq + h) * d->Lq + i) * d->Dv;
        memset(o, 0, d->Dv * sizeof(double));
        double l = d->sinks && isfinite(m) ? exp(d->sinks[h] - m) : 0.0;
        for (int64_t j = 0; j < d->Lk; j++) {
          if (t[j] == -INFINITY) continue;
          const double e = exp(t[j] - m);
          l += e;
          const float *vj = p->v + ((b * d->Hkv + h / G) * d->Lk + j) * d->Dv;
          for (int64_t c = 0; c < d->Dv; c++)
            o[c] += e * vj[c];
        }
        for (int64_t c = 0; any && c < d->Dv; c++)
          o[c] /= l;
        lse[(b * d->Hq + h) * d->Lq + i] =
            any ? m + log(l) : d->sinks ? (double)d->sinks[h] : -INFINITY;
      }
  free(t);
}

static void check_naive(const ccfg *c, unsigned seed) {
  cprob p;
  make(c, seed, &p);
  results m;
  run(NULL, &p, &m);
  double *o = malloc((p.no + 1) * sizeof(double)), *l = malloc((p.nl + 1) * sizeof(double));
  naive_forward(&p, o, l);
  float *of = malloc((p.no + 1) * sizeof(float)), *lf = malloc((p.nl + 1) * sizeof(float));
  for (int64_t e = 0; e < p.no; e++)
    of[e] = (float)o[e];
  for (int64_t e = 0; e < p.nl; e++)
    lf[e] = (float)l[e];
  CHECK_CLOSE("out vs naive", m.x[0], of, p.no, 2e-6, 2e-5);
  CHECK_CLOSE("lse vs naive", m.x[1], lf, p.nl, 2e-6, 2e-5);
  free(o), free(l), free(of), free(lf);
  release(&m);
  unmake(&p);
}

/* math matches the formulas written out: softcap before the mask and ALiBi,
 * the sink in every denominator and lse, empty rows out 0 / lse = sink */
static void test_math_vs_naive(void) {
  const ccfg cs[] = {
      {1, 2, 2, 5, 7, 8, 8, 5.0f, 0, 0, -1, -1, 0, 0, 0, 0, 0},
      {1, 2, 2, 5, 7, 8, 8, 0.0f, 1, 0, -1, -1, 0, 0, 0, 0, 0},
      {2, 4, 2, 6, 9, 8, 5, 2.0f, 1, 1, -1, -1, 1, 1, 0, 0, 0},
      {2, 2, 1, 6, 9, 4, 4, 3.0f, 1, 0, 3, 1, 0, 1, 1, 1, 2},
      {1, 2, 2, 4, 70, 8, 8, 1.5f, 1, 1, -1, -1, 0, 0, 0, 1, 66},
  };
  for (unsigned i = 0; i < sizeof cs / sizeof cs[0]; i++)
    check_naive(&cs[i], 10 + i);
}

static void test_flash_vs_math(void) {
  const ccfg cs[] = {
      /* B Hq Hkv Lq Lk D Dv cap sinks causal wl wr kl am bm alibi off */
      {2, 2, 2, 37, 45, 16, 16, 5.0f, 0, 0, -1, -1, 0, 0, 0, 0, 0},
      {2, 2, 2, 37, 45, 16, 16, 0.0f, 1, 0, -1, -1, 0, 0, 0, 0, 0},
      {2, 2, 2, 37, 45, 16, 16, 30.0f, 1, 0, -1, -1, 0, 0, 0, 0, 0},
      {1, 4, 2, 150, 200, 32, 24, 2.0f, 1, 1, -1, -1, 0, 0, 0, 0, 0},
      {2, 4, 1, 70, 130, 16, 16, 3.0f, 1, 0, 20, 5, 1, 0, 0, 0, 0},
      {2, 2, 2, 64, 128, 8, 8, 4.0f, 1, 1, -1, -1, 0, 1, 1, 0, 64},
      {1, 4, 4, 50, 90, 16, 8, 1.0f, 1, 1, 30, -1, 0, 0, 0, 1, 40},
      {1, 2, 1, 200, 64, 16, 16, 10.0f, 0, 0, -1, -1, 0, 0, 0, 1, 0},
      {3, 2, 2, 20, 140, 16, 16, 0.0f, 1, 0, -1, -1, 1, 1, 0, 0, 0},
  };
  for (unsigned i = 0; i < sizeof cs / sizeof cs[0]; i++)
    compare(&cs[i], 100 + i);
}

/* L = sum(dout * out) in double, from the math forward */
static double loss(cprob *p) {
  float *o = malloc((p->no + 1) * sizeof(float)), *l = malloc((p->nl + 1) * sizeof(float));
  CHECK_OK(attn_sdpa_forward_math(&p->d, p->q, p->k, p->v, o, l, NULL));
  double s = 0;
  for (int64_t e = 0; e < p->no; e++)
    s += (double)o[e] * p->dout[e];
  free(o), free(l);
  return s;
}

static void test_finite_differences(void) {
  const ccfg c = {2, 4, 2, 9, 11, 8, 6, 2.0f, 1, 1, 4, -1, 1, 1, 0, 0, 2};
  cprob p;
  make(&c, 7, &p);
  for (int o = -1; o < n_ops; o++) {
    results r;
    run(o < 0 ? NULL : ops_list[o], &p, &r);
    const float hstep = 1e-2f;
    for (int h = 0; h < c.Hq; h++) { /* d sinks */
      const float s0 = p.sinks[h];
      p.sinks[h] = s0 + hstep;
      double lp = loss(&p);
      p.sinks[h] = s0 - hstep;
      double lm = loss(&p);
      p.sinks[h] = s0;
      float fd = (float)((lp - lm) / (2.0 * hstep));
      CHECK_CLOSE("dsinks vs fd", &r.x[5][h], &fd, 1, 2e-3, 1e-2);
    }
    for (int64_t e = 0; e < p.nq; e += 13) { /* dq through the softcap */
      const float q0 = p.q[e];
      p.q[e] = q0 + hstep;
      double lp = loss(&p);
      p.q[e] = q0 - hstep;
      double lm = loss(&p);
      p.q[e] = q0;
      float fd = (float)((lp - lm) / (2.0 * hstep));
      CHECK_CLOSE("dq vs fd", &r.x[2][e], &fd, 1, 2e-3, 1e-2);
    }
    for (int64_t e = 0; e < p.nk; e += 11) { /* dk */
      const float k0 = p.k[e];
      p.k[e] = k0 + hstep;
      double lp = loss(&p);
      p.k[e] = k0 - hstep;
      double lm = loss(&p);
      p.k[e] = k0;
      float fd = (float)((lp - lm) / (2.0 * hstep));
      CHECK_CLOSE("dk vs fd", &r.x[3][e], &fd, 1, 2e-3, 1e-2);
    }
    release(&r);
  }
  unmake(&p);
}

/* key_lens 0 for a batch: its rows give out 0, lse = the sink, zero
 * gradients, and add nothing to d sinks */
static void test_empty_rows(void) {
  const ccfg c = {2, 2, 1, 5, 70, 8, 8, 3.0f, 1, 0, -1, -1, 1, 0, 0, 0, 0};
  cprob p;
  make(&c, 3, &p);
  for (int o = -1; o < n_ops; o++) {
    results r;
    run(o < 0 ? NULL : ops_list[o], &p, &r);
    for (int h = 0; h < c.Hq; h++)
      for (int i = 0; i < c.Lq; i++) {
        CHECK(r.x[1][h * c.Lq + i] == p.sinks[h]);
        for (int e = 0; e < c.Dv; e++)
          CHECK(r.x[0][(h * c.Lq + i) * c.Dv + e] == 0.0f);
        for (int e = 0; e < c.D; e++)
          CHECK(r.x[2][(h * c.Lq + i) * c.D + e] == 0.0f);
      }
    release(&r);
  }
  unmake(&p);
}

/* a descriptor whose only score modifier is softcap = cap */
static attn_sdpa_desc cap_desc(float cap) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, 1, 1, 1, 1, 1, 1);
  d.softcap = cap;
  return d;
}

/* the f32 tile against the double formula, including -inf, +inf, NaN, tiny */
static void test_softcap_tile(void) {
  const attn_sdpa_desc cd = cap_desc(7.0f);
  float x[3 * 70], y[3 * 70], g[3 * 70], gw[3 * 70];
  fill_uniform(x, 3 * 70, 5, -40.0f, 40.0f);
  for (int e = 0; e < 30; e++)
    x[e] *= 1e-4f * (float)e; /* the series branch and its edge */
  x[31] = -INFINITY, x[32] = INFINITY, x[33] = NAN, x[34] = 0.0f, x[35] = 0.125f * 7.0f;
  memcpy(y, x, sizeof x);
  attn_stage_tile(&cd, 0, 3, 70, y, 70, g, 70);
  float want[3 * 70];
  memcpy(want, x, sizeof x);
  attn_stage_row_exact(&cd, 0, want, 3 * 70, gw);
  CHECK_CLOSE("softcap tile", y, want, 3 * 70, 1e-6, 4e-7);
  CHECK_CLOSE("softcap derivative", g, gw, 3 * 70, 1e-6, 1e-6);
  CHECK(y[31] == -INFINITY && g[31] == 0.0f && y[32] == 7.0f && g[32] == 0.0f && isnan(y[33]));
  CHECK(y[34] == 0.0f && g[34] == 1.0f);
}

/* Each level's vector row op (the unit's vec[], NULL at generic) against
 * the double formula at every tail length: the series branch and its edge,
 * -inf, +inf, NaN, 0 and large values. */
static void test_softcap_row_levels(void) {
  const attn_sdpa_desc cd = cap_desc(7.0f);
  float x[70], y[70], g[70], want[70], gw[70];
  fill_uniform(x, 70, 9, -40.0f, 40.0f);
  for (int e = 0; e < 30; e++)
    x[e] *= 1e-4f * (float)e;
  x[31] = -INFINITY, x[32] = INFINITY, x[33] = NAN, x[34] = 0.0f, x[35] = 0.125f * 7.0f;
  x[36] = -0.125f * 7.0f, x[37] = 1e30f, x[38] = -1e30f;
  int vector = 0;
  for (int i = 0; i < ATTN_ISA_COUNT; i++) {
    const attn_kern *k = attn_kern_at((attn_isa)i);
    const attn_score_vec_fn vf =
        k ? attn_stage_vec(attn_stage_unit_named("softcap"), (attn_isa)i) : NULL;
    if (!vf) continue;
    vector++;
    for (int n = 1; n <= 70; n += n < 20 ? 1 : 17) {
      memcpy(y, x, sizeof x), memcpy(want, x, sizeof x);
      if (n < 70) g[n] = 123.0f, y[n] = 321.0f; /* past n: untouched */
      vf(7.0f, y, g, n);
      attn_stage_row_exact(&cd, 0, want, n, gw);
      CHECK_CLOSE("softcap row", y, want, n, 1e-6, 4e-7);
      CHECK_CLOSE("softcap row derivative", g, gw, n, 1e-6, 1e-6);
      if (n < 70) CHECK(g[n] == 123.0f && y[n] == 321.0f);
      vf(7.0f, y, NULL, 0); /* n = 0: nothing */
    }
    memcpy(y, x, sizeof x);
    vf(7.0f, y, NULL, 70);
    CHECK(y[31] == -INFINITY && y[32] == 7.0f && isnan(y[33]) && y[34] == 0.0f);
    CHECK(y[37] == 7.0f && y[38] == -7.0f);
    if (h_case_failed) printf("  ^ level %s\n", attn_isa_name((attn_isa)i));
  }
  if (attn_isa_active() != ATTN_ISA_GENERIC) CHECK(vector > 0);
}

/* tile_forward_mod of the level, counting the calls that carry ALiBi */
static const attn_flash_ops *mod_real;
static int mod_alibi_calls;
static void mod_counting(const attn_flash_mod *mod, int G, int64_t D, int64_t Dv, const float *q,
                         int64_t ldq, const float *kt, const float *v, int64_t ldv, float scale,
                         float *s, float *o, int64_t ldo, float *m, float *l, const float *ktn,
                         const float *vn, int64_t ldvn) {
  mod_alibi_calls += mod->alibi != 0;
  mod_real->tile_forward_mod(mod, G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn, vn,
                             ldvn);
}

/* The level's fused tiles with softcap and / or ALiBi (tile_forward_mod,
 * wherever it has tile_forward) give the same bits as the steps (logits, the
 * level's softcap row op, the ALiBi table, softmax, p·v): the same problem
 * through the level's set and through a copy without tile_forward_mod; and
 * ALiBi does reach the fused tiles (causal, q_offset of either sign, GQA). */
static void test_fused_softcap_matches_steps(void) {
  const attn_flash_ops *a = attn_kern_get()->flash;
  if (!a->tile_forward) {
    SKIP("kernel set %s has no fused tiles", a->name);
    return;
  }
  CHECK(a->tile_forward_mod != NULL);
  attn_flash_ops steps = *a, counted = *a;
  steps.tile_forward_mod = NULL;
  counted.tile_forward_mod = mod_counting;
  mod_real = a;
  const ccfg cs[] = {{1, 2, 1, 200, 256, 64, 64, 3.0f, 0, 0, -1, -1, 0, 0, 0, 0, 0},
                     {2, 2, 2, 150, 130, 40, 24, 0.5f, 1, 0, -1, -1, 0, 0, 0, 0, 0},
                     {1, 4, 2, 300, 320, 64, 64, 0.0f, 0, 0, -1, -1, 0, 0, 0, 1, 0},
                     {2, 2, 2, 200, 256, 32, 48, 5.0f, 1, 1, -1, -1, 0, 0, 0, 1, 56},
                     {1, 2, 2, 260, 200, 64, 64, 0.0f, 0, 1, -1, -1, 0, 0, 0, 1, -60}};
  for (int t = 0; t < 5; t++) {
    cprob p;
    make(&cs[t], 70 + t, &p);
    float *o[2], *l[2];
    mod_alibi_calls = 0;
    for (int x = 0; x < 2; x++) {
      o[x] = calloc(p.no, sizeof(float)), l[x] = calloc(p.nl, sizeof(float));
      CHECK_OK(attn_sdpa_forward_flash_ops(x ? &steps : &counted, &p.d, p.q, p.k, p.v, o[x], l[x]));
    }
    if (cs[t].alibi) CHECK(mod_alibi_calls > 0);
    CHECK_CLOSE("fused softcap/alibi out", o[0], o[1], p.no, 0, 0);
    CHECK_CLOSE("fused softcap/alibi lse", l[0], l[1], p.nl, 0, 0);
    if (h_case_failed) printf("  ^ case %d\n", t);
    for (int x = 0; x < 2; x++)
      free(o[x]), free(l[x]);
    unmake(&p);
  }
}

/* NaN in q makes its row NaN with softcap on; a NaN sink makes its head's lse NaN */
static void test_nan_contract(void) {
  const ccfg c = {1, 2, 2, 8, 20, 8, 8, 4.0f, 1, 0, -1, -1, 0, 0, 0, 0, 0};
  for (int o = -1; o < n_ops; o++) {
    cprob p;
    make(&c, 9, &p);
    p.q[3 * c.D + 1] = NAN; /* head 0, row 3 */
    p.sinks[1] = NAN;
    results r;
    alloc_results(&p, &r);
    if (o < 0)
      CHECK_OK(attn_sdpa_forward_math(&p.d, p.q, p.k, p.v, r.x[0], r.x[1], NULL));
    else
      CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[o], &p.d, p.q, p.k, p.v, r.x[0], r.x[1]));
    CHECK(isnan(r.x[1][3]) && isnan(r.x[0][3 * c.Dv]));
    CHECK(!isnan(r.x[1][2]) && !isnan(r.x[0][2 * c.Dv]));
    for (int i = 0; i < c.Lq; i++)
      CHECK(isnan(r.x[1][c.Lq + i]) && isnan(r.x[0][(c.Lq + i) * c.Dv]));
    release(&r);
    unmake(&p);
  }
}

/* bf16 and fp16 flash (every path this machine has) and int8 flash forward
 * with softcap and sinks, against the f32 flash on the rounded inputs. The
 * tiles round p to bf16 (int8: the scores are quantized): out 1e-2 + 1e-2
 * |f32| (int8: 3e-2), lse 2e-3 + 1e-3 |f32| (int8: 5e-2 + 1e-2: the logits are quantized),
 * gradients 3e-2 + 3e-2 |f32|, d sinks 2e-2 + 2e-2 |f32|. */
static void lowp_case(const ccfg *c, unsigned seed) {
  cprob p;
  make(c, seed, &p);
  uint16_t *q16 = malloc((p.nq + 1) * 2), *k16 = malloc((p.nk + 1) * 2),
           *v16 = malloc((p.nv + 1) * 2);
  for (int f16 = 0; f16 < 2; f16++) {
    void (*to16)(const float *, uint16_t *, int64_t) = f16 ? attn_f32_to_f16_n : attn_f32_to_bf16_n;
    void (*to32)(const uint16_t *, float *, int64_t) = f16 ? attn_f16_to_f32_n : attn_bf16_to_f32_n;
    cprob r = p; /* the rounded inputs as f32 */
    float *rq = malloc((p.nq + 1) * 4), *rk = malloc((p.nk + 1) * 4), *rv = malloc((p.nv + 1) * 4);
    to16(p.q, q16, p.nq), to16(p.k, k16, p.nk), to16(p.v, v16, p.nv);
    to32(q16, rq, p.nq), to32(k16, rk, p.nk), to32(v16, rv, p.nv);
    r.q = rq, r.k = rk, r.v = rv;
    results want;
    run(attn_kern_get()->flash, &r, &want);
    const attn_lowp_path paths[] = {ATTN_LOWP_AUTO, ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD,
                                    ATTN_LOWP_AMX, ATTN_LOWP_F32};
    for (unsigned a = 0; a < sizeof paths / sizeof paths[0]; a++) {
      if (f16 ? !attn_sdpa_f16_path_available(paths[a]) : !attn_sdpa_bf16_path_available(paths[a]))
        continue;
      int before = h_case_failed;
      h_case_failed = 0;
      results got;
      alloc_results(&p, &got);
      attn_sdpa_desc d = p.d;
      d.sinks_grad = d.sinks ? got.x[5] : NULL;
      float **x = got.x;
      if (f16) {
        CHECK_OK(attn_sdpa_forward_f16_path(paths[a], &d, q16, k16, v16, x[0], x[1]));
        CHECK_OK(attn_sdpa_backward_f16_path(paths[a], &d, q16, k16, v16, x[0], x[1], p.dout,
                                             x[2], x[3], x[4]));
      } else {
        CHECK_OK(attn_sdpa_forward_bf16_path(paths[a], &d, q16, k16, v16, x[0], x[1]));
        CHECK_OK(attn_sdpa_backward_bf16_path(paths[a], &d, q16, k16, v16, x[0], x[1], p.dout,
                                              x[2], x[3], x[4]));
      }
      CHECK_CLOSE("out", x[0], want.x[0], p.no, 1e-2, 1e-2);
      CHECK_CLOSE("lse", x[1], want.x[1], p.nl, 2e-3, 1e-3);
      for (int i = 2; i < 5; i++)
        CHECK_CLOSE(names[i], x[i], want.x[i], got.n[i], 3e-2, 3e-2);
      if (c->sinks) CHECK_CLOSE("dsinks", x[5], want.x[5], c->Hq, 2e-2, 2e-2);
      if (h_case_failed)
        printf("  ^ %s path %d, cap %g sinks %d\n", f16 ? "f16" : "bf16", (int)paths[a],
               (double)c->cap, c->sinks);
      h_case_failed |= before;
      release(&got);
    }
    release(&want);
    free(rq), free(rk), free(rv);
  }
  /* int8 forward on the f32 inputs against the f32 flash */
  results want;
  run(attn_kern_get()->flash, &p, &want);
  const attn_lowp_path ipaths[] = {ATTN_LOWP_AUTO, ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX};
  for (unsigned a = 0; a < sizeof ipaths / sizeof ipaths[0]; a++) {
    if (!attn_sdpa_i8_path_available(ipaths[a])) continue;
    float *o = calloc(p.no + 1, 4), *l = calloc(p.nl + 1, 4);
    CHECK_OK(attn_sdpa_forward_i8_path(ipaths[a], &p.d, p.q, p.k, p.v, o, l));
    CHECK_CLOSE("i8 out", o, want.x[0], p.no, 3e-2, 1e-2);
    CHECK_CLOSE("i8 lse", l, want.x[1], p.nl, 5e-2, 1e-2);
    free(o), free(l);
  }
  release(&want);
  free(q16), free(k16), free(v16);
  unmake(&p);
}

static void test_low_precision(void) {
  const ccfg cs[] = {
      {1, 2, 2, 40, 100, 32, 32, 5.0f, 0, 0, -1, -1, 0, 0, 0, 0, 0},
      {1, 2, 2, 40, 100, 32, 32, 0.0f, 1, 0, -1, -1, 0, 0, 0, 0, 0},
      {2, 4, 2, 70, 150, 64, 48, 3.0f, 1, 1, -1, -1, 1, 1, 0, 0, 0},
  };
  for (unsigned i = 0; i < sizeof cs / sizeof cs[0]; i++)
    lowp_case(&cs[i], 300 + i);
}

/* ---- golden files (tools/golden_softcap.py): math and both kernel sets ---- */
static void golden(const attn_flash_ops *ops, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "tests/golden/cap_sdpa_%s.safetensors", name);
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(path, &g));
  if (!g) return;
  attn_sdpa_desc d;
  golden_var_desc(g, &d); /* shapes, causal, window, q_offset, ALiBi */
  const attn_tensor *kl = attn_st_get(g, "key_lens"), *mask = attn_st_get(g, "mask");
  if (kl) d.key_lens = kl->data;
  if (mask) {
    const int64_t full[4] = {d.B, d.Hq, d.Lq, d.Lk};
    if (mask->dtype == ATTN_BOOL) {
      d.bool_mask = mask->data;
      CHECK(golden_mask_strides(mask, full, d.bool_mask_stride));
    } else {
      d.add_mask = mask->data;
      CHECK(golden_mask_strides(mask, full, d.add_mask_stride));
    }
  }
  if (attn_st_meta(g, "softcap")) d.softcap = strtof(attn_st_meta(g, "softcap"), NULL);
  d.sinks = golden_f32(g, "sinks");
  const int64_t n[6] = {d.B * d.Hq * d.Lq * d.Dv, d.B * d.Hq * d.Lq, d.B * d.Hq * d.Lq * d.D,
                        d.B * d.Hkv * d.Lk * d.D, d.B * d.Hkv * d.Lk * d.Dv, d.sinks ? d.Hq : 0};
  float *x[6];
  for (int i = 0; i < 6; i++)
    x[i] = calloc(n[i] + 1, sizeof(float));
  d.sinks_grad = d.sinks ? x[5] : NULL;
  const float *q = golden_f32(g, "q"), *k = golden_f32(g, "k"), *v = golden_f32(g, "v");
  const float *dout = golden_f32(g, "dout");
  if (ops) {
    CHECK_OK(attn_sdpa_forward_flash_ops(ops, &d, q, k, v, x[0], x[1]));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops, &d, q, k, v, x[0], x[1], dout, x[2], x[3], x[4]));
  } else {
    CHECK_OK(attn_sdpa_forward_math(&d, q, k, v, x[0], x[1], NULL));
    CHECK_OK(attn_sdpa_backward_math(&d, q, k, v, x[0], x[1], dout, x[2], x[3], x[4]));
  }
  const char *what[6] = {"out", "lse", "dq", "dk", "dv", "dsinks"};
  int before = h_case_failed;
  h_case_failed = 0;
  for (int i = 0; i < 6; i++) {
    if (!n[i]) continue;
    const float *want = golden_f32(g, what[i]);
    CHECK(want != NULL);
    if (want) CHECK_CLOSE(what[i], x[i], want, n[i], 2e-5, 1e-4);
  }
  if (h_case_failed) printf("  ^ golden %s, %s\n", name, ops ? ops->name : "math");
  h_case_failed |= before;
  for (int i = 0; i < 6; i++)
    free(x[i]);
  attn_st_free(g);
}

static void test_golden_files(void) {
  static const char *const cases[] = {"softcap", "sinks_causal_gqa", "softcap_sinks_masks",
                                      "softcap_sinks_bool", "gemma_tiles"};
  for (int o = -1; o < n_ops; o++)
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++)
      golden(o < 0 ? NULL : ops_list[o], cases[c]);
}

/* `attn bench sdpa --softcap C --sinks` and `--alibi-batch --rotary FRAC` run
 * (plain flash timed beside them: the vs_plain column) and reject a bad cap
 * or fraction; nothing is measured here */
static void test_bench_options(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    SKIP("ATTN_BIN not set: CLI not checked");
    return;
  }
  char cmd[512], line[512];
  int seen = 0;
  snprintf(cmd, sizeof cmd,
           "%s bench sdpa --n 80 --heads 2 --dim 16 --softcap 30 --sinks --backward --no-math "
           "--threads 1 2>&1",
           bin);
  FILE *f = popen(cmd, "r");
  CHECK(f != NULL);
  while (f && fgets(line, sizeof line, f))
    seen |= (strstr(line, "softcap 30 sinks") ? 1 : 0) | (strstr(line, "vs_plain") ? 2 : 0);
  CHECK(f && pclose(f) == 0);
  CHECK(seen == 3);
  snprintf(cmd, sizeof cmd, "%s bench sdpa --n 64 --softcap -1 >/dev/null 2>&1", bin);
  int rc = system(cmd);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
  /* per-batch slopes and partial rotary (forward and backward) */
  for (int bwd = 0; bwd < 2; bwd++) {
    snprintf(cmd, sizeof cmd,
             "%s bench sdpa --n 80 --batch 2 --heads 2 --dim 16 --alibi-batch --rotary 0.5 "
             "--no-math --threads 1%s 2>&1",
             bin, bwd ? " --backward" : "");
    seen = 0;
    f = popen(cmd, "r");
    CHECK(f != NULL);
    while (f && fgets(line, sizeof line, f))
      seen |= (strstr(line, "alibi-batch rotary 8/16") ? 1 : 0) | (strstr(line, "vs_plain") ? 2 : 0);
    CHECK(f && pclose(f) == 0);
    CHECK(seen == 3);
  }
  const char *bad[] = {"--rotary 0", "--rotary 1.5", "--rotary 0.5 --dtype bf16"};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "%s bench sdpa --n 64 %s >/dev/null 2>&1", bin, bad[i]);
    rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
  }
}

static void test_bad_input(void) {
  const ccfg c = {1, 2, 2, 4, 6, 8, 8, 0.0f, 0, 0, -1, -1, 0, 0, 0, 0, 0};
  cprob p;
  make(&c, 1, &p);
  float o[64], l[8], dq[64], dk[96], dv[96];
  const float bad[] = {-1.0f, NAN, INFINITY, -INFINITY};
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    attn_sdpa_desc d = p.d;
    d.softcap = bad[i];
    CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, NULL), ATTN_EINVAL);
    CHECK(strstr(attn_last_error(), "softcap") != NULL);
    CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL),
              ATTN_EINVAL);
    CHECK_ERR(
        attn_sdpa_backward_f32(&d, ATTN_BACKEND_AUTO, p.q, p.k, p.v, o, l, p.dout, dq, dk, dv),
        ATTN_EINVAL);
  }
  attn_sdpa_desc d = p.d;
  float rb[2 * 8] = {0};
  d.softcap = 5.0f;
  d.rel_bias = rb;
  d.rel_buckets = 8;
  d.rel_max_distance = 16;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, p.q, p.k, p.v, o, l, NULL),
            ATTN_EUNSUPPORTED);
  unmake(&p);
}

int main(void) {
  attn_set_num_threads(1);
  n_ops = flash_ops_portable_and_level(ops_list);
  RUN(test_softcap_tile);
  RUN(test_softcap_row_levels);
  RUN(test_fused_softcap_matches_steps);
  RUN(test_math_vs_naive);
  RUN(test_flash_vs_math);
  RUN(test_finite_differences);
  RUN(test_empty_rows);
  RUN(test_nan_contract);
  RUN(test_low_precision);
  RUN(test_golden_files);
  RUN(test_bad_input);
  RUN(test_bench_options);
  HARNESS_END();
}
