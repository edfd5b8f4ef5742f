/* Dynamic loss scaling with torch.cuda.amp.GradScaler's update rule
 * (include/attn/amp.h). */
#include <math.h>

#include "attn/amp.h"
#include "attn/train.h"

void attn_loss_scaler_init(attn_loss_scaler *s, int enabled) {
  if (!s) return;
  s->enabled = enabled != 0;
  s->scale = enabled ? 65536.0f : 1.0f;
  s->growth_factor = 2.0f;
  s->backoff_factor = 0.5f;
  s->growth_interval = 2000;
  s->growth_tracker = 0;
  s->steps = 0;
  s->skipped = 0;
}

attn_status attn_loss_scaler_config(attn_loss_scaler *s, float init_scale, float growth_factor,
                                    float backoff_factor, int64_t growth_interval) {
  if (!s) return attn_set_error(ATTN_EINVAL, "loss_scaler_config: s is NULL");
  if (!(init_scale > 0.0f) || !isfinite(init_scale))
    return attn_set_error(ATTN_EINVAL, "loss_scaler: init_scale %g must be finite and > 0",
                          (double)init_scale);
  if (!(growth_factor > 1.0f) || !isfinite(growth_factor))
    return attn_set_error(ATTN_EINVAL, "loss_scaler: growth_factor %g must be > 1",
                          (double)growth_factor);
  if (!(backoff_factor > 0.0f && backoff_factor < 1.0f))
    return attn_set_error(ATTN_EINVAL, "loss_scaler: backoff_factor %g must be in (0, 1)",
                          (double)backoff_factor);
  if (growth_interval < 1)
    return attn_set_error(ATTN_EINVAL, "loss_scaler: growth_interval %lld must be >= 1",
                          (long long)growth_interval);
  attn_loss_scaler_init(s, 1);
  s->scale = init_scale;
  s->growth_factor = growth_factor;
  s->backoff_factor = backoff_factor;
  s->growth_interval = growth_interval;
  return ATTN_OK;
}

attn_status attn_loss_scaler_scale_f32(const attn_loss_scaler *s, float *g, int64_t n) {
  if (!s || (!g && n > 0) || n < 0)
    return attn_set_error(ATTN_EINVAL, "loss_scaler_scale: NULL scaler/gradient or n < 0");
  if (!s->enabled) return ATTN_OK;
  for (int64_t i = 0; i < n; i++) g[i] *= s->scale;
  return ATTN_OK;
}

attn_status attn_loss_scaler_unscale(attn_loss_scaler *s, attn_params *p, int *found_inf) {
  if (!s || !p || !p->grad || !found_inf)
    return attn_set_error(ATTN_EINVAL, "loss_scaler_unscale: NULL scaler, params or found_inf");
  *found_inf = 0;
  if (s->enabled) {
    float inv = (float)(1.0 / (double)s->scale);  // torch: scale.double().reciprocal().float()
    for (int i = 0; i < p->count; i++) {
      float *g = attn_params_grad(p, i);
      for (int64_t k = 0; k < p->views[i].numel; k++) g[k] *= inv;
    }
  }
  if (attn_grads_check_finite(p) != ATTN_OK) *found_inf = 1;
  return ATTN_OK;
}

void attn_loss_scaler_update(attn_loss_scaler *s, int found_inf) {
  if (!s || !s->enabled) {
    if (s) s->steps++;
    return;
  }
  s->steps++;
  if (found_inf) {
    s->scale *= s->backoff_factor;
    s->growth_tracker = 0;
    s->skipped++;
    return;
  }
  if (++s->growth_tracker == s->growth_interval) {
    float grown = s->scale * s->growth_factor;
    if (isfinite(grown)) s->scale = grown;
    s->growth_tracker = 0;
  }
}
