/* Position schemes and block-sparse layouts fused into the flash backend:
 * flash (both kernel sets) against the math reference for ALiBi, T5 relative
 * bias (with its table gradient), Shaw relative positions (keys and values,
 * with table gradients) and block layouts (block sizes below, equal to and
 * above the flash tiles), alone and combined with causal, windows, key_lens,
 * GQA, Dv != D, q_offset, masks; 1 vs 2 threads bit-identical; the variant
 * PyTorch golden files (tests/golden/var_sdpa_*) through both kernel sets.
 *
 * Tolerance vs math: as tests/test_flash.c (1e-5 + 1e-4 |math| forward, twice
 * that for gradients); the table gradients sum O(Lq·Lk) terms per entry in
 * another order: 1e-4 + 1e-3 |math|. */
#include <stdint.h>

#include "harness.h"
#include "kernels/kern.h"
#include "kernels/flash/sdpa_flash.h"
#include "flash_ops_list.h"
#include "sdpa_golden.h"

static const attn_flash_ops *ops_list[2];
static int n_ops;

typedef struct {
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  int causal, wl, wr, key_lens, bool_mask, q_offset;
  int alibi;          /* slopes */
  int t5;             /* 0 off, 1 bidirectional, 2 causal bucketing */
  int shaw_k, shaw_v; /* tables with shaw_max M */
  int M;
  int block;      /* block size (0 off): BigBird-like layout */
  int block_cols; /* extra columns in the layout's row stride (decoding) */
} vcfg;

typedef struct {
  attn_sdpa_desc d;
  float *q, *k, *v, *dout, *slopes, *rb, *sk, *sv;
  uint8_t *bm, *blk;
  int32_t *kl;
  int64_t nq, nk, nv, no, nl, nrb, nsk, nsv;
} vprob;

static void make(const vcfg *c, unsigned seed, vprob *p) {
  memset(p, 0, sizeof *p);
  attn_sdpa_desc *d = &p->d;
  attn_sdpa_desc_init(d, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv);
  d->causal = c->causal;
  d->window_left = c->wl;
  d->window_right = c->wr;
  d->q_offset = c->q_offset;
  p->nq = (int64_t)c->B * c->Hq * c->Lq * c->D;
  p->nk = (int64_t)c->B * c->Hkv * c->Lk * c->D;
  p->nv = (int64_t)c->B * c->Hkv * c->Lk * c->Dv;
  p->no = (int64_t)c->B * c->Hq * c->Lq * c->Dv;
  p->nl = (int64_t)c->B * c->Hq * c->Lq;
  p->q = malloc((p->nq + 1) * sizeof(float));
  p->k = malloc((p->nk + 1) * sizeof(float));
  p->v = malloc((p->nv + 1) * sizeof(float));
  p->dout = malloc((p->no + 1) * sizeof(float));
  fill_uniform(p->q, p->nq, seed, -1.5f, 1.5f);
  fill_uniform(p->k, p->nk, seed + 1, -1.5f, 1.5f);
  fill_uniform(p->v, p->nv, seed + 2, -1, 1);
  fill_uniform(p->dout, p->no, seed + 3, -1, 1);
  if (c->key_lens) {
    p->kl = malloc(c->B * sizeof(int32_t));
    for (int b = 0; b < c->B; b++)
      p->kl[b] = (int32_t)((seed * 7 + b * 13) % (c->Lk + 1));
    p->kl[c->B - 1] = c->Lk;
    d->key_lens = p->kl;
  }
  if (c->bool_mask) { /* [Lq, Lk] broadcast over batch and heads */
    int64_t n2 = (int64_t)c->Lq * c->Lk;
    p->bm = malloc(n2 + 1);
    for (int64_t e = 0; e < n2; e++)
      p->bm[e] = (e * 2654435761u + seed) % 5 != 0;
    d->bool_mask = p->bm;
    d->bool_mask_stride[2] = c->Lk;
    d->bool_mask_stride[3] = 1;
  }
  if (c->alibi) {
    p->slopes = malloc(c->Hq * sizeof(float));
    CHECK_OK(attn_alibi_slopes(c->Hq, p->slopes));
    d->alibi_slopes = p->slopes;
  }
  if (c->t5) {
    d->rel_bidirectional = c->t5 == 1;
    d->rel_buckets = 16;
    d->rel_max_distance = 40;
    p->nrb = (int64_t)c->Hq * d->rel_buckets;
    p->rb = malloc(p->nrb * sizeof(float));
    fill_uniform(p->rb, p->nrb, seed + 6, -1, 1);
    d->rel_bias = p->rb;
  }
  if (c->shaw_k || c->shaw_v) d->shaw_max = c->M;
  if (c->shaw_k) {
    p->nsk = (int64_t)(2 * c->M - 1) * c->D;
    p->sk = malloc(p->nsk * sizeof(float));
    fill_uniform(p->sk, p->nsk, seed + 7, -1, 1);
    d->shaw_k = p->sk;
  }
  if (c->shaw_v) {
    p->nsv = (int64_t)(2 * c->M - 1) * c->Dv;
    p->sv = malloc(p->nsv * sizeof(float));
    fill_uniform(p->sv, p->nsv, seed + 8, -1, 1);
    d->shaw_v = p->sv;
  }
  if (c->block) {
    int64_t bs = c->block, nqb = (c->q_offset + c->Lq + bs - 1) / bs;
    int64_t nkb = (c->Lk + bs - 1) / bs + c->block_cols;
    p->blk = malloc((size_t)(nqb * nkb + 1));
    CHECK_OK(attn_block_sparse_bigbird(p->blk, nqb, nkb, 1, 1, 1, seed, 0));
    d->block_mask = p->blk;
    d->block_size = bs;
    if (c->block_cols) d->block_cols = nkb;
  }
}

static void unmake(vprob *p) {
  free(p->q), free(p->k), free(p->v), free(p->dout), free(p->slopes), free(p->rb);
  free(p->sk), free(p->sv), free(p->bm), free(p->blk), free(p->kl);
}

static float *zeros(int64_t n) { return calloc((size_t)n + 1, sizeof(float)); }

/* forward + backward (with table gradients) of one backend into r[0..9]:
 * out, lse, dq, dk, dv, drel, dshaw_k, dshaw_v */
typedef struct {
  float *x[8];
} results;

static void run(const attn_flash_ops *ops, vprob *p, results *r) {
  const int64_t n[8] = {p->no, p->nl, p->nq, p->nk, p->nv, p->nrb, p->nsk, p->nsv};
  for (int i = 0; i < 8; i++)
    r->x[i] = zeros(n[i]);
  attn_sdpa_desc d = p->d;
  d.rel_bias_grad = p->rb ? r->x[5] : NULL;
  d.shaw_k_grad = p->sk ? r->x[6] : NULL;
  d.shaw_v_grad = p->sv ? r->x[7] : NULL;
  if (ops) {
    CHECK_OK(attn_sdpa_forward_flash_ops(ops, &d, p->q, p->k, p->v, r->x[0], r->x[1]));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops, &d, p->q, p->k, p->v, r->x[0], r->x[1], p->dout,
                                          r->x[2], r->x[3], r->x[4]));
  } else {
    CHECK_OK(attn_sdpa_forward_math(&d, p->q, p->k, p->v, r->x[0], r->x[1], NULL));
    CHECK_OK(attn_sdpa_backward_math(&d, p->q, p->k, p->v, r->x[0], r->x[1], p->dout, r->x[2],
                                     r->x[3], r->x[4]));
  }
}

static void release(results *r) {
  for (int i = 0; i < 8; i++)
    free(r->x[i]);
}

static void compare(const vcfg *c, unsigned seed) {
  if (!h_sample()) return; /* ATTN_TEST_SAMPLE (tests/harness.h) */
  vprob p;
  make(c, seed, &p);
  results m;
  run(NULL, &p, &m);
  const int64_t n[8] = {p.no, p.nl, p.nq, p.nk, p.nv, p.nrb, p.nsk, p.nsv};
  static const char *what[8] = {"out", "lse", "dq", "dk", "dv", "drel_bias", "dshaw_k", "dshaw_v"};
  for (int o = 0; o < n_ops; o++) {
    results f;
    run(ops_list[o], &p, &f);
    int before = h_case_failed;
    h_case_failed = 0;
    for (int i = 0; i < 8; i++) {
      double atol = i < 2 ? 1e-5 : i < 5 ? 2e-5 : 1e-4, rtol = 10 * atol;
      if (n[i]) CHECK_CLOSE(what[i], f.x[i], m.x[i], n[i], atol, rtol);
    }
    if (h_case_failed)
      printf("  ^ %s B%d Hq%d Hkv%d Lq%d Lk%d D%d Dv%d causal%d w(%d,%d) kl%d bm%d qo%d alibi%d "
             "t5 %d shaw %d%d M%d block %d seed %u\n",
             ops_list[o]->name, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv, c->causal, c->wl,
             c->wr, c->key_lens, c->bool_mask, c->q_offset, c->alibi, c->t5, c->shaw_k, c->shaw_v,
             c->M, c->block, seed);
    h_case_failed |= before;
    release(&f);
  }
  release(&m);
  unmake(&p);
}

static vcfg base(int Lq, int Lk, int D) {
  vcfg c = {1, 2, 2, Lq, Lk, D, D, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  return c;
}

/* the add_rows tile op: AVX-512 against portable, each column stride, tails,
 * -inf kept with skip, negative row strides (overlapping rows accumulate in
 * row order) */
static void test_add_rows_kernels(void) {
  if (n_ops < 2) return;
  float b[200], s0[6 * 64 + 8], s1[6 * 64 + 8];
  fill_uniform(b, 200, 5, -1, 1);
  for (int bcs = -1; bcs <= 1; bcs++)
    for (int n = 1; n <= 64; n += 9)
      for (int mode = 0; mode < 3; mode++) {
        fill_uniform(s0, 6 * 64 + 8, 6 + n, -1, 1);
        for (int e = 0; e < 6 * 64; e += 5)
          s0[e] = -INFINITY;
        memcpy(s1, s0, sizeof s0);
        int64_t lds = mode == 2 ? -1 : 64, brs = mode == 1 ? 3 : -1;
        float *t0 = mode == 2 ? s0 + 100 : s0, *t1 = mode == 2 ? s1 + 100 : s1;
        int R = mode == 2 ? 5 : 6, skip = mode != 2;
        const float *bb = b + 100; /* reads b[100 - 70 .. 100 + 70] at most */
        ops_list[0]->add_rows(R, n, t0, lds, bb, brs, bcs, skip);
        ops_list[1]->add_rows(R, n, t1, lds, bb, brs, bcs, skip);
        CHECK_CLOSE("add_rows", s1, s0, 6 * 64 + 8, 0, 0);
      }
  for (int n = 0; n <= 64; n += 7) /* sums: any order, so within rounding */
    CHECK(fabsf(ops_list[1]->sum(n, b) - ops_list[0]->sum(n, b)) <= 1e-5f);
  float ones[64];
  for (int e = 0; e < 64; e++)
    ones[e] = 1.0f;
  for (int o = 0; o < 2; o++)
    CHECK(ops_list[o]->sum(64, ones) == 64.0f && ops_list[o]->sum(13, ones) == 13.0f &&
          ops_list[o]->sum(0, ones) == 0.0f);
  float x[16] = {-INFINITY, 1, 2, -INFINITY}, one = 1.0f;
  ops_list[1]->add_rows(1, 4, x, 64, &one, 0, 0, 1);
  CHECK(x[0] == -INFINITY && x[1] == 2 && x[2] == 3 && x[3] == -INFINITY && x[4] == 0);
}

/* each scheme alone, on shapes with tails (several tiles and row groups) */
static void test_each_scheme_alone(void) {
  for (int s = 0; s < 6; s++) {
    vcfg c = base(100, 150, 24);
    c.Dv = 16;
    c.alibi = s == 0;
    c.t5 = s == 1 ? 1 : s == 2 ? 2 : 0;
    c.shaw_k = s == 3 || s == 5;
    c.shaw_v = s == 4 || s == 5;
    c.M = s == 5 ? 70 : 9; /* 70: bands wider than one tile */
    compare(&c, 1000 + s);
  }
}

/* block layouts with block sizes below, equal to and above the tiles */
static void test_block_sparse_sizes(void) {
  static const int bs[] = {5, 16, 48, 64, 100, 200};
  for (unsigned i = 0; i < sizeof bs / sizeof bs[0]; i++) {
    vcfg c = base(190, 260, 16);
    c.block = bs[i];
    compare(&c, 1100 + i);
  }
}

/* block-sparse work really is skipped: a layout with only the diagonal block
 * equals a window over the same block (flash results, bit for bit, since the
 * tiles computed are the same) */
static void test_block_equals_dense_mask(void) {
  for (int o = 0; o < n_ops; o++) {
    vcfg c = base(128, 128, 16);
    vprob p;
    make(&c, 1200, &p);
    uint8_t layout[4] = {1, 0, 0, 1}, *dense = malloc(128 * 128);
    CHECK_OK(attn_block_sparse_expand(layout, 64, 128, 128, dense));
    float *o1 = zeros(p.no), *o2 = zeros(p.no), *l1 = zeros(p.nl), *l2 = zeros(p.nl);
    attn_sdpa_desc a = p.d, b = p.d;
    a.block_mask = layout;
    a.block_size = 64;
    b.bool_mask = dense;
    b.bool_mask_stride[2] = 128;
    b.bool_mask_stride[3] = 1;
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[o], &a, p.q, p.k, p.v, o1, l1));
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[o], &b, p.q, p.k, p.v, o2, l2));
    CHECK_CLOSE("out", o1, o2, p.no, 0, 0);
    CHECK_CLOSE("lse", l1, l2, p.nl, 0, 0);
    free(o1), free(o2), free(l1), free(l2), free(dense);
    unmake(&p);
  }
}

/* schemes combined with causal, windows, key_lens, GQA, Dv != D, q_offset,
 * bool masks, and all at once */
static void test_combined(void) {
  unsigned s = 777;
  for (int t = 0; t < 16; t++) {
    s = s * 1103515245u + 12345u;
    vcfg c = base(1 + (s >> 4) % 130, 1 + (s >> 12) % 170, 1 + (s >> 20) % 40);
    c.Dv = 1 + (s >> 8) % 33;
    c.Hkv = 1 + t % 2;
    c.Hq = c.Hkv * (1 + (t / 2) % 3);
    c.B = 1 + t % 2;
    c.causal = (s >> 27) & 1;
    c.wl = (s >> 28) & 1 ? (int)((s >> 5) % 50) : -1;
    c.wr = (s >> 29) & 1 ? (int)((s >> 9) % 50) : -1;
    c.key_lens = (s >> 30) & 1;
    c.bool_mask = t % 5 == 0;
    c.q_offset = t % 3 == 0 ? (int)((s >> 3) % 40) : 0;
    c.alibi = t % 2 == 0;
    c.t5 = t % 3 == 1 ? 1 : t % 3 == 2 ? 2 : 0;
    c.shaw_k = t % 4 != 1;
    c.shaw_v = t % 4 != 2;
    c.M = 1 + (int)((s >> 14) % 80);
    c.block = t % 4 == 3 ? 8 + (int)((s >> 16) % 90) : 0;
    compare(&c, 1300 + t);
  }
  vcfg all = base(150, 170, 32); /* decode-like: q_offset = Lk - Lq, everything on */
  all.B = 2, all.Hq = 4, all.Hkv = 2, all.Dv = 24, all.causal = 1, all.key_lens = 0;
  all.q_offset = 20, all.alibi = 1, all.t5 = 2, all.shaw_k = all.shaw_v = 1, all.M = 12;
  all.block = 32;
  compare(&all, 1400);
  all.block_cols = 3; /* a decoder's layout: row stride wider than Lk needs */
  all.block = 24;
  compare(&all, 1401);
  for (int M = 1; M <= 3; M++) { /* the smallest tables: every distance clipped or one interior row */
    vcfg c = base(70, 90, 8);
    c.shaw_k = c.shaw_v = 1, c.M = M, c.causal = M == 2, c.q_offset = M == 3 ? 5 : 0;
    compare(&c, 1410 + M);
  }
}

/* 1 and 2 threads: the same bits, table gradients included */
static void test_threads_bit_identical(void) {
  vcfg c = base(150, 170, 24);
  c.Hq = 2, c.Hkv = 1, c.causal = 1, c.alibi = 1, c.t5 = 1, c.shaw_k = c.shaw_v = 1, c.M = 20;
  c.block = 40;
  vprob p;
  make(&c, 1500, &p);
  const int64_t n[8] = {p.no, p.nl, p.nq, p.nk, p.nv, p.nrb, p.nsk, p.nsv};
  for (int o = 0; o < n_ops; o++) {
    results r[2];
    for (int t = 0; t < 2; t++) {
      attn_set_num_threads(t + 1);
      run(ops_list[o], &p, &r[t]);
    }
    attn_set_num_threads(1);
    for (int i = 0; i < 8; i++)
      CHECK(!memcmp(r[0].x[i], r[1].x[i], (size_t)n[i] * sizeof(float)));
    release(&r[0]), release(&r[1]);
  }
  unmake(&p);
}

/* the public API's flash and auto backends take these descriptors (no
 * fallback to math: flash itself accepts them) */
static void test_public_api(void) {
  vcfg c = base(40, 50, 8);
  c.alibi = c.t5 = c.shaw_k = c.shaw_v = 1, c.M = 5, c.block = 16;
  vprob p;
  make(&c, 1600, &p);
  float *o = zeros(p.no), *l = zeros(p.nl), *o2 = zeros(p.no), *l2 = zeros(p.nl);
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_FLASH, p.q, p.k, p.v, o, l, NULL));
  CHECK_OK(attn_sdpa_forward_f32(&p.d, ATTN_BACKEND_AUTO, p.q, p.k, p.v, o2, l2, NULL));
  CHECK_CLOSE("auto = flash", o2, o, p.no, 0, 0);
  free(o), free(l), free(o2), free(l2);
  unmake(&p);
}

/* ---- golden files (tools/golden_variants.py) through both kernel sets ---- */
static void golden(const attn_flash_ops *ops, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "tests/golden/var_sdpa_%s.safetensors", name);
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(path, &g));
  if (!g) return;
  attn_sdpa_desc d;
  golden_var_desc(g, &d);
  const attn_tensor *tv = attn_st_get(g, "v");
  const int64_t nq = d.B * d.Hq * d.Lq * d.D, nk = d.B * d.Hkv * d.Lk * d.D;
  const int64_t nv = d.B * d.Hkv * d.Lk * d.Dv, no = d.B * d.Hq * d.Lq * d.Dv,
                R = 2 * d.shaw_max - 1;
  const int rb = d.rel_bias != NULL, sk = d.shaw_k != NULL, sv = d.shaw_v != NULL;
  float *q, *k;
  golden_rope rope;
  golden_var_qk(g, &d, &q, &k, &rope);
  const int64_t n[8] = {no, d.B * d.Hq * d.Lq, nq, nk, nv, rb ? d.Hq * d.rel_buckets : 0,
                        sk ? R * d.D : 0, sv ? R * d.Dv : 0};
  static const char *what[8] = {"out", "lse", "dq", "dk", "dv", "drel_bias", "dshaw_k", "dshaw_v"};
  float *x[8];
  for (int i = 0; i < 8; i++)
    x[i] = zeros(n[i]);
  d.rel_bias_grad = rb ? x[5] : NULL;
  d.shaw_k_grad = sk ? x[6] : NULL;
  d.shaw_v_grad = sv ? x[7] : NULL;
  CHECK_OK(attn_sdpa_forward_flash_ops(ops, &d, q, k, tv->data, x[0], x[1]));
  CHECK_OK(attn_sdpa_backward_flash_ops(ops, &d, q, k, tv->data, x[0], x[1], golden_f32(g, "dout"),
                                        x[2], x[3], x[4]));
  golden_rope_backward(&rope, &d, x[2], x[3]);
  int before = h_case_failed;
  h_case_failed = 0;
  for (int i = 0; i < 8; i++) {
    const float *want = golden_f32(g, what[i]);
    if (!n[i]) continue;
    CHECK(want != NULL);
    if (want) CHECK_CLOSE(what[i], x[i], want, n[i], 2e-5, 1e-4);
  }
  if (h_case_failed) printf("  ^ golden %s, %s kernels\n", name, ops->name);
  h_case_failed |= before;
  for (int i = 0; i < 8; i++)
    free(x[i]);
  free(q), free(k);
  attn_st_free(g);
}

static void test_golden_files(void) {
  static const char *const cases[] = {
      "alibi_causal",  "alibi_decode", "t5_bidir",         "t5_causal",     "shaw",
      "shaw_k_offset", "block",        "rope_interleaved", "rope_half_gqa", "combo"};
  for (int o = 0; o < n_ops; o++)
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++)
      golden(ops_list[o], cases[c]);
}

int main(void) {
  attn_set_num_threads(1); /* see test_threads_bit_identical */
  n_ops = flash_ops_portable_and_level(ops_list);
  RUN(test_add_rows_kernels);
  RUN(test_each_scheme_alone);
  RUN(test_block_sparse_sizes);
  RUN(test_block_equals_dense_mask);
  RUN(test_combined);
  RUN(test_threads_bit_identical);
  RUN(test_public_api);
  RUN(test_golden_files);
  HARNESS_END();
}
