/* gradcheck cases for the nn modules: the gradient of L = sum(w * out) with
 * respect to the module inputs and to all of its parameters (one flat
 * "params" input: the attn_params buffer, checked at evenly spread entries).
 * Dropout cases run in training mode with a fixed seed, so the mask is the
 * same at every evaluation and the function is smooth. GELU everywhere
 * (ReLU's kink would trip the differences; ReLU is covered by the golden
 * tests). */
#include <string.h>

#include "apps/tools/gradcheck.h"
#include "attn/kernels.h"
#include "attn/nn.h"

typedef enum { M_LINEAR, M_LAYERNORM, M_MHA, M_ENCODER, M_DECODER, M_SEED } mkind;

typedef struct {
  mkind kind;
  attn_params prm;
  attn_linear lin;
  attn_layernorm ln;
  attn_mha mha;
  attn_encoder_layer enc;
  attn_decoder_layer dec;
  attn_seed_layer seed;
  attn_mha_saved ms;
  attn_encoder_saved es;
  attn_decoder_saved dsv;
  attn_seed_layer_saved ss;
  attn_nn_ctx ctx;
  attn_mha_masks m1, m2;
  int64_t B, L, Lk, E, in_f; /* in_f: Linear input features */
  int cross, pidx;
  float *mean, *rstd;
} mctx;

static void mcleanup(attn_gc_problem *p) {
  mctx *c = p->ctx;
  if (!c) return;
  attn_params_free(&c->prm);
  attn_mha_saved_free(&c->ms);
  attn_encoder_saved_free(&c->es);
  attn_decoder_saved_free(&c->dsv);
  attn_seed_layer_saved_free(&c->ss);
}

static attn_status mfwd(attn_gc_problem *p, float *out) {
  mctx *c = p->ctx;
  memcpy(c->prm.data, p->in[c->pidx].x, (size_t)c->prm.numel * sizeof(float));
  const float *x = p->in[0].x;
  switch (c->kind) {
  case M_LINEAR:
    return attn_linear_forward(&c->lin, &c->prm, x, out, c->B * c->L);
  case M_LAYERNORM:
    return attn_layernorm_forward(&c->ln, &c->prm, x, out, c->mean, c->rstd, c->B * c->L);
  case M_MHA:
    return attn_mha_forward(&c->mha, &c->prm, &c->ctx, &c->ms, x, c->cross ? p->in[1].x : NULL,
                            c->cross ? p->in[2].x : NULL, c->B, c->L, c->Lk, &c->m1, out, NULL, 0);
  case M_ENCODER:
    return attn_encoder_forward(&c->enc, &c->prm, &c->ctx, &c->es, x, c->B, c->L, &c->m1, out);
  case M_DECODER:
    return attn_decoder_forward(&c->dec, &c->prm, &c->ctx, &c->dsv, x, p->in[1].x, c->B, c->L,
                                c->Lk, &c->m1, &c->m2, out);
  case M_SEED:
    return attn_seed_layer_forward(&c->seed, &c->prm, &c->ctx, &c->ss, x, c->B, c->L, out);
  }
  return ATTN_EINVAL;
}

static attn_status mbwd(attn_gc_problem *p, const float *dout) {
  mctx *c = p->ctx;
  float *tmp = attn_gc_grad(p, c->pidx); /* scratch for the forward's output */
  attn_status st = p->nout <= p->in[c->pidx].n ? mfwd(p, tmp) : ATTN_EINVAL;
  if (st) return st;
  attn_params_zero_grad(&c->prm);
  for (int i = 0; i < p->ninputs; i++) memset(p->in[i].grad, 0, (size_t)p->in[i].n * sizeof(float));
  const float *x = p->in[0].x;
  float *dx = attn_gc_grad(p, 0);
  switch (c->kind) {
  case M_LINEAR:
    st = attn_linear_backward(&c->lin, &c->prm, x, dout, dx, c->B * c->L);
    break;
  case M_LAYERNORM:
    st = attn_layernorm_backward(&c->ln, &c->prm, x, c->mean, c->rstd, dout, dx, c->B * c->L);
    break;
  case M_MHA:
    st = attn_mha_backward(&c->mha, &c->prm, &c->ctx, &c->ms, x, c->cross ? p->in[1].x : NULL,
                           c->cross ? p->in[2].x : NULL, dout, dx,
                           c->cross ? attn_gc_grad(p, 1) : NULL,
                           c->cross ? attn_gc_grad(p, 2) : NULL);
    break;
  case M_ENCODER:
    st = attn_encoder_backward(&c->enc, &c->prm, &c->ctx, &c->es, x, dout, dx);
    break;
  case M_DECODER:
    st = attn_decoder_backward(&c->dec, &c->prm, &c->ctx, &c->dsv, x, p->in[1].x, dout, dx,
                               attn_gc_grad(p, 1));
    break;
  case M_SEED:
    st = attn_seed_layer_backward(&c->seed, &c->prm, &c->ctx, &c->ss, x, dout, dx);
    break;
  }
  if (!st) memcpy(attn_gc_grad(p, c->pidx), c->prm.grad, (size_t)c->prm.numel * sizeof(float));
  return st;
}

/* Allocates the declared parameters, initialises them (torch defaults plus a
 * little noise so biases and LayerNorm affines are not trivial) and exposes
 * them as the last input "params". */
static attn_status finish(attn_gc_problem *p, mctx *c, int64_t nout) {
  attn_status st = attn_params_alloc(&c->prm);
  if (st) return st;
  switch (c->kind) {
  case M_LINEAR: st = attn_linear_init(&c->lin, &c->prm, ATTN_INIT_TORCH, p->seed); break;
  case M_LAYERNORM: st = attn_layernorm_init(&c->ln, &c->prm); break;
  case M_MHA: st = attn_mha_init(&c->mha, &c->prm, ATTN_INIT_TORCH, p->seed); break;
  case M_ENCODER: st = attn_encoder_init(&c->enc, &c->prm, ATTN_INIT_TORCH, p->seed); break;
  case M_DECODER: st = attn_decoder_init(&c->dec, &c->prm, ATTN_INIT_TORCH, p->seed); break;
  case M_SEED: st = attn_seed_layer_init(&c->seed, &c->prm, ATTN_INIT_TORCH, p->seed); break;
  }
  if (st) return st;
  float *w;
  int64_t n = c->prm.numel > nout ? c->prm.numel : nout;  // grad doubles as forward scratch
  c->pidx = p->ninputs;
  st = attn_gc_input(p, "params", n, &w);
  if (st) return st;
  attn_gc_fill_uniform(w, c->prm.numel, p->seed + 99, -0.1f, 0.1f);
  for (int64_t i = 0; i < c->prm.numel; i++) w[i] += c->prm.data[i];
  p->nout = nout;
  p->forward = mfwd;
  p->backward = mbwd;
  return ATTN_OK;
}

static mctx *begin(attn_gc_problem *p, mkind kind, int64_t B, int64_t L, int64_t Lk, int64_t E) {
  mctx *c = attn_gc_alloc(p, sizeof *c);
  if (!c) return NULL;
  c->kind = kind;
  c->B = B;
  c->L = L;
  c->Lk = Lk;
  c->E = E;
  c->ctx.backend = ATTN_BACKEND_MATH;
  c->ctx.seed = 1234;
  attn_params_init(&c->prm);
  p->ctx = c;
  p->cleanup = mcleanup;
  return c;
}

static float *input(attn_gc_problem *p, const char *name, int64_t n, uint64_t salt) {
  float *x;
  if (attn_gc_input(p, name, n, &x)) return NULL;
  attn_gc_fill_uniform(x, n, p->seed + salt, -1.5f, 1.5f);
  return x;
}

static attn_status setup_linear(attn_gc_problem *p) {
  mctx *c = begin(p, M_LINEAR, 2, 3, 0, 5);
  if (!c || !input(p, "x", 2 * 3 * 6, 1)) return ATTN_ENOMEM;
  attn_status st = attn_linear_declare(&c->lin, &c->prm, "lin.", 6, 5, 1);
  return st ? st : finish(p, c, 2 * 3 * 5);
}

static attn_status setup_layernorm(attn_gc_problem *p) {
  mctx *c = begin(p, M_LAYERNORM, 2, 3, 0, 8);
  if (!c || !input(p, "x", 2 * 3 * 8, 1)) return ATTN_ENOMEM;
  c->mean = attn_gc_alloc(p, 6 * sizeof(float));
  c->rstd = attn_gc_alloc(p, 6 * sizeof(float));
  if (!c->mean || !c->rstd) return ATTN_ENOMEM;
  attn_status st = attn_layernorm_declare(&c->ln, &c->prm, "ln.", 8, 1e-5f);
  return st ? st : finish(p, c, 2 * 3 * 8);
}

/* bool key padding (batch 1's last key) + a bool attn_mask with ~1/4 blocked */
static attn_status bool_masks(attn_gc_problem *p, attn_mha_masks *m, int64_t B, int64_t L,
                              int64_t Lk) {
  uint8_t *kpm = attn_gc_alloc(p, (size_t)(B * Lk)), *am = attn_gc_alloc(p, (size_t)(L * Lk));
  if (!kpm || !am) return ATTN_ENOMEM;
  kpm[B * Lk - 1] = 1;
  for (int64_t i = 0; i < L * Lk; i++)
    am[i] = i % Lk != 0 && attn_rng_uniform(p->seed + 7, (uint64_t)i) < 0.25f;
  m->key_padding_bool = kpm;
  m->attn_bool = am;
  return ATTN_OK;
}

static attn_status setup_mha_heads(attn_gc_problem *p, int cross, float dropout,
                                   attn_mha_style style, int64_t heads, int64_t kv_heads) {
  const int64_t B = 2, L = 3, Lk = cross ? 4 : 3, E = 8;
  mctx *c = begin(p, M_MHA, B, L, Lk, E);
  if (!c || !input(p, "query", B * L * E, 1)) return ATTN_ENOMEM;
  attn_mha_config mc;
  memset(&mc, 0, sizeof mc);
  mc.embed_dim = E;
  mc.num_heads = heads;
  mc.num_kv_heads = kv_heads;
  mc.bias = style == ATTN_MHA_TORCH;
  mc.out_proj = 1;
  mc.dropout = dropout;
  mc.style = style;
  if (cross) {
    mc.kdim = 6;
    mc.vdim = 5;
    if (!input(p, "key", B * Lk * 6, 2) || !input(p, "value", B * Lk * 5, 3)) return ATTN_ENOMEM;
    c->cross = 1;
  }
  c->ctx.training = dropout > 0;
  attn_status st = bool_masks(p, &c->m1, B, L, Lk);
  if (!st) st = attn_mha_declare(&c->mha, &c->prm, "attn.", &mc);
  return st ? st : finish(p, c, B * L * E);
}
static attn_status setup_mha(attn_gc_problem *p, int cross, float dropout, attn_mha_style style) {
  return setup_mha_heads(p, cross, dropout, style, 2, 0);
}
/* grouped-query (4 query heads on 2 key/value heads) and multi-query with dropout */
static attn_status setup_mha_gqa(attn_gc_problem *p) {
  return setup_mha_heads(p, 1, 0, ATTN_MHA_TORCH, 4, 2);
}
static attn_status setup_mha_mqa_dropout(attn_gc_problem *p) {
  return setup_mha_heads(p, 0, 0.3f, ATTN_MHA_TORCH, 4, 1);
}
static attn_status setup_mha_self(attn_gc_problem *p) { return setup_mha(p, 0, 0, ATTN_MHA_TORCH); }
static attn_status setup_mha_cross(attn_gc_problem *p) { return setup_mha(p, 1, 0, ATTN_MHA_TORCH); }
static attn_status setup_mha_dropout(attn_gc_problem *p) {
  return setup_mha(p, 1, 0.3f, ATTN_MHA_TORCH);
}
static attn_status setup_mha_seed000(attn_gc_problem *p) {
  return setup_mha(p, 0, 0, ATTN_MHA_SEED_SHARED);
}

static attn_layer_config layer_cfg(int norm_first, float dropout) {
  attn_layer_config lc;
  memset(&lc, 0, sizeof lc);
  lc.d_model = 8;
  lc.nhead = 2;
  lc.dim_feedforward = 12;
  lc.dropout = dropout;
  lc.activation = ATTN_ACT_GELU;
  lc.layer_norm_eps = 1e-5f;
  lc.norm_first = norm_first;
  lc.bias = 1;
  return lc;
}

static attn_status setup_encoder(attn_gc_problem *p, int norm_first, float dropout) {
  const int64_t B = 2, L = 3, E = 8;
  mctx *c = begin(p, M_ENCODER, B, L, L, E);
  if (!c || !input(p, "src", B * L * E, 1)) return ATTN_ENOMEM;
  attn_layer_config lc = layer_cfg(norm_first, dropout);
  c->ctx.training = dropout > 0;
  attn_status st = bool_masks(p, &c->m1, B, L, L);
  if (!st) st = attn_encoder_declare(&c->enc, &c->prm, "enc.", &lc);
  return st ? st : finish(p, c, B * L * E);
}
static attn_status setup_encoder_post(attn_gc_problem *p) { return setup_encoder(p, 0, 0); }
static attn_status setup_encoder_pre_dropout(attn_gc_problem *p) {
  return setup_encoder(p, 1, 0.2f);
}

static attn_status setup_decoder(attn_gc_problem *p, int norm_first, float dropout) {
  const int64_t B = 2, L = 3, Lm = 4, E = 8;
  mctx *c = begin(p, M_DECODER, B, L, Lm, E);
  if (!c || !input(p, "tgt", B * L * E, 1) || !input(p, "memory", B * Lm * E, 2))
    return ATTN_ENOMEM;
  attn_layer_config lc = layer_cfg(norm_first, dropout);
  c->ctx.training = dropout > 0;
  c->m1.causal = 1;
  attn_status st = bool_masks(p, &c->m2, B, L, Lm);
  if (!st) st = attn_decoder_declare(&c->dec, &c->prm, "dec.", &lc);
  return st ? st : finish(p, c, B * L * E);
}
static attn_status setup_decoder_post(attn_gc_problem *p) { return setup_decoder(p, 0, 0); }
static attn_status setup_decoder_pre_dropout(attn_gc_problem *p) {
  return setup_decoder(p, 1, 0.2f);
}

static attn_status setup_seed004_mha(attn_gc_problem *p) {
  const int64_t B = 1, L = 4, E = 8;
  mctx *c = begin(p, M_SEED, B, L, L, E);
  if (!c || !input(p, "x", B * L * E, 1)) return ATTN_ENOMEM;
  attn_status st = attn_seed_layer_declare(&c->seed, &c->prm, "", E, 2, 0, 0);
  return st ? st : finish(p, c, B * L * E);
}

/* name, setup, h, atol, rtol, max_entries (per input) */
static const attn_gradcheck_case cases[] = {
    {"nn.linear", setup_linear, 1e-2f, 2e-4, 1e-2, 0},
    {"nn.layernorm", setup_layernorm, 1e-2f, 2e-4, 1e-2, 0},
    {"nn.mha.self_masks", setup_mha_self, 1e-2f, 2e-4, 1e-2, 32},
    {"nn.mha.cross_kvdim", setup_mha_cross, 1e-2f, 2e-4, 1e-2, 32},
    {"nn.mha.dropout", setup_mha_dropout, 1e-2f, 2e-4, 1e-2, 32},
    {"nn.mha.seed000", setup_mha_seed000, 1e-2f, 2e-4, 1e-2, 32},
    {"nn.mha.gqa", setup_mha_gqa, 1e-2f, 2e-4, 1e-2, 32},
    {"nn.mha.mqa_dropout", setup_mha_mqa_dropout, 1e-2f, 2e-4, 1e-2, 32},
    {"nn.encoder.post", setup_encoder_post, 1e-2f, 4e-4, 1e-2, 24},
    {"nn.encoder.pre_dropout", setup_encoder_pre_dropout, 1e-2f, 4e-4, 1e-2, 24},
    {"nn.decoder.post_masks", setup_decoder_post, 1e-2f, 4e-4, 1e-2, 24},
    {"nn.decoder.pre_dropout", setup_decoder_pre_dropout, 1e-2f, 4e-4, 1e-2, 24},
    {"nn.seed004.mha", setup_seed004_mha, 1e-2f, 4e-4, 1e-2, 24},
};

int attn_gradcheck_nn_cases(const attn_gradcheck_case **out) {
  *out = cases;
  return (int)(sizeof cases / sizeof cases[0]);
}
