/* Packed variable-length SDPA in bf16, fp16 (forward and backward) and
 * int8 (forward) (attn/sdpa_varlen.h): the varlen runner (sdpa_varlen.c)
 * validates and splits the batch; each sequence is one call of the dtype's
 * flash kernel on its rows (no padding computed). The 16-bit q, k, v move
 * by the piece's element offsets (the runner moves only f32 tensors). */
#include "attn/sdpa_bf16.h"
#include "attn/sdpa_deprecated.h"
#include "attn/sdpa_f16.h"
#include "attn/sdpa_i8.h"
#include "attn/tensor.h"
#include "kernels/sdpa/sdpa_varlen_run.h"

/* 16-bit q, k, v of a call, which kernel (bf16: 1, fp16: 0) and its path. */
typedef struct {
  const uint16_t *q, *k, *v;
  int bf16;
  attn_lowp_path path;
} lowp_qkv;

#define AT(ptr, off) ((ptr) ? (ptr) + (off) : NULL)

static attn_status forward16(const attn_sdpa_desc *d, const attn_sdpa_io *x,
                             const attn_sdpa_piece *p, void *user) {
  const lowp_qkv *t = user;
  const uint16_t *q = AT(t->q, p->q), *k = AT(t->k, p->k), *v = AT(t->v, p->v);
  return t->bf16 ? attn_sdpa_forward_bf16_path(t->path, d, q, k, v, x->out, x->lse)
                 : attn_sdpa_forward_f16_path(t->path, d, q, k, v, x->out, x->lse);
}

static attn_status backward16(const attn_sdpa_desc *d, const attn_sdpa_io *x,
                              const attn_sdpa_piece *p, void *user) {
  const lowp_qkv *t = user;
  const uint16_t *q = AT(t->q, p->q), *k = AT(t->k, p->k), *v = AT(t->v, p->v);
  return t->bf16 ? attn_sdpa_backward_bf16_path(t->path, d, q, k, v, x->out_in, x->lse_in, x->dout,
                                                x->dq, x->dk, x->dv)
                 : attn_sdpa_backward_f16_path(t->path, d, q, k, v, x->out_in, x->lse_in, x->dout,
                                               x->dq, x->dk, x->dv);
}

static attn_status forward_i8(const attn_sdpa_desc *d, const attn_sdpa_io *x,
                              const attn_sdpa_piece *p, void *user) {
  (void)p;
  return attn_sdpa_forward_i8_path(*(const attn_lowp_path *)user, d, x->q, x->k, x->v, x->out,
                                   x->lse);
}

static attn_status run_forward16(int bf16, attn_lowp_path path, const attn_sdpa_desc *d,
                                 const attn_sdpa_varlen *vl, const uint16_t *q, const uint16_t *k,
                                 const uint16_t *v, float *out, float *lse) {
  lowp_qkv t = {q, k, v, bf16, path};
  const attn_sdpa_io io = {.out = out, .lse = lse};
  return attn_sdpa_varlen_run(d, vl, 0, &io, forward16, &t);
}

static attn_status run_backward16(int bf16, attn_lowp_path path, const attn_sdpa_desc *d,
                                  const attn_sdpa_varlen *vl, const uint16_t *q, const uint16_t *k,
                                  const uint16_t *v, const float *out, const float *lse,
                                  const float *dout, float *dq, float *dk, float *dv) {
  lowp_qkv t = {q, k, v, bf16, path};
  const attn_sdpa_io io = {.out_in = out, .lse_in = lse, .dout = dout, .dq = dq, .dk = dk, .dv = dv};
  return attn_sdpa_varlen_run(d, vl, 1, &io, backward16, &t);
}

attn_status attn_sdpa_varlen_forward_bf16(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                          const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                          float *out, float *lse) {
  return run_forward16(1, ATTN_LOWP_AUTO, d, vl, q, k, v, out, lse);
}

attn_status attn_sdpa_varlen_backward_bf16(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                           const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                           const float *out, const float *lse, const float *dout,
                                           float *dq, float *dk, float *dv) {
  return run_backward16(1, ATTN_LOWP_AUTO, d, vl, q, k, v, out, lse, dout, dq, dk, dv);
}

attn_status attn_sdpa_varlen_forward_f16(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                         const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                         float *out, float *lse) {
  return run_forward16(0, ATTN_LOWP_AUTO, d, vl, q, k, v, out, lse);
}

attn_status attn_sdpa_varlen_backward_f16(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                          const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                          const float *out, const float *lse, const float *dout,
                                          float *dq, float *dk, float *dv) {
  return run_backward16(0, ATTN_LOWP_AUTO, d, vl, q, k, v, out, lse, dout, dq, dk, dv);
}

attn_status attn_sdpa_varlen_forward_i8(const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                                        const float *q, const float *k, const float *v, float *out,
                                        float *lse) {
  const attn_lowp_path path = ATTN_LOWP_AUTO;
  const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out = out, .lse = lse};
  return attn_sdpa_varlen_run(d, vl, 0, &io, forward_i8, (void *)&path);
}

attn_status attn_sdpa_varlen_lowp_forward(int dtype, attn_lowp_path path, const attn_sdpa_desc *d,
                                          const attn_sdpa_varlen *vl, const void *q, const void *k,
                                          const void *v, float *out, float *lse) {
  if (dtype == ATTN_I8) {
    const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out = out, .lse = lse};
    return attn_sdpa_varlen_run(d, vl, 0, &io, forward_i8, &path);
  }
  return run_forward16(dtype == ATTN_BF16, path, d, vl, q, k, v, out, lse);
}

attn_status attn_sdpa_varlen_lowp_backward(int dtype, attn_lowp_path path, const attn_sdpa_desc *d,
                                           const attn_sdpa_varlen *vl, const void *q, const void *k,
                                           const void *v, const float *out, const float *lse,
                                           const float *dout, float *dq, float *dk, float *dv) {
  return run_backward16(dtype == ATTN_BF16, path, d, vl, q, k, v, out, lse, dout, dq, dk, dv);
}
