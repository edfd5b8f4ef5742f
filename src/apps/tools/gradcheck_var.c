/* gradcheck cases for the attention variants: the SDPA with ALiBi, T5 bias
 * (gradient to the bias table), Shaw relative positions (gradients to both
 * tables), the block-sparse layout, q_offset and all of them together
 * (var.sdpa_*, and through the flash backend var.flash_*); the RoPE kernels (var.rope_*); the
 * projected-attention module with GQA + RoPE, its parameters included, and with a Shaw table taken
 * from a RelativePositionEmbedding (var.nn_*). */
#include <math.h>
#include <string.h>

#include "apps/tools/gradcheck.h"
#include "attn/kernels.h"
#include "attn/nn_variants.h"
#include "attn/sdpa.h"

/* ---- SDPA ------------------------------------------------------------------------ */
typedef struct {
  attn_sdpa_desc d;
  float *out, *lse;
  int rel, shk, shv;    /* input index of each table, -1 = none */
  int slopes;           /* input index of learnable ALiBi slopes, -1 = none */
  attn_backend backend; /* MATH (set by v_setup) or FLASH */
} vctx;

/* point the descriptor's tables at the (perturbed) inputs */
static void bind_tables(attn_gc_problem *p, vctx *c) {
  if (c->rel >= 0) c->d.rel_bias = p->in[c->rel].x;
  if (c->shk >= 0) c->d.shaw_k = p->in[c->shk].x;
  if (c->shv >= 0) c->d.shaw_v = p->in[c->shv].x;
  if (c->slopes >= 0) c->d.alibi_slopes = p->in[c->slopes].x;
}

static attn_status v_fwd(attn_gc_problem *p, float *out) {
  vctx *c = p->ctx;
  bind_tables(p, c);
  return attn_gc_sdpa_forward(p, &c->d, c->backend, out, c->lse);
}

static attn_status v_bwd(attn_gc_problem *p, const float *dout) {
  vctx *c = p->ctx;
  attn_status st = v_fwd(p, c->out);
  if (st) return st;
  c->d.rel_bias_grad = c->rel >= 0 ? attn_gc_grad(p, c->rel) : NULL;
  c->d.shaw_k_grad = c->shk >= 0 ? attn_gc_grad(p, c->shk) : NULL;
  c->d.shaw_v_grad = c->shv >= 0 ? attn_gc_grad(p, c->shv) : NULL;
  c->d.alibi_slopes_grad = c->slopes >= 0 ? attn_gc_grad(p, c->slopes) : NULL;
  return attn_gc_sdpa_backward(p, &c->d, c->backend, c->out, c->lse, dout);
}

static vctx *v_setup(attn_gc_problem *p, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk,
                     int64_t D, int64_t Dv) {
  vctx *c = attn_gc_alloc(p, sizeof *c);
  if (!c) return NULL;
  attn_sdpa_desc_init(&c->d, B, Hq, Hkv, Lq, Lk, D, Dv);
  c->rel = c->shk = c->shv = c->slopes = -1;
  c->backend = ATTN_BACKEND_MATH;
  const int64_t nq = B * Hq * Lq * D, nk = B * Hkv * Lk * D, nv = B * Hkv * Lk * Dv;
  float *q, *k, *v;
  if (attn_gc_input(p, "q", nq, &q) || attn_gc_input(p, "k", nk, &k) ||
      attn_gc_input(p, "v", nv, &v))
    return NULL;
  attn_gc_fill_uniform(q, nq, p->seed, -2.0f, 2.0f);
  attn_gc_fill_uniform(k, nk, p->seed + 1, -2.0f, 2.0f);
  attn_gc_fill_uniform(v, nv, p->seed + 2, -1.0f, 1.0f);
  c->out = attn_gc_alloc(p, (size_t)(B * Hq * Lq * Dv) * sizeof(float));
  c->lse = attn_gc_alloc(p, (size_t)(B * Hq * Lq) * sizeof(float));
  if (!c->out || !c->lse) return NULL;
  p->ctx = c;
  p->nout = B * Hq * Lq * Dv;
  p->forward = v_fwd;
  p->backward = v_bwd;
  return c;
}

/* a table input of n floats in [-1, 1); returns its index or -1 */
static int v_table(attn_gc_problem *p, const char *name, int64_t n, uint64_t seed) {
  float *x;
  if (attn_gc_input(p, name, n, &x)) return -1;
  attn_gc_fill_uniform(x, n, seed, -1.0f, 1.0f);
  return p->ninputs - 1;
}

static attn_status setup_alibi(attn_gc_problem *p) {
  vctx *c = v_setup(p, 1, 3, 1, 6, 6, 4, 4);
  float *sl = c ? attn_gc_alloc(p, 3 * sizeof(float)) : NULL;
  if (!sl) return ATTN_ENOMEM;
  attn_alibi_slopes(3, sl);
  c->d.alibi_slopes = sl;
  c->d.causal = 1;
  return ATTN_OK;
}

static attn_status t5_common(attn_gc_problem *p, int bidir) {
  vctx *c = v_setup(p, 1, 2, 1, 9, 9, 4, 4); /* one K/V task: light under ASan */
  if (!c) return ATTN_ENOMEM;
  c->d.rel_buckets = 8;
  c->d.rel_max_distance = 6;
  c->d.rel_bidirectional = bidir;
  c->d.causal = !bidir;
  if ((c->rel = v_table(p, "rel_bias", 2 * 8, p->seed + 5)) < 0) return ATTN_ENOMEM;
  bind_tables(p, c);
  return ATTN_OK;
}
static attn_status setup_t5_bidir(attn_gc_problem *p) { return t5_common(p, 1); }
static attn_status setup_t5_causal(attn_gc_problem *p) { return t5_common(p, 0); }

static attn_status setup_shaw(attn_gc_problem *p) {
  vctx *c = v_setup(p, 1, 2, 1, 5, 6, 4, 3);
  if (!c) return ATTN_ENOMEM;
  c->d.shaw_max = 3;
  if ((c->shk = v_table(p, "shaw_k", 5 * 4, p->seed + 6)) < 0 ||
      (c->shv = v_table(p, "shaw_v", 5 * 3, p->seed + 7)) < 0)
    return ATTN_ENOMEM;
  bind_tables(p, c);
  return ATTN_OK;
}

static attn_status setup_offset(attn_gc_problem *p) {
  vctx *c = v_setup(p, 1, 2, 1, 3, 7, 4, 4);
  if (!c) return ATTN_ENOMEM;
  c->d.causal = 1;
  c->d.q_offset = 4;
  c->d.shaw_max = 2;
  if ((c->shk = v_table(p, "shaw_k", 3 * 4, p->seed + 8)) < 0) return ATTN_ENOMEM;
  bind_tables(p, c);
  return ATTN_OK;
}

/* bottom-right alignment per batch element (one row sees no key), learnable
 * per-batch ALiBi slopes [B, Hq] */
static attn_status setup_aligned(attn_gc_problem *p) {
  vctx *c = v_setup(p, 2, 2, 1, 5, 4, 4, 4);
  int64_t *offs = c ? attn_gc_alloc(p, 2 * sizeof(int64_t)) : NULL;
  if (!offs) return ATTN_ENOMEM;
  offs[0] = -1, offs[1] = 2;
  c->d.causal = 1;
  c->d.q_offsets = offs;
  c->d.alibi_slopes_bstride = 2;
  if ((c->slopes = v_table(p, "alibi_slopes", 2 * 2, p->seed + 9)) < 0) return ATTN_ENOMEM;
  bind_tables(p, c);
  return ATTN_OK;
}

static attn_status setup_block(attn_gc_problem *p) {
  vctx *c = v_setup(p, 1, 2, 1, 8, 8, 4, 4);
  uint8_t *bm = c ? attn_gc_alloc(p, 16) : NULL;
  if (!bm) return ATTN_ENOMEM;
  attn_block_sparse_bigbird(bm, 4, 4, 0, 1, 1, p->seed, 0);
  c->d.block_mask = bm;
  c->d.block_size = 2;
  return ATTN_OK;
}

static attn_status setup_combo(attn_gc_problem *p) {
  vctx *c = v_setup(p, 1, 2, 1, 6, 8, 4, 4);
  float *sl = c ? attn_gc_alloc(p, 2 * sizeof(float)) : NULL;
  uint8_t *bm = sl ? attn_gc_alloc(p, 8) : NULL;
  if (!bm) return ATTN_ENOMEM;
  attn_alibi_slopes(2, sl);
  attn_block_sparse_bigbird(bm, 2, 2, 1, 0, 0, 0, 0);
  bm[1] = 0; /* query block 0 does not see key block 1 */
  c->d.alibi_slopes = sl;
  c->d.block_mask = bm;
  c->d.block_size = 4;
  c->d.window_left = 4;
  c->d.rel_buckets = 6;
  c->d.rel_max_distance = 5;
  c->d.shaw_max = 3;
  if ((c->rel = v_table(p, "rel_bias", 2 * 6, p->seed + 9)) < 0 ||
      (c->shk = v_table(p, "shaw_k", 5 * 4, p->seed + 10)) < 0 ||
      (c->shv = v_table(p, "shaw_v", 5 * 4, p->seed + 11)) < 0)
    return ATTN_ENOMEM;
  bind_tables(p, c);
  return ATTN_OK;
}

/* The same problems through the flash backend (schemes fused in its tiles). */
static attn_status flash(attn_gc_problem *p, attn_status (*setup)(attn_gc_problem *)) {
  attn_status st = setup(p);
  if (st == ATTN_OK) ((vctx *)p->ctx)->backend = ATTN_BACKEND_FLASH;
  return st;
}
static attn_status setup_flash_t5(attn_gc_problem *p) { return flash(p, setup_t5_bidir); }
static attn_status setup_flash_shaw(attn_gc_problem *p) { return flash(p, setup_shaw); }
static attn_status setup_flash_offset(attn_gc_problem *p) { return flash(p, setup_offset); }
static attn_status setup_flash_combo(attn_gc_problem *p) { return flash(p, setup_combo); }
static attn_status setup_flash_aligned(attn_gc_problem *p) { return flash(p, setup_aligned); }

/* ---- RoPE ------------------------------------------------------------------------- */
typedef struct {
  attn_rope_layout layout;
  int64_t rd; /* rotated dims (partial rotary: < RD) */
} rctx;
enum { RN = 2, RL = 3, RH = 2, RD = 6 };

static attn_status r_fwd(attn_gc_problem *p, float *out) {
  rctx *c = p->ctx;
  return attn_rope_partial_f32(p->in[0].x, out, RN, RL, RH, RD, c->rd, 100.0f, 2, c->layout);
}
static attn_status r_bwd(attn_gc_problem *p, const float *dout) {
  rctx *c = p->ctx;
  return attn_rope_partial_backward_f32(dout, attn_gc_grad(p, 0), RN, RL, RH, RD, c->rd, 100.0f, 2,
                                        c->layout);
}
static attn_status rope_common(attn_gc_problem *p, attn_rope_layout layout, int64_t rd) {
  rctx *c = attn_gc_alloc(p, sizeof *c);
  float *x;
  if (!c || attn_gc_input(p, "x", RN * RL * RH * RD, &x)) return ATTN_ENOMEM;
  attn_gc_fill_uniform(x, RN * RL * RH * RD, p->seed, -1.0f, 1.0f);
  c->layout = layout;
  c->rd = rd;
  p->ctx = c;
  p->nout = RN * RL * RH * RD;
  p->forward = r_fwd;
  p->backward = r_bwd;
  return ATTN_OK;
}
static attn_status setup_rope_interleaved(attn_gc_problem *p) {
  return rope_common(p, ATTN_ROPE_INTERLEAVED, RD);
}
static attn_status setup_rope_half(attn_gc_problem *p) { return rope_common(p, ATTN_ROPE_HALF, RD); }
static attn_status setup_rope_partial(attn_gc_problem *p) {
  return rope_common(p, ATTN_ROPE_HALF, 4);
}

/* ---- modules ---------------------------------------------------------------------
 * Inputs: x, then chosen parameters (copied into the module's attn_params
 * before each forward, their gradients read back after the backward). */
typedef struct {
  attn_params prm;
  attn_vattn m;
  attn_relpos rp; /* shaw table source, when use_rp */
  int use_rp;
  attn_vattn_saved s;
  int64_t B, L;
  int pidx[ATTN_GC_MAX_INPUTS]; /* param index of input i (i >= 1) */
} mctx;

static void m_cleanup(attn_gc_problem *p) {
  mctx *c = p->ctx;
  if (!c) return;
  attn_vattn_saved_free(&c->s);
  attn_params_free(&c->prm);
}

static void m_extra(mctx *c, attn_sdpa_desc *e) {
  attn_sdpa_desc_init(e, 1, 1, 1, 1, 1, 1, 1);
  if (!c->use_rp) return;
  e->shaw_k = attn_relpos_table(&c->rp, &c->prm);
  e->shaw_max = c->rp.max_len;
  e->shaw_k_grad = attn_params_grad(&c->prm, c->rp.weight);
}

static attn_status m_fwd(attn_gc_problem *p, float *out) {
  mctx *c = p->ctx;
  for (int i = 1; i < p->ninputs; i++)
    memcpy(attn_params_data(&c->prm, c->pidx[i]), p->in[i].x, (size_t)p->in[i].n * sizeof(float));
  attn_sdpa_desc e;
  m_extra(c, &e);
  attn_nn_ctx ctx = {.backend = ATTN_BACKEND_MATH};
  return attn_vattn_forward(&c->m, &c->prm, &ctx, &c->s, p->in[0].x, NULL, c->B, c->L, c->L, &e,
                            out);
}

static attn_status m_bwd(attn_gc_problem *p, const float *dout) {
  mctx *c = p->ctx;
  attn_status st = m_fwd(p, attn_gc_grad(p, 0)); /* out scratch: overwritten below */
  if (st) return st;
  attn_params_zero_grad(&c->prm);
  memset(attn_gc_grad(p, 0), 0, (size_t)p->in[0].n * sizeof(float));
  attn_sdpa_desc e;
  m_extra(c, &e);
  attn_nn_ctx ctx = {.backend = ATTN_BACKEND_MATH};
  st = attn_vattn_backward(&c->m, &c->prm, &ctx, &c->s, p->in[0].x, NULL, dout, &e,
                           attn_gc_grad(p, 0), NULL);
  for (int i = 1; st == ATTN_OK && i < p->ninputs; i++)
    memcpy(attn_gc_grad(p, i), attn_params_grad(&c->prm, c->pidx[i]),
           (size_t)p->in[i].n * sizeof(float));
  return st;
}

/* the module and its inputs: x and the named parameters */
static attn_status m_setup(attn_gc_problem *p, const attn_vattn_config *cfg, int use_rp,
                           const char *const *params, int np) {
  mctx *c = attn_gc_alloc(p, sizeof *c);
  if (!c) return ATTN_ENOMEM;
  attn_params_init(&c->prm);
  p->ctx = c;
  p->cleanup = m_cleanup;
  c->B = 1;
  c->L = 5;
  c->use_rp = use_rp;
  attn_status st = attn_vattn_declare(&c->m, &c->prm, "", cfg);
  if (!st && use_rp)
    st = attn_relpos_declare(&c->rp, &c->prm, "rel.", 3, cfg->embed_dim / cfg->num_heads);
  if (!st) st = attn_params_alloc(&c->prm);
  if (!st) st = attn_vattn_init(&c->m, &c->prm, ATTN_INIT_XAVIER, p->seed);
  if (!st && use_rp) st = attn_relpos_init(&c->rp, &c->prm, p->seed);
  if (st) return st;
  const int64_t E = cfg->embed_dim;
  float *x;
  if ((st = attn_gc_input(p, "x", c->B * c->L * E, &x))) return st;
  attn_gc_fill_uniform(x, c->B * c->L * E, p->seed + 1, -1.0f, 1.0f);
  for (int i = 0; i < np; i++) {
    int idx = attn_params_find(&c->prm, params[i]);
    if (idx < 0) return attn_set_error(ATTN_EINVAL, "gradcheck var: no parameter %s", params[i]);
    float *t;
    const int64_t n = c->prm.views[idx].numel;
    if ((st = attn_gc_input(p, params[i], n, &t))) return st;
    memcpy(t, attn_params_data(&c->prm, idx), (size_t)n * sizeof(float));
    c->pidx[p->ninputs - 1] = idx;
  }
  p->nout = c->B * c->L * E;
  p->forward = m_fwd;
  p->backward = m_bwd;
  return ATTN_OK;
}

static attn_status setup_nn_gqa(attn_gc_problem *p) {
  attn_vattn_config cfg;
  attn_gqa_attention_config(&cfg, 8, 4, 2, 100.0f);
  static const char *const params[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight",
                                       "o_proj.weight"};
  return m_setup(p, &cfg, 0, params, 4);
}

/* partial rotary: RoPE on 4 of the 8 dims of each head */
static attn_status setup_nn_gqa_partial_rotary(attn_gc_problem *p) {
  attn_vattn_config cfg;
  attn_gqa_attention_config(&cfg, 16, 2, 1, 100.0f);
  cfg.rope_dim = 4;
  static const char *const params[] = {"q_proj.weight", "k_proj.weight"};
  return m_setup(p, &cfg, 0, params, 2);
}

static attn_status setup_nn_shaw(attn_gc_problem *p) {
  attn_vattn_config cfg;
  attn_sparse_attention_config(&cfg, 8, 2, 4);
  cfg.num_kv_heads = 1; /* multi-query */
  static const char *const params[] = {"rel.embedding.weight", "key.bias", "query.weight"};
  return m_setup(p, &cfg, 1, params, 3);
}

/* name, setup, h, atol, rtol, max_entries */
static const attn_gradcheck_case cases[] = {
    {"var.sdpa_alibi", setup_alibi, 1e-2f, 2e-4, 1e-2, 0},
    {"var.sdpa_t5_bidir", setup_t5_bidir, 1e-2f, 2e-4, 1e-2, 0},
    {"var.sdpa_t5_causal", setup_t5_causal, 1e-2f, 2e-4, 1e-2, 0},
    {"var.sdpa_shaw", setup_shaw, 1e-2f, 2e-4, 1e-2, 0},
    {"var.sdpa_q_offset", setup_offset, 1e-2f, 2e-4, 1e-2, 0},
    {"var.sdpa_block", setup_block, 1e-2f, 2e-4, 1e-2, 0},
    {"var.sdpa_combo", setup_combo, 1e-2f, 2e-4, 1e-2, 0},
    {"var.flash_t5_bidir", setup_flash_t5, 1e-2f, 2e-4, 1e-2, 0},
    {"var.flash_shaw", setup_flash_shaw, 1e-2f, 2e-4, 1e-2, 0},
    {"var.flash_q_offset", setup_flash_offset, 1e-2f, 2e-4, 1e-2, 0},
    {"var.flash_combo", setup_flash_combo, 1e-2f, 2e-4, 1e-2, 0},
    {"var.sdpa_aligned_slopes", setup_aligned, 1e-2f, 2e-4, 1e-2, 0},
    {"var.flash_aligned_slopes", setup_flash_aligned, 1e-2f, 2e-4, 1e-2, 0},
    {"var.rope_interleaved", setup_rope_interleaved, 1e-2f, 1e-4, 1e-3, 0},
    {"var.rope_half", setup_rope_half, 1e-2f, 1e-4, 1e-3, 0},
    {"var.nn_gqa_rope", setup_nn_gqa, 1e-2f, 3e-4, 1e-2, 24},
    {"var.rope_partial", setup_rope_partial, 1e-2f, 1e-4, 1e-3, 0},
    {"var.nn_gqa_partial_rotary", setup_nn_gqa_partial_rotary, 1e-2f, 3e-4, 1e-2, 24},
    {"var.nn_shaw_relpos", setup_nn_shaw, 1e-2f, 3e-4, 1e-2, 24},
};

int attn_gradcheck_var_cases(const attn_gradcheck_case **out) {
  *out = cases;
  return (int)(sizeof cases / sizeof cases[0]);
}
