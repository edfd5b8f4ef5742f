/* Internal to dynamic quantization: the AVX-512 row quantizer and the
 * quantized Linear's dequantizing epilogue (quantize_avx512.c), which give
 * the same bits as the scalar code in quantize.c / qlinear.c. Tests call
 * both to check that. */
#ifndef ATTN_QUANTIZE_INTERNAL_H
#define ATTN_QUANTIZE_INTERNAL_H

#include <stdint.h>

/* Row r of x [rows, n] -> q, given scale[r] > 0 and zero[r] (as
 * attn_quantize_rows_u8 computed them): q = clamp(round(x / s) + z, 0, 255). */
void attn_quantize_row_u8_generic(const float *x, int64_t n, float s, int32_t z, uint8_t *q);
void attn_quantize_row_u8_avx512(const float *x, int64_t n, float s, int32_t z, uint8_t *q);
/* min(x, 0), max(x, 0) over a row; *bad = 1 if any value is NaN */
void attn_minmax_row_avx512(const float *x, int64_t n, float *lo, float *hi, int *bad);

/* y[j] = (sx * sw[j]) * (float)(acc[j] - zx * cs[j]) (+ b[j]) for j < n */
void attn_dequant_row_generic(const int32_t *acc, int64_t n, float sx, int32_t zx,
                              const float *sw, const int32_t *cs, const float *b, float *y);
void attn_dequant_row_avx512(const int32_t *acc, int64_t n, float sx, int32_t zx,
                             const float *sw, const int32_t *cs, const float *b, float *y);

#endif
