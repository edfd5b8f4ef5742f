/* Per-sequence alignment (negative q_offset, per-batch q_offsets), per-batch
 * and learnable ALiBi slopes, and packed variable-length batches
 * (attn/sdpa_varlen.h), against PyTorch golden files (tools/golden_varlen.py,
 * float64 per-sequence references: tests/golden/al_*) on math and on both
 * flash kernel sets; the packed call against the padded golden batch on its
 * valid rows; the bf16/fp16/int8 flash loops with per-batch offsets against
 * math; bad cu_seqlens.
 *
 * Tolerance: f32 vs the float64 reference on O(1) data, as
 * tests/test_variants.c (2e-5 + 1e-4 |ref|); the slope and table gradients
 * sum O(Lq·Lk) terms: 1e-4 + 1e-3 |ref|. */
#include <stdint.h>
#include <string.h>

#include "attn/lowp.h"
#include "attn/sdpa_bf16.h"
#include "attn/sdpa_f16.h"
#include "attn/sdpa_i8.h"
#include "attn/sdpa_varlen.h"
#include "flash_ops_list.h"
#include "harness.h"
#include "round16.h"
#include "kernels/kern.h"
#include "kernels/flash/sdpa_flash.h"
#include "sdpa_golden.h"
#include "tool_run.h"

#define ATOL 2e-5
#define RTOL 1e-4
#define TATOL 1e-4
#define TRTOL 1e-3

static const attn_flash_ops *ops_list[2];
static int n_ops;

static const char *const cases[] = {"bottom_right", "window_br", "padded", "padded_window",
                                    "padded_plain"};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* A loaded al_* file: descriptor (pointing into the file) and buffers. */
typedef struct {
  attn_st *g;
  attn_sdpa_desc d;
  const float *q, *k, *v, *dout;
  const int32_t *q_lens;
  int64_t nq, nk, nv, no, nl, nsl, R;
  float *out, *lse, *dq, *dk, *dv, *dsl, *drel, *dsk, *dsv;
} al_file;

static int al_load(const char *name, al_file *f) {
  memset(f, 0, sizeof *f);
  char path[256];
  snprintf(path, sizeof path, "tests/golden/al_%s.safetensors", name);
  CHECK_OK(attn_st_load(path, &f->g));
  if (!f->g) return 0;
  attn_st *g = f->g;
  attn_sdpa_desc *d = &f->d;
  golden_var_desc(g, d); /* shapes, causal, window, q_offset, slopes, T5, Shaw */
  const attn_tensor *t;
  if ((t = attn_st_get(g, "q_offsets"))) d->q_offsets = t->data;
  if ((t = attn_st_get(g, "key_lens"))) d->key_lens = t->data;
  if ((t = attn_st_get(g, "alibi_slopes")) && t->ndim == 2) d->alibi_slopes_bstride = d->Hq;
  f->q_lens = (t = attn_st_get(g, "q_lens")) ? t->data : NULL;
  f->q = golden_f32(g, "q"), f->k = golden_f32(g, "k"), f->v = golden_f32(g, "v");
  f->dout = golden_f32(g, "dout");
  f->nq = d->B * d->Hq * d->Lq * d->D, f->nk = d->B * d->Hkv * d->Lk * d->D;
  f->nv = d->B * d->Hkv * d->Lk * d->Dv, f->no = d->B * d->Hq * d->Lq * d->Dv;
  f->nl = d->B * d->Hq * d->Lq;
  f->nsl = d->alibi_slopes ? (d->alibi_slopes_bstride ? d->B : 1) * d->Hq : 0;
  f->R = 2 * d->shaw_max - 1;
  f->out = calloc(f->no, sizeof(float)), f->lse = calloc(f->nl, sizeof(float));
  f->dq = calloc(f->nq, sizeof(float)), f->dk = calloc(f->nk, sizeof(float));
  f->dv = calloc(f->nv, sizeof(float));
  f->dsl = d->alibi_slopes ? calloc(f->nsl, sizeof(float)) : NULL;
  f->drel = d->rel_bias ? calloc(d->Hq * d->rel_buckets, sizeof(float)) : NULL;
  f->dsk = d->shaw_k ? calloc(f->R * d->D, sizeof(float)) : NULL;
  f->dsv = d->shaw_v ? calloc(f->R * d->Dv, sizeof(float)) : NULL;
  d->alibi_slopes_grad = f->dsl;
  d->rel_bias_grad = f->drel;
  d->shaw_k_grad = f->dsk;
  d->shaw_v_grad = f->dsv;
  return 1;
}

static void al_free(al_file *f) {
  free(f->out), free(f->lse), free(f->dq), free(f->dk), free(f->dv);
  free(f->dsl), free(f->drel), free(f->dsk), free(f->dsv);
  attn_st_free(f->g);
}

static double cmp(const char *what, const float *got, const attn_st *g, const char *name,
                  int64_t n, double atol, double rtol) {
  const float *want = golden_f32(g, name);
  CHECK(want != NULL);
  if (!want || n == 0) return 0;
  return CHECK_CLOSE(what, got, want, n, atol, rtol);
}

/* The table gradients of f against the file (when present). */
static void cmp_tables(const al_file *f) {
  const attn_sdpa_desc *d = &f->d;
  if (f->dsl) cmp("dalibi_slopes", f->dsl, f->g, "dalibi_slopes", f->nsl, TATOL, TRTOL);
  if (f->drel) cmp("drel_bias", f->drel, f->g, "drel_bias", d->Hq * d->rel_buckets, TATOL, TRTOL);
  if (f->dsk) cmp("dshaw_k", f->dsk, f->g, "dshaw_k", f->R * d->D, TATOL, TRTOL);
  if (f->dsv) cmp("dshaw_v", f->dsv, f->g, "dshaw_v", f->R * d->Dv, TATOL, TRTOL);
}

/* The padded batch of each file through one backend (ops NULL: the public
 * dispatcher with be; else that flash kernel set). */
static void golden_padded(attn_backend be, const attn_flash_ops *ops) {
  for (int c = 0; c < NCASES; c++) {
    al_file f;
    if (!al_load(cases[c], &f)) continue;
    const attn_sdpa_desc *d = &f.d;
    if (ops) {
      CHECK_OK(attn_sdpa_forward_flash_ops(ops, d, f.q, f.k, f.v, f.out, f.lse));
      CHECK_OK(attn_sdpa_backward_flash_ops(ops, d, f.q, f.k, f.v, f.out, f.lse, f.dout, f.dq,
                                            f.dk, f.dv));
    } else {
      CHECK_OK(attn_sdpa_forward_f32(d, be, f.q, f.k, f.v, f.out, f.lse, NULL));
      CHECK_OK(
          attn_sdpa_backward_f32(d, be, f.q, f.k, f.v, f.out, f.lse, f.dout, f.dq, f.dk, f.dv));
    }
    double e[5];
    e[0] = cmp("out", f.out, f.g, "out", f.no, ATOL, RTOL);
    e[1] = cmp("lse", f.lse, f.g, "lse", f.nl, ATOL, RTOL);
    e[2] = cmp("dq", f.dq, f.g, "dq", f.nq, ATOL, RTOL);
    e[3] = cmp("dk", f.dk, f.g, "dk", f.nk, ATOL, RTOL);
    e[4] = cmp("dv", f.dv, f.g, "dv", f.nv, ATOL, RTOL);
    cmp_tables(&f);
    printf("  golden %-6s %-14s max abs err: out %.1e lse %.1e dq %.1e dk %.1e dv %.1e\n",
           ops ? ops->name : attn_backend_name(be), cases[c], e[0], e[1], e[2], e[3], e[4]);
    al_free(&f);
  }
}

static void test_golden_math(void) { golden_padded(ATTN_BACKEND_MATH, NULL); }
static void test_golden_auto(void) { golden_padded(ATTN_BACKEND_AUTO, NULL); }
static void test_golden_flash(void) {
  for (int o = 0; o < n_ops; o++)
    golden_padded(ATTN_BACKEND_FLASH, ops_list[o]);
}

/* Copies rows of the padded [B, H, L, W] x into packed [total, H, W]
 * (rows 0..lens[b]-1 of each b), or back (unpack: 1). */
static void pack_rows(float *x, float *packed, const attn_sdpa_desc *d, int64_t H, int64_t L,
                      int64_t W, const int32_t *lens, int unpack) {
  int64_t row = 0;
  for (int64_t b = 0; b < d->B; b++)
    for (int64_t i = 0; i < lens[b]; i++, row++)
      for (int64_t h = 0; h < H; h++) {
        float *p = x + ((b * H + h) * L + i) * W, *z = packed + (row * H + h) * W;
        if (unpack)
          memcpy(p, z, (size_t)W * sizeof(float));
        else
          memcpy(z, p, (size_t)W * sizeof(float));
      }
}

/* The packed call on the valid rows of each padded file with q_lens: out,
 * lse, dq on valid queries and dk, dv on valid keys equal the golden
 * padded batch (whose q_offsets are the bottom-right ones), and so do the
 * table gradients. */
static void varlen_vs_padded(attn_backend be) {
  for (int c = 0; c < NCASES; c++) {
    al_file f;
    if (!al_load(cases[c], &f)) continue;
    if (!f.q_lens) {
      al_free(&f);
      continue;
    }
    attn_sdpa_desc d = f.d; /* B sequences, Lq, Lk = the maxima */
    const int64_t B = d.B, Hq = d.Hq, Hkv = d.Hkv, D = d.D, Dv = d.Dv;
    int32_t *cuq = calloc(B + 1, sizeof(int32_t)), *cuk = calloc(B + 1, sizeof(int32_t));
    for (int64_t b = 0; b < B; b++) {
      cuq[b + 1] = cuq[b] + f.q_lens[b];
      cuk[b + 1] = cuk[b] + d.key_lens[b];
    }
    const int32_t *klens = d.key_lens;
    d.key_lens = NULL;
    d.q_offsets = NULL; /* bottom-right per sequence: the default */
    const attn_sdpa_varlen vl = {cuq, cuk, cuq[B], cuk[B]};
    const int64_t tq = cuq[B], tk = cuk[B];
    float *q = calloc(tq * Hq * D + 1, 4), *k = calloc(tk * Hkv * D + 1, 4);
    float *v = calloc(tk * Hkv * Dv + 1, 4), *go = calloc(tq * Hq * Dv + 1, 4);
    float *o = calloc(tq * Hq * Dv + 1, 4), *l = calloc(tq * Hq + 1, 4);
    float *dq = calloc(tq * Hq * D + 1, 4), *dk = calloc(tk * Hkv * D + 1, 4);
    float *dv = calloc(tk * Hkv * Dv + 1, 4);
    pack_rows((float *)f.q, q, &d, Hq, d.Lq, D, f.q_lens, 0);
    pack_rows((float *)f.k, k, &d, Hkv, d.Lk, D, klens, 0);
    pack_rows((float *)f.v, v, &d, Hkv, d.Lk, Dv, klens, 0);
    pack_rows((float *)f.dout, go, &d, Hq, d.Lq, Dv, f.q_lens, 0);
    CHECK_OK(attn_sdpa_varlen_forward(&d, &vl, be, q, k, v, o, l));
    CHECK_OK(attn_sdpa_varlen_backward(&d, &vl, be, q, k, v, o, l, go, dq, dk, dv));
    /* the golden padded results at the valid rows, packed the same way */
    float *want = calloc(tq * Hq * (D > Dv ? D : Dv) + tk * Hkv * (D > Dv ? D : Dv) + 1, 4);
    pack_rows((float *)golden_f32(f.g, "out"), want, &d, Hq, d.Lq, Dv, f.q_lens, 0);
    CHECK_CLOSE("varlen out", o, want, tq * Hq * Dv, ATOL, RTOL);
    pack_rows((float *)golden_f32(f.g, "dq"), want, &d, Hq, d.Lq, D, f.q_lens, 0);
    CHECK_CLOSE("varlen dq", dq, want, tq * Hq * D, ATOL, RTOL);
    pack_rows((float *)golden_f32(f.g, "dk"), want, &d, Hkv, d.Lk, D, klens, 0);
    CHECK_CLOSE("varlen dk", dk, want, tk * Hkv * D, ATOL, RTOL);
    pack_rows((float *)golden_f32(f.g, "dv"), want, &d, Hkv, d.Lk, Dv, klens, 0);
    CHECK_CLOSE("varlen dv", dv, want, tk * Hkv * Dv, ATOL, RTOL);
    /* lse: per sequence [Hq, len] at Hq * cu_seqlens_q[s] */
    const float *gl = golden_f32(f.g, "lse");
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < f.q_lens[b]; i++)
          want[Hq * cuq[b] + h * f.q_lens[b] + i] = gl[(b * Hq + h) * d.Lq + i];
    CHECK_CLOSE("varlen lse", l, want, tq * Hq, ATOL, RTOL);
    cmp_tables(&f); /* the varlen call wrote f's table gradients again */
    printf("  varlen %-5s %-14s %lld queries, %lld keys in %lld sequences\n",
           attn_backend_name(be), cases[c], (long long)tq, (long long)tk, (long long)B);
    free(want), free(q), free(k), free(v), free(go), free(o), free(l), free(dq), free(dk),
        free(dv), free(cuq), free(cuk);
    al_free(&f);
  }
}

static void test_varlen_math(void) { varlen_vs_padded(ATTN_BACKEND_MATH); }
static void test_varlen_flash(void) { varlen_vs_padded(ATTN_BACKEND_FLASH); }

/* Bad cu_seqlens and fields the packed call refuses: ATTN_EINVAL, message. */
static void test_varlen_bad_input(void) {
  float q[4 * 2 * 4] = {0}, o[4 * 2 * 4], l[8];
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 2, 2, 2, 3, 3, 4, 4);
  struct {
    int32_t cq[3], ck[3];
    const char *msg;
  } bad[] = {
      {{1, 2, 4}, {0, 2, 4}, "must start at 0"},
      {{0, 3, 2}, {0, 2, 4}, "decreases"},
      {{0, 2, 5}, {0, 2, 4}, "the tensor has 4 rows"},
      {{0, 2, 4}, {0, 0, 4}, "more than the maximum"},
  };
  for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
    attn_sdpa_varlen vl = {bad[t].cq, bad[t].ck, 4, 4};
    CHECK_ERR(attn_sdpa_varlen_forward(&d, &vl, ATTN_BACKEND_MATH, q, q, q, o, l), ATTN_EINVAL);
    CHECK(strstr(attn_last_error(), bad[t].msg) != NULL);
    if (!strstr(attn_last_error(), bad[t].msg)) printf("  case %zu: %s\n", t, attn_last_error());
  }
  int32_t cq[3] = {0, 2, 4};
  attn_sdpa_varlen vl = {cq, cq, 4, 4};
  CHECK_OK(attn_sdpa_varlen_forward(&d, &vl, ATTN_BACKEND_FLASH, q, q, q, o, l));
  d.key_lens = cq;
  CHECK_ERR(attn_sdpa_varlen_forward(&d, &vl, ATTN_BACKEND_MATH, q, q, q, o, l), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "key_lens") != NULL);
  d.key_lens = NULL;
  vl.cu_seqlens_k = NULL;
  CHECK_ERR(attn_sdpa_varlen_forward(&d, &vl, ATTN_BACKEND_MATH, q, q, q, o, l), ATTN_EINVAL);
  vl.cu_seqlens_k = cq;
  float sl[2] = {0.5f, 0.25f};
  d.alibi_slopes = sl;
  d.alibi_slopes_bstride = 1; /* neither 0 nor Hq */
  CHECK_ERR(attn_sdpa_varlen_forward(&d, &vl, ATTN_BACKEND_MATH, q, q, q, o, l), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "alibi_slopes_bstride") != NULL);
}

/* The alignment's own rules on the padded API. */
static void test_alignment_bad_input(void) {
  float q[2 * 8 * 4] = {0}, o[2 * 8 * 4], l[16], sl[2] = {0.5f, 0.25f};
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 2, 1, 1, 8, 8, 4, 4);
  int64_t offs[2] = {0, -3};
  d.q_offsets = offs;
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, q, q, o, l, NULL));
  d.block_mask = (const uint8_t *)"\1\1\1\1";
  d.block_size = 4;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, q, q, o, l, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "q_offsets[1]") != NULL);
  d.block_mask = NULL;
  offs[0] = INT64_MIN / 2;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, q, q, q, o, l, NULL), ATTN_EINVAL);
  offs[0] = 0;
  float g[2];
  d.alibi_slopes_grad = g; /* without slopes */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, q, q, o, l, NULL), ATTN_EINVAL);
  d.alibi_slopes = sl;
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, q, q, o, l, NULL));
  /* B = 1: q_offsets[0] with a position scheme equals q_offset */
  float kv[8 * 4], o2[8 * 4], l2[8];
  fill_uniform(q, 8 * 4, 21, -1, 1);
  fill_uniform(kv, 8 * 4, 22, -1, 1);
  attn_sdpa_desc_init(&d, 1, 1, 1, 8, 8, 4, 4);
  d.causal = 1;
  d.alibi_slopes = sl;
  d.q_offset = -2;
  for (int be = 0; be < 2; be++) {
    const attn_backend b = be ? ATTN_BACKEND_FLASH : ATTN_BACKEND_MATH;
    d.q_offsets = NULL;
    CHECK_OK(attn_sdpa_forward_f32(&d, b, q, kv, kv, o, l, NULL));
    offs[0] = -2;
    d.q_offsets = offs;
    d.q_offset = 5; /* overridden */
    CHECK_OK(attn_sdpa_forward_f32(&d, b, q, kv, kv, o2, l2, NULL));
    d.q_offset = -2;
    CHECK_CLOSE("q_offsets[0] = q_offset: out", o2, o, 8 * 4, 0, 0);
    CHECK_CLOSE("q_offsets[0] = q_offset: lse", l2, l, 8, 0, 0);
  }
}

/* A padded batch with per-batch offsets of both signs, key_lens and a
 * window, B = 3, H = 2, L = 70 (several flash tiles). */
typedef struct {
  attn_sdpa_desc d;
  int64_t offs[3];
  int32_t klens[3];
  float *q, *k, *v, *dout;
  int64_t n, nl;
  float *om, *lm, *gm[3]; /* math: out, lse, dq, dk, dv */
} lowp_case;

static void lowp_case_init(lowp_case *c, int causal) {
  memset(c, 0, sizeof *c);
  attn_sdpa_desc_init(&c->d, 3, 2, 2, 70, 70, 16, 16);
  const int64_t offs[3] = {-30, 5, -69}, kl[3] = {70, 40, 12};
  for (int b = 0; b < 3; b++)
    c->offs[b] = offs[b], c->klens[b] = (int32_t)kl[b];
  c->d.q_offsets = c->offs;
  c->d.key_lens = c->klens;
  c->d.causal = causal;
  c->d.window_left = causal ? 20 : -1;
  c->n = 3 * 2 * 70 * 16;
  c->q = malloc(c->n * 4), c->k = malloc(c->n * 4), c->v = malloc(c->n * 4);
  c->dout = malloc(c->n * 4);
  fill_uniform(c->q, c->n, 11, -1, 1);
  fill_uniform(c->k, c->n, 12, -1, 1);
  fill_uniform(c->v, c->n, 13, -1, 1);
  fill_uniform(c->dout, c->n, 14, -1, 1);
}

/* The math results on c's (possibly rounded) q, k, v. */
static void lowp_case_math(lowp_case *c) {
  c->nl = 3 * 2 * 70;
  c->om = malloc(c->n * 4), c->lm = malloc(c->nl * 4);
  for (int x = 0; x < 3; x++)
    c->gm[x] = malloc(c->n * 4);
  CHECK_OK(attn_sdpa_forward_math(&c->d, c->q, c->k, c->v, c->om, c->lm, NULL));
  CHECK_OK(attn_sdpa_backward_math(&c->d, c->q, c->k, c->v, c->om, c->lm, c->dout, c->gm[0],
                                   c->gm[1], c->gm[2]));
}

static void lowp_case_free(lowp_case *c) {
  free(c->q), free(c->k), free(c->v), free(c->dout), free(c->om), free(c->lm);
  for (int x = 0; x < 3; x++)
    free(c->gm[x]);
}

/* The bf16, fp16 (forward and backward) and int8 (forward) flash loops with
 * per-batch offsets of both signs against math on the same rounded values:
 * the rows that see no key agree exactly (lse -inf), the rest within the
 * dtype's tolerance (test_sdpa_bf16.c, test_sdpa_f16.c, test_sdpa_i8.c). */
static void test_lowp_offsets(void) {
  for (int causal = 0; causal < 2; causal++)
    for (int bf = 0; bf < 2; bf++) {
      lowp_case c;
      lowp_case_init(&c, causal);
      const int64_t n = c.n;
      uint16_t *q16 = malloc(n * 2), *k16 = malloc(n * 2), *v16 = malloc(n * 2);
      round16(c.q, q16, n, bf), round16(c.k, k16, n, bf), round16(c.v, v16, n, bf);
      lowp_case_math(&c);
      const int64_t nl = c.nl;
      float *o = malloc(n * 4), *l = malloc(nl * 4), *om = c.om, *lm = c.lm;
      float *g[6] = {c.gm[0], c.gm[1], c.gm[2], malloc(n * 4), malloc(n * 4), malloc(n * 4)};
      const double tol = bf ? 2e-2 : 1e-4;
      if (bf) {
        CHECK_OK(attn_sdpa_forward_bf16(&c.d, q16, k16, v16, o, l));
      } else {
        CHECK_OK(attn_sdpa_forward_f16(&c.d, q16, k16, v16, o, l));
      }
      CHECK_CLOSE(bf ? "bf16 out" : "f16 out", o, om, n, tol, tol);
      CHECK_CLOSE(bf ? "bf16 lse" : "f16 lse", l, lm, nl, tol, tol);
      if (bf) {
        CHECK_OK(attn_sdpa_backward_bf16(&c.d, q16, k16, v16, om, lm, c.dout, g[3], g[4], g[5]));
      } else {
        CHECK_OK(attn_sdpa_backward_f16(&c.d, q16, k16, v16, om, lm, c.dout, g[3], g[4], g[5]));
      }
      CHECK_CLOSE("lowp dq", g[3], g[0], n, 4 * tol, 4 * tol);
      CHECK_CLOSE("lowp dk", g[4], g[1], n, 4 * tol, 4 * tol);
      CHECK_CLOSE("lowp dv", g[5], g[2], n, 4 * tol, 4 * tol);
      if (bf) { /* int8 forward: quantized q, k */
        CHECK_OK(attn_sdpa_forward_i8(&c.d, c.q, c.k, c.v, o, l));
        CHECK_CLOSE("i8 out", o, om, n, 5e-2, 5e-2);
        CHECK_CLOSE("i8 lse", l, lm, nl, 5e-2, 5e-2);
      }
      for (int x = 3; x < 6; x++)
        free(g[x]);
      free(q16), free(k16), free(v16), free(o), free(l);
      lowp_case_free(&c);
    }
}

/* Per-batch offsets without position schemes run natively in the flash
 * tiles (no split): both kernel sets against math. */
static void test_flash_offsets(void) {
  for (int causal = 0; causal < 2; causal++) {
    lowp_case c;
    lowp_case_init(&c, causal);
    lowp_case_math(&c);
    const int64_t n = c.n, nl = c.nl;
    float *om = c.om, *lm = c.lm, *o = malloc(n * 4), *l = malloc(nl * 4);
    float *g[6] = {c.gm[0], c.gm[1], c.gm[2], malloc(n * 4), malloc(n * 4), malloc(n * 4)};
    int none = 0;
    for (int64_t i = 0; i < nl; i++)
      none += lm[i] == -INFINITY;
    CHECK(!causal || (none > 0 && none < nl)); /* causal: some rows see no key, some do */
    for (int x = 0; x < n_ops; x++) {
      CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[x], &c.d, c.q, c.k, c.v, o, l));
      CHECK_OK(attn_sdpa_backward_flash_ops(ops_list[x], &c.d, c.q, c.k, c.v, o, l, c.dout, g[3],
                                            g[4], g[5]));
      CHECK_CLOSE("flash out", o, om, n, 1e-5, 1e-4);
      CHECK_CLOSE("flash lse", l, lm, nl, 1e-5, 1e-4);
      CHECK_CLOSE("flash dq", g[3], g[0], n, 2e-5, 2e-4);
      CHECK_CLOSE("flash dk", g[4], g[1], n, 2e-5, 2e-4);
      CHECK_CLOSE("flash dv", g[5], g[2], n, 2e-5, 2e-4);
    }
    for (int x = 3; x < 6; x++)
      free(g[x]);
    free(o), free(l);
    lowp_case_free(&c);
  }
}

static char bin[512];

/* `attn sdpa` on the inputs of golden files with per-batch q_offsets,
 * negative q_offset, per-batch slopes: the outputs and dalibi_slopes match. */
static void test_cli(void) {
  static const char *const ins[] = {"q",        "k",        "v",       "dout", "alibi_slopes",
                                    "key_lens", "q_offsets", "rel_bias", "shaw_k", "shaw_v"};
  static const char *const outs[] = {"out", "lse", "dq", "dk", "dv", "dalibi_slopes",
                                     "drel_bias", "dshaw_k", "dshaw_v"};
  char dir[64], in[128], out[128], args[512], err[2048];
  snprintf(dir, sizeof dir, "/tmp/attn_al.%d", (int)getpid());
  snprintf(in, sizeof in, "%s.in.st", dir);
  snprintf(out, sizeof out, "%s.out.st", dir);
  for (int c = 0; c < NCASES; c++) {
    char path[256];
    snprintf(path, sizeof path, "tests/golden/al_%s.safetensors", cases[c]);
    attn_st *g = NULL, *x = NULL, *o = NULL;
    CHECK_OK(attn_st_load(path, &g));
    CHECK_OK(attn_st_new(&x));
    if (!g || !x) break;
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++) {
      const attn_tensor *t = attn_st_get(g, ins[i]);
      if (t) CHECK_OK(attn_st_add(x, ins[i], t->dtype, t->ndim, t->shape, t->data));
    }
    for (int i = 0; i < attn_st_meta_count(g); i++)
      CHECK_OK(attn_st_set_meta(x, attn_st_meta_key(g, i), attn_st_meta(g, attn_st_meta_key(g, i))));
    CHECK_OK(attn_st_save(x, in));
    snprintf(args, sizeof args, "sdpa %s %s", in, out);
    int rc = tool_run("", bin, "/tmp", args, NULL, 0, err, sizeof err);
    CHECK(rc == 0);
    if (rc) printf("  %s: rc %d: %s\n", cases[c], rc, err);
    if (!rc) CHECK_OK(attn_st_load(out, &o));
    for (size_t r = 0; o && r < sizeof outs / sizeof outs[0]; r++) {
      const attn_tensor *w = attn_st_get(g, outs[r]), *t = attn_st_get(o, outs[r]);
      CHECK(!w == !t);
      if (w && t)
        CHECK_CLOSE(outs[r], t->data, w->data, attn_tensor_numel(w), TATOL, TRTOL);
    }
    attn_st_free(g), attn_st_free(x), attn_st_free(o);
  }
  remove(in);
  remove(out);
  /* a packed file (al_padded as cu_seqlens): results on the valid rows */
  al_file f;
  if (al_load("padded", &f)) {
    const attn_sdpa_desc *d = &f.d;
    const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, D = d->D, Dv = d->Dv;
    int32_t cq[4] = {0}, ck[4] = {0};
    for (int64_t b = 0; b < B; b++)
      cq[b + 1] = cq[b] + f.q_lens[b], ck[b + 1] = ck[b] + d->key_lens[b];
    const int64_t tq = cq[B], tk = ck[B], sq[3] = {tq, Hq, D}, sk[3] = {tk, Hkv, D};
    const int64_t sv[3] = {tk, Hkv, Dv}, so[3] = {tq, Hq, Dv}, sc[1] = {B + 1};
    float *pk[5];
    const char *names[5] = {"q", "k", "v", "dout", "out"};
    const int64_t *shapes[5] = {sq, sk, sv, so, so};
    attn_st *x = NULL, *o = NULL;
    CHECK_OK(attn_st_new(&x));
    for (int t = 0; t < 5; t++) {
      const int isk = t == 1 || t == 2;
      pk[t] = calloc(shapes[t][0] * shapes[t][1] * shapes[t][2] + 1, 4);
      pack_rows((float *)golden_f32(f.g, names[t]), pk[t], d, isk ? Hkv : Hq, isk ? d->Lk : d->Lq,
                shapes[t][2], isk ? d->key_lens : f.q_lens, 0);
      if (t < 4) CHECK_OK(attn_st_add_f32(x, names[t], 3, shapes[t], pk[t]));
    }
    const attn_tensor *sl = attn_st_get(f.g, "alibi_slopes");
    CHECK_OK(attn_st_add(x, "alibi_slopes", ATTN_F32, sl->ndim, sl->shape, sl->data));
    CHECK_OK(attn_st_add(x, "cu_seqlens_q", ATTN_I32, 1, sc, cq));
    CHECK_OK(attn_st_add(x, "cu_seqlens_k", ATTN_I32, 1, sc, ck));
    CHECK_OK(attn_st_set_meta(x, "causal", "true"));
    CHECK_OK(attn_st_save(x, in));
    int rc = tool_run("", bin, "/tmp", args, NULL, 0, err, sizeof err);
    CHECK(rc == 0);
    if (rc) printf("  varlen file: rc %d: %s\n", rc, err);
    if (!rc) CHECK_OK(attn_st_load(out, &o));
    const attn_tensor *t;
    if (o && (t = attn_st_get(o, "out"))) CHECK_CLOSE("file out", t->data, pk[4], tq * Hq * Dv, ATOL, RTOL);
    if (o && (t = attn_st_get(o, "lse"))) { /* [Hq, total_q] */
      const float *gl = golden_f32(f.g, "lse");
      for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
          for (int64_t i = 0; i < f.q_lens[b]; i++) {
            float got = ((const float *)t->data)[h * tq + cq[b] + i], want = gl[(b * Hq + h) * d->Lq + i];
            CHECK(got == want || fabsf(got - want) <= ATOL + RTOL * fabsf(want));
          }
    }
    if (o && (t = attn_st_get(o, "dalibi_slopes")))
      CHECK_CLOSE("file dalibi_slopes", t->data, golden_f32(f.g, "dalibi_slopes"), B * Hq, TATOL, TRTOL);
    CHECK(o && attn_st_get(o, "dq") && attn_st_get(o, "dalibi_slopes"));
    attn_st_free(o);
    o = NULL;
    cq[0] = 1; /* bad: does not start at 0 */
    attn_st_free(x);
    x = NULL;
    CHECK_OK(attn_st_new(&x));
    CHECK_OK(attn_st_add_f32(x, "q", 3, sq, pk[0]));
    CHECK_OK(attn_st_add_f32(x, "k", 3, sk, pk[1]));
    CHECK_OK(attn_st_add_f32(x, "v", 3, sv, pk[2]));
    CHECK_OK(attn_st_add(x, "cu_seqlens_q", ATTN_I32, 1, sc, cq));
    CHECK_OK(attn_st_add(x, "cu_seqlens_k", ATTN_I32, 1, sc, ck));
    CHECK_OK(attn_st_save(x, in));
    remove(out);
    rc = tool_run("", bin, "/tmp", args, NULL, 0, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "must start at 0") && attn_st_load(out, &o) != ATTN_OK);
    attn_st_free(o);
    attn_st_free(x);
    for (int t2 = 0; t2 < 5; t2++)
      free(pk[t2]);
    al_free(&f);
  }
  remove(in);
  remove(out);
  /* the bench runs (no timing checked): mixed lengths, an empty sequence */
  char so[4096];
  int rc = tool_run("", bin, "/tmp",
                    "bench varlen --lens 8,40,3,0 --heads 2 --dim 8 --reps 1 --causal", so,
                    sizeof so, err, sizeof err);
  CHECK(rc == 0 && strstr(so, "backward") && strstr(so, "speedup"));
  if (rc) printf("  bench varlen: rc %d: %s\n", rc, err);
}

int main(int argc, char **argv) {
  (void)argc;
  tool_path(argv[0], bin, sizeof bin);
  n_ops = flash_ops_portable_and_level(ops_list);
  RUN(test_golden_math);
  RUN(test_golden_auto);
  RUN(test_golden_flash);
  RUN(test_varlen_math);
  RUN(test_varlen_flash);
  RUN(test_varlen_bad_input);
  RUN(test_alignment_bad_input);
  RUN(test_flash_offsets);
  RUN(test_lowp_offsets);
  RUN(test_cli);
  HARNESS_END();
}
