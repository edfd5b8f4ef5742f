/* attn — dtypes and a minimal owned/borrowed n-d tensor used at the file and
 * CLI boundary (kernels take raw pointers + shapes). Row-major, contiguous. */
#ifndef ATTN_TENSOR_H
#define ATTN_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "attn/api.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ATTN_F32 = 0,
  ATTN_F16,
  ATTN_BF16,
  ATTN_I64,
  ATTN_I32,
  ATTN_I8,
  ATTN_U8,
  ATTN_BOOL,
  ATTN_DTYPE_COUNT
} attn_dtype;

#define ATTN_MAX_DIMS 8

typedef struct {
  attn_dtype dtype;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  void *data; /* numel * attn_dtype_size(dtype) bytes, row-major contiguous */
} attn_tensor;

ATTN_API size_t attn_dtype_size(attn_dtype t);
/* "F32", "BF16", ... as safetensors spells them; NULL for unknown. */
ATTN_API const char *attn_dtype_name(attn_dtype t);
/* Parse a safetensors dtype name. */
ATTN_API attn_status attn_dtype_from_name(const char *name, attn_dtype *out);
ATTN_API int64_t attn_tensor_numel(const attn_tensor *t);
ATTN_API size_t attn_tensor_nbytes(const attn_tensor *t);

/* bf16/f16 <-> f32 scalar conversions (round to nearest even). */
ATTN_API float attn_bf16_to_f32(uint16_t h);
ATTN_API uint16_t attn_f32_to_bf16(float f);
ATTN_API float attn_f16_to_f32(uint16_t h);
ATTN_API uint16_t attn_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif
#endif
