/* gradcheck cases for logit softcap and attention sinks (attn/sdpa.h): the
 * SDPA's q, k, v and the sink logits (an input with its own gradient,
 * sinks_grad), with softcap alone, sinks alone (GQA), and both with a window,
 * key_lens (a batch whose rows see no key) and ALiBi; cap.sdpa_* on the math
 * backend, cap.flash_* through the flash tiles. */
#include <string.h>

#include "apps/tools/gradcheck.h"
#include "attn/kernels.h"
#include "attn/sdpa.h"
#include "attn/variants.h"

typedef struct {
  attn_sdpa_desc d;
  float *out, *lse;
  int sinks;            /* input index of the sinks, -1 = none */
  attn_backend backend; /* MATH or FLASH */
} cctx;

static attn_status c_fwd(attn_gc_problem *p, float *out) {
  cctx *c = p->ctx;
  c->d.sinks = c->sinks >= 0 ? p->in[c->sinks].x : NULL; /* the perturbed sinks */
  return attn_gc_sdpa_forward(p, &c->d, c->backend, out, c->lse);
}

static attn_status c_bwd(attn_gc_problem *p, const float *dout) {
  cctx *c = p->ctx;
  attn_status st = c_fwd(p, c->out);
  if (st) return st;
  c->d.sinks_grad = c->sinks >= 0 ? attn_gc_grad(p, c->sinks) : NULL;
  return attn_gc_sdpa_backward(p, &c->d, c->backend, c->out, c->lse, dout);
}

/* q, k in [-2, 2) (scores up to ~4 at D = 4: the cap bends them), v in [-1, 1);
 * sinks (if wanted) in [-1, 2) */
static cctx *c_setup(attn_gc_problem *p, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int sinks,
                     float softcap) {
  cctx *c = attn_gc_alloc(p, sizeof *c);
  if (!c) return NULL;
  const int64_t D = 4;
  attn_sdpa_desc_init(&c->d, B, Hq, Hkv, L, L, D, D);
  c->d.softcap = softcap;
  c->sinks = -1;
  c->backend = ATTN_BACKEND_MATH;
  const int64_t nq = B * Hq * L * D, nk = B * Hkv * L * D;
  float *q, *k, *v, *s;
  if (attn_gc_input(p, "q", nq, &q) || attn_gc_input(p, "k", nk, &k) ||
      attn_gc_input(p, "v", nk, &v))
    return NULL;
  attn_gc_fill_uniform(q, nq, p->seed, -2.0f, 2.0f);
  attn_gc_fill_uniform(k, nk, p->seed + 1, -2.0f, 2.0f);
  attn_gc_fill_uniform(v, nk, p->seed + 2, -1.0f, 1.0f);
  if (sinks) {
    if (attn_gc_input(p, "sinks", Hq, &s)) return NULL;
    attn_gc_fill_uniform(s, Hq, p->seed + 3, -1.0f, 2.0f);
    c->sinks = p->ninputs - 1;
  }
  c->out = attn_gc_alloc(p, (size_t)(B * Hq * L * D) * sizeof(float));
  c->lse = attn_gc_alloc(p, (size_t)(B * Hq * L) * sizeof(float));
  if (!c->out || !c->lse) return NULL;
  p->ctx = c;
  p->nout = B * Hq * L * D;
  p->forward = c_fwd;
  p->backward = c_bwd;
  return c;
}

static attn_status setup_softcap(attn_gc_problem *p) {
  cctx *c = c_setup(p, 1, 2, 1, 7, 0, 1.5f);
  if (!c) return ATTN_ENOMEM;
  c->d.causal = 1;
  return ATTN_OK;
}

static attn_status setup_sinks(attn_gc_problem *p) {
  return c_setup(p, 1, 4, 2, 6, 1, 0.0f) ? ATTN_OK : ATTN_ENOMEM;
}

static attn_status setup_both(attn_gc_problem *p) {
  cctx *c = c_setup(p, 2, 2, 1, 6, 1, 2.0f);
  int32_t *kl = c ? attn_gc_alloc(p, 2 * sizeof(int32_t)) : NULL;
  float *sl = kl ? attn_gc_alloc(p, 2 * sizeof(float)) : NULL;
  if (!sl) return ATTN_ENOMEM;
  kl[0] = 0, kl[1] = 5; /* batch 0: no key at all (out 0, lse = the sink) */
  attn_alibi_slopes(2, sl);
  c->d.key_lens = kl;
  c->d.alibi_slopes = sl;
  c->d.window_left = 3;
  c->d.window_right = 1;
  return ATTN_OK;
}

static attn_status flash(attn_gc_problem *p, attn_status (*setup)(attn_gc_problem *)) {
  attn_status st = setup(p);
  if (st == ATTN_OK) ((cctx *)p->ctx)->backend = ATTN_BACKEND_FLASH;
  return st;
}
static attn_status setup_flash_softcap(attn_gc_problem *p) { return flash(p, setup_softcap); }
static attn_status setup_flash_sinks(attn_gc_problem *p) { return flash(p, setup_sinks); }
static attn_status setup_flash_both(attn_gc_problem *p) { return flash(p, setup_both); }

/* name, setup, h, atol, rtol, max_entries */
static const attn_gradcheck_case cases[] = {
    {"cap.sdpa_softcap", setup_softcap, 1e-2f, 2e-4, 1e-2, 0},
    {"cap.sdpa_sinks", setup_sinks, 1e-2f, 2e-4, 1e-2, 0},
    {"cap.sdpa_softcap_sinks", setup_both, 1e-2f, 2e-4, 1e-2, 0},
    {"cap.flash_softcap", setup_flash_softcap, 1e-2f, 2e-4, 1e-2, 0},
    {"cap.flash_sinks", setup_flash_sinks, 1e-2f, 2e-4, 1e-2, 0},
    {"cap.flash_softcap_sinks", setup_flash_both, 1e-2f, 2e-4, 1e-2, 0},
};

int attn_gradcheck_capsink_cases(const attn_gradcheck_case **out) {
  *out = cases;
  return (int)(sizeof cases / sizeof cases[0]);
}
