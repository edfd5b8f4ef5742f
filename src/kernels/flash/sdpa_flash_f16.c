/* fp16 flash attention (attn/sdpa_f16.h): the f32 flash loops (sdpa_flash.c,
 * sdpa_flash_backward.c) on fp16 q, k, v, which they convert to f32 a block
 * at a time (attn_flash_in, the fp16 case of flash_operands.c). This file
 * picks the tile kernels and the conversion of a path and checks the
 * arguments; the arithmetic is the f32 backend's. */
#include "attn/kernels.h"
#include "attn/sdpa_f16.h"
#include "attn/tensor.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/kern.h"
#include "kernels/lowp/gemm_lowp_internal.h"

/* The simd path: the active level's tile kernels and fp16 conversion (F16C
 * on AVX2, AVX-512's, NEON's), wherever the level is not the portable one. */
static int simd_usable(void) { return attn_kern_get()->isa != ATTN_ISA_GENERIC; }

int attn_sdpa_f16_path_available(attn_lowp_path path) {
  if (path == ATTN_LOWP_AUTO || path == ATTN_LOWP_PORTABLE) return 1;
  if (path == ATTN_LOWP_SIMD) return simd_usable();
  return 0;
}

/* The tile kernels of path (*portable: with the portable conversion), or
 * NULL (error set). */
static const attn_flash_ops *ops_for(attn_lowp_path path, int *portable) {
  if (path == ATTN_LOWP_AUTO) path = simd_usable() ? ATTN_LOWP_SIMD : ATTN_LOWP_PORTABLE;
  *portable = path == ATTN_LOWP_PORTABLE;
  switch (path) {
  case ATTN_LOWP_PORTABLE: return attn_flash_ops_generic();
  case ATTN_LOWP_SIMD:
    if (simd_usable()) return attn_kern_get()->flash;
    attn_set_error(ATTN_EUNSUPPORTED, "sdpa f16: the simd path needs a vector level (avx2, "
                                      "avx512, neon); the active level is generic");
    return NULL;
  case ATTN_LOWP_AMX:
    attn_set_error(ATTN_EUNSUPPORTED, "sdpa f16: no AMX path (AMX-FP16 is not supported; "
                                      "auto, portable or simd)");
    return NULL;
  default:
    attn_set_error(ATTN_EUNSUPPORTED,
                   "sdpa f16: path %d is not an fp16 flash path (auto, portable or simd)",
                   (int)path);
    return NULL;
  }
}

/* The common checks of forward and backward, then the kernels of path. */
static attn_status check(attn_lowp_path path, const attn_sdpa_desc *d, const uint16_t *q,
                         const uint16_t *k, const uint16_t *v, attn_flash_in *in,
                         const attn_flash_ops **ops) {
  attn_sdpa_resolved rs;
  /* validate reads only sizes, strides and NULL-ness of the pointers */
  attn_status st =
      attn_sdpa_validate(d, (const float *)(const void *)q, (const float *)(const void *)k,
                         (const float *)(const void *)v, &rs);
  if (st) return st;
  if (attn_sdpa_has_positions(d))
    return attn_set_error(ATTN_EUNSUPPORTED, "sdpa f16: position variants and block-sparse "
                                             "layouts are not supported (use the f32 flash)");
  int portable;
  if (!(*ops = ops_for(path, &portable))) return ATTN_EUNSUPPORTED;
  attn_flash_in_of(ATTN_F16, portable, q, k, v, in); /* the fp16 operand hook */
  return ATTN_OK;
}

attn_status attn_sdpa_forward_f16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                       const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                       float *out, float *lse) {
  attn_flash_in in;
  const attn_flash_ops *ops;
  attn_status st = check(path, d, q, k, v, &in, &ops);
  if (st) return st;
  if ((!out || !lse) && d->Lq > 0)
    return attn_set_error(ATTN_EINVAL, "sdpa f16: %s is NULL", !out ? "out" : "lse");
  return attn_sdpa_forward_flash_in(ops, d, &in, out, lse);
}

attn_status attn_sdpa_backward_f16_path(attn_lowp_path path, const attn_sdpa_desc *d,
                                        const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                        const float *out, const float *lse, const float *dout,
                                        float *dq, float *dk, float *dv) {
  attn_flash_in in;
  const attn_flash_ops *ops;
  attn_status st = check(path, d, q, k, v, &in, &ops);
  if (st) return st;
  st = attn_sdpa_check_backward_ptrs(d, "sdpa f16 backward", out, lse, dout, dq, dk, dv);
  if (st) return st;
  return attn_sdpa_backward_flash_in(ops, d, &in, out, lse, dout, dq, dk, dv);
}

attn_status attn_sdpa_forward_f16(const attn_sdpa_desc *d, const uint16_t *q, const uint16_t *k,
                                  const uint16_t *v, float *out, float *lse) {
  return attn_sdpa_forward_f16_path(ATTN_LOWP_AUTO, d, q, k, v, out, lse);
}

attn_status attn_sdpa_backward_f16(const attn_sdpa_desc *d, const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const float *out, const float *lse,
                                   const float *dout, float *dq, float *dk, float *dv) {
  return attn_sdpa_backward_f16_path(ATTN_LOWP_AUTO, d, q, k, v, out, lse, dout, dq, dk, dv);
}
