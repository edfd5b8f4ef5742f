/* Internal to the int8 flash SDPA (sdpa_flash_i8.c): the scores kernels,
 * AMX-INT8 (sdpa_flash_i8_amx.c), AVX512_VNNI (sdpa_flash_i8_avx512.c),
 * AVX2 (sdpa_flash_i8_avx2.c) and portable C (sdpa_flash_i8.c). The softmax and P·V are the bf16 flash's
 * tile kernels (sdpa_flash_bf16.h), in the same transposed orientation:
 * scores sᵀ [64 keys, 16 queries], one query per lane.
 *
 * Layouts (int8):
 *   K rows  [keys][Dp] row-major (Dp = 64 * dc): A tiles of 16 keys x 64 depth
 *   Qp      per 16 queries [dc][16 depth quads][16 queries][4]: dc B tiles
 *           (the VNNI layout TDPBSSD reads), then int32 qsum[16] (the sum of
 *           each query's int8 values, for the VNNI +128 correction) and f32
 *           sq[16] (query scale times the softmax scale); ATTN_I8_QP_BYTES(dc)
 *           bytes in all.
 *   s, st   [64 keys][16 queries] int32 scores, f32 logits
 */
#ifndef ATTN_SDPA_FLASH_I8_H
#define ATTN_SDPA_FLASH_I8_H

#include <stdint.h>

#define ATTN_I8_QP_BYTES(dc) ((int64_t)(dc) * 1024 + 16 * 4 + 16 * 4)

/* s[j][q] = K rows (64 rows ldk bytes apart, dc chunks of 64) · Qpᵀ, exact
 * int32 (the same on every variant). */
typedef void (*attn_i8_scores_fn)(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                  int32_t *s);
void attn_flash_i8_scores_generic(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                  int32_t *s);
/* NULL where the build has no x86 code; the CPU must have the features. */
attn_i8_scores_fn attn_flash_i8_scores_vnni(void); /* AVX512F, BW, VNNI */
attn_i8_scores_fn attn_flash_i8_scores_avx2(void); /* AVX2 (VPMADDWD) */
attn_i8_scores_fn attn_flash_i8_scores_amx(void);  /* AMX-INT8, tiles configured */

/* st[j][q] = (float)s[j][q] * (sk[j] * sq[q]) for the 64 x 16 scores (the
 * same bits on both variants). */
typedef void (*attn_i8_dequant_fn)(const int32_t *s, const float *sk, const float *sq, float *st);
void attn_i8_dequant_generic(const int32_t *s, const float *sk, const float *sq, float *st);
attn_i8_dequant_fn attn_i8_dequant_avx512(void); /* NULL without x86; needs AVX512F */
attn_i8_dequant_fn attn_i8_dequant_avx2(void);   /* NULL without x86; needs AVX2 */

/* q[0..n) = clamp(round(x / s), -127, 127), s = max|x| / 127 (0 and q = 0
 * for a zero row): attn_quantize_weights_s8 on one row, the same bits.
 * Returns 1 if some x is not finite. */
int attn_i8_quantize_row_generic(const float *x, int64_t n, int8_t *q, float *scale);
/* NULL where the build has no x86 code; needs AVX512F, BW and VL. */
typedef int (*attn_i8_quantize_fn)(const float *x, int64_t n, int8_t *q, float *scale);
attn_i8_quantize_fn attn_i8_quantize_row_avx512(void);
attn_i8_quantize_fn attn_i8_quantize_row_avx2(void); /* AVX2 */

/* acc[e] += x[j * ld + e] in double for j < n in order, e < D (the scalar
 * loop's bits); NULL without x86, needs AVX512F and VL. */
typedef void (*attn_i8_colsum_fn)(const float *x, int64_t ld, int64_t n, int64_t D, double *acc);
void attn_i8_colsum_generic(const float *x, int64_t ld, int64_t n, int64_t D, double *acc);
attn_i8_colsum_fn attn_i8_colsum_avx512(void);
attn_i8_colsum_fn attn_i8_colsum_avx2(void); /* AVX2 */

#endif
