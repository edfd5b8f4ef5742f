/* attn — mixed-precision training: Linear GEMMs in bf16 / fp16 with f32
 * accumulation (the precision field of attn_nn_ctx, nn.h) and dynamic loss
 * scaling like torch.cuda.amp.GradScaler for fp16.
 *
 * Typical fp16 step (scaler s, initialised with attn_loss_scaler_init):
 *   forward; dlogits = ∂loss/∂logits * s.scale   (attn_loss_scaler_scale_f32)
 *   backward (gradients are scaled)
 *   attn_loss_scaler_unscale(&s, &p, &found_inf)  grads /= scale, inf/NaN check
 *   if (!found_inf) { clip; attn_adam_step(...) }  (else the step is skipped)
 *   attn_loss_scaler_update(&s, found_inf)
 *   attn_params_zero_grad(&p) */
#ifndef ATTN_AMP_H
#define ATTN_AMP_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/nn.h"
#include "attn/params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C[M,N] (f32) = alpha * op(A) · op(B) + beta * C with f32 operands rounded
 * to `prec` (bf16: attn_gemm_bf16_f32in; fp16: converted into a workspace,
 * |x| > 65504 becomes ±inf as in fp16 hardware; f32: attn_gemm_f32) and
 * products accumulated in f32. */
ATTN_API attn_status attn_gemm_prec_f32in(attn_precision prec, int transa, int transb, int64_t M,
                                          int64_t N, int64_t K, float alpha, const float *A,
                                          int64_t lda, const float *B, int64_t ldb, float beta,
                                          float *C, int64_t ldc);

/* ---- dynamic loss scaling (GradScaler's rule) --------------------------------
 * update(found_inf):
 *   found_inf: scale *= backoff_factor, growth_tracker = 0, skipped += 1
 *   else:      growth_tracker += 1; when it reaches growth_interval:
 *              scale *= growth_factor (only if the result is finite), tracker = 0
 * A disabled scaler (f32 / bf16 training) keeps scale 1 and never skips. */
typedef struct {
  int enabled;
  float scale;          /* current scale (init 2^16) */
  float growth_factor;  /* 2 */
  float backoff_factor; /* 0.5 */
  int64_t growth_interval; /* 2000 */
  int64_t growth_tracker;  /* good steps since the last change */
  int64_t steps, skipped;  /* updates seen, of which skipped (overflow) */
} attn_loss_scaler;

/* torch defaults: init_scale 65536, growth 2, backoff 0.5, interval 2000. */
ATTN_API void attn_loss_scaler_init(attn_loss_scaler *s, int enabled);
/* Custom values; ATTN_EINVAL unless init_scale > 0 finite, growth > 1,
 * 0 < backoff < 1, interval >= 1. */
ATTN_API attn_status attn_loss_scaler_config(attn_loss_scaler *s, float init_scale,
                                             float growth_factor, float backoff_factor,
                                             int64_t growth_interval);
/* g[i] *= scale (the loss gradient fed to backward); no-op when disabled. */
ATTN_API attn_status attn_loss_scaler_scale_f32(const attn_loss_scaler *s, float *g, int64_t n);
/* Every gradient of p *= (float)(1 / (double)scale) in place (torch's
 * inv_scale), then *found_inf = 1 if any gradient is NaN/Inf. When disabled
 * only the check runs. */
ATTN_API attn_status attn_loss_scaler_unscale(attn_loss_scaler *s, attn_params *p, int *found_inf);
/* The rule above (after the step was taken or skipped). */
ATTN_API void attn_loss_scaler_update(attn_loss_scaler *s, int found_inf);

#ifdef __cplusplus
}
#endif
#endif
