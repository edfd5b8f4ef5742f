/* Multi-head attention: declaration (PyTorch / seed parameter names) and
 * initialisation. The passes are in mha_forward.c / mha_backward.c. */
#include <math.h>
#include <string.h>

#include "nn/nn_internal.h"

void attn_mha_saved_free(attn_mha_saved *s) {
  if (!s) return;
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
}

static attn_status declare_torch(attn_mha *m, attn_params *p, const char *prefix) {
  int64_t E = m->c.embed_dim, Ekv = m->c.num_kv_heads * m->head_dim;
  char name[ATTN_PARAM_NAME_MAX];
  attn_status st = ATTN_OK;
  if (m->c.kdim == E && m->c.vdim == E && Ekv == E) {  // packed in_proj_weight [3E, E]
    int64_t sh[2] = {3 * E, E};
    st = attn_nn_name(name, prefix, "in_proj_weight");
    if (!st) st = attn_params_declare(p, name, 2, sh, &m->w[0]);
    m->w[1] = m->w[2] = m->w[0];
    for (int i = 0; i < 3; i++) m->wo[i] = i * E * E;
  } else {
    static const char *nm[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
    for (int i = 0; i < 3 && !st; i++) {
      int64_t sh[2] = {m->out[i], m->in[i]};
      st = attn_nn_name(name, prefix, nm[i]);
      if (!st) st = attn_params_declare(p, name, 2, sh, &m->w[i]);
    }
  }
  if (!st && m->c.bias) {
    int64_t n = E + 2 * Ekv;
    st = attn_nn_name(name, prefix, "in_proj_bias");
    if (!st) st = attn_params_declare(p, name, 1, &n, &m->b[0]);
    m->b[1] = m->b[2] = m->b[0];
    m->bo[0] = 0;
    m->bo[1] = E;
    m->bo[2] = E + Ekv;
  }
  if (!st) st = attn_nn_name(name, prefix, "out_proj.");
  if (!st) st = attn_linear_declare(&m->out_lin, p, name, E, E, m->c.bias);
  m->has_out = 1;
  static const char *bkv[2] = {"bias_k", "bias_v"};
  int64_t sh[3] = {1, 1, E};
  for (int i = 0; i < 2 && !st && m->c.add_bias_kv; i++) {
    st = attn_nn_name(name, prefix, bkv[i]);
    if (!st) st = attn_params_declare(p, name, 3, sh, &m->bias_kv[i]);
  }
  return st;
}

static attn_status declare_seed(attn_mha *m, attn_params *p, const char *prefix) {
  const char *nm[3] = {m->c.q_name ? m->c.q_name : "query", m->c.k_name ? m->c.k_name : "key",
                       m->c.v_name ? m->c.v_name : "value"};
  char name[ATTN_PARAM_NAME_MAX], sub[ATTN_PARAM_NAME_MAX];
  attn_status st = ATTN_OK;
  for (int i = 0; i < 3 && !st; i++) {
    attn_linear l;
    st = attn_nn_name(sub, nm[i], ".");
    if (!st) st = attn_nn_name(name, prefix, sub);
    if (!st) st = attn_linear_declare(&l, p, name, m->in[i], m->out[i], m->c.bias);
    m->w[i] = l.weight;
    m->b[i] = st ? -1 : l.bias;
  }
  m->has_out = m->c.out_proj;
  if (!st && m->has_out) {
    st = attn_nn_name(name, prefix, "fc_out.");
    if (!st) st = attn_linear_declare(&m->out_lin, p, name, m->c.embed_dim, m->c.embed_dim, 1);
  }
  return st;
}

attn_status attn_mha_declare(attn_mha *m, attn_params *p, const char *prefix,
                             const attn_mha_config *c) {
  if (!m || !p || !prefix || !c) return attn_set_error(ATTN_EINVAL, "mha_declare: NULL argument");
  memset(m, 0, sizeof *m);
  m->c = *c;
  int64_t E = c->embed_dim, H = c->num_heads;
  if (E <= 0 || H <= 0 || E % H)
    return attn_set_error(ATTN_EINVAL,
                          "mha '%s': embed_dim %lld must be a positive multiple of num_heads %lld",
                          prefix, (long long)E, (long long)H);
  if (c->kdim < 0 || c->vdim < 0 || !(c->dropout >= 0.0f && c->dropout < 1.0f) ||
      !(c->scale >= 0.0f) || c->style < ATTN_MHA_TORCH || c->style > ATTN_MHA_SEED_SHARED)
    return attn_set_error(ATTN_EINVAL, "mha '%s': bad kdim/vdim, dropout, scale or style",
                          prefix);
  if (!m->c.kdim) m->c.kdim = E;
  if (!m->c.vdim) m->c.vdim = E;
  if (c->style != ATTN_MHA_TORCH && (m->c.kdim != E || m->c.vdim != E))
    return attn_set_error(ATTN_EINVAL, "mha '%s': the seed styles need kdim = vdim = embed_dim",
                          prefix);
  m->head_dim = E / H;
  if (!m->c.num_kv_heads) m->c.num_kv_heads = H;
  if (m->c.num_kv_heads < 0 || H % m->c.num_kv_heads ||
      (m->c.num_kv_heads != H && c->style != ATTN_MHA_TORCH))
    return attn_set_error(ATTN_EINVAL,
                          "mha '%s': num_kv_heads %lld must divide num_heads %lld (TORCH style)",
                          prefix, (long long)c->num_kv_heads, (long long)H);
  if (c->style == ATTN_MHA_SEED_SHARED && m->c.scale == 0.0f)
    m->c.scale = (float)(1.0 / sqrt((double)E));
  int64_t din[3] = {E, m->c.kdim, m->c.vdim};
  for (int i = 0; i < 3; i++) {
    m->in[i] = c->style == ATTN_MHA_SEED_SHARED ? m->head_dim : din[i];
    m->out[i] = c->style == ATTN_MHA_SEED_SHARED ? m->head_dim
                : i                               ? m->c.num_kv_heads * m->head_dim
                                                  : E;
    m->b[i] = -1;
  }
  m->out_lin.weight = m->out_lin.bias = -1;
  m->bias_kv[0] = m->bias_kv[1] = -1;
  if ((c->add_bias_kv || c->add_zero_attn) &&
      (c->style != ATTN_MHA_TORCH || m->c.num_kv_heads != H))
    return attn_set_error(ATTN_EINVAL, "mha '%s': add_bias_kv / add_zero_attn need the TORCH style "
                          "without grouped key/value heads", prefix);
  m->site = attn_nn_hash(prefix, attn_nn_hash("mha", 0));
  return c->style == ATTN_MHA_TORCH ? declare_torch(m, p, prefix) : declare_seed(m, p, prefix);
}

attn_status attn_mha_init(const attn_mha *m, attn_params *p, attn_init kind, uint64_t seed) {
  if (!m || !p) return attn_set_error(ATTN_EINVAL, "mha_init: NULL argument");
  attn_status st = ATTN_OK;
  if (m->c.style == ATTN_MHA_TORCH) {
    int n = m->w[0] == m->w[1] ? 1 : 3;  // packed: one tensor
    for (int i = 0; i < n && !st; i++) st = attn_init_xavier(p, m->w[i], seed);
    if (!st && m->b[0] >= 0) st = attn_init_const(p, m->b[0], 0.0f);
    if (!st) st = attn_linear_init(&m->out_lin, p, kind, seed);
    if (!st && m->out_lin.bias >= 0) st = attn_init_const(p, m->out_lin.bias, 0.0f);
    /* torch: xavier_normal_ on [1, 1, E] (std 1/sqrt(E)); here the uniform
     * of that variance */
    for (int i = 0; i < 2 && !st && m->bias_kv[i] >= 0; i++)
      st = attn_init_uniform(p, m->bias_kv[i], sqrtf(3.0f / (float)m->c.embed_dim), seed);
    return st;
  }
  for (int i = 0; i < 3 && !st; i++) {
    attn_linear l = {m->in[i], m->out[i], m->w[i], m->b[i]};
    st = attn_linear_init(&l, p, kind, seed);
  }
  if (!st && m->has_out) st = attn_linear_init(&m->out_lin, p, kind, seed);
  return st;
}
