/* The finite-difference checker: every registered case passes, and the
 * checker catches wrong backwards (a missing term, a 5% scale error, one
 * wrong entry), so its passing means something. Also `attn gradcheck`'s exit
 * codes when the tool is built (ATTN_BIN, set by tests/run.sh). */
#include <sys/wait.h>
#include <unistd.h>

#include "apps/tools/gradcheck.h"
#include "harness.h"

static void test_every_registered_case_passes(void) {
  int n = attn_gradcheck_case_count();
  CHECK(n >= 20); /* kernels and SDPA at least */
  for (int i = 0; i < n; i++) {
    const attn_gradcheck_case *c = attn_gradcheck_case_at(i);
    attn_gradcheck_result res[ATTN_GC_MAX_INPUTS];
    int nres = 0;
    CHECK_OK(attn_gradcheck_run(c, 1, res, &nres));
    CHECK(nres >= 1);
    for (int k = 0; k < nres; k++) {
      CHECK(res[k].checked > 0);
      if (!res[k].ok) {
        printf("  %s %s: max abs %.3g, worst [%lld] analytic %.8g numeric %.8g\n", c->name,
               res[k].tensor, res[k].max_abs, (long long)res[k].worst, res[k].worst_analytic,
               res[k].worst_numeric);
        h_case_failed = 1;
      }
    }
  }
  CHECK(attn_gradcheck_case_at(n) == NULL && attn_gradcheck_case_at(-1) == NULL);
}

static void test_case_names_are_unique(void) {
  int n = attn_gradcheck_case_count();
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      CHECK(strcmp(attn_gradcheck_case_at(i)->name, attn_gradcheck_case_at(j)->name) != 0);
}

/* ---- deliberately wrong backwards ------------------------------------------------ */

typedef struct {
  int64_t rows, n;
  float *y;
  int mode; /* which bug */
} wctx;

enum { BUG_SOFTMAX_NO_SUM, BUG_GELU_SCALE, BUG_ONE_ENTRY, BUG_NONE };

static attn_status w_fwd(attn_gc_problem *p, float *out) {
  wctx *c = p->ctx;
  if (c->mode == BUG_SOFTMAX_NO_SUM) return attn_softmax_f32(p->in[0].x, out, c->rows, c->n);
  return attn_gelu_f32(p->in[0].x, out, c->rows * c->n);
}

static attn_status w_bwd(attn_gc_problem *p, const float *dout) {
  wctx *c = p->ctx;
  float *g = attn_gc_grad(p, 0);
  int64_t n = c->rows * c->n;
  if (c->mode == BUG_SOFTMAX_NO_SUM) { /* dx = y * dy: forgets - y * sum(dy * y) */
    attn_status st = attn_softmax_f32(p->in[0].x, c->y, c->rows, c->n);
    for (int64_t i = 0; st == ATTN_OK && i < n; i++) g[i] = c->y[i] * dout[i];
    return st;
  }
  attn_status st = attn_gelu_backward_f32(p->in[0].x, dout, g, n);
  if (st != ATTN_OK) return st;
  if (c->mode == BUG_GELU_SCALE)
    for (int64_t i = 0; i < n; i++) g[i] *= 1.05f;
  if (c->mode == BUG_ONE_ENTRY) g[n - 1] += 0.01f;
  return ATTN_OK;
}

static attn_status w_setup(attn_gc_problem *p, int mode) {
  wctx *c = attn_gc_alloc(p, sizeof *c);
  if (!c) return ATTN_ENOMEM;
  c->rows = 3;
  c->n = 6;
  c->mode = mode;
  c->y = attn_gc_alloc(p, 18 * sizeof(float));
  float *x;
  attn_status st = attn_gc_input(p, "x", 18, &x);
  if (st != ATTN_OK || !c->y) return st ? st : ATTN_ENOMEM;
  attn_gc_fill_uniform(x, 18, p->seed, -3.0f, 3.0f);
  p->ctx = c;
  p->nout = 18;
  p->forward = w_fwd;
  p->backward = w_bwd;
  return ATTN_OK;
}
static attn_status setup_no_sum(attn_gc_problem *p) { return w_setup(p, BUG_SOFTMAX_NO_SUM); }
static attn_status setup_scale(attn_gc_problem *p) { return w_setup(p, BUG_GELU_SCALE); }
static attn_status setup_one(attn_gc_problem *p) { return w_setup(p, BUG_ONE_ENTRY); }
static attn_status setup_none(attn_gc_problem *p) { return w_setup(p, BUG_NONE); }

static int run_ok(const attn_gradcheck_case *c, attn_gradcheck_result *r) {
  int nres = 0;
  CHECK_OK(attn_gradcheck_run(c, 1, r, &nres));
  CHECK(nres == 1);
  return nres == 1 && r->ok;
}

static void test_wrong_backwards_are_caught(void) {
  /* same step and tolerances as the kernel cases */
  const attn_gradcheck_case no_sum = {"wrong.softmax_no_sum", setup_no_sum, 1e-2f, 1e-4, 1e-2, 0};
  const attn_gradcheck_case scale = {"wrong.gelu_x1.05", setup_scale, 1e-2f, 1e-4, 1e-2, 0};
  const attn_gradcheck_case one = {"wrong.gelu_one_entry", setup_one, 1e-2f, 1e-4, 1e-2, 0};
  const attn_gradcheck_case right = {"right.gelu", setup_none, 1e-2f, 1e-4, 1e-2, 0};
  attn_gradcheck_result r;
  CHECK(!run_ok(&no_sum, &r));
  CHECK(r.checked == 18);
  CHECK(!run_ok(&scale, &r));
  CHECK(r.max_rel > 0.04 && r.max_rel < 0.06); /* the 5% shows as the relative error */
  CHECK(!run_ok(&one, &r));
  CHECK(r.worst == 17); /* and the checker points at it */
  CHECK(fabs(r.worst_analytic - r.worst_numeric - 0.01) < 1e-3);
  CHECK(run_ok(&right, &r)); /* the same case without the bug passes */
}

/* ---- checker plumbing --------------------------------------------------------------- */

static void test_max_entries_spreads_the_sample(void) {
  const attn_gradcheck_case some = {"right.gelu.some", setup_none, 1e-2f, 1e-4, 1e-2, 5};
  attn_gradcheck_result r;
  CHECK(run_ok(&some, &r));
  CHECK(r.checked == 5);
  /* 5 of 18 entries, evenly spread: 0, 3, 7, 10, 14; a bug in entry 17 alone
   * is not seen (why small tensors are checked whole) */
  const attn_gradcheck_case one5 = {"wrong.one.some", setup_one, 1e-2f, 1e-4, 1e-2, 5};
  CHECK(run_ok(&one5, &r));
}

static attn_status setup_fails(attn_gc_problem *p) {
  float *x;
  attn_status st = attn_gc_input(p, "x", 4, &x);
  if (st != ATTN_OK) return st;
  return attn_set_error(ATTN_EINVAL, "setup_fails: on purpose");
}

static attn_status setup_too_many_inputs(attn_gc_problem *p) {
  float *x;
  for (int i = 0; i <= ATTN_GC_MAX_INPUTS; i++) {
    attn_status st = attn_gc_input(p, "x", 2, &x);
    if (st != ATTN_OK) return st;
  }
  return ATTN_OK;
}

static void test_setup_errors_are_reported(void) {
  const attn_gradcheck_case bad = {"bad.setup", setup_fails, 1e-2f, 1e-4, 1e-2, 0};
  const attn_gradcheck_case many = {"bad.inputs", setup_too_many_inputs, 1e-2f, 1e-4, 1e-2, 0};
  attn_gradcheck_result r[ATTN_GC_MAX_INPUTS];
  int nres = -1;
  CHECK_ERR(attn_gradcheck_run(&bad, 1, r, &nres), ATTN_EINVAL);
  CHECK(nres == 0);
  CHECK_ERR(attn_gradcheck_run(&many, 1, r, &nres), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "inputs") != NULL);
}

/* ---- the CLI ---------------------------------------------------------------------------- */

static int run_cli(const char *args) {
  const char *bin = getenv("ATTN_BIN");
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s gradcheck %s >/dev/null 2>&1", bin, args);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_cli_exit_codes(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    SKIP("ATTN_BIN not set: CLI not checked");
    return;
  }
  CHECK(run_cli("--filter softmax") == 0);
  CHECK(run_cli("--filter sdpa.causal --verbose") == 0);
  CHECK(run_cli("--filter no-such-case") == 1);
  CHECK(run_cli("--bogus") == 2);
  CHECK(run_cli("--seed x") == 2);
}

int main(void) {
  RUN(test_every_registered_case_passes);
  RUN(test_case_names_are_unique);
  RUN(test_wrong_backwards_are_caught);
  RUN(test_max_entries_spreads_the_sample);
  RUN(test_setup_errors_are_reported);
  RUN(test_cli_exit_codes);
  HARNESS_END();
}
