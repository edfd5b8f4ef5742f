/* Dynamic int8 quantization (per-channel symmetric s8 weights, per-row
 * asymmetric u8 activations) and fake quantization with the straight-through
 * estimator for QAT. Rounding is to nearest even (nearbyintf in the default
 * rounding mode, as torch.round / quantize_per_tensor). */
#include <float.h>
#include <math.h>
#include <stddef.h>

#include "attn/kernels.h"
#include "attn/lowp.h"
#include "kernels/rows/elementwise_internal.h"

/* max |x|, or the first value that is not finite (NaN / inf) */
static float max_abs(const float *x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float a = fabsf(x[i]);
    if (!(a <= FLT_MAX)) return a;
    m = a > m ? a : m;
  }
  return m;
}

static int32_t clamp_i32(float v, int32_t lo, int32_t hi) {
  /* v is already rounded; compare in float so huge values cannot overflow */
  if (!(v >= (float)lo)) return lo; /* also NaN -> lo */
  if (v > (float)hi) return hi;
  return (int32_t)v;
}

attn_status attn_quant_scales_per_channel_f32(const float *w, int64_t rows, int64_t n,
                                              float *scale) {
  if (rows < 0 || n < 0)
    return attn_set_error(ATTN_EINVAL, "quant_scales: negative size rows=%lld n=%lld",
                          (long long)rows, (long long)n);
  if (rows > 0 && (!scale || (n > 0 && !w)))
    return attn_set_error(ATTN_EINVAL, "quant_scales: w or scale is NULL");
  for (int64_t r = 0; r < rows; r++) {
    float m = max_abs(w + r * n, n);
    if (!isfinite(m))
      return attn_set_error(ATTN_ENUMERIC, "quant_scales: row %lld of w is not finite",
                            (long long)r);
    scale[r] = m / 127.0f;
  }
  return ATTN_OK;
}

attn_status attn_quantize_weights_s8(const float *W, int64_t rows, int64_t n, int8_t *q,
                                     float *scale) {
  if (rows > 0 && n > 0 && !q) return attn_set_error(ATTN_EINVAL, "quantize_weights: q is NULL");
  attn_status st = attn_quant_scales_per_channel_f32(W, rows, n, scale);
  if (st != ATTN_OK) return st;
  for (int64_t r = 0; r < rows; r++) {
    float s = scale[r];
    const float *w = W + r * n;
    int8_t *qr = q + r * n;
    for (int64_t k = 0; k < n; k++)
      qr[k] = s > 0.0f ? (int8_t)clamp_i32(nearbyintf(w[k] / s), -127, 127) : 0;
  }
  return ATTN_OK;
}

attn_status attn_quant_params_u8(float lo, float hi, float *scale, int32_t *zero) {
  if (!scale || !zero) return attn_set_error(ATTN_EINVAL, "quant_params_u8: NULL output");
  if (!isfinite(lo) || !isfinite(hi))
    return attn_set_error(ATTN_ENUMERIC, "quant_params_u8: range [%g, %g] is not finite",
                          (double)lo, (double)hi);
  lo = lo < 0.0f ? lo : 0.0f;
  hi = hi > 0.0f ? hi : 0.0f;
  float s = (hi - lo) / 255.0f;
  *scale = s;
  *zero = s > 0.0f ? clamp_i32(nearbyintf(-lo / s), 0, 255) : 0;
  return ATTN_OK;
}

attn_status attn_quantize_rows_u8(const float *x, int64_t rows, int64_t n, uint8_t *q,
                                  float *scale, int32_t *zero) {
  if (rows < 0 || n < 0)
    return attn_set_error(ATTN_EINVAL, "quantize_rows: negative size rows=%lld n=%lld",
                          (long long)rows, (long long)n);
  if (rows > 0 && (!scale || !zero || (n > 0 && (!x || !q))))
    return attn_set_error(ATTN_EINVAL, "quantize_rows: NULL argument");
  const attn_row_ops *ro = &attn_kern_get()->row;
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float lo = 0.0f, hi = 0.0f;
    int bad;
    ro->minmax_row(xr, n, &lo, &hi, &bad);
    if (bad) lo = NAN; /* caught below */
    attn_status st = attn_quant_params_u8(lo, hi, &scale[r], &zero[r]);
    if (st != ATTN_OK)
      return attn_set_error(st, "quantize_rows: row %lld of x is not finite", (long long)r);
    uint8_t *qr = q + r * n;
    if (scale[r] == 0.0f) {
      for (int64_t k = 0; k < n; k++) qr[k] = 0;
    } else {
      ro->quantize_row_u8(xr, n, scale[r], zero[r], qr);
    }
  }
  return ATTN_OK;
}

static attn_status check_fq(const char *fn, float scale, int32_t qmin, int32_t qmax) {
  if (!(scale > 0.0f) || !isfinite(scale))
    return attn_set_error(ATTN_EINVAL, "%s: scale %g must be positive and finite", fn,
                          (double)scale);
  if (qmin > qmax)
    return attn_set_error(ATTN_EINVAL, "%s: qmin %d > qmax %d", fn, (int)qmin, (int)qmax);
  return ATTN_OK;
}

/* y[i] and mask[i] for one run of values with one scale / zero point */
static void fake_quant_run(const float *x, float *y, uint8_t *mask, int64_t n, float scale,
                           int32_t zero, int32_t qmin, int32_t qmax) {
  for (int64_t i = 0; i < n; i++) {
    float q = nearbyintf(x[i] / scale) + (float)zero;
    int in = q >= (float)qmin && q <= (float)qmax;
    float c = in ? q : q < (float)qmin ? (float)qmin : (float)qmax;
    y[i] = (c - (float)zero) * scale;
    if (mask) mask[i] = (uint8_t)in;
  }
}

attn_status attn_fake_quant_per_tensor_f32(const float *x, float *y, uint8_t *mask, int64_t n,
                                           float scale, int32_t zero, int32_t qmin,
                                           int32_t qmax) {
  if (n < 0) return attn_set_error(ATTN_EINVAL, "fake_quant_per_tensor: n=%lld < 0", (long long)n);
  if (n > 0 && (!x || !y)) return attn_set_error(ATTN_EINVAL, "fake_quant_per_tensor: x or y is NULL");
  attn_status st = check_fq("fake_quant_per_tensor", scale, qmin, qmax);
  if (st != ATTN_OK) return st;
  fake_quant_run(x, y, mask, n, scale, zero, qmin, qmax);
  return ATTN_OK;
}

attn_status attn_fake_quant_per_channel_f32(const float *w, float *y, uint8_t *mask,
                                            int64_t rows, int64_t n, const float *scale,
                                            int32_t qmin, int32_t qmax) {
  if (rows < 0 || n < 0)
    return attn_set_error(ATTN_EINVAL, "fake_quant_per_channel: negative size rows=%lld n=%lld",
                          (long long)rows, (long long)n);
  if (rows > 0 && (!scale || (n > 0 && (!w || !y))))
    return attn_set_error(ATTN_EINVAL, "fake_quant_per_channel: NULL argument");
  if (qmin > qmax)
    return attn_set_error(ATTN_EINVAL, "fake_quant_per_channel: qmin %d > qmax %d", (int)qmin,
                          (int)qmax);
  for (int64_t r = 0; r < rows; r++) {
    if (scale[r] == 0.0f) { /* an all-zero channel stays zero, gradient passes */
      for (int64_t k = 0; k < n; k++) {
        y[r * n + k] = 0.0f;
        if (mask) mask[r * n + k] = 1;
      }
      continue;
    }
    attn_status st = check_fq("fake_quant_per_channel", scale[r], qmin, qmax);
    if (st != ATTN_OK) return attn_set_error(st, "fake_quant_per_channel: scale[%lld]=%g invalid",
                                             (long long)r, (double)scale[r]);
    fake_quant_run(w + r * n, y + r * n, mask ? mask + r * n : NULL, n, scale[r], 0, qmin, qmax);
  }
  return ATTN_OK;
}

attn_status attn_fake_quant_backward_f32(const float *dy, const uint8_t *mask, float *dx,
                                         int64_t n) {
  if (n < 0) return attn_set_error(ATTN_EINVAL, "fake_quant_backward: n=%lld < 0", (long long)n);
  if (n > 0 && (!dy || !mask || !dx))
    return attn_set_error(ATTN_EINVAL, "fake_quant_backward: NULL argument");
  for (int64_t i = 0; i < n; i++) dx[i] = mask[i] ? dy[i] : 0.0f;
  return ATTN_OK;
}
