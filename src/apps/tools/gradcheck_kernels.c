/* gradcheck cases for the f32 kernels (softmax, log-softmax, LayerNorm, ReLU,
 * GELU, dropout, embedding, cross-entropy). Each setup declares the inputs,
 * the forward runs the kernel, and the backward runs the kernel's backward
 * (recomputing what it needs from the forward at the same inputs). */
#include <string.h>

#include "apps/tools/gradcheck.h"
#include "attn/kernels.h"

/* Shared state of these cases: sizes, fixed non-differentiable inputs and a
 * scratch buffer. */
typedef struct {
  int64_t rows, n;
  float *scratch;     /* [rows * n] */
  float *mean, *rstd; /* [rows] */
  int32_t *ids;       /* embedding ids / cross-entropy targets */
  uint8_t *mask;      /* dropout */
  float p, smoothing;
  int32_t ignore;
} kctx;

static kctx *new_ctx(attn_gc_problem *p, int64_t rows, int64_t n) {
  kctx *c = attn_gc_alloc(p, sizeof *c);
  if (!c) return NULL;
  c->rows = rows;
  c->n = n;
  c->scratch = attn_gc_alloc(p, (size_t)(rows * n) * sizeof(float));
  c->mean = attn_gc_alloc(p, (size_t)rows * sizeof(float));
  c->rstd = attn_gc_alloc(p, (size_t)rows * sizeof(float));
  if (!c->scratch || !c->mean || !c->rstd) return NULL;
  p->ctx = c;
  return c;
}

/* one input "x" [rows, n] uniform in [lo, hi); out [rows * n] */
static attn_status setup_rows(attn_gc_problem *p, int64_t rows, int64_t n, float lo, float hi,
                              attn_gc_forward_fn fwd, attn_gc_backward_fn bwd) {
  float *x;
  if (!new_ctx(p, rows, n)) return ATTN_ENOMEM;
  attn_status st = attn_gc_input(p, "x", rows * n, &x);
  if (st != ATTN_OK) return st;
  attn_gc_fill_uniform(x, rows * n, p->seed, lo, hi);
  p->nout = rows * n;
  p->forward = fwd;
  p->backward = bwd;
  return ATTN_OK;
}

/* ---- softmax / log-softmax ------------------------------------------------------ */

static attn_status softmax_fwd(attn_gc_problem *p, float *out) {
  kctx *c = p->ctx;
  return attn_softmax_f32(p->in[0].x, out, c->rows, c->n);
}
static attn_status softmax_bwd(attn_gc_problem *p, const float *dout) {
  kctx *c = p->ctx;
  attn_status st = attn_softmax_f32(p->in[0].x, c->scratch, c->rows, c->n);
  if (st != ATTN_OK) return st;
  return attn_softmax_backward_f32(c->scratch, dout, attn_gc_grad(p, 0), c->rows, c->n);
}
static attn_status setup_softmax(attn_gc_problem *p) {
  return setup_rows(p, 3, 7, -3.0f, 3.0f, softmax_fwd, softmax_bwd);
}

static attn_status log_softmax_fwd(attn_gc_problem *p, float *out) {
  kctx *c = p->ctx;
  return attn_log_softmax_f32(p->in[0].x, out, c->rows, c->n);
}
static attn_status log_softmax_bwd(attn_gc_problem *p, const float *dout) {
  kctx *c = p->ctx;
  attn_status st = attn_log_softmax_f32(p->in[0].x, c->scratch, c->rows, c->n);
  if (st != ATTN_OK) return st;
  return attn_log_softmax_backward_f32(c->scratch, dout, attn_gc_grad(p, 0), c->rows, c->n);
}
static attn_status setup_log_softmax(attn_gc_problem *p) {
  return setup_rows(p, 3, 7, -3.0f, 3.0f, log_softmax_fwd, log_softmax_bwd);
}

/* ---- LayerNorm: inputs x [rows, n] and, when affine, weight [n], bias [n] -------- */

static attn_status layernorm_fwd(attn_gc_problem *p, float *out) {
  kctx *c = p->ctx;
  const float *w = p->ninputs > 1 ? p->in[1].x : NULL, *b = p->ninputs > 2 ? p->in[2].x : NULL;
  return attn_layernorm_f32(p->in[0].x, w, b, out, c->mean, c->rstd, c->rows, c->n, 1e-5f);
}
static attn_status layernorm_bwd(attn_gc_problem *p, const float *dout) {
  kctx *c = p->ctx;
  int affine = p->ninputs > 1;
  attn_status st = layernorm_fwd(p, c->scratch);
  if (st != ATTN_OK) return st;
  if (affine) { /* dweight/dbias accumulate */
    memset(attn_gc_grad(p, 1), 0, (size_t)c->n * sizeof(float));
    memset(attn_gc_grad(p, 2), 0, (size_t)c->n * sizeof(float));
  }
  return attn_layernorm_backward_f32(p->in[0].x, affine ? p->in[1].x : NULL, c->mean, c->rstd,
                                     dout, attn_gc_grad(p, 0), affine ? attn_gc_grad(p, 1) : NULL,
                                     affine ? attn_gc_grad(p, 2) : NULL, c->rows, c->n);
}
static attn_status setup_layernorm_common(attn_gc_problem *p, int64_t rows, int64_t n,
                                          int affine) {
  attn_status st = setup_rows(p, rows, n, -2.0f, 2.0f, layernorm_fwd, layernorm_bwd);
  if (st != ATTN_OK || !affine) return st;
  float *w, *b;
  st = attn_gc_input(p, "weight", n, &w);
  if (st == ATTN_OK) st = attn_gc_input(p, "bias", n, &b);
  if (st != ATTN_OK) return st;
  attn_gc_fill_uniform(w, n, p->seed + 1, 0.5f, 1.5f);
  attn_gc_fill_uniform(b, n, p->seed + 2, -1.0f, 1.0f);
  return ATTN_OK;
}
static attn_status setup_layernorm_affine(attn_gc_problem *p) {
  return setup_layernorm_common(p, 3, 17, 1);
}
static attn_status setup_layernorm_plain(attn_gc_problem *p) {
  return setup_layernorm_common(p, 4, 9, 0);
}

/* ---- ReLU (inputs kept 0.1 away from the kink), GELU ------------------------------ */

static attn_status relu_fwd(attn_gc_problem *p, float *out) {
  return attn_relu_f32(p->in[0].x, out, p->in[0].n);
}
static attn_status relu_bwd(attn_gc_problem *p, const float *dout) {
  return attn_relu_backward_f32(p->in[0].x, dout, attn_gc_grad(p, 0), p->in[0].n);
}
static attn_status setup_relu(attn_gc_problem *p) {
  attn_status st = setup_rows(p, 1, 60, 0.1f, 2.0f, relu_fwd, relu_bwd);
  if (st != ATTN_OK) return st;
  for (int64_t i = 0; i < p->in[0].n; i += 2) p->in[0].x[i] = -p->in[0].x[i];
  return ATTN_OK;
}

static attn_status gelu_fwd(attn_gc_problem *p, float *out) {
  return attn_gelu_f32(p->in[0].x, out, p->in[0].n);
}
static attn_status gelu_bwd(attn_gc_problem *p, const float *dout) {
  return attn_gelu_backward_f32(p->in[0].x, dout, attn_gc_grad(p, 0), p->in[0].n);
}
static attn_status setup_gelu(attn_gc_problem *p) {
  return setup_rows(p, 1, 60, -5.0f, 5.0f, gelu_fwd, gelu_bwd);
}

/* ---- dropout: fixed seed, so a linear map of x ----------------------------------- */

static attn_status dropout_fwd(attn_gc_problem *p, float *out) {
  kctx *c = p->ctx;
  return attn_dropout_f32(p->in[0].x, out, c->mask, p->in[0].n, c->p, 99, 7);
}
static attn_status dropout_bwd(attn_gc_problem *p, const float *dout) {
  kctx *c = p->ctx;
  return attn_dropout_backward_f32(dout, c->mask, attn_gc_grad(p, 0), p->in[0].n, c->p);
}
static attn_status setup_dropout(attn_gc_problem *p) {
  attn_status st = setup_rows(p, 1, 64, -2.0f, 2.0f, dropout_fwd, dropout_bwd);
  if (st != ATTN_OK) return st;
  kctx *c = p->ctx;
  c->p = 0.3f;
  c->mask = attn_gc_alloc(p, 64);
  return c->mask ? ATTN_OK : ATTN_ENOMEM;
}

/* ---- embedding: input table [vocab, dim], fixed ids with repeats -------------------- */

static attn_status embedding_fwd(attn_gc_problem *p, float *out) {
  kctx *c = p->ctx; /* rows = number of ids, n = dim */
  return attn_embedding_f32(c->ids, c->rows, p->in[0].x, p->in[0].n / c->n, c->n, out);
}
static attn_status embedding_bwd(attn_gc_problem *p, const float *dout) {
  kctx *c = p->ctx;
  memset(attn_gc_grad(p, 0), 0, (size_t)p->in[0].n * sizeof(float)); /* accumulates */
  return attn_embedding_backward_f32(c->ids, c->rows, dout, p->in[0].n / c->n, c->n,
                                     attn_gc_grad(p, 0));
}
static attn_status setup_embedding(attn_gc_problem *p) {
  static const int32_t ids[10] = {2, 0, 2, 5, 1, 2, 0, 3, 5, 2};
  const int64_t vocab = 6, dim = 4;
  kctx *c = new_ctx(p, 10, dim);
  float *table;
  if (!c) return ATTN_ENOMEM;
  c->ids = attn_gc_alloc(p, sizeof ids);
  if (!c->ids) return ATTN_ENOMEM;
  memcpy(c->ids, ids, sizeof ids);
  attn_status st = attn_gc_input(p, "table", vocab * dim, &table);
  if (st != ATTN_OK) return st;
  attn_gc_fill_uniform(table, vocab * dim, p->seed, -1.0f, 1.0f);
  p->nout = 10 * dim;
  p->forward = embedding_fwd;
  p->backward = embedding_bwd;
  return ATTN_OK;
}

/* ---- cross-entropy: logits [rows, classes] -> the scalar mean loss ----------------- */

static attn_status cross_entropy_fwd(attn_gc_problem *p, float *out) {
  kctx *c = p->ctx;
  return attn_cross_entropy_f32(p->in[0].x, c->ids, c->rows, c->n, c->ignore, c->smoothing, out,
                                NULL);
}
static attn_status cross_entropy_bwd(attn_gc_problem *p, const float *dout) {
  kctx *c = p->ctx;
  float *g = attn_gc_grad(p, 0);
  attn_status st = attn_cross_entropy_f32(p->in[0].x, c->ids, c->rows, c->n, c->ignore,
                                          c->smoothing, NULL, g);
  for (int64_t i = 0; st == ATTN_OK && i < p->in[0].n; i++) g[i] *= dout[0];
  return st;
}
static attn_status setup_cross_entropy_common(attn_gc_problem *p, float smoothing) {
  static const int32_t targets[6] = {3, -100, 0, 6, 3, 1};
  attn_status st = setup_rows(p, 6, 7, -3.0f, 3.0f, cross_entropy_fwd, cross_entropy_bwd);
  if (st != ATTN_OK) return st;
  kctx *c = p->ctx;
  c->ids = attn_gc_alloc(p, sizeof targets);
  if (!c->ids) return ATTN_ENOMEM;
  memcpy(c->ids, targets, sizeof targets);
  c->ignore = -100;
  c->smoothing = smoothing;
  p->nout = 1;
  return ATTN_OK;
}
static attn_status setup_cross_entropy(attn_gc_problem *p) {
  return setup_cross_entropy_common(p, 0.0f);
}
static attn_status setup_cross_entropy_smooth(attn_gc_problem *p) {
  return setup_cross_entropy_common(p, 0.1f);
}

/* name, setup, h, atol, rtol, max_entries */
static const attn_gradcheck_case cases[] = {
    {"softmax", setup_softmax, 1e-2f, 1e-4, 1e-2, 0},
    {"log_softmax", setup_log_softmax, 1e-2f, 1e-4, 1e-2, 0},
    {"layernorm.affine", setup_layernorm_affine, 1e-2f, 2e-4, 1e-2, 0},
    {"layernorm.plain", setup_layernorm_plain, 1e-2f, 2e-4, 1e-2, 0},
    {"relu", setup_relu, 1e-2f, 1e-4, 1e-2, 0},
    {"gelu", setup_gelu, 1e-2f, 1e-4, 1e-2, 0},
    {"dropout", setup_dropout, 1e-2f, 1e-4, 1e-2, 0},
    {"embedding", setup_embedding, 1e-2f, 1e-4, 1e-2, 0},
    {"cross_entropy", setup_cross_entropy, 1e-2f, 1e-4, 1e-2, 0},
    {"cross_entropy.smooth", setup_cross_entropy_smooth, 1e-2f, 1e-4, 1e-2, 0},
};

int attn_gradcheck_kernel_cases(const attn_gradcheck_case **out) {
  *out = cases;
  return (int)(sizeof cases / sizeof cases[0]);
}
