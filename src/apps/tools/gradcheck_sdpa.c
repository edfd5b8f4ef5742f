/* gradcheck cases for SDPA: dq, dk, dv of L = sum(w * out) under each kind
 * of mask, grouped heads, Dv != D and a fully masked query row (whose
 * gradient must be 0, as the differences are), for the reference ("math")
 * backend (sdpa.*) and the same problems through the flash backend
 * (sdpa_flash.*). */
#include <math.h>
#include <string.h>

#include "apps/tools/gradcheck.h"
#include "attn/kernels.h"
#include "attn/sdpa.h"

typedef struct {
  attn_sdpa_desc d;
  attn_backend backend; /* MATH (the default, zeroed is AUTO) or FLASH */
  float *out, *lse;     /* forward results the backward needs */
} sctx;

static attn_status sdpa_fwd(attn_gc_problem *p, float *out) {
  sctx *c = p->ctx;
  return attn_gc_sdpa_forward(p, &c->d, c->backend, out, c->lse);
}

static attn_status sdpa_bwd(attn_gc_problem *p, const float *dout) {
  sctx *c = p->ctx;
  attn_status st = sdpa_fwd(p, c->out);
  if (st != ATTN_OK) return st;
  return attn_gc_sdpa_backward(p, &c->d, c->backend, c->out, c->lse, dout);
}

attn_status attn_gc_sdpa_forward(attn_gc_problem *p, const attn_sdpa_desc *d, attn_backend be,
                                 float *out, float *lse) {
  const attn_sdpa_args a = {.path = (attn_sdpa_path)be,
                            .q = p->in[0].x,
                            .k = p->in[1].x,
                            .v = p->in[2].x,
                            .out = out,
                            .lse = lse};
  return attn_sdpa_forward(d, &a);
}

attn_status attn_gc_sdpa_backward(attn_gc_problem *p, const attn_sdpa_desc *d, attn_backend be,
                                  float *out, float *lse, const float *dout) {
  const attn_sdpa_args a = {.path = (attn_sdpa_path)be,
                            .q = p->in[0].x,
                            .k = p->in[1].x,
                            .v = p->in[2].x,
                            .out = out,
                            .lse = lse,
                            .dout = dout,
                            .dq = attn_gc_grad(p, 0),
                            .dk = attn_gc_grad(p, 1),
                            .dv = attn_gc_grad(p, 2)};
  return attn_sdpa_backward(d, &a);
}

/* q, k, v uniform in [-1, 1); c->d sized; returns the context for masks */
static sctx *setup_sdpa(attn_gc_problem *p, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq,
                        int64_t Lk, int64_t D, int64_t Dv) {
  sctx *c = attn_gc_alloc(p, sizeof *c);
  if (!c) return NULL;
  attn_sdpa_desc_init(&c->d, B, Hq, Hkv, Lq, Lk, D, Dv);
  int64_t nq = B * Hq * Lq * D, nk = B * Hkv * Lk * D, nv = B * Hkv * Lk * Dv;
  int64_t nout = B * Hq * Lq * Dv;
  float *q, *k, *v;
  if (attn_gc_input(p, "q", nq, &q) || attn_gc_input(p, "k", nk, &k) ||
      attn_gc_input(p, "v", nv, &v))
    return NULL;
  /* q and k scaled up so the softmax is far from uniform */
  attn_gc_fill_uniform(q, nq, p->seed, -2.0f, 2.0f);
  attn_gc_fill_uniform(k, nk, p->seed + 1, -2.0f, 2.0f);
  attn_gc_fill_uniform(v, nv, p->seed + 2, -1.0f, 1.0f);
  c->out = attn_gc_alloc(p, (size_t)nout * sizeof(float));
  c->lse = attn_gc_alloc(p, (size_t)(B * Hq * Lq) * sizeof(float));
  if (!c->out || !c->lse) return NULL;
  c->backend = ATTN_BACKEND_MATH;
  p->ctx = c;
  p->nout = nout;
  p->forward = sdpa_fwd;
  p->backward = sdpa_bwd;
  return c;
}

static attn_status setup_plain(attn_gc_problem *p) {
  return setup_sdpa(p, 2, 2, 2, 5, 6, 4, 4) ? ATTN_OK : ATTN_ENOMEM;
}

static attn_status setup_scale(attn_gc_problem *p) {
  sctx *c = setup_sdpa(p, 1, 2, 2, 4, 5, 4, 4);
  if (!c) return ATTN_ENOMEM;
  c->d.scale = 1.3f;
  c->d.has_scale = 1;
  return ATTN_OK;
}

static attn_status setup_causal(attn_gc_problem *p) {
  sctx *c = setup_sdpa(p, 2, 2, 2, 6, 6, 4, 4);
  if (!c) return ATTN_ENOMEM;
  c->d.causal = 1;
  return ATTN_OK;
}

static attn_status setup_window(attn_gc_problem *p) {
  sctx *c = setup_sdpa(p, 1, 2, 2, 7, 7, 4, 4);
  if (!c) return ATTN_ENOMEM;
  c->d.window_left = 2;
  c->d.window_right = 1;
  return ATTN_OK;
}

static attn_status setup_key_lens(attn_gc_problem *p) {
  sctx *c = setup_sdpa(p, 2, 2, 2, 4, 6, 4, 4);
  if (!c) return ATTN_ENOMEM;
  int32_t *kl = attn_gc_alloc(p, 2 * sizeof(int32_t));
  if (!kl) return ATTN_ENOMEM;
  kl[0] = 3;
  kl[1] = 6;
  c->d.key_lens = kl;
  return ATTN_OK;
}

/* prefix-LM: batch 0 sees its first 4 keys from every query, batch 1 none
 * (plain causal) */
static attn_status setup_prefix_lm(attn_gc_problem *p) {
  sctx *c = setup_sdpa(p, 2, 2, 2, 7, 7, 4, 4);
  if (!c) return ATTN_ENOMEM;
  int32_t *pl = attn_gc_alloc(p, 2 * sizeof(int32_t));
  if (!pl) return ATTN_ENOMEM;
  pl[0] = 4;
  pl[1] = 0;
  c->d.causal = 1;
  c->d.prefix_lens = pl;
  return ATTN_OK;
}

/* bool mask [B, 1, Lq, Lk] broadcast over heads: ~1/3 of the keys masked,
 * key 0 always allowed unless masked_row >= 0 (that row is fully masked). */
static attn_status setup_bool_common(attn_gc_problem *p, int64_t masked_row) {
  const int64_t B = 2, Lq = 5, Lk = 6;
  sctx *c = setup_sdpa(p, B, 2, 2, Lq, Lk, 4, 4);
  if (!c) return ATTN_ENOMEM;
  uint8_t *m = attn_gc_alloc(p, (size_t)(B * Lq * Lk));
  if (!m) return ATTN_ENOMEM;
  for (int64_t i = 0; i < B * Lq * Lk; i++)
    m[i] = i % Lk == 0 || attn_rng_uniform(p->seed + 3, (uint64_t)i) >= 1.0f / 3;
  if (masked_row >= 0)
    for (int64_t b = 0; b < B; b++) memset(m + (b * Lq + masked_row) * Lk, 0, (size_t)Lk);
  c->d.bool_mask = m;
  c->d.bool_mask_stride[0] = Lq * Lk;
  c->d.bool_mask_stride[1] = 0;
  c->d.bool_mask_stride[2] = Lk;
  c->d.bool_mask_stride[3] = 1;
  return ATTN_OK;
}
static attn_status setup_bool_mask(attn_gc_problem *p) { return setup_bool_common(p, -1); }
static attn_status setup_masked_row(attn_gc_problem *p) { return setup_bool_common(p, 2); }

/* additive mask [Lq, Lk] broadcast over batch and heads: values in [-2, 2),
 * every 4th entry -inf (key 0 never) */
static attn_status setup_add_mask(attn_gc_problem *p) {
  const int64_t Lq = 5, Lk = 6;
  sctx *c = setup_sdpa(p, 2, 2, 2, Lq, Lk, 4, 4);
  if (!c) return ATTN_ENOMEM;
  float *m = attn_gc_alloc(p, (size_t)(Lq * Lk) * sizeof(float));
  if (!m) return ATTN_ENOMEM;
  attn_gc_fill_uniform(m, Lq * Lk, p->seed + 4, -2.0f, 2.0f);
  for (int64_t i = 1; i < Lq * Lk; i += 4)
    if (i % Lk) m[i] = -INFINITY;
  c->d.add_mask = m;
  c->d.add_mask_stride[2] = Lk;
  c->d.add_mask_stride[3] = 1;
  return ATTN_OK;
}

static attn_status setup_gqa(attn_gc_problem *p) {
  sctx *c = setup_sdpa(p, 1, 4, 2, 5, 5, 4, 4);
  if (!c) return ATTN_ENOMEM;
  c->d.causal = 1;
  return ATTN_OK;
}

static attn_status setup_dv(attn_gc_problem *p) {
  return setup_sdpa(p, 1, 2, 1, 4, 7, 4, 7) ? ATTN_OK : ATTN_ENOMEM;
}

/* The same problems through the flash backend. */
static attn_status flash(attn_gc_problem *p, attn_status (*setup)(attn_gc_problem *)) {
  attn_status st = setup(p);
  if (st == ATTN_OK) ((sctx *)p->ctx)->backend = ATTN_BACKEND_FLASH;
  return st;
}
static attn_status setup_flash_plain(attn_gc_problem *p) { return flash(p, setup_plain); }
static attn_status setup_flash_scale(attn_gc_problem *p) { return flash(p, setup_scale); }
static attn_status setup_flash_causal(attn_gc_problem *p) { return flash(p, setup_causal); }
static attn_status setup_flash_window(attn_gc_problem *p) { return flash(p, setup_window); }
static attn_status setup_flash_key_lens(attn_gc_problem *p) { return flash(p, setup_key_lens); }
static attn_status setup_flash_bool_mask(attn_gc_problem *p) { return flash(p, setup_bool_mask); }
static attn_status setup_flash_add_mask(attn_gc_problem *p) { return flash(p, setup_add_mask); }
static attn_status setup_flash_gqa(attn_gc_problem *p) { return flash(p, setup_gqa); }
static attn_status setup_flash_dv(attn_gc_problem *p) { return flash(p, setup_dv); }
static attn_status setup_flash_masked_row(attn_gc_problem *p) {
  return flash(p, setup_masked_row);
}
static attn_status setup_flash_prefix_lm(attn_gc_problem *p) { return flash(p, setup_prefix_lm); }

/* name, setup, h, atol, rtol, max_entries */
static const attn_gradcheck_case cases[] = {
    {"sdpa.plain", setup_plain, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.scale", setup_scale, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.causal", setup_causal, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.window", setup_window, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.key_lens", setup_key_lens, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.bool_mask", setup_bool_mask, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.add_mask", setup_add_mask, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.gqa_hq4_hkv2", setup_gqa, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.dv7_d4", setup_dv, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.masked_row", setup_masked_row, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa.prefix_lm", setup_prefix_lm, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.plain", setup_flash_plain, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.scale", setup_flash_scale, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.causal", setup_flash_causal, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.window", setup_flash_window, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.key_lens", setup_flash_key_lens, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.bool_mask", setup_flash_bool_mask, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.add_mask", setup_flash_add_mask, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.gqa_hq4_hkv2", setup_flash_gqa, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.dv7_d4", setup_flash_dv, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.masked_row", setup_flash_masked_row, 1e-2f, 2e-4, 1e-2, 0},
    {"sdpa_flash.prefix_lm", setup_flash_prefix_lm, 1e-2f, 2e-4, 1e-2, 0},
};

int attn_gradcheck_sdpa_cases(const attn_gradcheck_case **out) {
  *out = cases;
  return (int)(sizeof cases / sizeof cases[0]);
}
