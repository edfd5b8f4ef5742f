/* Quantization-aware training state: one EMA min/max observer per Linear
 * (keyed by its weight storage) and the fake quantization of its input and
 * weight (include/attn/quant.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/quant_internal.h"

typedef struct {
  const float *W;
  int seen;       /* the observer holds a range */
  float lo, hi;   /* observed range */
  float scale;    /* activation parameters of the last forward */
  int32_t zero;
} qat_entry;

struct attn_qat {
  float c; /* averaging constant */
  attn_qat_act act;
  qat_entry *e;
  int n, cap;
};

attn_status attn_qat_new(attn_qat **out, float averaging_constant) {
  if (!out) return attn_set_error(ATTN_EINVAL, "qat_new: out is NULL");
  *out = NULL;
  if (averaging_constant == 0.0f) averaging_constant = 0.01f;
  if (!(averaging_constant > 0.0f && averaging_constant <= 1.0f))
    return attn_set_error(ATTN_EINVAL, "qat_new: averaging constant %g not in (0, 1]",
                          (double)averaging_constant);
  attn_qat *q = calloc(1, sizeof *q);
  if (!q) return attn_set_error(ATTN_ENOMEM, "qat_new: out of memory");
  q->c = averaging_constant;
  *out = q;
  return ATTN_OK;
}

void attn_qat_free(attn_qat *q) {
  if (!q) return;
  free(q->e);
  free(q);
}

attn_status attn_qat_set_activation(attn_qat *q, attn_qat_act mode) {
  if (!q) return attn_set_error(ATTN_EINVAL, "qat_set_activation: q is NULL");
  if (mode != ATTN_QAT_ACT_TENSOR && mode != ATTN_QAT_ACT_ROW)
    return attn_set_error(ATTN_EINVAL, "qat_set_activation: unknown mode %d", (int)mode);
  q->act = mode;
  return ATTN_OK;
}

int attn_qat_count(const attn_qat *q) { return q ? q->n : 0; }

static qat_entry *find(const attn_qat *q, const float *W) {
  for (int i = 0; i < q->n; i++)
    if (q->e[i].W == W) return &q->e[i];
  return NULL;
}

int attn_qat_range(const attn_qat *q, const float *W, float *lo, float *hi) {
  const qat_entry *e = q ? find(q, W) : NULL;
  if (!e || !e->seen) return 0;
  if (lo) *lo = e->lo;
  if (hi) *hi = e->hi;
  return 1;
}

static qat_entry *add(attn_qat *q, const float *W) {
  if (q->n == q->cap) {
    int cap = q->cap ? 2 * q->cap : 16;
    qat_entry *e = realloc(q->e, sizeof *e * (size_t)cap);
    if (!e) return NULL;
    q->e = e;
    q->cap = cap;
  }
  qat_entry *e = &q->e[q->n++];
  memset(e, 0, sizeof *e);
  e->W = W;
  return e;
}

/* min and max of x [n] in order (deterministic); *bad if any is not finite */
static void range(const float *x, int64_t n, float *lo, float *hi, int *bad) {
  float a = INFINITY, b = -INFINITY;
  int nf = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (!isfinite(v)) nf = 1;
    a = v < a ? v : a;
    b = v > b ? v : b;
  }
  *lo = a, *hi = b, *bad = nf;
}

/* Per row r of x [rows, in]: the u8 parameters of attn_quantize_rows_u8
 * (range [min(x_r, 0), max(x_r, 0)]) and x_r fake-quantized with them. */
static attn_status fake_quant_rows(const float *x, int64_t rows, int64_t in, float *xq,
                                   uint8_t *mx) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * in;
    float lo = 0.0f, hi = 0.0f, scale;
    int32_t zero;
    for (int64_t k = 0; k < in; k++) {
      if (!isfinite(xr[k]))
        return attn_set_error(ATTN_ENUMERIC, "qat: row %lld of a Linear input holds NaN or Inf",
                              (long long)r);
      lo = xr[k] < lo ? xr[k] : lo;
      hi = xr[k] > hi ? xr[k] : hi;
    }
    attn_status st = attn_quant_params_u8(lo, hi, &scale, &zero);
    if (!st && scale > 0.0f)
      st = attn_fake_quant_per_tensor_f32(xr, xq + r * in, mx ? mx + r * in : NULL, in, scale,
                                          zero, 0, 255);
    else if (!st) {  // an all-zero row: int8 gives zeros
      memcpy(xq + r * in, xr, sizeof(float) * (size_t)in);
      if (mx) memset(mx + r * in, 1, (size_t)in);
    }
    if (st) return st;
  }
  return ATTN_OK;
}

attn_status attn_nn_qat_apply(attn_qat *q, int forward, int update, const float *W, const float *x,
                         int64_t rows, int64_t in, int64_t out, float *xq, uint8_t *mx,
                         float *wq, uint8_t *mw) {
  if (!q || !W || !xq || !wq) return attn_set_error(ATTN_EINVAL, "qat: NULL argument");
  qat_entry *e = find(q, W);
  if (!e && !forward)
    return attn_set_error(ATTN_EINVAL, "qat backward: this Linear [%lld, %lld] had no QAT forward",
                          (long long)out, (long long)in);
  if (!e && !(e = add(q, W))) return attn_set_error(ATTN_ENOMEM, "qat: out of memory");
  int64_t n = rows * in;
  attn_status st = ATTN_OK;
  if (q->act == ATTN_QAT_ACT_ROW) {
    st = fake_quant_rows(x, rows, in, xq, mx);
    if (st) return st;
  } else if (forward && update && n > 0) {
    float lo, hi;
    int bad;
    range(x, n, &lo, &hi, &bad);
    if (bad)
      return attn_set_error(ATTN_ENUMERIC, "qat: Linear [%lld, %lld] input holds NaN or Inf",
                            (long long)out, (long long)in);
    if (!e->seen) {
      e->lo = lo, e->hi = hi, e->seen = 1;
    } else {  // torch MovingAverageMinMaxObserver
      e->lo = e->lo + q->c * (lo - e->lo);
      e->hi = e->hi + q->c * (hi - e->hi);
    }
  }
  if (forward && q->act == ATTN_QAT_ACT_TENSOR) {
    e->scale = 0.0f, e->zero = 0;
    if (e->seen) st = attn_quant_params_u8(e->lo, e->hi, &e->scale, &e->zero);
    if (st) return st;
  }
  if (n > 0 && q->act == ATTN_QAT_ACT_TENSOR) {
    if (e->scale > 0.0f) {
      st = attn_fake_quant_per_tensor_f32(x, xq, mx, n, e->scale, e->zero, 0, 255);
    } else {  // no range observed yet (or all zeros): the input passes unchanged
      memcpy(xq, x, sizeof(float) * (size_t)n);
      if (mx) memset(mx, 1, (size_t)n);
    }
    if (st) return st;
  }
  float *sc = malloc(sizeof(float) * (size_t)out);
  if (!sc) return attn_set_error(ATTN_ENOMEM, "qat: out of memory");
  st = attn_quant_scales_per_channel_f32(W, out, in, sc);
  if (!st) st = attn_fake_quant_per_channel_f32(W, wq, mw, out, in, sc, -127, 127);
  free(sc);
  return st;
}
