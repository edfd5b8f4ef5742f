/* Learning-rate schedules: linear warm-up, then cosine decay, the inverse
 * square root or constant. */
#include <math.h>

#include "attn/train.h"

attn_status attn_schedule_check(const attn_schedule *s) {
  if (!s) return attn_set_error(ATTN_EINVAL, "schedule is NULL");
  if (s->kind != ATTN_SCHED_CONSTANT && s->kind != ATTN_SCHED_WARMUP_COSINE &&
      s->kind != ATTN_SCHED_WARMUP_INV_SQRT)
    return attn_set_error(ATTN_EINVAL, "schedule: unknown kind %d", (int)s->kind);
  if (!(s->base_lr >= 0) || !isfinite(s->base_lr))
    return attn_set_error(ATTN_EINVAL, "schedule: base_lr %g must be finite and >= 0", s->base_lr);
  if (s->warmup_steps < 0)
    return attn_set_error(ATTN_EINVAL, "schedule: warmup_steps %lld < 0",
                          (long long)s->warmup_steps);
  if (s->kind == ATTN_SCHED_WARMUP_INV_SQRT && s->warmup_steps < 1)
    return attn_set_error(ATTN_EINVAL, "schedule: the inverse square root needs warmup_steps >= 1");
  if (s->kind == ATTN_SCHED_WARMUP_COSINE) {
    if (!(s->min_lr >= 0) || !(s->min_lr <= s->base_lr))
      return attn_set_error(ATTN_EINVAL, "schedule: min_lr %g must be in [0, base_lr %g]",
                            s->min_lr, s->base_lr);
    if (s->total_steps <= s->warmup_steps)
      return attn_set_error(ATTN_EINVAL, "schedule: total_steps %lld must exceed warmup_steps %lld",
                            (long long)s->total_steps, (long long)s->warmup_steps);
  }
  return ATTN_OK;
}

double attn_schedule_lr(const attn_schedule *s, int64_t step) {
  if (step < 0) step = 0;
  if (step < s->warmup_steps) return s->base_lr * (double)(step + 1) / (double)s->warmup_steps;
  if (s->kind == ATTN_SCHED_CONSTANT) return s->base_lr;
  if (s->kind == ATTN_SCHED_WARMUP_INV_SQRT)
    return s->base_lr * sqrt((double)s->warmup_steps / (double)(step + 1));
  if (step >= s->total_steps) return s->min_lr;
  double progress = (double)(step - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
  return s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * progress));
}
