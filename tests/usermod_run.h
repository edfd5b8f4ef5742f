/* Running SDPA with user modifiers (attn/sdpa_mods.h) on every backend of
 * this level (math, the portable flash set and the level's own, fp16
 * flash) and comparing: what tests/test_usermod.c and
 * tests/test_usermod_row.c share. */
#ifndef ATTN_TEST_USERMOD_RUN_H
#define ATTN_TEST_USERMOD_RUN_H

#include "attn/sdpa_f16.h"
#include "attn/sdpa_mods.h"
#include "flash_ops_list.h"
#include "harness.h"
#include "kernels/flash/sdpa_flash.h"
#include "sdpa_problem.h"

static const attn_flash_ops *ops_list[2];
static int n_ops; /* flash_ops_portable_and_level(ops_list) in main */

/* ---- running one backend: out, lse, dq, dk, dv ------------------------- */
enum { MATH = -1, F16 = -2 };
typedef struct {
  float *x[5];
} results;

static void run(int be, const attn_sdpa_desc *d, const sdpa_problem *p, results *r) {
  const int64_t n[5] = {p->no, p->nl, p->nq, p->nk, p->nv};
  for (int i = 0; i < 5; i++)
    r->x[i] = sdpa_zeros(n[i]);
  float **x = r->x;
  if (be == MATH) {
    CHECK_OK(attn_sdpa_forward_math(d, p->q, p->k, p->v, x[0], x[1], NULL));
    CHECK_OK(attn_sdpa_backward_math(d, p->q, p->k, p->v, x[0], x[1], p->dout, x[2], x[3], x[4]));
  } else if (be == F16) {
    CHECK_OK(attn_sdpa_forward_f16(d, p->qh, p->kh, p->vh, x[0], x[1]));
    CHECK_OK(attn_sdpa_backward_f16(d, p->qh, p->kh, p->vh, x[0], x[1], p->dout, x[2], x[3], x[4]));
  } else {
    CHECK_OK(attn_sdpa_forward_flash_ops(ops_list[be], d, p->q, p->k, p->v, x[0], x[1]));
    CHECK_OK(attn_sdpa_backward_flash_ops(ops_list[be], d, p->q, p->k, p->v, x[0], x[1], p->dout,
                                          x[2], x[3], x[4]));
  }
}

static void release(results *r) {
  for (int i = 0; i < 5; i++)
    free(r->x[i]);
}

static const char *be_name(int be) {
  return be == MATH ? "math" : be == F16 ? "f16 flash" : ops_list[be]->name;
}

/* got against want on every output; tol 0: bit for bit */
static void same(const char *what, int be, const sdpa_problem *p, const results *got,
                 const results *want, double tol) {
  static const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
  const int64_t n[5] = {p->no, p->nl, p->nq, p->nk, p->nv};
  int before = h_case_failed;
  h_case_failed = 0;
  for (int i = 0; i < 5; i++) {
    const double atol = tol * (i < 2 ? 1e-5 : 2e-5);
    CHECK_CLOSE(names[i], got->x[i], want->x[i], n[i], atol, 10 * atol);
  }
  if (h_case_failed) printf("  ^ %s, %s\n", what, be_name(be));
  h_case_failed |= before;
}

/* The descriptor with mods (and the block mask of mask_mod, when bq > 0)
 * against the built-in descriptor, on math and each flash set; also flash
 * with mods against math with mods. */
static void against_builtin(const char *what, const sdpa_problem *p, const attn_sdpa_desc *builtin,
                            attn_sdpa_mods *mods, int bq, int bk) {
  attn_block_mask bm = {0};
  attn_sdpa_desc d = p->d;
  d.mods = mods;
  if (bq > 0) {
    CHECK_OK(attn_block_mask_from_mask_mod(mods->mask_mod, mods->user, d.B, d.Hq, d.Lq, d.Lk, bq,
                                           bk, &bm));
    mods->block_mask = &bm;
  }
  results mm;
  run(MATH, &d, p, &mm);
  for (int be = MATH; be < n_ops; be++) {
    results a, b;
    run(be, &d, p, &a);
    run(be, builtin, p, &b);
    same(what, be, p, &a, &b, 1);
    if (be != MATH) same(what, be, p, &a, &mm, 1);
    release(&a), release(&b);
  }
  release(&mm);
  mods->block_mask = NULL;
  attn_block_mask_free(&bm);
}

static sdpa_cfg shape(int Lq, int Lk) {
  sdpa_cfg c = sdpa_plain(Lq, Lk, 24);
  c.B = 2, c.Hq = 4, c.Hkv = 2, c.Dv = 16;
  return c;
}

/* *p of shape(Lq, Lk) with causal and q_offset as given */
static void make(sdpa_problem *p, int Lq, int Lk, int causal, int q_offset, unsigned seed) {
  sdpa_cfg c = shape(Lq, Lk);
  c.causal = causal, c.q_offset = q_offset;
  sdpa_make_problem(&c, seed, p);
}

/* Packed documents for 2 batches of 160 positions: doc[b * 1000 + i] the
 * document of position i, and the same as a bool mask [2, 1, 160, 160]
 * set on *builtin (returned; free it). */
static uint8_t *usermod_documents(int32_t *doc, attn_sdpa_desc *builtin) {
  uint8_t *bm = malloc(2 * 160 * 160);
  static const int ends[2][4] = {{50, 51, 130, 160}, {64, 128, 150, 160}};
  for (int b = 0; b < 2; b++)
    for (int i = 0, dd = 0; i < 160; i++) {
      while (i >= ends[b][dd]) dd++;
      doc[b * 1000 + i] = dd;
    }
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 160; i++)
      for (int j = 0; j < 160; j++)
        bm[(b * 160 + i) * 160 + j] = doc[b * 1000 + i] == doc[b * 1000 + j];
  builtin->bool_mask = bm;
  builtin->bool_mask_stride[0] = 160 * 160, builtin->bool_mask_stride[2] = 160;
  builtin->bool_mask_stride[3] = 1;
  return bm;
}

/* 1 and 2 threads give the same bits on every backend, the parameter
 * gradient partials [2, 4] included (*slot: where the callbacks' user data
 * keeps its partials' pointer) */
static void usermod_threads_identical(const sdpa_problem *p, const attn_sdpa_desc *d,
                                      float **slot) {
  float partial[2][8];
  const int64_t n[5] = {p->no, p->nl, p->nq, p->nk, p->nv};
  for (int be = MATH; be < n_ops; be++) {
    results r[2];
    for (int t = 0; t < 2; t++) {
      attn_set_num_threads(t + 1);
      memset(partial[t], 0, sizeof partial[t]);
      *slot = partial[t];
      run(be, d, p, &r[t]);
    }
    attn_set_num_threads(1);
    for (int i = 0; i < 5; i++)
      CHECK(!memcmp(r[0].x[i], r[1].x[i], (size_t)n[i] * sizeof(float)));
    CHECK(!memcmp(partial[0], partial[1], sizeof partial[0]));
    release(&r[0]), release(&r[1]);
  }
}

/* The NaN contract on make(40, 70): mods put a NaN logit at (b 1, h 2,
 * q 3, kv 5); that row's out, lse, dq NaN, the other rows finite */
static void usermod_nan_contract(attn_sdpa_mods *mods) {
  sdpa_problem p;
  make(&p, 40, 70, 0, 0, 900);
  attn_sdpa_desc d = p.d;
  d.mods = mods;
  const int64_t row = (1 * 4 + 2) * 40 + 3;
  for (int be = MATH; be < n_ops; be++) {
    results r;
    run(be, &d, &p, &r);
    CHECK(isnan(r.x[1][row]) && isnan(r.x[0][row * 16]) && isnan(r.x[2][row * 24]));
    CHECK(!sdpa_any_nan(r.x[1], row) && !sdpa_any_nan(r.x[1] + row + 1, p.nl - row - 1));
    CHECK(!sdpa_any_nan(r.x[0], row * 16));
    CHECK(!sdpa_any_nan(r.x[3], p.nk / 2)); /* batch 0's keys */
    release(&r);
  }
  sdpa_free_problem(&p);
}

#endif
