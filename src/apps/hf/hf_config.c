/* config.json of a Hugging Face BERT / GPT-2 checkpoint -> attn_hf_config,
 * with the defaults of transformers' BertConfig and GPT2Config for absent
 * keys; options attn does not run are refused by name. Also the
 * --input-ids list parser. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "apps/hf/hf.h"
#include "io/json.h"

/* positive (or >= 0 with allow_zero) integer key, default def when absent
 * or null */
static attn_status get_int(const json_value *v, const char *key, int64_t def, int allow_zero,
                           int64_t *out) {
  const json_value *x = attn_json_get(v, key);
  *out = def;
  if (!x || x->type == JSON_NULL) return ATTN_OK;
  if (x->type != JSON_NUMBER || !x->is_uint || x->uint > (1ull << 40) ||
      (!allow_zero && x->uint == 0))
    return attn_set_error(ATTN_EFORMAT, "config.json: '%s' must be a %s integer", key,
                          allow_zero ? "non-negative" : "positive");
  *out = (int64_t)x->uint;
  return ATTN_OK;
}

static attn_status get_float(const json_value *v, const char *key, float def, float *out) {
  const json_value *x = attn_json_get(v, key);
  *out = def;
  if (!x || x->type == JSON_NULL) return ATTN_OK;
  if (x->type != JSON_NUMBER || !(x->number > 0.0))
    return attn_set_error(ATTN_EFORMAT, "config.json: '%s' must be a positive number", key);
  *out = (float)x->number;
  return ATTN_OK;
}

/* string key, def when absent */
static attn_status get_str(const json_value *v, const char *key, const char *def,
                           const char **out) {
  const json_value *x = attn_json_get(v, key);
  *out = def;
  if (!x || x->type == JSON_NULL) return ATTN_OK;
  if (x->type != JSON_STRING)
    return attn_set_error(ATTN_EFORMAT, "config.json: '%s' must be a string", key);
  *out = x->str;
  return ATTN_OK;
}

/* boolean key that must have the value want (or be absent) */
static attn_status require_bool(const json_value *v, const char *key, int want, int def,
                                int *out) {
  const json_value *x = attn_json_get(v, key);
  int val = def;
  if (x && x->type == JSON_BOOL) val = x->boolean;
  else if (x && x->type != JSON_NULL)
    return attn_set_error(ATTN_EFORMAT, "config.json: '%s' must be true or false", key);
  if (out) *out = val;
  if (want >= 0 && val != want)
    return attn_set_error(ATTN_EUNSUPPORTED, "config.json: %s = %s is not supported", key,
                          val ? "true" : "false");
  return ATTN_OK;
}

static attn_status activation(const char *key, const char *name, attn_activation *out) {
  if (!strcmp(name, "gelu")) *out = ATTN_ACT_GELU;
  else if (!strcmp(name, "gelu_new") || !strcmp(name, "gelu_pytorch_tanh")) *out = ATTN_ACT_GELU_TANH;
  else if (!strcmp(name, "relu")) *out = ATTN_ACT_RELU;
  else
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "config.json: %s '%.40s' is not supported (gelu, gelu_new, "
                          "gelu_pytorch_tanh, relu)", key, name);
  return ATTN_OK;
}

static attn_status parse_bert(const json_value *v, attn_hf_config *c) {
  const char *act, *pos;
  c->arch = ATTN_HF_BERT;
  attn_status st = get_int(v, "vocab_size", 30522, 0, &c->vocab_size);
  if (!st) st = get_int(v, "hidden_size", 768, 0, &c->hidden_size);
  if (!st) st = get_int(v, "num_hidden_layers", 12, 1, &c->num_layers);
  if (!st) st = get_int(v, "num_attention_heads", 12, 0, &c->num_heads);
  if (!st) st = get_int(v, "intermediate_size", 3072, 0, &c->intermediate_size);
  if (!st) st = get_int(v, "max_position_embeddings", 512, 0, &c->max_positions);
  if (!st) st = get_int(v, "type_vocab_size", 2, 1, &c->type_vocab_size);
  if (!st) st = get_float(v, "layer_norm_eps", 1e-12f, &c->layer_norm_eps);
  if (!st) st = get_str(v, "hidden_act", "gelu", &act);
  if (!st) st = activation("hidden_act", act, &c->activation);
  if (!st) st = get_str(v, "position_embedding_type", "absolute", &pos);
  if (!st && strcmp(pos, "absolute"))
    st = attn_set_error(ATTN_EUNSUPPORTED,
                        "config.json: position_embedding_type '%.40s' is not supported "
                        "(absolute only)", pos);
  if (!st) st = require_bool(v, "is_decoder", 0, 0, NULL);
  if (!st) st = require_bool(v, "add_cross_attention", 0, 0, NULL);
  return st;
}

static attn_status parse_gpt2(const json_value *v, attn_hf_config *c) {
  const char *act;
  int tie = 1;
  c->arch = ATTN_HF_GPT2;
  attn_status st = get_int(v, "vocab_size", 50257, 0, &c->vocab_size);
  if (!st) st = get_int(v, "n_embd", 768, 0, &c->hidden_size);
  if (!st) st = get_int(v, "n_layer", 12, 1, &c->num_layers);
  if (!st) st = get_int(v, "n_head", 12, 0, &c->num_heads);
  if (!st) st = get_int(v, "n_inner", 4 * c->hidden_size, 0, &c->intermediate_size);
  if (!st) st = get_int(v, "n_positions", 1024, 0, &c->max_positions);
  if (!st) st = get_float(v, "layer_norm_epsilon", 1e-5f, &c->layer_norm_eps);
  if (!st) st = get_str(v, "activation_function", "gelu_new", &act);
  if (!st) st = activation("activation_function", act, &c->activation);
  if (!st) st = require_bool(v, "scale_attn_weights", 1, 1, NULL);
  if (!st) st = require_bool(v, "scale_attn_by_inverse_layer_idx", 0, 0, NULL);
  if (!st) st = require_bool(v, "add_cross_attention", 0, 0, NULL);
  if (!st) st = require_bool(v, "tie_word_embeddings", -1, 1, &tie);
  c->untied_lm_head = !tie;
  c->type_vocab_size = 0;
  return st;
}

attn_status attn_hf_config_parse(const char *json, size_t len, attn_hf_config *c) {
  if (!json || !c) return attn_set_error(ATTN_EINVAL, "hf config: NULL argument");
  memset(c, 0, sizeof *c);
  json_value *v = NULL;
  char err[160];
  if (attn_json_parse_limited(json, len, 100000, &v, err, sizeof err))
    return attn_set_error(ATTN_EFORMAT, "config.json: %s", err);
  attn_status st = ATTN_OK;
  const char *type = NULL;
  if (v->type != JSON_OBJECT)
    st = attn_set_error(ATTN_EFORMAT, "config.json: not a JSON object");
  if (!st) st = get_str(v, "model_type", NULL, &type);
  if (!st && !type)
    st = attn_set_error(ATTN_EFORMAT, "config.json: no model_type (bert or gpt2 expected)");
  if (!st) {
    if (!strcmp(type, "bert")) st = parse_bert(v, c);
    else if (!strcmp(type, "gpt2")) st = parse_gpt2(v, c);
    else
      st = attn_set_error(ATTN_EUNSUPPORTED,
                          "config.json: model_type '%.60s' is not supported (attn hf runs "
                          "bert and gpt2)", type);
  }
  if (!st && c->hidden_size % c->num_heads)
    st = attn_set_error(ATTN_EFORMAT, "config.json: hidden size %lld is not a multiple of %lld "
                        "heads", (long long)c->hidden_size, (long long)c->num_heads);
  attn_json_free(v);
  return st;
}

attn_status attn_hf_special_ids(const char *json, size_t len, const attn_hf_config *c, int64_t *bos,
                                int64_t *eos) {
  if (!json || !c || !bos || !eos) return attn_set_error(ATTN_EINVAL, "hf config: NULL argument");
  const int64_t def = c->arch == ATTN_HF_GPT2 ? 50256 : -1;
  *bos = *eos = def;
  json_value *v = NULL;
  char err[160];
  if (attn_json_parse_limited(json, len, 100000, &v, err, sizeof err))
    return attn_set_error(ATTN_EFORMAT, "config.json: %s", err);
  static const char *const keys[2] = {"bos_token_id", "eos_token_id"};
  int64_t *dst[2] = {bos, eos};
  attn_status st = ATTN_OK;
  for (int i = 0; i < 2 && !st; i++) {
    const json_value *x = attn_json_get(v, keys[i]);
    if (!x) continue;
    if (x->type == JSON_NULL)
      *dst[i] = -1;
    else if (x->type == JSON_NUMBER && x->is_uint && x->uint < (uint64_t)c->vocab_size)
      *dst[i] = (int64_t)x->uint;
    else
      st = attn_set_error(ATTN_EFORMAT, "config.json: %s is not a token id below vocab_size %lld",
                          keys[i], (long long)c->vocab_size);
  }
  if (!st && (*bos >= c->vocab_size || *eos >= c->vocab_size)) *bos = *eos = -1;
  attn_json_free(v);
  return st;
}

attn_status attn_hf_parse_ids(const char *s, int32_t **ids, int64_t *n) {
  if (!s || !ids || !n) return attn_set_error(ATTN_EINVAL, "input ids: NULL argument");
  *ids = NULL;
  *n = 0;
  int64_t cap = 1;
  for (const char *q = s; *q; q++) cap += *q == ',';
  int32_t *out = malloc((size_t)cap * sizeof *out);
  if (!out) return attn_set_error(ATTN_ENOMEM, "input ids: out of memory");
  int64_t k = 0;
  const char *q = s;
  for (;;) {
    char *end;
    errno = 0;
    long long x = strtoll(q, &end, 10);
    if (end == q || errno || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
      free(out);
      return attn_set_error(ATTN_EINVAL, "input ids: item %lld ('%.20s') is not a non-negative "
                            "integer", (long long)k + 1, q);
    }
    out[k++] = (int32_t)x;
    if (!*end) break;
    q = end + 1;
  }
  *ids = out;
  *n = k;
  return ATTN_OK;
}
