/* Quantized Linear (dynamic int8, like torch.quantization.quantize_dynamic):
 * weights quantized once per output channel, activations per row at run
 * time, one u8 x s8 -> s32 GEMM with the dequantization and zero-point
 * compensation fused into its output tiles (include/attn/lowp.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/iface_lowp.h"
#include "kernels/iface.h"

void attn_qlinear_free(attn_qlinear *q) {
  if (!q) return;
  free(q->w);
  free(q->scale);
  free(q->colsum);
  free(q->bias);
  free(q->wp);
  memset(q, 0, sizeof *q);
}

attn_status attn_qlinear_quantize(attn_qlinear *q, const float *W, const float *bias,
                                  int64_t out, int64_t in) {
  if (!q) return attn_set_error(ATTN_EINVAL, "qlinear_quantize: q is NULL");
  memset(q, 0, sizeof *q);
  if (out <= 0 || in <= 0)
    return attn_set_error(ATTN_EINVAL, "qlinear_quantize: out=%lld in=%lld must be positive",
                          (long long)out, (long long)in);
  if (in > ATTN_GEMM_I8_MAX_K)
    return attn_set_error(ATTN_EINVAL, "qlinear_quantize: in=%lld > %d", (long long)in,
                          ATTN_GEMM_I8_MAX_K);
  if (!W) return attn_set_error(ATTN_EINVAL, "qlinear_quantize: W is NULL");
  q->in = in;
  q->out = out;
  q->w = malloc((size_t)(out * in));
  q->scale = malloc(sizeof(float) * (size_t)out);
  q->colsum = malloc(sizeof(int32_t) * (size_t)out);
  q->bias = bias ? malloc(sizeof(float) * (size_t)out) : NULL;
  if (!q->w || !q->scale || !q->colsum || (bias && !q->bias)) {
    attn_qlinear_free(q);
    return attn_set_error(ATTN_ENOMEM, "qlinear_quantize: cannot allocate [%lld, %lld]",
                          (long long)out, (long long)in);
  }
  attn_status st = attn_quantize_weights_s8(W, out, in, q->w, q->scale);
  if (st != ATTN_OK) {
    attn_qlinear_free(q);
    return st;
  }
  for (int64_t j = 0; j < out; j++) {
    int32_t s = 0;
    for (int64_t k = 0; k < in; k++) s += q->w[j * in + k];
    q->colsum[j] = s;
  }
  if (bias) memcpy(q->bias, bias, sizeof(float) * (size_t)out);
  /* W as the micro-kernels read B: panels of 32 columns, depth quads,
   * depth padded to 64 (the AMX step; a multiple of every kernel's) */
  q->kp = (in + 63) / 64 * 64;
  size_t packed = (size_t)((out + 31) / 32 * 32) * (size_t)q->kp;
  q->wp = aligned_alloc(64, (packed + 63) / 64 * 64);
  if (!q->wp) {
    attn_qlinear_free(q);
    return attn_set_error(ATTN_ENOMEM, "qlinear_quantize: cannot allocate %zu packed bytes", packed);
  }
  attn_lowp_src b = attn_lowp_src_b(q->w, LOWP_S8, 1, in);
  st = attn_lowp_prepack_b(&b, out, in, 32, 4, q->kp, LOWP_S8, q->wp);
  if (st != ATTN_OK) attn_qlinear_free(q);
  return st;
}

int64_t attn_qlinear_bytes(const attn_qlinear *q) {
  if (!q) return 0;
  return q->out * q->in + q->out * (int64_t)(sizeof(float) + sizeof(int32_t)) +
         (q->bias ? q->out * (int64_t)sizeof(float) : 0);
}

typedef struct {
  const attn_qlinear *q;
  const float *sx;
  const int32_t *zx;
} qlin_ctx;

/* y[i,j] = (sx[i] * sw[j]) * (acc - zx[i] * colsum[j]) + bias[j] for one
 * tile (the whole depth is one k block, so each tile is final). */
static void epi_dequant(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
                        int64_t rows, int64_t cols, int first) {
  const qlin_ctx *c = e->ctx;
  const int32_t *tile = t;
  const float *sw = c->q->scale + j0, *b = c->q->bias ? c->q->bias + j0 : NULL;
  const int32_t *cs = c->q->colsum + j0;
  void (*dequant)(const int32_t *, int64_t, float, int32_t, const float *, const int32_t *,
                  const float *, float *) = attn_kernels_dequant_row();
  for (int64_t r = 0; r < rows; r++) {
    float *y = (float *)e->C + (i0 + r) * e->ldc + j0;
    dequant(tile + r * ldt, cols, c->sx[i0 + r], c->zx[i0 + r], sw, cs, b, y);
  }
}

attn_status attn_qlinear_forward_path(attn_lowp_path path, const attn_qlinear *q, const float *x,
                                      int64_t rows, float *y) {
  if (!q || !q->w || !q->scale || !q->colsum || !q->wp)
    return attn_set_error(ATTN_EINVAL, "qlinear_forward: q is not quantized");
  if (rows < 0)
    return attn_set_error(ATTN_EINVAL, "qlinear_forward: rows=%lld < 0", (long long)rows);
  if (rows == 0) return ATTN_OK;
  if (!x || !y) return attn_set_error(ATTN_EINVAL, "qlinear_forward: x or y is NULL");
  const attn_lowp_kernel *kr;
  attn_status st = attn_lowp_select(path, "i8", &kr);
  if (st != ATTN_OK) return st;
  int64_t in = q->in, out = q->out;
  uint8_t *xq = malloc((size_t)(rows * in));
  float *sx = malloc(sizeof(float) * (size_t)rows);
  int32_t *zx = malloc(sizeof(int32_t) * (size_t)rows);
  if (!xq || !sx || !zx) {
    st = attn_set_error(ATTN_ENOMEM, "qlinear_forward: cannot allocate x [%lld, %lld] in u8",
                        (long long)rows, (long long)in);
  } else {
    st = attn_quantize_rows_u8(x, rows, in, xq, sx, zx);
  }
  if (st == ATTN_OK) {
    qlin_ctx ctx = {q, sx, zx};
    attn_lowp_src a = attn_lowp_src_a(xq, LOWP_U8, 0, in);
    attn_lowp_src b = attn_lowp_src_b(q->w, LOWP_S8, 1, in);
    b.packed = q->wp, b.pnr = 32, b.pg = 4, b.kp = q->kp;
    attn_lowp_epi e = {epi_dequant, y, out, 1.0f, 0.0f, &ctx, 0};
    st = attn_lowp_gemm_run(kr, &a, &b, rows, out, in, &e, 1);
  }
  free(xq);
  free(sx);
  free(zx);
  return st;
}

attn_status attn_qlinear_forward(const attn_qlinear *q, const float *x, int64_t rows, float *y) {
  return attn_qlinear_forward_path(ATTN_LOWP_AUTO, q, x, rows, y);
}
