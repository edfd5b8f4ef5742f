/* attn — low-precision kernels: bf16 / fp16 / int8 GEMM, dynamic int8
 * quantization, a quantized Linear, and fake quantization for QAT.
 *
 * Storage: bf16 and fp16 values are uint16_t bit patterns; int8 GEMM operands
 * are uint8_t (A, activations) and int8_t (B, weights). Row-major, with the
 * transpose / leading-dimension conventions of attn_gemm_f32 (kernels.h).
 *
 * Paths are chosen at run time from attn_cpu():
 *   bf16: AMX tiles (TDPBF16PS) > AVX512_BF16 (VDPBF16PS) > convert to f32
 *         while packing + the level's f32 FMA micro-kernel (AVX-512 without
 *         AVX512_BF16, AVX2 + FMA) > the portable f32 micro-kernel. (On the Xeon this was measured on,
 *         VDPBF16PS runs at half the f32 FMA flop rate, so the AVX512_BF16
 *         path is ~0.6x the f32 GEMM: it is the fallback for a refused AMX
 *         permission, not a speed-up; AMX is 2.5-6x the f32 GEMM.)
 *   fp16: f16 is converted to f32 while packing and multiplied with f32 FMA
 *         (the AVX-512 or AVX2 f32 micro-kernel, else the portable one; F16C
 *         converts at the avx2 level). Chosen over
 *         AVX512_FP16 FMAs: those accumulate in fp16 (11-bit significand), so
 *         even short blocks lose ~3 bits against f32 accumulation; converting
 *         while packing keeps the result as exact as f32 GEMM of the f16
 *         inputs and halves the memory traffic of the operands.
 *   int8: AMX tiles (TDPBUSD) > AVX512_VNNI (VPDPBUSD) > AVX2 (operands
 *         widened to 16 bits, VPMADDWD: exact, where VPMADDUBSW would
 *         saturate) > portable C; all are u8 x s8 -> s32 and bit-exact.
 * Every result is independent of the thread count. AMX needs the kernel's
 * permission (arch_prctl ARCH_REQ_XCOMP_PERM), requested once; when it is
 * refused the AVX-512 path is used instead. */
#ifndef ATTN_LOWP_H
#define ATTN_LOWP_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/status.h"
#include "attn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- conversions of n values (round to nearest even; NaN stays NaN; the
 * scalar attn_f32_to_bf16 / attn_f32_to_f16 / ... are in tensor.h) ------- */
ATTN_API void attn_f32_to_bf16_n(const float *x, uint16_t *y, int64_t n);
ATTN_API void attn_bf16_to_f32_n(const uint16_t *x, float *y, int64_t n);
ATTN_API void attn_f32_to_f16_n(const float *x, uint16_t *y, int64_t n);
ATTN_API void attn_f16_to_f32_n(const uint16_t *x, float *y, int64_t n);

/* ---- GEMM --------------------------------------------------------------------
 * C[M,N] (f32) = alpha * op(A) · op(B) + beta * C, products accumulated in f32.
 * beta == 0 means C is write-only. */
ATTN_API attn_status attn_gemm_bf16(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                    float alpha, const uint16_t *A, int64_t lda, const uint16_t *B,
                                    int64_t ldb, float beta, float *C, int64_t ldc);
/* f32 inputs rounded to bf16 while packing (mixed-precision Linear layers). */
ATTN_API attn_status attn_gemm_bf16_f32in(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                          float alpha, const float *A, int64_t lda, const float *B,
                                          int64_t ldb, float beta, float *C, int64_t ldc);
ATTN_API attn_status attn_gemm_f16(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                   float alpha, const uint16_t *A, int64_t lda, const uint16_t *B,
                                   int64_t ldb, float beta, float *C, int64_t ldc);
/* C[M,N] (s32) = op(A)[u8] · op(B)[s8], exact (overwrites C). K <= 65536 so
 * no sum can overflow s32 (|a·b| <= 255·128 per term). */
ATTN_API attn_status attn_gemm_u8s8s32(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                       const uint8_t *A, int64_t lda, const int8_t *B, int64_t ldb,
                                       int32_t *C, int64_t ldc);
#define ATTN_GEMM_I8_MAX_K 65536

/* Which path a low-precision GEMM runs (tests and benches force one; AUTO is
 * what the functions above do). SIMD = the active level's vector kernel:
 * avx512: AVX512_BF16 for bf16 (else f32 FMA on bf16 widened while packing),
 * f32 FMA for fp16, AVX512_VNNI for int8; avx2: AVX2 + FMA on bf16 / fp16
 * widened to f32, int8 widened to 16 bits and VPMADDWD (exact). A forced
 * path the CPU (or the AMX permission) lacks gives ATTN_EUNSUPPORTED. AUTO:
 * AMX, else SIMD, but for bf16 F32 (below) where the CPU's bf16 dot product
 * is slow (Intel's AVX512_BF16: half the f32 FMA's rate). */
typedef enum {
  ATTN_LOWP_AUTO = 0,
  ATTN_LOWP_PORTABLE,
  ATTN_LOWP_SIMD,
  ATTN_LOWP_AMX,
  /* bf16 (and f16) data widened to f32 and multiplied with the level's f32
   * FMA: the GEMMs' packing widens them (bf16: what AUTO takes where the CPU
   * has a slow bf16 dot product, attn_cpu_features.bf16_dot_fast; f16: the
   * same kernel as SIMD; not int8); bf16 flash attention runs the operands
   * widened a block at a time on the level's f32 flash kernels (every level) */
  ATTN_LOWP_F32
} attn_lowp_path;
/* 1 if `path` can run `dtype` ("bf16", "f16", "i8") here, else 0. */
ATTN_API int attn_lowp_path_available(attn_lowp_path path, const char *dtype);
/* Name of the kernel `path` means for dtype at the active level ("amx",
 * "avx512_bf16", "avx512_vnni", "avx512_f32fma", "avx2_f32fma", "avx2_i16",
 * "portable"; "simd" where the level has none); for AUTO, the one it picks. */
ATTN_API const char *attn_lowp_path_name(attn_lowp_path path, const char *dtype);
ATTN_API attn_status attn_gemm_bf16_path(attn_lowp_path path, int transa, int transb, int64_t M,
                                         int64_t N, int64_t K, float alpha, const uint16_t *A,
                                         int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                                         float *C, int64_t ldc);
ATTN_API attn_status attn_gemm_bf16_f32in_path(attn_lowp_path path, int transa, int transb,
                                               int64_t M, int64_t N, int64_t K, float alpha,
                                               const float *A, int64_t lda, const float *B,
                                               int64_t ldb, float beta, float *C, int64_t ldc);
ATTN_API attn_status attn_gemm_f16_path(attn_lowp_path path, int transa, int transb, int64_t M,
                                        int64_t N, int64_t K, float alpha, const uint16_t *A,
                                        int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                                        float *C, int64_t ldc);
ATTN_API attn_status attn_gemm_u8s8s32_path(attn_lowp_path path, int transa, int transb, int64_t M,
                                            int64_t N, int64_t K, const uint8_t *A, int64_t lda,
                                            const int8_t *B, int64_t ldb, int32_t *C, int64_t ldc);
/* Integer reference: plain triple loop in int64, C = op(A)·op(B). */
ATTN_API attn_status attn_gemm_u8s8s32_ref(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                           const uint8_t *A, int64_t lda, const int8_t *B,
                                           int64_t ldb, int32_t *C, int64_t ldc);

/* ---- dynamic quantization ----------------------------------------------------
 * Weights: per output channel (row of W [rows, n]), symmetric int8:
 *   scale[r] = max|W[r,:]| / 127, q = clamp(round(w / scale), -127, 127);
 *   a row of zeros gets scale 0 and q = 0. Rounding is to nearest even.
 * Activations: per row, asymmetric u8 (like torch's dynamic quantization,
 * but per row and over the full 0..255 range, since VPDPBUSD/TDPBUSD do not
 * saturate pairs): lo = min(x, 0), hi = max(x, 0), scale = (hi - lo) / 255,
 * zero = clamp(round(-lo / scale), 0, 255), q = clamp(round(x / scale) + zero,
 * 0, 255); x ≈ scale * (q - zero). A row of zeros gets scale 0, zero 0. */
ATTN_API attn_status attn_quantize_weights_s8(const float *W, int64_t rows, int64_t n, int8_t *q,
                                              float *scale);
ATTN_API attn_status attn_quantize_rows_u8(const float *x, int64_t rows, int64_t n, uint8_t *q,
                                           float *scale, int32_t *zero);

/* ---- quantized Linear: y [rows, out] = x [rows, in] · Wᵀ + bias ------------
 * W [out, in] is quantized per output channel (above); at run time x is
 * quantized per row, multiplied with the int8 GEMM (u8 x s8 -> s32), and
 * dequantized with the zero-point compensation
 *   y[i,j] = sx[i] * sw[j] * (acc[i,j] - zx[i] * colsum[j]) + bias[j],
 * colsum[j] = sum_k Wq[j,k], fused into the GEMM's output tile. */
typedef struct {
  int64_t in, out;
  int8_t *w;       /* [out, in] */
  float *scale;    /* [out] */
  int32_t *colsum; /* [out] */
  float *bias;     /* [out] or NULL */
  int8_t *wp;      /* w packed once for the int8 micro-kernels (internal layout) */
  int64_t kp;      /* in, padded for the packed layout */
} attn_qlinear;
/* Fills *q (owning its arrays; release with attn_qlinear_free). bias may be NULL. */
ATTN_API attn_status attn_qlinear_quantize(attn_qlinear *q, const float *W, const float *bias,
                                           int64_t out, int64_t in);
ATTN_API void attn_qlinear_free(attn_qlinear *q);
ATTN_API attn_status attn_qlinear_forward(const attn_qlinear *q, const float *x, int64_t rows,
                                          float *y);
ATTN_API attn_status attn_qlinear_forward_path(attn_lowp_path path, const attn_qlinear *q,
                                               const float *x, int64_t rows, float *y);
/* Bytes of the quantized weights + scales + colsums + bias (as stored in a
 * file; the packed copy wp is not counted). */
ATTN_API int64_t attn_qlinear_bytes(const attn_qlinear *q);

/* ---- fake quantization (QAT) -------------------------------------------------
 * Forward: q = round(x / scale) + zero; y = (clamp(q, qmin, qmax) - zero) * scale.
 * mask[i] = 1 where qmin <= q <= qmax (the gradient passes), 0 where clipped
 * (may be NULL). Backward (straight-through estimator): dx = dy * mask.
 * A scale <= 0 (or not finite) is ATTN_EINVAL. */
ATTN_API attn_status attn_fake_quant_per_tensor_f32(const float *x, float *y, uint8_t *mask,
                                                    int64_t n, float scale, int32_t zero,
                                                    int32_t qmin, int32_t qmax);
/* w, y [rows, n]; scale[rows] (zero = 0), symmetric int8 is qmin -127, qmax 127.
 * A zero scale leaves the row at 0 with mask 1 (an all-zero channel). */
ATTN_API attn_status attn_fake_quant_per_channel_f32(const float *w, float *y, uint8_t *mask,
                                                     int64_t rows, int64_t n, const float *scale,
                                                     int32_t qmin, int32_t qmax);
ATTN_API attn_status attn_fake_quant_backward_f32(const float *dy, const uint8_t *mask, float *dx,
                                                  int64_t n);
/* scale[r] = max|w[r,:]| / 127 (the weight scales attn_quantize_weights_s8 uses). */
ATTN_API attn_status attn_quant_scales_per_channel_f32(const float *w, int64_t rows, int64_t n,
                                                       float *scale);
/* Per-tensor affine u8 parameters covering [min(lo,0), max(hi,0)]: as for
 * the activation rows above. */
ATTN_API attn_status attn_quant_params_u8(float lo, float hi, float *scale, int32_t *zero);

#ifdef __cplusplus
}
#endif
#endif
