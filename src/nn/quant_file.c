/* int8 model files: quantize every Linear weight of a safetensors set per
 * output channel (I8 + F32 scales), and back (include/attn/quant.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/params.h"
#include "attn/quant.h"

static int64_t numel(const attn_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

int attn_quant_is_linear_weight(const char *name, const attn_tensor *t) {
  static const char *const skip[] = {"embed", "emb.",  "position", "pos_", "norm",
                                     "ln_",   "wte",   "wpe",      "rel"};
  if (!name || !t || t->dtype != ATTN_F32 || t->ndim != 2) return 0;
  if (!ends_with(name, ".weight") && !ends_with(name, "_weight") && strcmp(name, "weight"))
    return 0;
  for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
    if (strstr(name, skip[i])) return 0;
  return 1;
}

int attn_st_is_quantized(const attn_st *st) {
  const char *q = st ? attn_st_meta(st, "quantized") : NULL;
  return q && !strcmp(q, "int8");
}

static attn_status copy_meta(const attn_st *in, attn_st *out, const char *except) {
  attn_status st = ATTN_OK;
  for (int i = 0; i < attn_st_meta_count(in) && !st; i++) {
    const char *k = attn_st_meta_key(in, i);
    if (except && !strcmp(k, except)) continue;
    st = attn_st_set_meta(out, k, attn_st_meta(in, k));
  }
  return st;
}

static attn_status quantize_one(attn_st *out, const char *name, const attn_tensor *t,
                                attn_quant_report *rep) {
  int64_t rows = t->shape[0], n = t->shape[1];
  char sname[ATTN_PARAM_NAME_MAX + 8];
  if (snprintf(sname, sizeof sname, "%s.scale", name) >= (int)sizeof sname)
    return attn_set_error(ATTN_EINVAL, "quantize: tensor name '%s' is too long", name);
  int8_t *q = malloc((size_t)(rows * n > 0 ? rows * n : 1));
  float *scale = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
  attn_status st = (!q || !scale) ? attn_set_error(ATTN_ENOMEM, "quantize: '%s': out of memory",
                                                   name)
                                  : ATTN_OK;
  if (!st) st = attn_quantize_weights_s8(t->data, rows, n, q, scale);
  if (st) {
    char why[256];
    snprintf(why, sizeof why, "%s", attn_last_error());
    attn_set_error(st, "quantize: tensor '%s': %s", name, why);
  }
  if (!st) st = attn_st_add(out, name, ATTN_I8, 2, t->shape, q);
  if (!st) st = attn_st_add_f32(out, sname, 1, &rows, scale);
  if (!st) {
    rep->quantized++;
    rep->linear_f32_bytes += rows * n * (int64_t)sizeof(float);
    rep->linear_i8_bytes += rows * n + rows * (int64_t)sizeof(float);
  }
  free(q);
  free(scale);
  return st;
}

attn_status attn_quantize_st(const attn_st *in, attn_st **out, attn_quant_report *rep) {
  attn_quant_report local;
  if (!rep) rep = &local;
  memset(rep, 0, sizeof *rep);
  if (!in || !out) return attn_set_error(ATTN_EINVAL, "quantize: NULL input or output");
  *out = NULL;
  if (attn_st_is_quantized(in))
    return attn_set_error(ATTN_EINVAL, "quantize: the model is already quantized (int8)");
  attn_st *o;
  attn_status st = attn_st_new(&o);
  if (st) return st;
  rep->tensors = attn_st_count(in);
  for (int i = 0; i < rep->tensors && !st; i++) {
    const char *name = attn_st_name(in, i);
    const attn_tensor *t = attn_st_get(in, name);
    /* a training checkpoint's optimizer state (optim.m.*, optim.v.*) is not part of an
     * inference model: dropped, not quantized */
    if (!strncmp(name, "optim.", 6)) continue;
    char sname[ATTN_PARAM_NAME_MAX + 8];
    snprintf(sname, sizeof sname, "%s.scale", name);
    if (attn_quant_is_linear_weight(name, t) && attn_st_get(in, sname))
      st = attn_set_error(ATTN_EINVAL, "quantize: '%s' would collide with tensor '%s'", name,
                          sname);
    else if (attn_quant_is_linear_weight(name, t))
      st = quantize_one(o, name, t, rep);
    else
      st = attn_st_add(o, name, t->dtype, t->ndim, t->shape, t->data);
  }
  if (!st) st = copy_meta(in, o, "quantized");
  if (!st) st = attn_st_set_meta(o, "quantized", "int8");
  if (st) {
    attn_st_free(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

static int64_t file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

attn_status attn_quantize_file(const char *in_path, const char *out_path, attn_quant_report *rep) {
  attn_quant_report local;
  if (!rep) rep = &local;
  if (!in_path || !out_path) return attn_set_error(ATTN_EINVAL, "quantize: NULL path");
  attn_st *in = NULL, *out = NULL;
  attn_status st = attn_st_load(in_path, &in);
  if (!st) st = attn_quantize_st(in, &out, rep);
  if (!st && rep->quantized == 0)
    st = attn_set_error(ATTN_EINVAL, "quantize: '%s' holds no Linear weight to quantize",
                        in_path);
  if (!st) st = attn_st_save(out, out_path);
  if (!st) {
    rep->file_in_bytes = file_size(in_path);
    rep->file_out_bytes = file_size(out_path);
  }
  attn_st_free(in);
  attn_st_free(out);
  return st;
}

/* The scale tensor of a quantized "<name>" (I8 [rows, n] with "<name>.scale"
 * F32 [rows]), else NULL. */
static const attn_tensor *scale_of(const attn_st *in, const char *name, const attn_tensor *t) {
  if (t->dtype != ATTN_I8 || t->ndim != 2) return NULL;
  char sname[ATTN_PARAM_NAME_MAX + 8];
  if (snprintf(sname, sizeof sname, "%s.scale", name) >= (int)sizeof sname) return NULL;
  const attn_tensor *s = attn_st_get(in, sname);
  if (!s || s->dtype != ATTN_F32 || s->ndim != 1 || s->shape[0] != t->shape[0]) return NULL;
  return s;
}

attn_status attn_dequantize_st(const attn_st *in, attn_st **out) {
  if (!in || !out) return attn_set_error(ATTN_EINVAL, "dequantize: NULL input or output");
  *out = NULL;
  attn_st *o;
  attn_status st = attn_st_new(&o);
  for (int i = 0; i < attn_st_count(in) && !st; i++) {
    const char *name = attn_st_name(in, i);
    const attn_tensor *t = attn_st_get(in, name);
    size_t len = strlen(name);
    if (len > 6 && ends_with(name, ".scale")) {  // skip the scales of quantized tensors
      char base[ATTN_PARAM_NAME_MAX + 8];
      if (len - 6 < sizeof base) {
        memcpy(base, name, len - 6);
        base[len - 6] = 0;
        const attn_tensor *b = attn_st_get(in, base);
        if (b && scale_of(in, base, b)) continue;
      }
    }
    const attn_tensor *s = scale_of(in, name, t);
    if (!s) {
      st = attn_st_add(o, name, t->dtype, t->ndim, t->shape, t->data);
      continue;
    }
    int64_t rows = t->shape[0], n = t->shape[1];
    float *w = malloc(sizeof(float) * (size_t)(numel(t) > 0 ? numel(t) : 1));
    if (!w) {
      st = attn_set_error(ATTN_ENOMEM, "dequantize: '%s': out of memory", name);
      break;
    }
    const int8_t *q = t->data;
    const float *sc = s->data;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t k = 0; k < n; k++) w[r * n + k] = sc[r] * (float)q[r * n + k];
    st = attn_st_add_f32(o, name, 2, t->shape, w);
    free(w);
  }
  if (!st) st = copy_meta(in, o, "quantized");
  if (st) {
    attn_st_free(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}
