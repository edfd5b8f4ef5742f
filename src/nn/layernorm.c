/* LayerNorm module over the last dim (weight, bias, eps), as torch.nn.LayerNorm. */
#include <stdlib.h>

#include "nn/nn_internal.h"

attn_status attn_layernorm_declare(attn_layernorm *m, attn_params *p, const char *prefix,
                                   int64_t n, float eps) {
  return attn_layernorm_declare_bias(m, p, prefix, n, eps, 1);
}

attn_status attn_layernorm_declare_bias(attn_layernorm *m, attn_params *p, const char *prefix,
                                        int64_t n, float eps, int bias) {
  if (!m || !p || !prefix) return attn_set_error(ATTN_EINVAL, "layernorm_declare: NULL argument");
  if (n <= 0 || !(eps > 0.0f))
    return attn_set_error(ATTN_EINVAL, "layernorm '%s': n=%lld must be > 0 and eps > 0", prefix,
                          (long long)n);
  m->n = n;
  m->eps = eps;
  m->bias = -1;
  char name[ATTN_PARAM_NAME_MAX];
  attn_status st = attn_nn_name(name, prefix, "weight");
  if (!st) st = attn_params_declare(p, name, 1, &n, &m->weight);
  if (!st && bias) st = attn_nn_name(name, prefix, "bias");
  if (!st && bias) st = attn_params_declare(p, name, 1, &n, &m->bias);
  return st;
}

attn_status attn_layernorm_init(const attn_layernorm *m, attn_params *p) {
  attn_status st = attn_init_const(p, m->weight, 1.0f);
  return st || m->bias < 0 ? st : attn_init_const(p, m->bias, 0.0f);
}

attn_status attn_layernorm_forward(const attn_layernorm *m, const attn_params *p, const float *x,
                                   float *y, float *mean, float *rstd, int64_t rows) {
  if (!m || !p || !p->data) return attn_set_error(ATTN_EINVAL, "layernorm_forward: NULL module");
  return attn_layernorm_f32(x, attn_params_data(p, m->weight),
                            m->bias >= 0 ? attn_params_data(p, m->bias) : NULL, y,
                            mean, rstd, rows, m->n, m->eps);
}

attn_status attn_layernorm_backward(const attn_layernorm *m, attn_params *p, const float *x,
                                    const float *mean, const float *rstd, const float *dy,
                                    float *dx, int64_t rows) {
  if (!m || !p || !p->grad || !dx)
    return attn_set_error(ATTN_EINVAL, "layernorm_backward: NULL module or dx");
  float *t = attn_nn_scratch_uninit(rows * m->n);  // the kernel overwrites; we accumulate
  if (!t) return ATTN_ENOMEM;
  attn_status st = attn_nn_layernorm_backward_set(m, p, x, mean, rstd, dy, t, rows);
  if (!st) attn_nn_add(dx, t, rows * m->n);
  free(t);
  return st;
}

attn_status attn_nn_layernorm_backward_set(const attn_layernorm *m, attn_params *p,
                                           const float *x, const float *mean, const float *rstd,
                                           const float *dy, float *dx, int64_t rows) {
  if (!m || !p || !p->grad || !dx)
    return attn_set_error(ATTN_EINVAL, "layernorm_backward: NULL module or dx");
  return attn_layernorm_backward_f32(x, attn_params_data(p, m->weight), mean, rstd, dy, dx,
                                     attn_params_grad(p, m->weight),
                                     m->bias >= 0 ? attn_params_grad(p, m->bias) : NULL, rows,
                                     m->n);
}
