/* A table of int8 Linears keyed by the f32 weight storage they replace
 * (attn_nn_ctx.qlinears; include/attn/quant.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/quant.h"

typedef struct {
  const float *W;
  int64_t out, in;
  attn_qlinear q;
} qset_entry;

struct attn_qlinear_set {
  qset_entry *e;
  int n, cap;
};

void attn_qlinear_set_free(attn_qlinear_set *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) attn_qlinear_free(&s->e[i].q);
  free(s->e);
  free(s);
}

int attn_qlinear_set_count(const attn_qlinear_set *s) { return s ? s->n : 0; }

const attn_qlinear *attn_qlinear_set_find(const attn_qlinear_set *s, const float *W, int64_t out,
                                          int64_t in) {
  if (!s) return NULL;
  for (int i = 0; i < s->n; i++)
    if (s->e[i].W == W && s->e[i].out == out && s->e[i].in == in) return &s->e[i].q;
  return NULL;
}

int64_t attn_qlinear_set_bytes(const attn_qlinear_set *s) {
  int64_t b = 0;
  for (int i = 0; s && i < s->n; i++) b += attn_qlinear_bytes(&s->e[i].q);
  return b;
}

static attn_status grow(attn_qlinear_set *s) {
  if (s->n < s->cap) return ATTN_OK;
  int cap = s->cap ? 2 * s->cap : 16;
  qset_entry *e = realloc(s->e, sizeof *e * (size_t)cap);
  if (!e) return attn_set_error(ATTN_ENOMEM, "qlinear_set: out of memory");
  s->e = e;
  s->cap = cap;
  return ATTN_OK;
}

/* One entry for rows [r0, r0 + rows) of the weight W [*, in] (bias b, may be
 * NULL), with the file's int8 values q and scales sc for those rows. The
 * weights in p are the dequantized sc * q, which quantize back to q (the
 * largest |q| of a row is 127); the file's scales are then copied so the
 * int8 Linear is exactly the file's. */
static attn_status add(attn_qlinear_set *s, const float *W, const float *b, const int8_t *q,
                       const float *sc, int64_t rows, int64_t in) {
  attn_status st = grow(s);
  if (st) return st;
  qset_entry *e = &s->e[s->n];
  if ((st = attn_qlinear_quantize(&e->q, W, b, rows, in))) return st;
  if (!memcmp(e->q.w, q, (size_t)(rows * in)))
    memcpy(e->q.scale, sc, sizeof(float) * (size_t)rows);
  e->W = W, e->out = rows, e->in = in;
  s->n++;
  return ATTN_OK;
}

attn_status attn_qlinear_set_add_f32(attn_qlinear_set **s, const float *W, const float *b,
                                     int64_t out, int64_t in) {
  if (!s || !W) return attn_set_error(ATTN_EINVAL, "qlinear_set_add: NULL argument");
  if (!*s && !(*s = calloc(1, sizeof **s)))
    return attn_set_error(ATTN_ENOMEM, "qlinear_set_add: out of memory");
  attn_qlinear_set *t = *s;
  attn_status st = grow(t);
  if (st) return st;
  qset_entry *e = &t->e[t->n];
  if ((st = attn_qlinear_quantize(&e->q, W, b, out, in))) return st;
  e->W = W, e->out = out, e->in = in;
  t->n++;
  return ATTN_OK;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

attn_status attn_qlinear_set_build(attn_qlinear_set **out, const attn_st *st_in,
                                   const attn_params *p) {
  if (!out || !st_in || !p || !p->data)
    return attn_set_error(ATTN_EINVAL, "qlinear_set_build: NULL argument or unallocated params");
  *out = NULL;
  attn_qlinear_set *s = calloc(1, sizeof *s);
  if (!s) return attn_set_error(ATTN_ENOMEM, "qlinear_set_build: out of memory");
  attn_status st = ATTN_OK;
  for (int i = 0; i < attn_st_count(st_in) && !st; i++) {
    const char *name = attn_st_name(st_in, i);
    const attn_tensor *t = attn_st_get(st_in, name);
    char sname[ATTN_PARAM_NAME_MAX + 8], bname[ATTN_PARAM_NAME_MAX + 8];
    if (t->dtype != ATTN_I8 || t->ndim != 2) continue;
    snprintf(sname, sizeof sname, "%s.scale", name);
    const attn_tensor *sc = attn_st_get(st_in, sname);
    if (!sc || sc->dtype != ATTN_F32 || sc->ndim != 1 || sc->shape[0] != t->shape[0]) continue;
    int wi = attn_params_find(p, name);
    int64_t rows = t->shape[0], in = t->shape[1];
    if (wi < 0 || p->views[wi].ndim != 2 || p->views[wi].shape[0] != rows ||
        p->views[wi].shape[1] != in) {
      st = attn_set_error(ATTN_EINVAL,
                          "qlinear_set_build: quantized '%s' [%lld, %lld] has no such parameter",
                          name, (long long)rows, (long long)in);
      break;
    }
    // the bias: "<x>weight" -> "<x>bias" (in_proj_weight -> in_proj_bias)
    size_t len = strlen(name);
    snprintf(bname, sizeof bname, "%.*sbias", (int)(len - 6), name);
    int bi = attn_params_find(p, bname);
    const float *bias = bi >= 0 && p->views[bi].numel == rows ? attn_params_data(p, bi) : NULL;
    int blocks = ends_with(name, "in_proj_weight") && rows % 3 == 0 ? 3 : 1;
    int64_t br = rows / blocks;
    const float *W = attn_params_data(p, wi);
    const int8_t *q = t->data;
    const float *scale = sc->data;
    for (int j = 0; j < blocks && !st; j++)
      st = add(s, W + j * br * in, bias ? bias + j * br : NULL, q + j * br * in, scale + j * br,
               br, in);
  }
  if (st) {
    attn_qlinear_set_free(s);
    return st;
  }
  *out = s;
  return ATTN_OK;
}

attn_status attn_quant_load_params(attn_params *p, const attn_st *st, int allow_missing,
                                   attn_qlinear_set **qlinears) {
  if (qlinears) *qlinears = NULL;
  if (!p || !st) return attn_set_error(ATTN_EINVAL, "quant_load_params: NULL params or file");
  if (!attn_st_is_quantized(st)) return attn_params_load_st(p, st, "", allow_missing);
  attn_st *deq = NULL;
  attn_status r = attn_dequantize_st(st, &deq);
  if (!r) r = attn_params_load_st(p, deq, "", allow_missing);
  if (!r && qlinears) r = attn_qlinear_set_build(qlinears, st, p);
  attn_st_free(deq);
  return r;
}
