/* attn gradcheck — finite-difference checks of every backward.
 *
 * For a function f(x1..xk) -> out [nout] and a random weighting w [nout]
 * (uniform in [-1, 1), fixed seed), the checker compares the analytic
 * gradient of L = sum(w * f(x)) with respect to each input xi (what the
 * case's backward returns for dout = w) against central differences
 *   (L(x + h e_j) - L(x - h e_j)) / (2h)
 * evaluated in f32 (L summed in double), for every entry of small inputs and
 * for `max_entries` evenly spread entries of larger ones. An entry passes when
 * |analytic - numeric| <= atol + rtol * |numeric|.
 *
 * ---- Adding checks (the pattern) -------------------------------------------
 * 1. In your own file (e.g. src/apps/gradcheck_nn.c), write for each case a
 *    setup function that fills an attn_gc_problem:
 *      - attn_gc_input(p, "x", n, &x) for every differentiable input (the
 *        checker perturbs x in place and reads the analytic gradient from
 *        attn_gc_grad(p, i)); fill x yourself (attn_gc_fill_uniform);
 *      - attn_gc_alloc(p, bytes) for anything else the case needs (ids,
 *        masks, saved activations, a module struct); freed with the problem;
 *      - p->nout, p->forward, p->backward, and p->ctx (your state);
 *      - p->cleanup (optional) to free what attn_gc_alloc did not allocate
 *        (e.g. a module's attn_params).
 *    forward(p, out) computes out [nout] from the current inputs.
 *    backward(p, dout) OVERWRITES attn_gc_grad(p, i) for every input (zero
 *    them first when the kernel accumulates). The checker calls it right after
 *    a forward at the unperturbed inputs, so it may use what forward saved in
 *    p->ctx (softmax output, LayerNorm mean/rstd, SDPA out/lse...).
 * 2. List the cases in a static const attn_gradcheck_case array and expose it
 *    with a provider function `int attn_gradcheck_<topic>_cases(const
 *    attn_gradcheck_case **out)` returning the count; declare it below.
 * 3. Add the provider to the `providers` table in src/apps/gradcheck.c (one
 *    line). attn_gradcheck_nn_cases is already there, with a weak empty
 *    default, so defining it in src/apps/gradcheck_nn.c is all the nn layer
 *    needs.
 * Names are "<topic>.<what>" (softmax, layernorm.affine, sdpa.causal,
 * nn.linear...); `attn gradcheck --filter S` runs the cases whose name
 * contains S. Keep each case small (a few hundred entries, a few ms per
 * forward): tests/test_gradcheck.c runs them all, also under ASan.
 *
 * Step and tolerances: f32 evaluation rounds every output by ~6e-8 relative,
 * so the difference quotient carries ~6e-8 * |L| * sqrt(nout) / h of noise;
 * h = 1e-2..1e-3 keeps that and the O(h^2) truncation near 1e-4..1e-3. */
#ifndef ATTN_APPS_GRADCHECK_H
#define ATTN_APPS_GRADCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "attn/sdpa.h"
#include "attn/status.h"

#define ATTN_GC_MAX_INPUTS 8
#define ATTN_GC_MAX_ALLOCS 32
#define ATTN_GC_NAME_MAX 32

typedef struct attn_gc_problem attn_gc_problem;

/* out [p->nout] from the current inputs */
typedef attn_status (*attn_gc_forward_fn)(attn_gc_problem *p, float *out);
/* overwrite every attn_gc_grad(p, i) with dL/dinput_i for L = sum(dout * out) */
typedef attn_status (*attn_gc_backward_fn)(attn_gc_problem *p, const float *dout);

typedef struct {
  char name[ATTN_GC_NAME_MAX];
  float *x;    /* values; perturbed in place by the checker */
  float *grad; /* analytic gradient, written by backward */
  int64_t n;
} attn_gc_tensor;

struct attn_gc_problem {
  attn_gc_tensor in[ATTN_GC_MAX_INPUTS];
  int ninputs;
  int64_t nout;
  attn_gc_forward_fn forward;
  attn_gc_backward_fn backward;
  void *ctx;                            /* the case's own state */
  void (*cleanup)(attn_gc_problem *p); /* optional */
  uint64_t seed;                        /* for the case's random inputs */
  void *allocs[ATTN_GC_MAX_ALLOCS];     /* freed by attn_gc_problem_free */
  int nallocs;
};

typedef struct {
  const char *name;                          /* "<topic>.<what>" */
  attn_status (*setup)(attn_gc_problem *p); /* p is zeroed, p->seed set */
  float h;                                   /* central-difference step */
  double atol, rtol;
  int64_t max_entries; /* per input tensor; 0 = every entry */
} attn_gradcheck_case;

/* One line of the report: one input tensor of one case. */
typedef struct {
  char tensor[ATTN_GC_NAME_MAX];
  int64_t checked;
  double max_abs, max_rel; /* max_rel over entries with max(|a|,|n|) > 10 atol */
  int64_t worst;           /* entry with the largest excess over atol + rtol*|n| */
  double worst_analytic, worst_numeric;
  int ok;
} attn_gradcheck_result;

/* ---- building problems (for setup functions) -------------------------------- */
/* Zeroed memory owned by p; NULL (with the error set) when out of memory or
 * when more than ATTN_GC_MAX_ALLOCS were requested. */
void *attn_gc_alloc(attn_gc_problem *p, size_t bytes);
/* Declare a differentiable input of n floats (zeroed); *x receives its data. */
attn_status attn_gc_input(attn_gc_problem *p, const char *name, int64_t n, float **x);
static inline float *attn_gc_grad(attn_gc_problem *p, int i) { return p->in[i].grad; }
/* x[i] = lo + (hi - lo) * attn_rng_uniform(seed, i) */
void attn_gc_fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi);
/* SDPA on inputs 0, 1, 2 of p as q, k, v, f32 on backend be (gradcheck_sdpa.c): the
 * forward's out and lse; the backward writes the gradients of inputs 0..2. */
attn_status attn_gc_sdpa_forward(attn_gc_problem *p, const attn_sdpa_desc *d, attn_backend be,
                                 float *out, float *lse);
attn_status attn_gc_sdpa_backward(attn_gc_problem *p, const attn_sdpa_desc *d, attn_backend be,
                                  float *out, float *lse, const float *dout);
void attn_gc_problem_free(attn_gc_problem *p);

/* ---- running ------------------------------------------------------------------ */
/* Run one case: res[ATTN_GC_MAX_INPUTS] receives one line per input, *nres
 * their count. Returns an error status only if the case could not be run
 * (setup/forward/backward failed); gradient mismatches are reported in
 * res[i].ok. */
attn_status attn_gradcheck_run(const attn_gradcheck_case *c, uint64_t seed,
                               attn_gradcheck_result *res, int *nres);

/* Every registered case, providers in table order: i in [0, count). */
int attn_gradcheck_case_count(void);
const attn_gradcheck_case *attn_gradcheck_case_at(int i); /* NULL if out of range */

/* ---- providers: one per file ---------------------------------------------------- */
int attn_gradcheck_kernel_cases(const attn_gradcheck_case **out); /* gradcheck_kernels.c */
int attn_gradcheck_sdpa_cases(const attn_gradcheck_case **out);   /* gradcheck_sdpa.c */
int attn_gradcheck_nn_cases(const attn_gradcheck_case **out);     /* gradcheck_nn.c (nn) */
int attn_gradcheck_var_cases(const attn_gradcheck_case **out);    /* gradcheck_var.c */
int attn_gradcheck_capsink_cases(const attn_gradcheck_case **out); /* gradcheck_capsink.c */

#endif
