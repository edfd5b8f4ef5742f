/* The finite-difference checker behind `attn gradcheck` (see gradcheck.h):
 * problem building helpers, the comparison loop, and the table of case
 * providers. */
#include "apps/tools/gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"

/* ---- providers ---------------------------------------------------------------
 * One per file. A provider whose file is not built yet has a weak empty
 * default here, so adding its file is enough. */
__attribute__((weak)) int attn_gradcheck_nn_cases(const attn_gradcheck_case **out) {
  *out = NULL;
  return 0;
}
__attribute__((weak)) int attn_gradcheck_sdpa_cases(const attn_gradcheck_case **out) {
  *out = NULL;
  return 0;
}

typedef int (*provider_fn)(const attn_gradcheck_case **out);
static const provider_fn providers[] = {
    attn_gradcheck_kernel_cases,
    attn_gradcheck_sdpa_cases,
    attn_gradcheck_nn_cases,
    attn_gradcheck_var_cases,
    attn_gradcheck_capsink_cases,
};
#define NPROVIDERS ((int)(sizeof providers / sizeof providers[0]))

int attn_gradcheck_case_count(void) {
  int total = 0;
  for (int k = 0; k < NPROVIDERS; k++) {
    const attn_gradcheck_case *c;
    total += providers[k](&c);
  }
  return total;
}

const attn_gradcheck_case *attn_gradcheck_case_at(int i) {
  if (i < 0) return NULL;
  for (int k = 0; k < NPROVIDERS; k++) {
    const attn_gradcheck_case *c;
    int n = providers[k](&c);
    if (i < n) return &c[i];
    i -= n;
  }
  return NULL;
}

/* ---- building problems ---------------------------------------------------------- */

void *attn_gc_alloc(attn_gc_problem *p, size_t bytes) {
  if (p->nallocs >= ATTN_GC_MAX_ALLOCS) {
    attn_set_error(ATTN_EINVAL, "gradcheck: more than %d allocations in one case",
                   ATTN_GC_MAX_ALLOCS);
    return NULL;
  }
  void *m = calloc(1, bytes ? bytes : 1);
  if (!m) {
    attn_set_error(ATTN_ENOMEM, "gradcheck: %zu bytes", bytes);
    return NULL;
  }
  p->allocs[p->nallocs++] = m;
  return m;
}

attn_status attn_gc_input(attn_gc_problem *p, const char *name, int64_t n, float **x) {
  if (p->ninputs >= ATTN_GC_MAX_INPUTS)
    return attn_set_error(ATTN_EINVAL, "gradcheck: more than %d inputs (adding '%s')",
                          ATTN_GC_MAX_INPUTS, name);
  if (n < 0) return attn_set_error(ATTN_EINVAL, "gradcheck: input '%s' has n=%lld", name,
                                   (long long)n);
  attn_gc_tensor *t = &p->in[p->ninputs];
  t->x = attn_gc_alloc(p, (size_t)n * sizeof(float));
  t->grad = t->x ? attn_gc_alloc(p, (size_t)n * sizeof(float)) : NULL;
  if (!t->x || !t->grad) return ATTN_ENOMEM;
  snprintf(t->name, sizeof t->name, "%s", name);
  t->n = n;
  p->ninputs++;
  *x = t->x;
  return ATTN_OK;
}

void attn_gc_fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * attn_rng_uniform(seed, (uint64_t)i);
}

void attn_gc_problem_free(attn_gc_problem *p) {
  if (p->cleanup) p->cleanup(p);
  for (int i = 0; i < p->nallocs; i++) free(p->allocs[i]);
  memset(p, 0, sizeof *p);
}

/* ---- the check -------------------------------------------------------------------- */

/* L = sum(w * f(x)) in double */
static attn_status eval_loss(attn_gc_problem *p, const float *w, float *out, double *loss) {
  attn_status st = p->forward(p, out);
  if (st != ATTN_OK) return st;
  double s = 0;
  for (int64_t k = 0; k < p->nout; k++) s += (double)w[k] * out[k];
  *loss = s;
  return ATTN_OK;
}

static attn_status check_input(const attn_gradcheck_case *c, attn_gc_problem *p, int i,
                               const float *w, float *out, const float *analytic,
                               attn_gradcheck_result *r) {
  attn_gc_tensor *t = &p->in[i];
  int64_t m = c->max_entries > 0 && c->max_entries < t->n ? c->max_entries : t->n;
  memset(r, 0, sizeof *r);
  snprintf(r->tensor, sizeof r->tensor, "%s", t->name);
  r->ok = 1;
  r->worst = -1;
  double worst_excess = -INFINITY;
  for (int64_t e = 0; e < m; e++) {
    int64_t j = m == t->n ? e : (int64_t)((double)e * (double)t->n / (double)m);
    float x0 = t->x[j], xp = x0 + c->h, xm = x0 - c->h;
    double lp, lm;
    t->x[j] = xp;
    attn_status st = eval_loss(p, w, out, &lp);
    t->x[j] = xm;
    if (st == ATTN_OK) st = eval_loss(p, w, out, &lm);
    t->x[j] = x0;
    if (st != ATTN_OK) return st;
    double num = (lp - lm) / ((double)xp - (double)xm), a = analytic[j];
    double err = fabs(a - num), tol = c->atol + c->rtol * fabs(num);
    double big = fmax(fabs(a), fabs(num));
    if (!(err <= tol)) r->ok = 0; /* NaN fails too */
    if (!(err <= r->max_abs)) r->max_abs = err;
    if (big > 10 * c->atol && !(err / big <= r->max_rel)) r->max_rel = err / big;
    double excess = isnan(err) ? INFINITY : err - tol;
    if (excess > worst_excess) {
      worst_excess = excess;
      r->worst = j;
      r->worst_analytic = a;
      r->worst_numeric = num;
    }
    r->checked++;
  }
  return ATTN_OK;
}

attn_status attn_gradcheck_run(const attn_gradcheck_case *c, uint64_t seed,
                               attn_gradcheck_result *res, int *nres) {
  attn_gc_problem p;
  memset(&p, 0, sizeof p);
  p.seed = seed;
  *nres = 0;
  attn_status st = c->setup(&p);
  if (st == ATTN_OK && (!p.forward || !p.backward || p.nout <= 0))
    st = attn_set_error(ATTN_EINVAL, "gradcheck %s: setup left no forward/backward/nout",
                        c->name);
  float *out = NULL, *w = NULL, *analytic = NULL;
  if (st == ATTN_OK) {
    out = attn_gc_alloc(&p, (size_t)p.nout * sizeof(float));
    w = out ? attn_gc_alloc(&p, (size_t)p.nout * sizeof(float)) : NULL;
    if (!out || !w) st = ATTN_ENOMEM;
  }
  if (st == ATTN_OK) {
    /* the weighting w: uniform in [-1, 1), its own stream */
    attn_gc_fill_uniform(w, p.nout, seed ^ 0x5bd1e995u, -1.0f, 1.0f);
    st = p.forward(&p, out);
  }
  if (st == ATTN_OK) st = p.backward(&p, w);
  /* keep the analytic gradients: later forwards may reuse p's buffers */
  if (st == ATTN_OK) {
    int64_t total = 0;
    for (int i = 0; i < p.ninputs; i++) total += p.in[i].n;
    analytic = attn_gc_alloc(&p, (size_t)total * sizeof(float));
    if (!analytic) st = ATTN_ENOMEM;
    int64_t off = 0;
    for (int i = 0; st == ATTN_OK && i < p.ninputs; off += p.in[i].n, i++)
      memcpy(analytic + off, p.in[i].grad, (size_t)p.in[i].n * sizeof(float));
  }
  for (int64_t i = 0, off = 0; st == ATTN_OK && i < p.ninputs; off += p.in[i].n, i++) {
    st = check_input(c, &p, (int)i, w, out, analytic + off, &res[i]);
    if (st == ATTN_OK) *nres = (int)i + 1;
  }
  if (st != ATTN_OK && attn_last_error()[0] == '\0')
    attn_set_error(st, "gradcheck %s failed", c->name);
  attn_gc_problem_free(&p);
  return st;
}
