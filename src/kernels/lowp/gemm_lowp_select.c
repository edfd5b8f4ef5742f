/* Which micro-kernel a low-precision GEMM runs: AMX when the CPU has it and
 * the kernel granted the tile permission, else the level's SIMD kernel of
 * the dtype (kern.h: AVX512_BF16 / VNNI, or f32 FMA on bf16 / f16 widened
 * while packing; at the avx2 level AVX2 + FMA, and int8 by VPMADDWD), else
 * the portable one; or the path a caller forces (tests, benches). */
#include <string.h>

#include "kernels/arch/amx/amx.h"
#include "kernels/lowp/gemm_lowp_internal.h"
#include "kernels/kern.h"

static int is_dtype(const char *d, const char *name) { return d && !strcmp(d, name); }

static const attn_lowp_kernel *kernel_for(attn_lowp_path path, const char *dtype) {
  const attn_lowp_ops *l = &attn_kern_get()->lowp;
  if (is_dtype(dtype, "bf16")) {
    if (path == ATTN_LOWP_AMX) return l->bf16_amx && attn_amx_ready() ? l->bf16_amx : NULL;
    /* no bf16 dot product at this level: bf16 widened to f32 while packing */
    if (path == ATTN_LOWP_SIMD) return l->bf16_simd ? l->bf16_simd : l->f32cvt_simd;
    /* widened to f32 whatever the level has (AUTO's where the dot product is slow) */
    if (path == ATTN_LOWP_F32)
      return l->f32cvt_simd ? l->f32cvt_simd : attn_lowp_kernel_f32_portable();
    return attn_lowp_kernel_f32_portable();
  }
  if (is_dtype(dtype, "f16")) {
    if (path == ATTN_LOWP_AMX) return NULL; /* AMX-FP16 is not supported */
    if (path == ATTN_LOWP_SIMD || path == ATTN_LOWP_F32) return l->f32cvt_simd;
    return attn_lowp_kernel_f32_portable();
  }
  if (is_dtype(dtype, "i8")) {
    if (path == ATTN_LOWP_AMX) return l->i8_amx && attn_amx_ready() ? l->i8_amx : NULL;
    if (path == ATTN_LOWP_SIMD) return l->i8_simd;
    if (path == ATTN_LOWP_F32) return NULL; /* int8 products are exact in integers */
    return attn_lowp_kernel_i8_portable();
  }
  return NULL;
}

/* AUTO: AMX, else the level's vector kernel (for bf16 its dot product only
 * where it is fast, attn_cpu_features.bf16_dot_fast, else widened to f32),
 * else portable */
static attn_lowp_path resolve(attn_lowp_path path, const char *dtype) {
  if (path != ATTN_LOWP_AUTO) return path;
  if (kernel_for(ATTN_LOWP_AMX, dtype)) return ATTN_LOWP_AMX;
  const attn_lowp_ops *l = &attn_kern_get()->lowp;
  if (is_dtype(dtype, "bf16") && l->bf16_simd && !l->bf16_dot_auto) return ATTN_LOWP_F32;
  if (kernel_for(ATTN_LOWP_SIMD, dtype)) return ATTN_LOWP_SIMD;
  return ATTN_LOWP_PORTABLE;
}

static int path_ok(attn_lowp_path path) { return path >= ATTN_LOWP_AUTO && path <= ATTN_LOWP_F32; }

attn_status attn_lowp_select(attn_lowp_path path, const char *dtype,
                             const attn_lowp_kernel **out) {
  *out = NULL;
  if (!is_dtype(dtype, "bf16") && !is_dtype(dtype, "f16") && !is_dtype(dtype, "i8"))
    return attn_set_error(ATTN_EINVAL, "lowp: unknown dtype '%s' (bf16, f16, i8)",
                          dtype ? dtype : "");
  if (!path_ok(path)) return attn_set_error(ATTN_EINVAL, "lowp: unknown path %d", (int)path);
  *out = kernel_for(resolve(path, dtype), dtype);
  if (!*out)
    return attn_set_error(ATTN_EUNSUPPORTED, "lowp: %s path '%s' not available on this CPU",
                          dtype, attn_lowp_path_name(path, dtype));
  return ATTN_OK;
}

int attn_lowp_path_available(attn_lowp_path path, const char *dtype) {
  if (!path_ok(path)) return 0;
  return kernel_for(resolve(path, dtype), dtype) != NULL;
}

const char *attn_lowp_path_name(attn_lowp_path path, const char *dtype) {
  if (!path_ok(path)) return "?";
  attn_lowp_path r = resolve(path, dtype);
  const attn_lowp_kernel *k = kernel_for(r, dtype);
  if (k && k->path) return k->path;
  return r == ATTN_LOWP_AMX    ? "amx"
         : r == ATTN_LOWP_SIMD ? "simd"
         : r == ATTN_LOWP_F32  ? "f32"
                               : "portable";
}

int attn_lowp_kernel_mr(const attn_lowp_kernel *kr) { return kr->mr; }
