/* The kernel seam: one table of micro-kernels per ISA level.
 *
 * cpu.c alone reads the CPU features (once) and decides the level
 * (ATTN_CPU=generic|avx2|avx512|neon|native caps it); dispatch.c fills the
 * tables and holds the active one; every loop in kernels/, nn/ and train/
 * calls through attn_kern() and never tests a CPU feature itself. Per-ISA files (gemm_avx2.c,
 * sdpa_flash_neon.c, row_ops_avx512.c, ...) each export one getter that
 * returns their kernel set, or NULL where the build has no such code (an
 * x86 file on arm64 and the reverse); dispatch.c calls a getter only when
 * the CPU has the level.
 *
 * Adding a level = one micro-kernel file per family below (arch/<isa>/) + its
 * entries in cpu.c and dispatch.c; no tile loop is copied. */
#ifndef ATTN_KERN_H
#define ATTN_KERN_H

#include <stdatomic.h>
#include <stdint.h>

#include "attn/kernels.h"
#include "kernels/gemm/gemm_ukr.h"
#include "kernels/lowp/gemm_lowp_internal.h"
#include "kernels/flash/flash_tiles.h"
#include "kernels/flash/sdpa_flash_bf16.h"
#include "kernels/flash/sdpa_flash_i8.h"
#include "kernels/decode/decode_ukr.h"
#include "kernels/iface.h"

/* ---- row and elementwise kernels ------------------------------------------
 * One set per level; an entry may be NULL, in which case the table takes the
 * generic one (attn_row_ops_generic, always complete). Arguments are
 * validated by the callers; n >= 0. (attn_adam_scalars: kernels/iface.h) */

typedef struct {
  const char *name;
  /* y[i] = e^x[i] within a few ulp of expf (-inf -> 0, x > 88.8 -> inf, NaN
   * -> NaN); in place allowed. */
  void (*vexp)(const float *x, float *y, int64_t n);
  /* y[j] = exp(x[j] - m) (y may be NULL, or x); returns the sum of those
   * values (any fixed summation order: deterministic, not thread-dependent). */
  float (*exp_sub_sum)(const float *x, float *y, int64_t n, float m);
  /* exact GELU y = x/2 erfc(-x/sqrt2) and its derivative times dy, a few ulp */
  void (*gelu)(const float *x, float *y, int64_t n);
  void (*gelu_backward)(const float *x, const float *dy, float *dx, int64_t n);
  /* Bit-identical to the portable Philox dropout: element i uses dropout's
   * stream (dropout_stream.h) at offset + i; y[i] = keep ? x[i] * scale : 0;
   * mask may be NULL; x == y allowed. */
  void (*dropout)(const float *x, float *y, uint8_t *mask, int64_t n, float p, float scale,
                  uint64_t seed, uint64_t offset);
  /* One Adam/AdamW update in place, bit-identical to the portable loop
   * (only IEEE-exact operations: mul, fma, sqrt, div, add). */
  void (*adam)(const attn_adam_scalars *k, float *p, const float *g, float *m, float *v,
               int64_t n);
  /* LayerNorm of one row: mean and biased variance accumulated in double
   * (two passes), rstd = 1/sqrtf(var + eps), y = (x - mean) rstd w + b (w, b
   * may be NULL). */
  void (*layernorm_row)(const float *x, const float *w, const float *b, float *y, float eps,
                        int64_t n, float *mean, float *rstd);
  /* dx of one row: dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w
   * (w NULL: g = dy), xhat = (x - mean) rstd; sums in f32, any fixed order. */
  void (*layernorm_backward_row)(const float *x, const float *w, float mean, float rstd,
                                 const float *dy, float *dx, int64_t n);
  /* min(x, 0) and max(x, 0) over a row; *bad = 1 if any value is NaN (exact) */
  void (*minmax_row)(const float *x, int64_t n, float *lo, float *hi, int *bad);
  /* q = clamp(round_half_even(x / s) + z, 0, 255), bit-identical to generic */
  void (*quantize_row_u8)(const float *x, int64_t n, float s, int32_t z, uint8_t *q);
  /* y[j] = (sx * sw[j]) * (float)(acc[j] - zx * cs[j]) (+ b[j]), no FMA,
   * wrapping int32 arithmetic; bit-identical to generic */
  void (*dequant_row)(const int32_t *acc, int64_t n, float sx, int32_t zx, const float *sw,
                      const int32_t *cs, const float *b, float *y);
  /* one row of the small GEMM path with B transposed (attn_gemm_small_f32's
   * bits: the decode steps' Linears, M = 1): for j < N, acc = the sum over p
   * = 0 .. K-1 in order of a[p inca] B[j ldb + p], each product rounded,
   * then added (no FMA); c[j] = alpha acc, or alpha acc + beta c[j] where
   * beta != 0. N, K > 0. */
  void (*gemv_nt)(int64_t N, int64_t K, float alpha, const float *a, int64_t inca, const float *B,
                  int64_t ldb, float beta, float *c);
  /* conversions, bit-identical to the portable ones (round to nearest even;
   * NaN stays NaN) */
  void (*f16_to_f32)(const uint16_t *x, float *y, int64_t n);
  void (*f32_to_f16)(const float *x, uint16_t *y, int64_t n);
  void (*f32_to_bf16)(const float *x, uint16_t *y, int64_t n);
  void (*bf16_to_f32)(const uint16_t *x, float *y, int64_t n);
  void (*f32_round_bf16)(const float *x, float *y, int64_t n); /* y = (float)bf16(x) */
  /* ---- attention dropout's mask (sdpa_dropout.h) ----
   * x[c] (c < n, keys j0 + c of the row whose key is k) := keep ? x[c] *
   * scale : 0, the keep bits exactly those of the portable kernel. */
  void (*sdpa_dropout)(const uint32_t k[2], uint32_t thr, float scale, int64_t j0, int64_t n,
                       float *x);
} attn_row_ops;

/* ---- the getters of the per-ISA files (NULL: not in this build) --------- */
const attn_row_ops *attn_row_ops_generic(void); /* row_ops_generic.c, complete */
const attn_row_ops *attn_row_ops_avx2(void);    /* row_ops_avx2.c (AVX2 + FMA + F16C) */
const attn_row_ops *attn_row_ops_avx512(void);  /* row_ops_avx512.c */
const attn_row_ops *attn_row_ops_neon(void);    /* row_ops_neon.c (arm64) */

/* GEMM micro-kernels (attn_gemm_kernel_f32, gemm_internal.h) */
const attn_gemm_kernel_f32 *attn_gemm_kernel_generic_f32(void); /* gemm_generic.c */
const attn_gemm_kernel_f32 *attn_gemm_kernel_avx2_f32(void);    /* gemm_avx2.c */
const attn_gemm_kernel_f32 *attn_gemm_kernel_avx512_f32(void);  /* gemm_avx512.c */
const attn_gemm_kernel_f32 *attn_gemm_kernel_neon_f32(void);    /* gemm_neon.c */
/* the avx2 level's 6x16 micro-kernel itself (x86-64 builds only; run it
 * only where the avx2 level is available), for the low-precision kernels
 * that pack into its panels (gemm_lowp_f32_avx2.c) */
void attn_gemm_ukr_avx2_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                             float alpha, float beta);

/* Flash attention tile kernels (attn_flash_ops, sdpa_flash.h) */
const attn_flash_ops *attn_flash_ops_generic(void); /* sdpa_flash_generic.c */
const attn_flash_ops *attn_flash_ops_avx2(void);    /* sdpa_flash_avx2.c */
const attn_flash_ops *attn_flash_ops_avx512(void);  /* sdpa_flash_avx512.c */
const attn_flash_ops *attn_flash_ops_neon(void);    /* sdpa_flash_neon.c */

/* Decode attention's micro-kernels (attn_decode_ops, decode_ukr.h) */
const attn_decode_ops *attn_decode_ops_generic(void); /* decode_generic.c */
const attn_decode_ops *attn_decode_ops_avx2(void);    /* decode_avx2.c */
const attn_decode_ops *attn_decode_ops_avx2_vnni(void); /* + AVX-VNNI int8 (decode_avx2_vnni.c) */
const attn_decode_ops *attn_decode_ops_avx512(void);  /* decode_avx512.c */
const attn_decode_ops *attn_decode_ops_avx512_vnni(void); /* + AVX512_VNNI int8 scores */
/* base + the AVX512_BF16 dot products (decode_avx512_bf16.c) */
const attn_decode_ops *attn_decode_ops_avx512_bf16(const attn_decode_ops *base);
const attn_decode_ops *attn_decode_ops_neon(void);    /* decode_neon.c */

/* ---- low precision --------------------------------------------------------
 * NULL where the level (or the CPU at that level) lacks the unit. AMX entries
 * are set when the CPU has the tiles; using them also needs the kernel's
 * permission (attn_amx_ready(), kernels/arch/amx/amx.h). */

typedef struct {
  /* packing and epilogue helpers of the low-precision GEMM driver
   * (gemm_lowp.c); NULL: its portable code (the same bytes) */
  void (*interleave)(const void *t, int g, int64_t w, int64_t n, uint32_t *out);
  void (*pack_t32)(const void *x, int f32, int64_t sp, int64_t nrows, int64_t kc, int64_t kcp,
                   uint16_t *dst);
  void (*epi_f32)(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
                  int64_t rows, int64_t cols, int first);
  /* y[r ldy + c] = bf16(x[r ldx + c]) and sum[c] += x (sum may be NULL), rows in order */
  void (*bf16_convert_rows)(const float *x, int64_t ldx, uint16_t *y, int64_t ldy, int64_t rows,
                            int64_t cols, float *sum);
  void (*bf16_epi_piece)(const attn_bf16_piece *p, int64_t rows, int64_t n);
  /* GEMM micro-kernels by path: SIMD bf16 (dot products), SIMD f16 / bf16
   * converted to f32, SIMD int8, AMX bf16 and int8 */
  const attn_lowp_kernel *bf16_simd, *f32cvt_simd, *i8_simd, *bf16_amx, *i8_amx;
  /* flash attention: bf16 tiles on AMX and on the vector units (AVX512_BF16
   * VDPBF16PS; at levels without a bf16 dot product, bf16 widened to f32 and
   * FMA), int8 scores (VNNI, AMX), and the int8 path's row helpers (NULL:
   * portable) */
  const attn_flash_bf16_ops *flash_bf16_amx, *flash_bf16_simd;
  attn_i8_scores_fn i8_scores_simd, i8_scores_amx;
  attn_i8_quantize_fn i8_quantize_row;
  attn_i8_dequant_fn i8_dequant;
  attn_i8_colsum_fn i8_colsum;
  /* the automatic choices take bf16_simd, flash_bf16_simd and the decode's
   * bf16 dot products (attn_cpu_features.bf16_dot_fast); forced paths and
   * the int8 flash's tiles take them whatever this says */
  int bf16_dot_auto;
} attn_lowp_ops;

/* ---- the table -------------------------------------------------------- */
typedef struct {
  attn_isa isa;
  const char *name;
  const attn_gemm_kernel_f32 *gemm; /* packed f32 GEMM micro-kernel */
  const attn_flash_ops *flash;      /* f32 flash attention tiles */
  const attn_decode_ops *decode;    /* decode attention over a KV cache */
  attn_row_ops row;                 /* complete (missing entries from lower levels) */
  attn_lowp_ops lowp;
} attn_kern;

/* The active level's table (chosen once; attn_set_isa switches it). The
 * loops ask for it per tile: after the first call, one acquire load here
 * (dispatch.c builds the tables once, then publishes the pointer). */
extern _Atomic(const attn_kern *) attn_kern_active_;
const attn_kern *attn_kern_get_slow(void);
static inline const attn_kern *attn_kern_get(void) {
  const attn_kern *k = atomic_load_explicit(&attn_kern_active_, memory_order_acquire);
  return k ? k : attn_kern_get_slow();
}
/* The table of a level, or NULL where this CPU or build lacks it. */
const attn_kern *attn_kern_at(attn_isa isa);

#endif
