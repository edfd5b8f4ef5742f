/* Hugging Face BERT / GPT-2 forward from attn's modules (include/attn/nn_hf.h):
 * embeddings, N TransformerEncoderLayers (post-norm for BERT, pre-norm and
 * causal for GPT-2), BERT's pooler, GPT-2's final LayerNorm and LM head. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/nn_hf.h"
#include "nn/nn_internal.h"

static attn_status check_config(const attn_hf_config *c) {
  if (!c || (c->arch != ATTN_HF_BERT && c->arch != ATTN_HF_GPT2))
    return attn_set_error(ATTN_EINVAL, "hf model: unknown architecture");
  if (c->vocab_size <= 0 || c->hidden_size <= 0 || c->num_layers < 0 || c->num_heads <= 0 ||
      c->intermediate_size <= 0 || c->max_positions <= 0 || c->type_vocab_size < 0 ||
      c->vocab_size > INT32_MAX || c->type_vocab_size > INT32_MAX)
    return attn_set_error(ATTN_EINVAL,
                          "hf model: vocab %lld, hidden %lld, heads %lld, intermediate %lld, "
                          "max positions %lld must be positive (layers %lld, token types %lld "
                          ">= 0)",
                          (long long)c->vocab_size, (long long)c->hidden_size,
                          (long long)c->num_heads, (long long)c->intermediate_size,
                          (long long)c->max_positions, (long long)c->num_layers,
                          (long long)c->type_vocab_size);
  if (c->hidden_size % c->num_heads)
    return attn_set_error(ATTN_EINVAL, "hf model: hidden size %lld is not a multiple of %lld heads",
                          (long long)c->hidden_size, (long long)c->num_heads);
  if (c->num_layers > 100000)
    return attn_set_error(ATTN_EINVAL, "hf model: %lld layers is absurd", (long long)c->num_layers);
  return ATTN_OK;
}

static attn_status declare_table(attn_params *p, const char *name, int64_t rows, int64_t cols,
                                 int *index) {
  int64_t shape[2] = {rows, cols};
  return attn_params_declare(p, name, 2, shape, index);
}

void attn_hf_model_free(attn_hf_model *m) {
  if (!m) return;
  free(m->layers);
  m->layers = NULL;
}

attn_status attn_hf_model_declare(attn_hf_model *m, attn_params *p, const attn_hf_config *c) {
  if (!m || !p) return attn_set_error(ATTN_EINVAL, "hf_model_declare: NULL argument");
  attn_status st = check_config(c);
  if (st) return st;
  memset(m, 0, sizeof *m);
  m->c = *c;
  m->token_type = m->lm_head = -1;
  int bert = c->arch == ATTN_HF_BERT;
  int64_t E = c->hidden_size;
  st = declare_table(p, "word_embeddings", c->vocab_size, E, &m->word);
  if (!st) st = declare_table(p, "position_embeddings", c->max_positions, E, &m->position);
  if (!st && bert && c->type_vocab_size > 0)
    st = declare_table(p, "token_type_embeddings", c->type_vocab_size, E, &m->token_type);
  if (!st && bert) st = attn_layernorm_declare(&m->norm, p, "embeddings_norm.", E, c->layer_norm_eps);
  if (st) return st;
  m->layers = calloc(c->num_layers ? (size_t)c->num_layers : 1, sizeof *m->layers);
  if (!m->layers) return attn_set_error(ATTN_ENOMEM, "hf model: out of memory");
  attn_layer_config lc;
  memset(&lc, 0, sizeof lc);
  lc.d_model = E;
  lc.nhead = c->num_heads;
  lc.dim_feedforward = c->intermediate_size;
  lc.activation = c->activation;
  lc.layer_norm_eps = c->layer_norm_eps;
  lc.norm_first = !bert;
  lc.bias = 1;
  for (int64_t i = 0; i < c->num_layers && !st; i++) {
    char prefix[ATTN_PARAM_NAME_MAX];
    snprintf(prefix, sizeof prefix, "layers.%lld.", (long long)i);
    st = attn_encoder_declare(&m->layers[i], p, prefix, &lc);
  }
  if (!st && !bert) st = attn_layernorm_declare(&m->norm, p, "final_norm.", E, c->layer_norm_eps);
  if (!st && bert && c->pooler) st = attn_linear_declare(&m->pooler, p, "pooler.", E, E, 1);
  if (!st && !bert && c->untied_lm_head)
    st = declare_table(p, "lm_head.weight", c->vocab_size, E, &m->lm_head);
  if (st) attn_hf_model_free(m);
  return st;
}

static attn_status check_ids(const attn_hf_model *m, const int32_t *ids, const int32_t *types,
                             int64_t B, int64_t L) {
  const attn_hf_config *c = &m->c;
  if (!ids) return attn_set_error(ATTN_EINVAL, "hf forward: ids is NULL");
  if (B <= 0 || L <= 0)
    return attn_set_error(ATTN_EINVAL, "hf forward: no input ids (batch %lld, length %lld)",
                          (long long)B, (long long)L);
  if (L > c->max_positions)
    return attn_set_error(ATTN_EINVAL,
                          "hf forward: sequence of %lld ids is longer than the model's %lld "
                          "positions (max_position_embeddings / n_positions)",
                          (long long)L, (long long)c->max_positions);
  for (int64_t i = 0; i < B * L; i++)
    if (ids[i] < 0 || ids[i] >= c->vocab_size)
      return attn_set_error(ATTN_EINVAL, "hf forward: input id %d at position %lld is outside the "
                            "vocabulary [0, %lld)", (int)ids[i], (long long)(i % L),
                            (long long)c->vocab_size);
  if (types && c->arch != ATTN_HF_BERT)
    return attn_set_error(ATTN_EINVAL, "hf forward: token type ids are BERT's, not GPT-2's");
  for (int64_t i = 0; types && i < B * L; i++)
    if (types[i] < 0 || types[i] >= c->type_vocab_size)
      return attn_set_error(ATTN_EINVAL, "hf forward: token type id %d at position %lld is "
                            "outside [0, %lld)", (int)types[i], (long long)(i % L),
                            (long long)c->type_vocab_size);
  return ATTN_OK;
}

/* x [B, L, E] = word[ids] + position[0..L) (+ token_type[types], type 0 when NULL) */
static attn_status embed(const attn_hf_model *m, const attn_params *p, const int32_t *ids,
                         const int32_t *types, int64_t B, int64_t L, float *x) {
  int64_t E = m->c.hidden_size;
  attn_status st = attn_embedding_f32(ids, B * L, attn_params_data(p, m->word), m->c.vocab_size,
                                      E, x);
  if (st) return st;
  const float *pos = attn_params_data(p, m->position);
  const float *tt = m->token_type >= 0 ? attn_params_data(p, m->token_type) : NULL;
  for (int64_t b = 0; b < B; b++)
    for (int64_t l = 0; l < L; l++) {
      float *row = x + (b * L + l) * E;
      const float *pr = pos + l * E;
      for (int64_t e = 0; e < E; e++) row[e] += pr[e];
      if (tt) {
        const float *tr = tt + (int64_t)(types ? types[b * L + l] : 0) * E;
        for (int64_t e = 0; e < E; e++) row[e] += tr[e];
      }
    }
  return ATTN_OK;
}

static attn_status norm_rows(const attn_layernorm *ln, const attn_params *p, const float *x,
                             float *y, int64_t rows) {
  float *stats = attn_nn_scratch(2 * rows);
  if (!stats) return ATTN_ENOMEM;
  attn_status st = attn_layernorm_forward(ln, p, x, y, stats, stats + rows, rows);
  free(stats);
  return st;
}

/* pooled [B, E] = tanh(W x[b, 0] + b) */
static attn_status pool(const attn_hf_model *m, const attn_params *p, const float *x, int64_t B,
                        int64_t L, float *pooled) {
  int64_t E = m->c.hidden_size;
  float *first = attn_nn_scratch(B * E);
  if (!first) return ATTN_ENOMEM;
  for (int64_t b = 0; b < B; b++) memcpy(first + b * E, x + b * L * E, (size_t)E * sizeof(float));
  attn_status st = attn_linear_forward(&m->pooler, p, first, pooled, B);
  for (int64_t i = 0; !st && i < B * E; i++) pooled[i] = tanhf(pooled[i]);
  free(first);
  return st;
}

attn_status attn_hf_model_forward(const attn_hf_model *m, const attn_params *p,
                                  const attn_nn_ctx *ctx, const int32_t *ids,
                                  const int32_t *token_types, int64_t B, int64_t L, int n_layers,
                                  float *hidden, float *pooled, float *logits) {
  if (!m || !p || !p->data || !m->layers)
    return attn_set_error(ATTN_EINVAL, "hf forward: NULL model or parameters not allocated");
  attn_status st = check_ids(m, ids, token_types, B, L);
  if (st) return st;
  const attn_hf_config *c = &m->c;
  if (n_layers < 0 || n_layers > c->num_layers) n_layers = (int)c->num_layers;
  int bert = c->arch == ATTN_HF_BERT;
  static const attn_nn_ctx zero_ctx;
  attn_nn_ctx run = ctx ? *ctx : zero_ctx;
  run.training = 0;
  int64_t rows = B * L, E = c->hidden_size;
  float *x = attn_nn_scratch(rows * E), *y = attn_nn_scratch(rows * E);
  attn_encoder_saved s;
  memset(&s, 0, sizeof s);
  attn_mha_masks causal;
  memset(&causal, 0, sizeof causal);
  causal.causal = 1;
  st = (!x || !y) ? attn_set_error(ATTN_ENOMEM, "hf forward: out of memory") : ATTN_OK;
  if (!st) st = embed(m, p, ids, token_types, B, L, bert ? y : x);
  if (!st && bert) st = norm_rows(&m->norm, p, y, x, rows);
  for (int i = 0; i < n_layers && !st; i++) {
    st = attn_encoder_forward(&m->layers[i], p, &run, &s, x, B, L, bert ? NULL : &causal, y);
    float *t = x;
    x = y;
    y = t;
  }
  attn_encoder_saved_free(&s);
  if (!st && !bert) {
    st = norm_rows(&m->norm, p, x, y, rows);
    float *t = x;
    x = y;
    y = t;
  }
  if (!st && hidden) memcpy(hidden, x, (size_t)(rows * E) * sizeof(float));
  if (!st && bert && pooled && c->pooler) st = pool(m, p, x, B, L, pooled);
  if (!st && !bert && logits) {
    int head = m->lm_head >= 0 ? m->lm_head : m->word;
    st = attn_dense_forward_f32(x, attn_params_data(p, head), NULL, logits, rows, E, c->vocab_size);
  }
  free(x);
  free(y);
  return st;
}
