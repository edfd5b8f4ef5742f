/* Internal to the int8 flash SDPA (sdpa_flash_i8.c): the scores kernels,
 * AMX-INT8 (sdpa_flash_i8_amx.c), AVX512_VNNI (sdpa_flash_i8_avx512.c) and
 * portable C (sdpa_flash_i8.c). The softmax and P·V are the bf16 flash's
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
 *   st      [64 keys][16 queries] f32
 */
#ifndef ATTN_SDPA_FLASH_I8_H
#define ATTN_SDPA_FLASH_I8_H

#include <stdint.h>

#define ATTN_I8_QP_BYTES(dc) ((int64_t)(dc) * 1024 + 16 * 4 + 16 * 4)

/* st[j][q] = (float)S[j][q] * (sk[j] * sq[q]) where S = K rows (64 rows ldk
 * bytes apart, dc chunks of 64) · Qpᵀ in exact int32. Every variant gives
 * the same bits. */
typedef void (*attn_i8_scores_fn)(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                  const float *sk, float *st);

void attn_flash_i8_scores_generic(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                  const float *sk, float *st);
/* NULL where the build has no x86 code; the CPU must have the features. */
attn_i8_scores_fn attn_flash_i8_scores_vnni(void); /* AVX512F, BW, VNNI */
attn_i8_scores_fn attn_flash_i8_scores_amx(void);  /* AMX-INT8 + AVX512F, tiles configured */

#endif
