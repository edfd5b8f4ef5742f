/* attn — a TransformerEncoderLayer whose parameters live in caller memory
 * (for bindings: the Python/PyTorch module keeps its Parameters as views of one
 * flat float32 tensor and passes its pointer on every call, no copy).
 *
 * attn_encoder_ext_new declares the layer (self_attn.*, linear1.*, linear2.*,
 * norm1.*, norm2.*, torch's state_dict names) without allocating parameters;
 * attn_encoder_ext_param gives each tensor's name, shape and float offset in
 * the flat layout of attn_encoder_ext_numel floats (the layout of
 * attn_params: 16-float aligned offsets). The caller's params and grad
 * buffers hold that many floats and start on a 64-byte boundary.
 *
 * Each forward returns a new attn_encoder_ext_saved (the activations and the
 * run's settings) for its backward; several may be alive at once (one per
 * pending backward). Backward ACCUMULATES into grad and dsrc (zero them first)
 * and may be called more than once on the same saved. Masks follow the
 * torch.nn modules: bool (uint8) nonzero = NOT allowed, float added. */
#ifndef ATTN_NN_ENCODER_EXT_H
#define ATTN_NN_ENCODER_EXT_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_encoder_ext attn_encoder_ext;
typedef struct attn_encoder_ext_saved attn_encoder_ext_saved;

ATTN_API attn_status attn_encoder_ext_new(const attn_layer_config *c, attn_encoder_ext **out);
ATTN_API void attn_encoder_ext_free(attn_encoder_ext *e);
ATTN_API int64_t attn_encoder_ext_numel(const attn_encoder_ext *e);
ATTN_API int attn_encoder_ext_count(const attn_encoder_ext *e);
/* tensor i (0 <= i < count): its name, rank, shape (4 entries) and offset */
ATTN_API attn_status attn_encoder_ext_param(const attn_encoder_ext *e, int i, const char **name,
                                            int *ndim, int64_t *shape, int64_t *offset);

/* The masks of one call (all optional). */
typedef struct {
  const void *key_padding; /* [B, L]: uint8 (nonzero = ignore the key) or float (added) */
  int key_padding_float;
  const void *attn_mask; /* [L, L], or [B * nhead, L, L] with attn_mask_per_head */
  int attn_mask_float;
  int attn_mask_per_head;
  int causal; /* key j allowed for query i only if j <= i */
} attn_encoder_ext_masks;

/* src, out [B, L, d_model]. training: dropout (p > 0) on, drawn from seed
 * (attn's counter-based stream, not torch's). precision: the Linear GEMMs.
 * *saved receives a new saved forward (NULL on error). */
ATTN_API attn_status attn_encoder_ext_forward(const attn_encoder_ext *e, const float *params,
                                              int training, uint64_t seed,
                                              attn_precision precision,
                                              const attn_encoder_ext_masks *masks,
                                              const float *src, int64_t B, int64_t L, float *out,
                                              attn_encoder_ext_saved **saved);
/* grad [numel] += dL/dparams, dsrc [B, L, d_model] += dL/dsrc; params and
 * src must be those of the forward. */
ATTN_API attn_status attn_encoder_ext_backward(const attn_encoder_ext *e, const float *params,
                                               float *grad, const attn_encoder_ext_saved *saved,
                                               const float *src, const float *dout, float *dsrc);
ATTN_API void attn_encoder_ext_saved_free(attn_encoder_ext_saved *s);

#ifdef __cplusplus
}
#endif
#endif
