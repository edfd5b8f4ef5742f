/* Internal to the low-precision GEMMs (include/attn/lowp.h): the packed
 * driver shared by bf16 / fp16 / int8 (gemm_lowp.c), its micro-kernel
 * descriptors (gemm_bf16_*.c, gemm_f16.c, gemm_i8_*.c) and the epilogues
 * that turn a finished tile into C (plain f32, s32, or the quantized
 * Linear's dequantization in src/nn/qlinear.c). */
#ifndef ATTN_GEMM_LOWP_INTERNAL_H
#define ATTN_GEMM_LOWP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attn/kernels.h"
#include "attn/lowp.h"
#include "kernels/gemm/gemm_ukr.h"
#include "kernels/iface_lowp.h"

/* LOWP_F32R: f32 operands of the bf16 GEMM, rounded to bf16 while packing
 * (also on the portable path, so every path computes the same products). */


/* Packed panel layout, for a panel of w rows (mr or nr) and depth kcp (a
 * multiple of the kernel's kgroup, zero past the valid depth and rows):
 *   element (r, p) at dst[(p / g) * w * g + r * g + p % g]
 * g = 1: k-major (f32 micro-kernels); g = 2 / 4: pairs / quads of depth per
 * row (VDPBF16PS, VPDPBUSD, and the VNNI layout of AMX B tiles); g = 32 / 64:
 * rows of 64 bytes (AMX A tiles). */
struct attn_lowp_kernel {
  const char *name;
  const char *path; /* attn_lowp_path_name's word for it: "avx2_f32fma", "avx512_vnni", ... */
  int mr, nr;
  int ga, gb;       /* depth group of packed a~ and b~ */
  int kgroup;       /* packed depth is padded to a multiple of this */
  int64_t mc, kc, nc;
  attn_lowp_type pa, pb; /* packed element types */
  int int_acc;      /* tile holds s32 (else f32) */
  /* tile[mr * nr] (row-major, overwritten) = a~[kcp] · b~[kcp] */
  void (*ukr)(int64_t kcp, const void *a, const void *b, void *tile);
  /* Optional (integer tiles): row 0 of the tile only, the same values (the
   * driver's call for a tile with one valid row: one-token inference reads
   * the weights at the memory's speed instead of computing mr rows). */
  void (*ukr_row)(int64_t kcp, const void *a, const void *b, void *tile);
  /* Optional (f32 tiles): c[mr, nr] (row stride ldc) = alpha * a~ · b~ +
   * beta * c, beta == 0: c write-only (the f32 GEMM's micro-kernel
   * contract, gemm_ukr.h). The driver calls it instead of ukr
   * and the epilogue for whole tiles where the epilogue is the plain f32
   * one (attn_lowp_epi.f32_direct), saving the tile's store and reload. */
  attn_gemm_ukr_f32 ukr_c;
  /* Optional: packs panels exactly as the driver's pack() (same bytes,
   * zero padding included) and returns 1, or returns 0 where it does not
   * handle the source (then pack() runs). */
  int (*pack)(const attn_lowp_src *s, int64_t r0, int64_t nrows, int64_t p0, int64_t kc,
              int64_t kcp, int w, void *dst);
  void (*begin)(void); /* per thread before the first ukr (AMX tile config), or NULL */
  void (*end)(void);
};


/* AVX-512 versions (gemm_lowp_avx512.c), same results; registered in the
 * avx512 level's table (dispatch.c), callers go through attn_kern_get(). */
void attn_lowp_f32_to_bf16_avx512(const float *x, uint16_t *y, int64_t n);
void attn_lowp_bf16_to_f32_avx512(const uint16_t *x, float *y, int64_t n);
void attn_lowp_f16_to_f32_avx512(const uint16_t *x, float *y, int64_t n);
void attn_lowp_f32_round_bf16_avx512(const float *x, float *y, int64_t n);
/* g = 2 runs of 16-bit or g = 4 runs of 8-bit values (run i at t + i*w
 * elements) interleaved into n 32-bit words */
void attn_lowp_interleave_avx512(const void *t, int g, int64_t w, int64_t n, uint32_t *out);
/* AMX A panels (w = 32 rows, g = 32) of rows [0, nrows) and depth [0, kc) of
 * a source whose rows are contiguous: element (r, p) at x[p * sp + r],
 * bf16 (f32 = 0) or f32 rounded to bf16 (f32 = 1); depth padded with zeros
 * to kcp (a multiple of 32), rows to a multiple of 32. Same bytes as pack()'s
 * portable branch, by 16 x 16 transposes of depth-pair words. */
void attn_lowp_pack_t32_avx512(const void *x, int f32, int64_t sp, int64_t nrows, int64_t kc,
                               int64_t kcp, uint16_t *dst);
void attn_lowp_epi_f32_avx512(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0,
                              int64_t j0, int64_t rows, int64_t cols, int first);

/* AVX2 versions (gemm_lowp_avx2.c), same results; the avx2 level's table. */
void attn_lowp_epi_f32_avx2(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
                            int64_t rows, int64_t cols, int first);
void attn_lowp_interleave_avx2(const void *t, int g, int64_t w, int64_t n, uint32_t *out);
/* attn_lowp_kernel.pack for f32 panels (g = 1) of f32, f32-rounded-to-bf16,
 * bf16 or f16 sources: conversion and 8 x 8 transposes in registers */
int attn_lowp_pack_f32_avx2(const attn_lowp_src *s, int64_t r0, int64_t nrows, int64_t p0,
                            int64_t kc, int64_t kcp, int w, void *dst);



/* Kernels; NULL where the build has no such code. dispatch.c registers them
 * where the CPU has the unit (attn_kern_get()->lowp). */
const attn_lowp_kernel *attn_lowp_kernel_bf16_amx(void);
const attn_lowp_kernel *attn_lowp_kernel_bf16_avx512(void);
const attn_lowp_kernel *attn_lowp_kernel_f32_avx512(void);   /* f16 / bf16 converted */
const attn_lowp_kernel *attn_lowp_kernel_f32_avx2(void);     /* f16 / bf16 converted, AVX2 + FMA */
const attn_lowp_kernel *attn_lowp_kernel_f32_portable(void); /* f16 / bf16 converted */
const attn_lowp_kernel *attn_lowp_kernel_i8_amx(void);
const attn_lowp_kernel *attn_lowp_kernel_i8_vnni(void);
const attn_lowp_kernel *attn_lowp_kernel_i8_avx2(void); /* VPMADDWD on widened operands, exact */
const attn_lowp_kernel *attn_lowp_kernel_i8_portable(void);

/* Validates, selects, handles K == 0, runs with the f32 alpha/beta epilogue. */
attn_status attn_lowp_gemm_f32out(const char *fn, const char *dtype, attn_lowp_path path,
                                  int transa, int transb, int64_t M, int64_t N, int64_t K,
                                  float alpha, const void *A, attn_lowp_type ta, int64_t lda,
                                  const void *B, attn_lowp_type tb, int64_t ldb, float beta,
                                  float *C, int64_t ldc);

/* Shape / pointer / leading-dimension checks shared by the GEMMs. */
attn_status attn_lowp_validate(const char *fn, int transa, int transb, int64_t M, int64_t N,
                               int64_t K, const void *A, int64_t lda, const void *B, int64_t ldb,
                               const void *C, int64_t ldc);

#endif
