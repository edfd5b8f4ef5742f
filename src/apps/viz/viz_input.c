/* Attention weights + token labels from a safetensors file (see viz.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz.h"

void attn_viz_input_free(attn_viz_input *in) {
  if (!in) return;
  free(in->probs);
  attn_viz_labels_free(in->q_labels, in->lq);
  attn_viz_labels_free(in->k_labels, in->lk);
  free(in->freq);
  attn_tok_bytes_free(in->q_bytes);
  free(in->q_bytes);
  attn_tok_bytes_free(in->k_bytes);
  free(in->k_bytes);
  memset(in, 0, sizeof *in);
}

/* The tokens' bytes from metadata PREFIX"token_bytes" (+ "..._breaks"): *out
 * malloc'd, NULL when absent; want tokens. */
static attn_status meta_bytes(const attn_st *st, const char *prefix, int64_t want,
                              attn_tok_bytes **out) {
  char key[64], brk[64], what[96];
  snprintf(key, sizeof key, "%stoken_bytes", prefix);
  snprintf(brk, sizeof brk, "%stoken_breaks", prefix);
  snprintf(what, sizeof what, "metadata '%s'", key);
  const char *json = attn_st_meta(st, key);
  *out = NULL;
  if (!json) return ATTN_OK;
  attn_tok_bytes *t = calloc(1, sizeof *t);
  if (!t) return attn_set_error(ATTN_ENOMEM, "%s: out of memory", what);
  attn_status s = attn_tok_bytes_from_json(json, attn_st_meta(st, brk), what, t);
  if (!s && t->n != want)
    s = attn_set_error(ATTN_EINVAL, "%s has %lld tokens, the attention has %lld", what,
                       (long long)t->n, (long long)want);
  if (s) {
    attn_tok_bytes_free(t);
    free(t);
    return s;
  }
  *out = t;
  return ATTN_OK;
}

/* Labels from metadata key; want entries. *out stays NULL when absent. */
static attn_status meta_labels(const attn_st *st, const char *key, int64_t want, char ***out) {
  const char *json = attn_st_meta(st, key);
  *out = NULL;
  if (!json) return ATTN_OK;
  int64_t n;
  attn_status s = attn_viz_labels_parse(json, out, &n);
  if (s) {
    char what[128];
    snprintf(what, sizeof what, "metadata '%.100s'", key);
    return attn_prefix_error(s, what);
  }
  if (n != want) {
    attn_viz_labels_free(*out, n);
    *out = NULL;
    return attn_set_error(ATTN_EINVAL, "metadata '%s' has %lld tokens, the attention has %lld", key,
                          (long long)n, (long long)want);
  }
  return ATTN_OK;
}

static attn_status to_f32(const attn_tensor *t, const char *name, float **out) {
  int64_t n = attn_tensor_numel(t);
  float *f = malloc((size_t)n * sizeof *f);
  if (!f) return attn_set_error(ATTN_ENOMEM, "tensor '%s': out of memory", name);
  if (t->dtype == ATTN_F32) {
    memcpy(f, t->data, (size_t)n * sizeof *f);
  } else if (t->dtype == ATTN_F16 || t->dtype == ATTN_BF16) {
    const uint16_t *h = t->data;
    for (int64_t i = 0; i < n; i++)
      f[i] = t->dtype == ATTN_F16 ? attn_f16_to_f32(h[i]) : attn_bf16_to_f32(h[i]);
  } else {
    free(f);
    return attn_set_error(ATTN_EINVAL, "tensor '%s' is %s; F32, F16 or BF16 expected", name,
                          attn_dtype_name(t->dtype));
  }
  *out = f;
  return ATTN_OK;
}

attn_status attn_viz_input_load(const char *path, const char *name, attn_viz_input *out) {
  if (!path || !out) return attn_set_error(ATTN_EINVAL, "viz input: NULL argument");
  memset(out, 0, sizeof *out);
  if (!name) name = "attn";
  attn_st *st = NULL;
  attn_status s = attn_st_load(path, &st);
  if (s) return s;
  const attn_tensor *t = attn_st_get(st, name);
  if (!t) {
    s = attn_set_error(ATTN_EINVAL,
                       "'%s' has no tensor '%s' (attention weights [Lq, Lk], "
                       "[H, Lq, Lk] or [Layers, H, Lq, Lk])",
                       path, name);
    goto fail;
  }
  if (t->ndim < 2 || t->ndim > 4) {
    s = attn_set_error(ATTN_EINVAL, "tensor '%s' has rank %d; 2, 3 or 4 expected", name, t->ndim);
    goto fail;
  }
  out->rank = t->ndim;
  out->layers = t->ndim == 4 ? t->shape[0] : 1;
  out->heads = t->ndim >= 3 ? t->shape[t->ndim - 3] : 1;
  out->lq = t->shape[t->ndim - 2], out->lk = t->shape[t->ndim - 1];
  if (attn_tensor_numel(t) < 1) {
    s = attn_set_error(ATTN_EINVAL, "tensor '%s' is empty", name);
    goto fail;
  }
  if ((s = to_f32(t, name, &out->probs))) goto fail;
  const char *qk = attn_st_meta(st, "query_tokens") ? "query_tokens" : "tokens";
  const char *kk = attn_st_meta(st, "key_tokens") ? "key_tokens" : "tokens";
  if ((s = meta_labels(st, qk, out->lq, &out->q_labels))) goto fail;
  if ((s = meta_labels(st, kk, out->lk, &out->k_labels))) goto fail;
  int own = attn_st_meta(st, "query_token_bytes") || attn_st_meta(st, "key_token_bytes");
  if ((s = meta_bytes(st, own ? "query_" : "", out->lq, &out->q_bytes))) goto fail;
  if ((s = meta_bytes(st, own ? "key_" : "", out->lk, &out->k_bytes))) goto fail;
  if (!out->q_labels && out->q_bytes && (s = attn_tok_char_labels(out->q_bytes, 0, &out->q_labels)))
    goto fail;
  if (!out->k_labels && out->k_bytes && (s = attn_tok_char_labels(out->k_bytes, 0, &out->k_labels)))
    goto fail;
  out->tok_lq = out->lq, out->tok_lk = out->lk;
  const char *kind = attn_st_meta(st, "attention");
  out->cross = kind && !strcmp(kind, "cross");
  const attn_tensor *fr = attn_st_get(st, "freq");
  if (fr) {
    if (fr->ndim != 1 || fr->shape[0] != out->lk) {
      s = attn_set_error(ATTN_EINVAL, "tensor 'freq' must have shape [%lld] (one per key)",
                         (long long)out->lk);
      goto fail;
    }
    if ((s = to_f32(fr, "freq", &out->freq))) goto fail;
  }
  attn_st_free(st);
  return ATTN_OK;
fail:
  attn_st_free(st);
  attn_viz_input_free(out);
  return s;
}
