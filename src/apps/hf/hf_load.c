/* Hugging Face BERT / GPT-2 checkpoint -> attn's nn_hf model: the name map
 * (docs/HF.md) and the copy of each tensor with its transposition or split,
 * after checking its shape. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/hf/hf.h"

#define L 1 /* per layer: %d is the layer index */
#define HF_NAME_MAX 256 /* an HF name with its prefix */

/* BertModel. The pooler is taken iff the checkpoint has it; token types iff
 * type_vocab_size > 0. */
static const attn_hf_name bert_map[] = {
    {"embeddings.word_embeddings.weight", "word_embeddings", ATTN_HF_COPY, 0, 1, 0},
    {"embeddings.position_embeddings.weight", "position_embeddings", ATTN_HF_COPY, 0, 1, 0},
    {"embeddings.token_type_embeddings.weight", "token_type_embeddings", ATTN_HF_COPY, 0, 1, 0},
    {"embeddings.LayerNorm.weight", "embeddings_norm.weight", ATTN_HF_COPY, 0, 1, 0},
    {"embeddings.LayerNorm.bias", "embeddings_norm.bias", ATTN_HF_COPY, 0, 1, 0},
    {"encoder.layer.%d.attention.self.query.weight", "layers.%d.self_attn.in_proj_weight", ATTN_HF_COPY, 0, 3, L},
    {"encoder.layer.%d.attention.self.key.weight", "layers.%d.self_attn.in_proj_weight", ATTN_HF_COPY, 1, 3, L},
    {"encoder.layer.%d.attention.self.value.weight", "layers.%d.self_attn.in_proj_weight", ATTN_HF_COPY, 2, 3, L},
    {"encoder.layer.%d.attention.self.query.bias", "layers.%d.self_attn.in_proj_bias", ATTN_HF_COPY, 0, 3, L},
    {"encoder.layer.%d.attention.self.key.bias", "layers.%d.self_attn.in_proj_bias", ATTN_HF_COPY, 1, 3, L},
    {"encoder.layer.%d.attention.self.value.bias", "layers.%d.self_attn.in_proj_bias", ATTN_HF_COPY, 2, 3, L},
    {"encoder.layer.%d.attention.output.dense.weight", "layers.%d.self_attn.out_proj.weight", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.attention.output.dense.bias", "layers.%d.self_attn.out_proj.bias", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.attention.output.LayerNorm.weight", "layers.%d.norm1.weight", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.attention.output.LayerNorm.bias", "layers.%d.norm1.bias", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.intermediate.dense.weight", "layers.%d.linear1.weight", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.intermediate.dense.bias", "layers.%d.linear1.bias", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.output.dense.weight", "layers.%d.linear2.weight", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.output.dense.bias", "layers.%d.linear2.bias", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.output.LayerNorm.weight", "layers.%d.norm2.weight", ATTN_HF_COPY, 0, 1, L},
    {"encoder.layer.%d.output.LayerNorm.bias", "layers.%d.norm2.bias", ATTN_HF_COPY, 0, 1, L},
    {"pooler.dense.weight", "pooler.weight", ATTN_HF_COPY, 0, 1, 0},
    {"pooler.dense.bias", "pooler.bias", ATTN_HF_COPY, 0, 1, 0},
};

/* GPT2Model (+ GPT2LMHeadModel's lm_head.weight when untied). Conv1D
 * weights are [in, out]: transposed. */
static const attn_hf_name gpt2_map[] = {
    {"wte.weight", "word_embeddings", ATTN_HF_COPY, 0, 1, 0},
    {"wpe.weight", "position_embeddings", ATTN_HF_COPY, 0, 1, 0},
    {"h.%d.ln_1.weight", "layers.%d.norm1.weight", ATTN_HF_COPY, 0, 1, L},
    {"h.%d.ln_1.bias", "layers.%d.norm1.bias", ATTN_HF_COPY, 0, 1, L},
    {"h.%d.attn.c_attn.weight", "layers.%d.self_attn.in_proj_weight", ATTN_HF_TRANSPOSE, 0, 1, L},
    {"h.%d.attn.c_attn.bias", "layers.%d.self_attn.in_proj_bias", ATTN_HF_COPY, 0, 1, L},
    {"h.%d.attn.c_proj.weight", "layers.%d.self_attn.out_proj.weight", ATTN_HF_TRANSPOSE, 0, 1, L},
    {"h.%d.attn.c_proj.bias", "layers.%d.self_attn.out_proj.bias", ATTN_HF_COPY, 0, 1, L},
    {"h.%d.ln_2.weight", "layers.%d.norm2.weight", ATTN_HF_COPY, 0, 1, L},
    {"h.%d.ln_2.bias", "layers.%d.norm2.bias", ATTN_HF_COPY, 0, 1, L},
    {"h.%d.mlp.c_fc.weight", "layers.%d.linear1.weight", ATTN_HF_TRANSPOSE, 0, 1, L},
    {"h.%d.mlp.c_fc.bias", "layers.%d.linear1.bias", ATTN_HF_COPY, 0, 1, L},
    {"h.%d.mlp.c_proj.weight", "layers.%d.linear2.weight", ATTN_HF_TRANSPOSE, 0, 1, L},
    {"h.%d.mlp.c_proj.bias", "layers.%d.linear2.bias", ATTN_HF_COPY, 0, 1, L},
    {"ln_f.weight", "final_norm.weight", ATTN_HF_COPY, 0, 1, 0},
    {"ln_f.bias", "final_norm.bias", ATTN_HF_COPY, 0, 1, 0},
    {"lm_head.weight", "lm_head.weight", ATTN_HF_COPY, 0, 1, 0},
};
#undef L

const attn_hf_name *attn_hf_name_map(attn_hf_arch arch, int *n) {
  if (arch == ATTN_HF_GPT2) {
    *n = (int)(sizeof gpt2_map / sizeof gpt2_map[0]);
    return gpt2_map;
  }
  *n = (int)(sizeof bert_map / sizeof bert_map[0]);
  return bert_map;
}

void attn_hf_free(attn_hf *h) {
  if (!h) return;
  attn_hf_model_free(&h->m);
  attn_params_free(&h->p);
  free(h);
}

/* "[a, b]" */
static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* An HF tensor by name, or (old BERT checkpoints) LayerNorm.gamma / .beta
 * for LayerNorm.weight / .bias; used_name [HF_NAME_MAX] receives the name
 * found. */
static const attn_tensor *find(const attn_st *st, const char *name, char *used_name) {
  snprintf(used_name, HF_NAME_MAX, "%s", name);
  const attn_tensor *t = attn_st_get(st, name);
  size_t n = strlen(name), keep = 0;
  const char *alias = NULL;
  if (!t && n >= 16 && !strcmp(name + n - 16, "LayerNorm.weight")) alias = "gamma", keep = n - 6;
  if (!t && n >= 14 && !strcmp(name + n - 14, "LayerNorm.bias")) alias = "beta", keep = n - 4;
  if (alias) {
    char buf[HF_NAME_MAX];
    snprintf(buf, sizeof buf, "%.*s%s", (int)keep, name, alias);
    t = attn_st_get(st, buf);
    if (t) snprintf(used_name, HF_NAME_MAX, "%s", buf);
  }
  return t;
}

static float element(const attn_tensor *t, int64_t i) {
  if (t->dtype == ATTN_F32) return ((const float *)t->data)[i];
  if (t->dtype == ATTN_F16) return attn_f16_to_f32(((const uint16_t *)t->data)[i]);
  return attn_bf16_to_f32(((const uint16_t *)t->data)[i]);
}

/* Copies HF tensor hf_name (under prefix) into attn parameter attn_name as
 * entry e says, after checking dtype and shape. */
static attn_status load_one(attn_hf *h, const attn_st *st, const char *prefix,
                            const attn_hf_name *e, const char *hf_name, const char *attn_name,
                            char *used_name) {
  char full[HF_NAME_MAX];
  const char *pre = !strcmp(hf_name, "lm_head.weight") ? "" : prefix; /* top level in the LM */
  if (strlen(pre) + strlen(hf_name) >= sizeof full)
    return attn_set_error(ATTN_EINVAL, "hf: name '%s' is too long", hf_name);
  memcpy(full, pre, strlen(pre));
  memcpy(full + strlen(pre), hf_name, strlen(hf_name) + 1);
  int idx = attn_params_find(&h->p, attn_name);
  if (idx < 0) return attn_set_error(ATTN_EINVAL, "hf: no attn parameter '%s'", attn_name);
  const attn_param_view *v = &h->p.views[idx];
  int64_t want[2] = {v->shape[0] / e->parts, v->ndim > 1 ? v->shape[1] : 0};
  if (e->op == ATTN_HF_TRANSPOSE) want[0] = v->shape[1], want[1] = v->shape[0];
  char ws[64], gs[64];
  shape_str(ws, sizeof ws, v->ndim, want);
  const attn_tensor *t = find(st, full, used_name);
  if (!t)
    return attn_set_error(ATTN_EINVAL, "tensor '%s' is missing (expected %s%s)", full, ws,
                          e->op == ATTN_HF_TRANSPOSE ? ", Conv1D [in, out]" : "");
  if (t->dtype != ATTN_F32 && t->dtype != ATTN_F16 && t->dtype != ATTN_BF16)
    return attn_set_error(ATTN_EINVAL, "tensor '%s' is %s, not F32, F16 or BF16", used_name,
                          attn_dtype_name(t->dtype));
  int same = t->ndim == v->ndim;
  for (int d = 0; same && d < v->ndim; d++) same = t->shape[d] == want[d];
  if (!same) {
    shape_str(gs, sizeof gs, t->ndim, t->shape);
    return attn_set_error(ATTN_EINVAL, "tensor '%s' has shape %s, expected %s%s", used_name, gs,
                          ws, e->op == ATTN_HF_TRANSPOSE ? " (Conv1D [in, out])" : "");
  }
  float *dst = attn_params_data(&h->p, idx);
  int64_t numel = attn_tensor_numel(t);
  dst += (int64_t)e->part * numel;
  if (e->op == ATTN_HF_COPY) {
    for (int64_t i = 0; i < numel; i++) dst[i] = element(t, i);
  } else { /* [in, out] -> [out, in] */
    int64_t in = want[0], out = want[1];
    for (int64_t i = 0; i < in; i++)
      for (int64_t o = 0; o < out; o++) dst[o * in + i] = element(t, i * out + o);
  }
  return ATTN_OK;
}

/* 1 if the entry has a parameter in this model (pooler, token types and
 * lm_head are optional) */
static int entry_applies(const attn_hf *h, const attn_hf_name *e) {
  if (!strncmp(e->attn, "pooler.", 7)) return h->c.pooler;
  if (!strcmp(e->attn, "token_type_embeddings")) return h->c.type_vocab_size > 0;
  if (!strcmp(e->attn, "lm_head.weight")) return h->c.untied_lm_head;
  return 1;
}

typedef struct {
  char (*names)[HF_NAME_MAX];
  int n;
} used_set;

static int is_used(const used_set *u, const char *name) {
  for (int i = 0; i < u->n; i++)
    if (!strcmp(u->names[i], name)) return 1;
  return 0;
}

static attn_status load_all(attn_hf *h, const attn_st *st, const char *prefix, used_set *u) {
  int n;
  const attn_hf_name *map = attn_hf_name_map(h->c.arch, &n);
  attn_status st_ = ATTN_OK;
  for (int k = 0; k < n && !st_; k++) {
    const attn_hf_name *e = &map[k];
    if (!entry_applies(h, e)) continue;
    int64_t layers = e->per_layer ? h->c.num_layers : 1;
    for (int64_t i = 0; i < layers && !st_; i++) {
      char hf_name[HF_NAME_MAX], attn_name[ATTN_PARAM_NAME_MAX];
      snprintf(hf_name, sizeof hf_name, e->hf, (int)i);
      snprintf(attn_name, sizeof attn_name, e->attn, (int)i);
      st_ = load_one(h, st, prefix, e, hf_name, attn_name, u->names[u->n]);
      if (!st_) u->n++;
    }
  }
  return st_;
}

/* Tensors of st that no map entry used */
static void count_ignored(attn_hf *h, const attn_st *st, const used_set *u) {
  for (int i = 0; i < attn_st_count(st); i++) {
    const char *name = attn_st_name(st, i);
    if (is_used(u, name)) continue;
    if (!h->ignored++)
      snprintf(h->first_ignored, sizeof h->first_ignored, "%.*s",
               (int)sizeof h->first_ignored - 1, name);
  }
}

attn_status attn_hf_from_st(const attn_hf_config *c, const attn_st *st, attn_hf **out) {
  if (!c || !st || !out) return attn_set_error(ATTN_EINVAL, "hf: NULL argument");
  *out = NULL;
  attn_hf *h = calloc(1, sizeof *h);
  if (!h) return attn_set_error(ATTN_ENOMEM, "hf: out of memory");
  attn_params_init(&h->p);
  h->c = *c;
  h->bos_token_id = h->eos_token_id = -1;
  int bert = c->arch == ATTN_HF_BERT;
  h->model_type = bert ? "bert" : "gpt2";
  const char *prefix = "";
  if (bert && attn_st_get(st, "bert.embeddings.word_embeddings.weight")) prefix = "bert.";
  if (!bert && attn_st_get(st, "transformer.wte.weight")) prefix = "transformer.";
  char pooler[64];
  snprintf(pooler, sizeof pooler, "%spooler.dense.weight", prefix);
  h->c.pooler = bert && attn_st_get(st, pooler) != NULL;
  used_set u = {calloc((size_t)attn_st_count(st) + 1, sizeof *u.names), 0};
  attn_status s = u.names ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "hf: out of memory");
  if (!s) s = attn_hf_model_declare(&h->m, &h->p, &h->c);
  if (!s) s = attn_params_alloc(&h->p);
  if (!s) s = load_all(h, st, prefix, &u);
  if (!s) count_ignored(h, st, &u);
  free(u.names);
  if (s) {
    attn_hf_free(h);
    return s;
  }
  *out = h;
  return ATTN_OK;
}

static char *read_small_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 > cap) {
      if (cap > ((size_t)16 << 20)) break; /* a config of more than 16 MB is not one */
      char *b = realloc(buf, cap = cap * 2 + 8192);
      if (!b) break;
      buf = b;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) break;
      fclose(f);
      buf[n] = '\0';
      *len = n;
      return buf;
    }
  }
  fclose(f);
  free(buf);
  return NULL;
}

attn_status attn_hf_load(const char *dir, attn_hf **out) {
  if (!dir || !out) return attn_set_error(ATTN_EINVAL, "hf: NULL argument");
  *out = NULL;
  size_t dl = strlen(dir);
  char *path = malloc(dl + 32);
  if (!path) return attn_set_error(ATTN_ENOMEM, "hf: out of memory");
  snprintf(path, dl + 32, "%s/config.json", dir);
  size_t len = 0;
  errno = 0;
  char *json = read_small_file(path, &len);
  attn_status s = json ? ATTN_OK
                       : attn_set_error(ATTN_EIO, "%s: %s", path,
                                        errno ? strerror(errno) : "cannot read it");
  attn_hf_config c;
  int64_t bos = -1, eos = -1;
  if (!s) s = attn_hf_config_parse(json, len, &c);
  if (!s) s = attn_hf_special_ids(json, len, &c, &bos, &eos);
  if (s && json) attn_prefix_error(s, dir);
  free(json);
  attn_st *st = NULL;
  if (!s) {
    snprintf(path, dl + 32, "%s/model.safetensors", dir);
    s = attn_st_load(path, &st);
  }
  if (!s) {
    s = attn_hf_from_st(&c, st, out);
    if (s) attn_prefix_error(s, path);
    if (!s) (*out)->bos_token_id = bos, (*out)->eos_token_id = eos;
  }
  attn_st_free(st);
  free(path);
  return s;
}
