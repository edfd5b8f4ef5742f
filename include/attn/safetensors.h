/* attn — safetensors files (the format PyTorch users exchange weights in).
 * Layout: u64 little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {"key": "string value", ...}}, then the data buffer.
 * Reading validates everything (JSON syntax, dtype, shape·dtype size ==
 * end-begin, offsets inside the file, no overlaps) and fails with
 * ATTN_EFORMAT naming the tensor. Limits: a header of at most 100 MB, at most
 * 131072 tensors and 131072 metadata keys per file (reading takes time and
 * memory linear in the header's size). Writing goes to PATH.tmp.<pid> and is
 * renamed over PATH only when complete; a save also removes the PATH.tmp.<pid>
 * files that writers killed half-way left (their process no longer runs). */
#ifndef ATTN_SAFETENSORS_H
#define ATTN_SAFETENSORS_H

#include "attn/api.h"
#include "attn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_st attn_st; /* an in-memory set of named tensors + metadata */

ATTN_API attn_status attn_st_new(attn_st **out);
ATTN_API attn_status attn_st_load(const char *path, attn_st **out);
/* Parse from memory (the bytes of a file). */
ATTN_API attn_status attn_st_parse(const void *bytes, size_t len, attn_st **out);
ATTN_API void attn_st_free(attn_st *st);

ATTN_API int attn_st_count(const attn_st *st);
/* i-th tensor's name (in file order for loaded files, insertion order otherwise) */
ATTN_API const char *attn_st_name(const attn_st *st, int i);
/* NULL if absent. The tensor's data stays owned by st. */
ATTN_API const attn_tensor *attn_st_get(const attn_st *st, const char *name);
/* Checked lookup: ATTN_EINVAL with a message naming the tensor if absent,
 * of another dtype, or (when ndim >= 0) of another rank; shape entries < 0
 * in `shape` are wildcards. `required` = 0 makes absence return ATTN_OK with
 * *out = NULL. */
ATTN_API attn_status attn_st_expect(const attn_st *st, const char *name, attn_dtype dtype, int ndim,
                                    const int64_t *shape, int required, const attn_tensor **out);

/* Metadata: NULL if absent. */
ATTN_API const char *attn_st_meta(const attn_st *st, const char *key);
ATTN_API int attn_st_meta_count(const attn_st *st);
ATTN_API const char *attn_st_meta_key(const attn_st *st, int i);
ATTN_API attn_status attn_st_set_meta(attn_st *st, const char *key, const char *value);

/* Add a tensor (data copied). Replaces an existing tensor of the same name. */
ATTN_API attn_status attn_st_add(attn_st *st, const char *name, attn_dtype dtype, int ndim,
                                 const int64_t *shape, const void *data);
/* Convenience for f32. */
ATTN_API attn_status attn_st_add_f32(attn_st *st, const char *name, int ndim, const int64_t *shape,
                                     const float *data);

/* *out = a copy of in (tensors and metadata) with every F16 / BF16 tensor
 * widened to F32 (exact), except those named in keep (NULL-terminated; may
 * be NULL). Free with attn_st_free; NULL on error. */
ATTN_API attn_status attn_st_widen(const attn_st *in, const char *const *keep, attn_st **out);

/* Atomic write (tmp file + fsync + rename). */
ATTN_API attn_status attn_st_save(const attn_st *st, const char *path);

#ifdef __cplusplus
}
#endif
#endif
