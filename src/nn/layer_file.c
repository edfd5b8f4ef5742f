/* Run a PyTorch-named layer from a set of named tensors: the `attn layer`
 * file format (see attn_layer_run_st in nn.h). One function per kind reads
 * sizes from the parameter shapes, declares the module under state_dict
 * names, loads it, reads the inputs under PyTorch's argument names, runs
 * forward (and backward with dout) and fills the output set. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse_bool.h"
#include "nn/nn_internal.h"

typedef struct {
  const char *kind;
  int64_t heads, kv_heads; /* kv_heads: mha only, 0 = heads */
  int norm_first, average, batch_first;
  int add_zero_attn; /* mha */
  attn_activation act;
  float eps;
} layer_meta;

typedef struct {
  const attn_st *in;
  attn_st *out;
  attn_params p;
  attn_nn_ctx ctx;
  const float *dout;
  const char *inputs[8]; /* input names this kind accepts */
  int ninputs;
} run_state;

static attn_status meta_int(const attn_st *in, const char *key, int64_t lo, int64_t hi,
                            int64_t def, int64_t *out) {
  const char *s = attn_st_meta(in, key);
  *out = def;
  if (!s) return ATTN_OK;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return attn_set_error(ATTN_EINVAL, "metadata '%s' = '%.60s': expected an integer in [%lld, %lld]",
                          key, s, (long long)lo, (long long)hi);
  *out = v;
  return ATTN_OK;
}

/* A boolean key (attn_parse_bool's spellings: PyTorch's True/False too). */
static attn_status meta_bool(const attn_st *in, const char *key, int def, int *out) {
  const char *s = attn_st_meta(in, key);
  *out = def;
  if (s && !attn_parse_bool(s, out))
    return attn_set_error(ATTN_EINVAL, "metadata '%s' = '%.60s': expected a boolean (%s)", key, s,
                          ATTN_BOOL_SPELLINGS);
  return ATTN_OK;
}

static attn_status read_meta(const attn_st *in, layer_meta *m) {
  static const char *known[] = {"kind", "num_heads", "norm_first", "activation", "layer_norm_eps",
                                "batch_first", "average_attn_weights", "format",
                                "num_kv_heads", "add_zero_attn"};
  for (int i = 0; i < attn_st_meta_count(in); i++) {
    const char *k = attn_st_meta_key(in, i);
    int ok = 0;
    for (size_t j = 0; j < sizeof known / sizeof known[0]; j++) ok |= !strcmp(k, known[j]);
    if (!ok) return attn_set_error(ATTN_EINVAL, "unknown metadata key '%.100s'", k);
  }
  m->kind = attn_st_meta(in, "kind");
  if (!m->kind) return attn_set_error(ATTN_EINVAL, "metadata 'kind' is missing (mha|encoder|decoder)");
  attn_status st = meta_int(in, "num_heads", 1, 1 << 20, 0, &m->heads);
  if (!st) st = meta_int(in, "num_kv_heads", 0, 1 << 20, 0, &m->kv_heads);
  if (!st) st = meta_bool(in, "norm_first", 0, &m->norm_first);
  if (!st) st = meta_bool(in, "average_attn_weights", 1, &m->average);
  if (!st) st = meta_bool(in, "batch_first", 1, &m->batch_first);
  if (!st) st = meta_bool(in, "add_zero_attn", 0, &m->add_zero_attn);
  if (st) return st;
  if (!m->batch_first && !strncmp(m->kind, "seed", 4))
    return attn_set_error(ATTN_EINVAL, "metadata 'batch_first' = '%.60s': the seed modules are "
                          "batch first (x [B, L, E])", attn_st_meta(in, "batch_first"));
  const char *a = attn_st_meta(in, "activation");
  m->act = ATTN_ACT_RELU;
  if (a && attn_activation_from_name(a, &m->act))
    return attn_set_error(ATTN_EINVAL, "metadata 'activation' = '%.60s': expected relu, gelu, gelu_tanh, "
                          "tanh, silu, swiglu or geglu", a);
  const char *e = attn_st_meta(in, "layer_norm_eps");
  m->eps = 1e-5f;
  if (e) {
    char *end;
    double d = strtod(e, &end);
    if (end == e || *end || !(d > 0.0) || !isfinite(d))
      return attn_set_error(ATTN_EINVAL, "metadata 'layer_norm_eps' = '%.60s': expected a number > 0", e);
    m->eps = (float)d;
  }
  return ATTN_OK;
}

/* A required/optional F32 tensor of rank ndim with shape (-1 = any). */
static attn_status f32_in(const run_state *r, const char *name, int ndim, const int64_t *shape,
                          int required, const attn_tensor **t) {
  return attn_st_expect(r->in, name, ATTN_F32, ndim, shape, required, t);
}

/* A mask: BOOL/U8 (nonzero = not allowed) or F32 (added), of one of two shapes. */
static attn_status mask_in(const run_state *r, const char *name, int64_t B, int64_t H, int64_t Lq,
                           int64_t Lk, int allow_3d, const uint8_t **b, const float **f,
                           int *per_head) {
  const attn_tensor *t = attn_st_get(r->in, name);
  *b = NULL;
  *f = NULL;
  if (per_head) *per_head = 0;
  if (!t) return ATTN_OK;
  if (t->dtype != ATTN_BOOL && t->dtype != ATTN_U8 && t->dtype != ATTN_F32)
    return attn_set_error(ATTN_EINVAL, "mask '%s' has dtype %s: expected BOOL (true = not allowed) or F32",
                          name, attn_dtype_name(t->dtype));
  int ok;
  if (!allow_3d) {  // key padding [B, Lk]
    ok = t->ndim == 2 && t->shape[0] == B && t->shape[1] == Lk;
  } else {
    ok = (t->ndim == 2 && t->shape[0] == Lq && t->shape[1] == Lk) ||
         (t->ndim == 3 && t->shape[0] == B * H && t->shape[1] == Lq && t->shape[2] == Lk);
    if (per_head) *per_head = t->ndim == 3;
  }
  if (!ok)
    return attn_set_error(ATTN_EINVAL, "mask '%s' has the wrong shape: expected %s", name,
                          allow_3d ? "[Lq, Lk] or [B*num_heads, Lq, Lk]" : "[B, Lk]");
  if (t->dtype == ATTN_F32)
    *f = t->data;
  else
    *b = t->data;
  return ATTN_OK;
}

static attn_status masks_in(const run_state *r, const char *attn_name, const char *kpm_name,
                            int64_t B, int64_t H, int64_t Lq, int64_t Lk, attn_mha_masks *mk) {
  memset(mk, 0, sizeof *mk);
  attn_status st = mask_in(r, attn_name, B, H, Lq, Lk, 1, &mk->attn_bool, &mk->attn_float,
                           &mk->attn_per_head);
  if (!st) st = mask_in(r, kpm_name, B, H, Lq, Lk, 0, &mk->key_padding_bool,
                        &mk->key_padding_float, NULL);
  return st;
}

/* Every tensor must be a parameter, an accepted input, dout, or an exported
 * reference output (out, attn_weights, grad.*), which is ignored. */
static attn_status check_names(const run_state *r) {
  for (int i = 0; i < attn_st_count(r->in); i++) {
    const char *n = attn_st_name(r->in, i);
    int ok = attn_params_find(&r->p, n) >= 0 || !strcmp(n, "dout") || !strcmp(n, "out") ||
             !strcmp(n, "attn_weights") || !strncmp(n, "grad.", 5);
    for (int j = 0; j < r->ninputs && !ok; j++) ok = !strcmp(n, r->inputs[j]);
    if (!ok)
      return attn_set_error(ATTN_EINVAL, "unexpected tensor '%.200s' (not a parameter or input of this kind)", n);
  }
  return ATTN_OK;
}

static attn_status load_params(run_state *r) {
  attn_status st = attn_params_alloc(&r->p);
  if (!st) st = check_names(r);
  if (!st) st = attn_params_load_st(&r->p, r->in, "", 0);
  return st;
}

static attn_status dout_in(run_state *r, const attn_tensor *like) {
  const attn_tensor *t;
  attn_status st = f32_in(r, "dout", like->ndim, like->shape, 0, &t);
  r->dout = t ? t->data : NULL;
  return st;
}

static attn_status add(run_state *r, const char *name, const attn_tensor *like, int64_t last,
                       const float *data) {
  int64_t sh[ATTN_MAX_DIMS];
  memcpy(sh, like->shape, sizeof sh);
  if (last > 0) sh[like->ndim - 1] = last;
  return attn_st_add_f32(r->out, name, like->ndim, sh, data);
}

static float *buf_like(const attn_tensor *t, int64_t last) {
  int64_t n = attn_tensor_numel(t);
  if (last > 0) n = n / t->shape[t->ndim - 1] * last;
  return attn_nn_scratch(n);
}

/* ---- mha: nn.MultiheadAttention ------------------------------------------ */
static attn_status run_mha(run_state *r, const layer_meta *lm) {
  const attn_tensor *ow, *qw = NULL, *kw = NULL, *vw = NULL, *q, *k, *v;
  attn_status st = f32_in(r, "out_proj.weight", 2, NULL, 1, &ow);
  if (st) return st;
  int64_t E = ow->shape[0], H = lm->heads;
  if (ow->shape[1] != E) return attn_set_error(ATTN_EINVAL, "tensor 'out_proj.weight' is not square");
  attn_mha_config c;
  memset(&c, 0, sizeof c);
  c.add_bias_kv = attn_st_get(r->in, "bias_k") || attn_st_get(r->in, "bias_v");
  c.add_zero_attn = lm->add_zero_attn;
  c.embed_dim = E;
  c.num_heads = H;
  c.num_kv_heads = lm->kv_heads; /* grouped-query attention (separate projections) */
  c.bias = attn_st_get(r->in, "in_proj_bias") != NULL;
  if (!attn_st_get(r->in, "in_proj_weight")) {
    int64_t s2[2] = {E, -1}, skv[2] = {-1, -1}; /* k/v rows: num_kv_heads * head_dim */
    st = f32_in(r, "q_proj_weight", 2, s2, 1, &qw);
    if (!st) st = f32_in(r, "k_proj_weight", 2, skv, 1, &kw);
    if (!st) st = f32_in(r, "v_proj_weight", 2, skv, 1, &vw);
    if (st) return st;
    c.kdim = kw->shape[1];
    c.vdim = vw->shape[1];
  }
  attn_mha m;
  if (H <= 0) return attn_set_error(ATTN_EINVAL, "metadata 'num_heads' is missing");
  st = attn_mha_declare(&m, &r->p, "", &c);
  if (!st) st = load_params(r);
  int64_t s3[3] = {-1, -1, E};
  if (!st) st = f32_in(r, "query", 3, s3, 1, &q);
  if (st) return st;
  int64_t B = q->shape[0], Lq = q->shape[1], kv[3] = {B, -1, m.c.kdim};
  st = f32_in(r, "key", 3, kv, 0, &k);
  kv[1] = k ? k->shape[1] : -1;
  kv[2] = m.c.vdim;
  if (!st) st = f32_in(r, "value", 3, kv, 0, &v);
  if (st) return st;
  if (!k != !v) return attn_set_error(ATTN_EINVAL, "tensors 'key' and 'value': give both or neither");
  if (!k && (m.c.kdim != E || m.c.vdim != E))
    return attn_set_error(ATTN_EINVAL, "tensor 'key' is missing (kdim/vdim differ from embed_dim)");
  int64_t Lk = k ? k->shape[1] : Lq;
  const attn_tensor *sk, *sv; /* torch's static_k / static_v [B*H, Ls, head_dim] */
  int64_t ss[3] = {B * H, -1, E / H};
  st = f32_in(r, "static_k", 3, ss, 0, &sk);
  if (!st && sk) ss[1] = sk->shape[1];
  if (!st) st = f32_in(r, "static_v", 3, ss, 0, &sv);
  if (st) return st;
  int64_t Ls = sk ? sk->shape[1] : sv ? sv->shape[1] : Lk; /* the keys the masks cover */
  int64_t Lkt = Ls + c.add_bias_kv + c.add_zero_attn;     /* every key row */
  attn_mha_masks mk;
  st = masks_in(r, "attn_mask", "key_padding_mask", B, H, Lq, Ls, &mk);
  if (!st) st = dout_in(r, q);
  if (st) return st;
  int64_t wn = B * (lm->average ? 1 : H) * Lq * Lkt;
  float *out = buf_like(q, 0), *w = attn_nn_scratch(wn), *dq = buf_like(q, 0);
  float *dk = k ? buf_like(k, 0) : NULL, *dv = v ? buf_like(v, 0) : NULL;
  float *dsk = sk ? buf_like(sk, 0) : NULL, *dsv = sv ? buf_like(sv, 0) : NULL;
  attn_mha_saved s = {0};
  st = (!out || !w || !dq || (k && (!dk || !dv)) || (sk && !dsk) || (sv && !dsv)) ? ATTN_ENOMEM
                                                                                 : ATTN_OK;
  if (!st)
    st = attn_mha_forward_static(&m, &r->p, &r->ctx, &s, q->data, k ? k->data : NULL,
                                 v ? v->data : NULL, sk ? sk->data : NULL, sv ? sv->data : NULL,
                                 Ls, B, Lq, Lk, &mk, out, w, lm->average);
  if (!st) st = add(r, "out", q, 0, out);
  if (!st) {
    int64_t ws[4] = {B, H, Lq, Lkt}, w3[3] = {B, Lq, Lkt};
    st = lm->average ? attn_st_add_f32(r->out, "attn_weights", 3, w3, w)
                     : attn_st_add_f32(r->out, "attn_weights", 4, ws, w);
  }
  if (!st && r->dout) {
    st = attn_mha_backward_static(&m, &r->p, &r->ctx, &s, q->data, k ? k->data : NULL,
                                  v ? v->data : NULL, r->dout, dq, dk, dv, dsk, dsv);
    if (!st) st = add(r, "grad.query", q, 0, dq);
    if (!st && k) st = add(r, "grad.key", k, 0, dk);
    if (!st && v) st = add(r, "grad.value", v, 0, dv);
    if (!st && sk) st = add(r, "grad.static_k", sk, 0, dsk);
    if (!st && sv) st = add(r, "grad.static_v", sv, 0, dsv);
  }
  attn_mha_saved_free(&s);
  free(out), free(w), free(dq), free(dk), free(dv), free(dsk), free(dsv);
  return st;
}

static attn_layer_config layer_cfg(const layer_meta *lm, int64_t E, int64_t FF) {
  attn_layer_config c;
  memset(&c, 0, sizeof c);
  c.d_model = E;
  c.nhead = lm->heads;
  c.dim_feedforward = FF;
  c.activation = lm->act;
  c.layer_norm_eps = lm->eps;
  c.norm_first = lm->norm_first;
  c.bias = 1;
  return c;
}

/* torch 2.1+ layers with bias=False have no bias tensors at all */
static void layer_bias(const run_state *r, attn_layer_config *c) {
  c->bias = attn_st_get(r->in, "self_attn.in_proj_bias") != NULL;
}

static attn_status layer_dims(run_state *r, const layer_meta *lm, int64_t *E, int64_t *FF) {
  const attn_tensor *ow, *l1;
  attn_status st = f32_in(r, "self_attn.out_proj.weight", 2, NULL, 1, &ow);
  if (!st) st = f32_in(r, "linear1.weight", 2, NULL, 1, &l1);
  if (st) return st;
  if (lm->heads <= 0) return attn_set_error(ATTN_EINVAL, "metadata 'num_heads' is missing");
  *E = ow->shape[0];
  *FF = l1->shape[0];
  return ATTN_OK;
}

/* ---- encoder: nn.TransformerEncoderLayer ---------------------------------- */
static attn_status run_encoder(run_state *r, const layer_meta *lm) {
  int64_t E, FF;
  attn_status st = layer_dims(r, lm, &E, &FF);
  if (st) return st;
  attn_layer_config c = layer_cfg(lm, E, FF);
  layer_bias(r, &c);
  attn_encoder_layer m;
  st = attn_encoder_declare(&m, &r->p, "", &c);
  if (!st) st = load_params(r);
  const attn_tensor *x;
  int64_t s3[3] = {-1, -1, E};
  if (!st) st = f32_in(r, "src", 3, s3, 1, &x);
  if (st) return st;
  int64_t B = x->shape[0], L = x->shape[1];
  attn_mha_masks mk;
  st = masks_in(r, "src_mask", "src_key_padding_mask", B, lm->heads, L, L, &mk);
  if (!st) st = dout_in(r, x);
  if (st) return st;
  float *out = buf_like(x, 0), *dx = buf_like(x, 0);
  attn_encoder_saved s = {0};
  st = (!out || !dx) ? ATTN_ENOMEM : ATTN_OK;
  if (!st) st = attn_encoder_forward(&m, &r->p, &r->ctx, &s, x->data, B, L, &mk, out);
  if (!st) st = add(r, "out", x, 0, out);
  if (!st && r->dout) {
    st = attn_encoder_backward(&m, &r->p, &r->ctx, &s, x->data, r->dout, dx);
    if (!st) st = add(r, "grad.src", x, 0, dx);
  }
  attn_encoder_saved_free(&s);
  free(out), free(dx);
  return st;
}

/* ---- decoder: nn.TransformerDecoderLayer ---------------------------------- */
static attn_status run_decoder(run_state *r, const layer_meta *lm) {
  int64_t E, FF;
  attn_status st = layer_dims(r, lm, &E, &FF);
  if (st) return st;
  attn_layer_config c = layer_cfg(lm, E, FF);
  layer_bias(r, &c);
  attn_decoder_layer m;
  st = attn_decoder_declare(&m, &r->p, "", &c);
  if (!st) st = load_params(r);
  const attn_tensor *x, *mem;
  int64_t s3[3] = {-1, -1, E};
  if (!st) st = f32_in(r, "tgt", 3, s3, 1, &x);
  if (!st) s3[0] = x->shape[0];
  if (!st) st = f32_in(r, "memory", 3, s3, 1, &mem);
  if (st) return st;
  int64_t B = x->shape[0], L = x->shape[1], Lm = mem->shape[1];
  attn_mha_masks tm, mm;
  st = masks_in(r, "tgt_mask", "tgt_key_padding_mask", B, lm->heads, L, L, &tm);
  if (!st) st = masks_in(r, "memory_mask", "memory_key_padding_mask", B, lm->heads, L, Lm, &mm);
  if (!st) st = dout_in(r, x);
  if (st) return st;
  float *out = buf_like(x, 0), *dx = buf_like(x, 0), *dm = buf_like(mem, 0);
  attn_decoder_saved s = {0};
  st = (!out || !dx || !dm) ? ATTN_ENOMEM : ATTN_OK;
  if (!st)
    st = attn_decoder_forward(&m, &r->p, &r->ctx, &s, x->data, mem->data, B, L, Lm, &tm, &mm, out);
  if (!st) st = add(r, "out", x, 0, out);
  if (!st && r->dout) {
    st = attn_decoder_backward(&m, &r->p, &r->ctx, &s, x->data, mem->data, r->dout, dx, dm);
    if (!st) st = add(r, "grad.tgt", x, 0, dx);
    if (!st) st = add(r, "grad.memory", mem, 0, dm);
  }
  attn_decoder_saved_free(&s);
  free(out), free(dx), free(dm);
  return st;
}

/* ---- the seeds' modules: input x [B, L, E] ---------------------------------- */
static attn_status run_seed(run_state *r, const layer_meta *lm) {
  const char *k = lm->kind;
  int layer = !strcmp(k, "seed004_mha") || !strcmp(k, "seed004_transformer");
  int has_ffn = !strcmp(k, "seed004_transformer");
  int s000 = !strncmp(k, "seed000", 7);
  const char *wname = layer ? (has_ffn ? "attention.fc_out.weight" : "fc_out.weight")
                      : !strcmp(k, "seed000_mha") ? "fc_out.weight"
                      : s000 ? "queries.weight" : "query.weight";
  const attn_tensor *w, *x, *f1 = NULL;
  attn_status st = f32_in(r, wname, 2, NULL, 1, &w);
  if (!st && has_ffn) st = f32_in(r, "ffn.fc1.weight", 2, NULL, 1, &f1);
  if (st) return st;
  int64_t E = w->shape[1], H = lm->heads ? lm->heads : 1;
  attn_mha mha;
  attn_seed_layer sl;
  if (layer) {
    st = attn_seed_layer_declare(&sl, &r->p, "", E, H, f1 ? f1->shape[0] : 1, has_ffn);
  } else {
    attn_mha_config c;
    memset(&c, 0, sizeof c);
    c.embed_dim = E;
    c.num_heads = strcmp(k, "seed000_mha") ? 1 : H;
    c.bias = !s000;
    c.out_proj = !strcmp(k, "seed000_mha");
    c.style = strcmp(k, "seed000_mha") ? ATTN_MHA_SEED_LINEAR : ATTN_MHA_SEED_SHARED;
    if (s000) {
      c.q_name = "queries";
      c.k_name = "keys";
      c.v_name = "values";
    }
    st = attn_mha_declare(&mha, &r->p, "", &c);
  }
  if (!st) st = load_params(r);
  int64_t s3[3] = {-1, -1, E};
  if (!st) st = f32_in(r, "x", 3, s3, 1, &x);
  if (!st) st = dout_in(r, x);
  if (st) return st;
  int64_t B = x->shape[0], L = x->shape[1];
  float *out = buf_like(x, 0), *dx = buf_like(x, 0);
  attn_seed_layer_saved ss = {0};
  attn_mha_saved ms = {0};
  st = (!out || !dx) ? ATTN_ENOMEM : ATTN_OK;
  if (!st)
    st = layer ? attn_seed_layer_forward(&sl, &r->p, &r->ctx, &ss, x->data, B, L, out)
               : attn_mha_forward(&mha, &r->p, &r->ctx, &ms, x->data, NULL, NULL, B, L, L, NULL,
                                  out, NULL, 0);
  if (!st) st = add(r, "out", x, 0, out);
  if (!st && r->dout) {
    st = layer ? attn_seed_layer_backward(&sl, &r->p, &r->ctx, &ss, x->data, r->dout, dx)
               : attn_mha_backward(&mha, &r->p, &r->ctx, &ms, x->data, NULL, NULL, r->dout, dx,
                                   NULL, NULL);
    if (!st) st = add(r, "grad.x", x, 0, dx);
  }
  attn_seed_layer_saved_free(&ss);
  attn_mha_saved_free(&ms);
  free(out), free(dx);
  return st;
}

static attn_status run_kind(const attn_st *in, const layer_meta *lm, attn_backend backend,
                            attn_st **out);

/* F16 / BF16 widened and sequence-first tensors transposed around the run
 * (layer_file_prep.c) */
attn_status attn_layer_run_st(const attn_st *in, attn_backend backend, attn_st **out) {
  if (!in || !out) return attn_set_error(ATTN_EINVAL, "layer_run_st: NULL argument");
  *out = NULL;
  layer_meta lm;
  attn_status st = read_meta(in, &lm);
  if (st) return st;
  if (!attn_nn_layer_needs_prep(in, lm.batch_first)) return run_kind(in, &lm, backend, out);
  attn_st *wide = NULL;
  st = attn_nn_layer_prep_in(in, lm.batch_first, &wide);
  if (!st) st = run_kind(wide, &lm, backend, out);
  if (!st && !lm.batch_first) st = attn_nn_layer_prep_out(*out);
  attn_st_free(wide);
  if (st) {
    attn_st_free(*out);
    *out = NULL;
  }
  return st;
}

static attn_status run_kind(const attn_st *in, const layer_meta *lm_in, attn_backend backend,
                            attn_st **out) {
  layer_meta lm = *lm_in;
  attn_status st;
  static const struct {
    const char *kind;
    attn_status (*fn)(run_state *, const layer_meta *);
    const char *inputs[8];
  } kinds[] = {
      {"mha", run_mha,
       {"query", "key", "value", "key_padding_mask", "attn_mask", "static_k", "static_v"}},
      {"encoder", run_encoder, {"src", "src_mask", "src_key_padding_mask"}},
      {"decoder", run_decoder,
       {"tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask",
        "memory_key_padding_mask"}},
      {"seed000_self_attention", run_seed, {"x"}},
      {"seed000_mha", run_seed, {"x"}},
      {"seed004_self_attention", run_seed, {"x"}},
      {"seed004_mha", run_seed, {"x"}},
      {"seed004_transformer", run_seed, {"x"}},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    if (strcmp(lm.kind, kinds[i].kind)) continue;
    run_state r;
    memset(&r, 0, sizeof r);
    r.in = in;
    r.ctx.backend = backend;
    for (int j = 0; j < 8 && kinds[i].inputs[j]; j++) r.inputs[r.ninputs++] = kinds[i].inputs[j];
    attn_params_init(&r.p);
    st = attn_st_new(&r.out);
    if (!st) st = kinds[i].fn(&r, &lm);
    if (!st && r.dout) st = attn_params_store_st(&r.p, r.out, 1, "grad.");
    attn_params_free(&r.p);
    if (st) {
      attn_st_free(r.out);
      return st;
    }
    *out = r.out;
    return ATTN_OK;
  }
  return attn_set_error(ATTN_EINVAL,
                        "metadata 'kind' = '%.60s': expected mha, encoder, decoder or a seed kind "
                        "(seed000_self_attention, seed000_mha, seed004_self_attention, "
                        "seed004_mha, seed004_transformer)",
                        lm.kind);
}
