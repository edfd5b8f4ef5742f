/* attn — training: Adam/AdamW (torch.optim semantics), learning-rate
 * schedules, gradient-norm clipping and NaN/Inf checks, and checkpoints
 * (parameters + optimizer state + metadata in one safetensors file).
 *
 * Everything works on the flat buffers of attn_params: the optimizer keeps
 * m and v with the same layout as p->data. Results do not depend on the
 * thread count.
 *
 * Typical step:
 *   attn_grads_check_finite(&p)            (or let clip report it)
 *   attn_clip_grad_norm(&p, 1.0, &norm)
 *   attn_adam_step(&opt, &p, attn_schedule_lr(&sched, opt.step))
 *   attn_params_zero_grad(&p) */
#ifndef ATTN_TRAIN_H
#define ATTN_TRAIN_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/params.h"
#include "attn/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Adam / AdamW ----------------------------------------------------------
 * Exactly torch.optim.Adam / AdamW (torch 1.13, amsgrad=False, maximize=False):
 *   step += 1
 *   Adam:  g = g + wd * p                      (L2 penalty through the gradient)
 *   AdamW: p = p * (1 - lr * wd)               (decoupled decay, before the update)
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g * g
 *   p = p - lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
 * Parameters whose decay flag is 0 get wd = 0 (both kinds). */
typedef enum { ATTN_ADAM = 0, ATTN_ADAMW = 1 } attn_adam_kind;

typedef struct {
  attn_adam_kind kind;
  double beta1, beta2, eps, weight_decay;
} attn_adam_config;

typedef struct {
  attn_adam_config cfg;
  int64_t step;   /* completed steps (torch's state['step']) */
  int64_t numel;  /* == params numel: m and v use the params layout */
  float *m, *v;   /* [numel], 64-byte aligned, zero-initialised */
  int nviews;
  unsigned char *decay; /* [nviews] 1 = weight decay applies (default: all) */
  /* work split: fixed chunks of the views, so the update is the same for any
   * thread count (it is elementwise anyway) */
  int nchunks;
  int64_t *chunk_begin, *chunk_len; /* offsets into the flat buffers */
  int *chunk_view;
} attn_adam;

/* torch defaults: Adam (0.9, 0.999, 1e-8, wd 0); AdamW wd 1e-2. */
ATTN_API attn_adam_config attn_adam_defaults(attn_adam_kind kind);
/* p must be allocated (attn_params_alloc); the optimizer is bound to its layout. */
ATTN_API attn_status attn_adam_init(attn_adam *opt, const attn_params *p,
                                    const attn_adam_config *cfg);
ATTN_API void attn_adam_free(attn_adam *opt);
/* One update with learning rate lr (from a schedule) using p->grad. */
ATTN_API attn_status attn_adam_step(attn_adam *opt, attn_params *p, double lr);

/* Per-parameter weight-decay rule: return 1 to decay the parameter `name`. */
typedef int (*attn_decay_rule)(const char *name, void *user);
/* The usual rule: no decay for names ending in "bias" or containing "norm"
 * (case-insensitive): "enc.0.norm1.weight" and "head.bias" are not decayed,
 * "head.weight" is. Pass your own rule for other naming conventions. */
ATTN_API int attn_decay_rule_default(const char *name, void *user);
/* Applies rule to every parameter of p (the one passed to attn_adam_init). */
ATTN_API attn_status attn_adam_set_decay_rule(attn_adam *opt, const attn_params *p,
                                              attn_decay_rule rule, void *user);
ATTN_API attn_status attn_adam_set_decay(attn_adam *opt, int view_index, int decay);

/* ---- learning-rate schedules ---------------------------------------------
 * lr for the update that follows `step` completed steps (0-based), a pure
 * function:
 *   step < warmup:          base * (step + 1) / warmup        (linear warm-up)
 *   WARMUP_COSINE, after:   min + (base - min) * (1 + cos(pi * (step - warmup) /
 *                           (total - warmup))) / 2, and min once step >= total
 *   CONSTANT, after:        base
 *   WARMUP_INV_SQRT, after: base * sqrt(warmup / (step + 1))   (inverse square root:
 *                           Vaswani et al. 2017, fairseq's inverse_sqrt; min and
 *                           total not used; warmup >= 1)
 * This equals torch.optim.lr_scheduler.LambdaLR with that factor (and, after
 * warm-up, CosineAnnealingLR's closed form with T_max = total - warmup). */
typedef enum {
  ATTN_SCHED_CONSTANT = 0,
  ATTN_SCHED_WARMUP_COSINE = 1,
  ATTN_SCHED_WARMUP_INV_SQRT = 2
} attn_sched_kind;

typedef struct {
  attn_sched_kind kind;
  double base_lr, min_lr;
  int64_t warmup_steps, total_steps;
} attn_schedule;

/* Checks the fields (lr >= 0, min <= base, 0 <= warmup, warmup < total for cosine,
 * warmup >= 1 for the inverse square root). */
ATTN_API attn_status attn_schedule_check(const attn_schedule *s);
ATTN_API double attn_schedule_lr(const attn_schedule *s, int64_t step);

/* ---- gradient norm, clipping, NaN/Inf ------------------------------------
 * The L2 norm over every gradient view, accumulated in double over fixed
 * 4096-float chunks summed in order: bit-identical for any thread count. */
ATTN_API attn_status attn_grad_norm(const attn_params *p, double *norm);
/* torch.nn.utils.clip_grad_norm_(max_norm): coef = max_norm / (norm + 1e-6);
 * if coef < 1 every gradient is multiplied by (float)coef. *norm_out (may be
 * NULL) receives the norm before clipping. A non-finite norm returns
 * ATTN_ENUMERIC naming the first bad parameter and leaves the grads as they are
 * (skip the step). */
ATTN_API attn_status attn_clip_grad_norm(attn_params *p, double max_norm, double *norm_out);
/* ATTN_ENUMERIC naming the first parameter (in declaration order) whose
 * gradient holds NaN or Inf, and the index. */
ATTN_API attn_status attn_grads_check_finite(const attn_params *p);

/* ---- weight averaging (EMA) -----------------------------------------------
 * An exponential moving average of the parameters (Polyak averaging; timm's
 * ModelEmaV2, or torch.optim.swa_utils.AveragedModel with an EMA avg_fn),
 * evaluated and kept instead of the raw weights. After each optimizer step:
 *   d   = min(decay, (1 + updates) / (10 + updates))   (warm-up: the average
 *         follows the early, fast-moving weights)
 *   avg = avg + (1 - d) * (p - avg);  updates += 1
 * avg has the params layout (p->numel floats, 64-byte aligned) and starts as
 * a copy of p. Elementwise, single pass: the same bits for any thread count. */
typedef struct {
  double decay;
  int64_t updates;
  int64_t numel;
  float *avg;
} attn_ema;

ATTN_API double attn_ema_decay(double decay, int64_t updates);
/* decay in (0, 1); avg = a copy of p's data. */
ATTN_API attn_status attn_ema_init(attn_ema *e, const attn_params *p, double decay);
ATTN_API void attn_ema_free(attn_ema *e);
ATTN_API attn_status attn_ema_update(attn_ema *e, const attn_params *p);
/* Exchanges avg and p's data (twice restores both): evaluate or save the
 * average with the code that uses p. */
ATTN_API attn_status attn_ema_swap(attn_ema *e, attn_params *p);
/* Adds "ema.<name>" for every parameter and metadata "ema.decay",
 * "ema.updates" to st (e.g. the extra of attn_checkpoint_save). */
ATTN_API attn_status attn_ema_store_st(const attn_ema *e, const attn_params *p, attn_st *st);
/* Restores e (freed and re-made for p) from st's "ema.*" entries; *found
 * (may be NULL) = 0 and e unchanged when st holds no average. Everything is
 * validated before e changes. */
ATTN_API attn_status attn_ema_load_st(attn_ema *e, const attn_params *p, const attn_st *st,
                                      int *found);

/* ---- checkpoints -----------------------------------------------------------
 * One safetensors file, written atomically:
 *   <name>                  every parameter (F32)
 *   optim.m.<name>, optim.v.<name>   Adam state (when opt != NULL)
 *   metadata "optim.step", "optim.kind", "optim.beta1", "optim.beta2",
 *            "optim.eps", "optim.weight_decay"
 * plus every tensor and metadata entry of `extra` (may be NULL: e.g. config
 * JSON, tokenizer, data-loader state). Names in extra must not collide with
 * the above (ATTN_EINVAL). */
ATTN_API attn_status attn_checkpoint_save(const char *path, const attn_params *p,
                                          const attn_adam *opt, const attn_st *extra);
/* Restores p (declared and allocated: every parameter must be present with
 * its shape) and, when opt != NULL (initialised for p), m, v and step. All is
 * validated before anything is changed. *file_out (may be NULL) receives the
 * whole file for metadata and extra tensors; free with attn_st_free. */
ATTN_API attn_status attn_checkpoint_load(const char *path, attn_params *p, attn_adam *opt,
                                          attn_st **file_out);

#ifdef __cplusplus
}
#endif
#endif
