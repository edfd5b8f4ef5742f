/* TextClassifier: model creation, initialisation and its config as JSON. */
#include "apps/classifier/classifier.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"

void attn_clf_config_default(attn_clf_config *c) {
  memset(c, 0, sizeof *c);
  c->d_model = 128;
  c->heads = 8;
  c->ff = 512;
  c->layers = 2;
  c->max_len = 256;
  c->classes = 2;
  c->dropout = 0.1f;
  c->attn_dropout = -1.0f;
  c->activation = ATTN_ACT_RELU;
}

attn_status attn_clf_config_to_json(const attn_clf_config *c, char **json) {
  if (!c || !json) return attn_set_error(ATTN_EINVAL, "clf_config_to_json: NULL argument");
  char buf[640], extra[160] = "";
  // attn_dropout, headers, tail and pool only when set: checkpoints without them read back as before
  int n = 0;
  if (c->attn_dropout >= 0.0f)
    n += snprintf(extra + n, sizeof extra - n, ",\"attn_dropout\":%.9g", (double)c->attn_dropout);
  if (c->headers) n += snprintf(extra + n, sizeof extra - n, ",\"headers\":%d", c->headers);
  if (c->tail) n += snprintf(extra + n, sizeof extra - n, ",\"tail\":%lld", (long long)c->tail);
  if (c->pool) snprintf(extra + n, sizeof extra - n, ",\"pool\":\"meanmax\"");
  snprintf(buf, sizeof buf,
           "{\"vocab\":%lld,\"d_model\":%lld,\"heads\":%lld,\"ff\":%lld,\"layers\":%lld,"
           "\"max_len\":%lld,\"classes\":%lld,\"dropout\":%.9g,\"sinusoidal\":%d,"
           "\"norm_first\":%d,\"activation\":\"%s\"%s}",
           (long long)c->vocab, (long long)c->d_model, (long long)c->heads, (long long)c->ff,
           (long long)c->layers, (long long)c->max_len, (long long)c->classes, (double)c->dropout,
           c->sinusoidal, c->norm_first, attn_activation_name(c->activation), extra);
  *json = strdup(buf);
  return *json ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "clf_config_to_json: out of memory");
}

attn_status attn_clf_config_from_json(const char *json, attn_clf_config *c) {
  if (!json || !c) return attn_set_error(ATTN_EINVAL, "clf_config_from_json: NULL argument");
  json_value *v = NULL;
  char err[128];
  if (attn_json_parse(json, strlen(json), &v, err, sizeof err))
    return attn_set_error(ATTN_EFORMAT, "classifier config: %s", err);
  attn_status st = ATTN_OK;
  if (v->type != JSON_OBJECT) st = attn_set_error(ATTN_EFORMAT, "classifier config: not an object");
  attn_clf_config_default(c);
  static const char *const ints[] = {"vocab", "d_model", "heads", "ff",
                                     "layers", "max_len", "classes", "tail"};
  int64_t *dst[] = {&c->vocab,  &c->d_model, &c->heads,   &c->ff,
                    &c->layers, &c->max_len, &c->classes, &c->tail};
  for (size_t i = 0; !st && i < v->count; i++) {
    const char *k = v->keys[i];
    const json_value *x = &v->items[i];
    int done = 0;
    for (int j = 0; j < 8 && !done; j++)
      if (!strcmp(k, ints[j])) {
        if (x->type != JSON_NUMBER || !x->is_uint || x->uint > (1ull << 40))
          st = attn_set_error(ATTN_EFORMAT, "classifier config: '%s' must be a positive integer", k);
        else
          *dst[j] = (int64_t)x->uint;
        done = 1;
      }
    if (done) continue;
    if (!strcmp(k, "dropout") && x->type == JSON_NUMBER) c->dropout = (float)x->number;
    else if (!strcmp(k, "attn_dropout") && x->type == JSON_NUMBER) c->attn_dropout = (float)x->number;
    else if (!strcmp(k, "sinusoidal") && x->type == JSON_NUMBER) c->sinusoidal = x->number != 0;
    else if (!strcmp(k, "norm_first") && x->type == JSON_NUMBER) c->norm_first = x->number != 0;
    else if (!strcmp(k, "headers") && x->type == JSON_NUMBER) c->headers = x->number != 0;
    else if (!strcmp(k, "pool") && x->type == JSON_STRING) {
      if (!strcmp(x->str, "mean")) c->pool = ATTN_CLF_POOL_MEAN;
      else if (!strcmp(x->str, "meanmax")) c->pool = ATTN_CLF_POOL_MEANMAX;
      else st = attn_set_error(ATTN_EFORMAT, "classifier config: pool '%s' (mean|meanmax)", x->str);
    } else if (!strcmp(k, "activation") && x->type == JSON_STRING)
      st = attn_activation_from_name(x->str, &c->activation);
    else
      st = attn_set_error(ATTN_EFORMAT, "classifier config: unknown or mistyped key '%s'", k);
  }
  attn_json_free(v);
  return st;
}

static attn_status check_config(const attn_clf_config *c) {
  if (c->vocab <= 0 || c->d_model <= 0 || c->heads <= 0 || c->ff <= 0 || c->layers < 0 ||
      c->max_len <= 0 || c->classes < 2)
    return attn_set_error(ATTN_EINVAL,
                          "classifier config: vocab, d_model, heads, ff, max_len must be > 0, "
                          "layers >= 0, classes >= 2");
  if (c->max_len > ATTN_CLF_MAX_LEN)
    return attn_set_error(ATTN_EINVAL, "classifier config: max_len %lld is more than %d",
                          (long long)c->max_len, ATTN_CLF_MAX_LEN);
  if (c->d_model % c->heads)
    return attn_set_error(ATTN_EINVAL, "classifier config: d_model %lld is not a multiple of heads %lld",
                          (long long)c->d_model, (long long)c->heads);
  if (c->sinusoidal && c->d_model % 2)
    return attn_set_error(ATTN_EINVAL, "classifier config: sinusoidal positions need an even d_model");
  if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
    return attn_set_error(ATTN_EINVAL, "classifier config: dropout %g not in [0,1)", (double)c->dropout);
  if (c->tail < 0 || c->tail >= c->max_len)
    return attn_set_error(ATTN_EINVAL, "classifier config: tail %lld not in [0, max_len %lld)",
                          (long long)c->tail, (long long)c->max_len);
  if (c->pool != ATTN_CLF_POOL_MEAN && c->pool != ATTN_CLF_POOL_MEANMAX)
    return attn_set_error(ATTN_EINVAL, "classifier config: pool %d unknown", c->pool);
  if (!(c->attn_dropout < 1.0f))
    return attn_set_error(ATTN_EINVAL, "classifier config: attn_dropout %g not < 1",
                          (double)c->attn_dropout);
  return ATTN_OK;
}

static attn_layer_config layer_config(const attn_clf_config *c) {
  attn_layer_config lc;
  memset(&lc, 0, sizeof lc);
  lc.d_model = c->d_model;
  lc.nhead = c->heads;
  lc.dim_feedforward = c->ff;
  lc.dropout = c->dropout;
  lc.activation = c->activation;
  lc.layer_norm_eps = 1e-5f;
  lc.norm_first = c->norm_first;
  lc.bias = 1;
  return lc;
}

attn_status attn_clf_create(attn_clf *m, const attn_clf_config *c) {
  if (!m || !c) return attn_set_error(ATTN_EINVAL, "clf_create: NULL argument");
  memset(m, 0, sizeof *m);
  attn_params_init(&m->p);
  attn_status st = check_config(c);
  if (st) return st;
  m->c = *c;
  m->pos = -1;
  int64_t E = c->d_model;
  int64_t shape[2] = {c->vocab, E};
  st = attn_params_declare(&m->p, "embedding.weight", 2, shape, &m->emb);
  if (!st && !c->sinusoidal) {
    int64_t ps[2] = {c->max_len, E};
    st = attn_params_declare(&m->p, "positions.weight", 2, ps, &m->pos);
  }
  if (!st && c->layers > 0) {
    m->layer = calloc((size_t)c->layers, sizeof *m->layer);
    if (!m->layer) st = attn_set_error(ATTN_ENOMEM, "clf_create: out of memory");
  }
  attn_layer_config lc = layer_config(c);
  for (int64_t i = 0; !st && i < c->layers; i++) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "layers.%lld.", (long long)i);
    st = attn_encoder_declare(&m->layer[i], &m->p, prefix, &lc);
    // the layer config has one dropout; the attention probabilities may have their own
    if (!st && c->attn_dropout >= 0.0f) m->layer[i].self_attn.c.dropout = c->attn_dropout;
  }
  int64_t pooled = c->pool == ATTN_CLF_POOL_MEANMAX ? 2 * E : E;
  if (!st) st = attn_linear_declare(&m->fc, &m->p, "fc.", pooled, c->classes, 1);
  if (!st) st = attn_params_alloc(&m->p);
  if (!st && c->sinusoidal) {
    m->sin_table = malloc((size_t)(c->max_len * E) * sizeof(float));
    if (!m->sin_table) st = attn_set_error(ATTN_ENOMEM, "clf_create: out of memory");
    // PE[t, 2i] = sin(t / 10000^(2i/E)), PE[t, 2i+1] = cos(...)
    for (int64_t t = 0; !st && t < c->max_len; t++)
      for (int64_t i = 0; i < E / 2; i++) {
        double ang = (double)t / pow(10000.0, (double)(2 * i) / (double)E);
        m->sin_table[t * E + 2 * i] = (float)sin(ang);
        m->sin_table[t * E + 2 * i + 1] = (float)cos(ang);
      }
  }
  if (st) attn_clf_free(m);
  return st;
}

static uint64_t name_seed(const char *s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void init_normal(attn_params *p, int idx, uint64_t seed) {
  float *w = attn_params_data(p, idx);
  uint64_t s = name_seed(p->views[idx].name, seed);
  for (int64_t i = 0; i < p->views[idx].numel; i++) w[i] = attn_rng_normal(s, (uint64_t)i);
}

attn_status attn_clf_init(attn_clf *m, uint64_t seed) {
  if (!m || !m->p.data) return attn_set_error(ATTN_EINVAL, "clf_init: model not created");
  init_normal(&m->p, m->emb, seed);
  if (m->pos >= 0) init_normal(&m->p, m->pos, seed);
  attn_status st = ATTN_OK;
  for (int64_t i = 0; !st && i < m->c.layers; i++)
    st = attn_encoder_init(&m->layer[i], &m->p, ATTN_INIT_TORCH, seed + 1000 * (uint64_t)i);
  if (!st) st = attn_linear_init(&m->fc, &m->p, ATTN_INIT_TORCH, seed);
  return st;
}

void attn_clf_free(attn_clf *m) {
  if (!m) return;
  attn_params_free(&m->p);
  free(m->layer);
  free(m->sin_table);
  attn_qlinear_set_free(m->qlinears);
  memset(m, 0, sizeof *m);
}

int attn_clf_decay_rule(const char *name, void *user) {
  (void)user;
  if (!strncmp(name, "embedding.", 10) || !strncmp(name, "positions.", 10)) return 0;
  return attn_decay_rule_default(name, NULL);
}
