/* Residual sublayers around f (attention or feed-forward):
 *   pre-norm  (norm_first): y = x + drop(f(LN(x)))
 *   post-norm:              y = LN(x + drop(f(x)))   (the seeds, torch's default) */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

void attn_sublayer_saved_free(attn_sublayer_saved *s) {
  if (!s) return;
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
}

attn_status attn_nn_sub_in(const attn_layernorm *ln, const attn_params *p, int norm_first,
                      attn_sublayer_saved *s, const float *x, int64_t rows, const float **f_in) {
  attn_sublayer_saved_free(s);
  s->rows = rows;
  s->n = ln->n;
  s->mean = NN_ALLOC_F(&s->arena, rows);
  s->rstd = NN_ALLOC_F(&s->arena, rows);
  if (!s->mean || !s->rstd) return ATTN_ENOMEM;
  *f_in = x;
  if (!norm_first) return ATTN_OK;
  s->a = NN_ALLOC_F_UNINIT(&s->arena, rows * ln->n);
  if (!s->a) return ATTN_ENOMEM;
  *f_in = s->a;
  return attn_layernorm_forward(ln, p, x, s->a, s->mean, s->rstd, rows);
}

attn_status attn_nn_sub_out(const attn_layernorm *ln, const attn_params *p, const attn_nn_ctx *ctx,
                       int norm_first, float dropout, uint64_t site, attn_sublayer_saved *s,
                       const float *x, const float *f_out, float *y) {
  int64_t n = s->rows * s->n;
  float *fd = NULL;
  if (attn_nn_dropout_on(ctx, dropout)) {
    s->drop_mask = NN_ALLOC_U8_UNINIT(&s->arena, n);  // both written whole by the dropout
    fd = attn_nn_scratch_uninit(n);
    attn_status st = (!s->drop_mask || !fd) ? ATTN_ENOMEM : ATTN_OK;
    if (!st) st = attn_nn_dropout_rows(ctx, f_out, fd, s->drop_mask, n, dropout, site);
    if (st) {
      free(fd);
      return st;
    }
    f_out = fd;
  }
  attn_status st = ATTN_OK;
  float *h = norm_first ? y : (s->h = NN_ALLOC_F_UNINIT(&s->arena, n));
  if (!h) st = ATTN_ENOMEM;
  if (!st) attn_nn_sum(h, x, f_out, n);
  if (!st && !norm_first) st = attn_layernorm_forward(ln, p, s->h, y, s->mean, s->rstd, s->rows);
  free(fd);
  return st;
}

attn_status attn_nn_sub_out_backward(const attn_layernorm *ln, attn_params *p, int norm_first,
                                float dropout, const attn_sublayer_saved *s, const float *dy,
                                float *dx, float *df) {
  int64_t n = s->rows * s->n;
  attn_status st = ATTN_OK;
  if (!norm_first) {  // through the LayerNorm of x + drop(f): its gradient straight into df
    st = attn_nn_layernorm_backward_set(ln, p, s->h, s->mean, s->rstd, dy, df, s->rows);
    dy = df;
  }
  if (st) return st;
  attn_nn_add(dx, dy, n);
  if (s->drop_mask) return attn_dropout_backward_f32(dy, s->drop_mask, df, n, dropout);
  if (dy != df) memcpy(df, dy, (size_t)n * sizeof(float));
  return ATTN_OK;
}

attn_status attn_nn_sub_in_backward(const attn_layernorm *ln, attn_params *p, int norm_first,
                               const attn_sublayer_saved *s, const float *x, const float *df_in,
                               float *dx) {
  if (norm_first) return attn_layernorm_backward(ln, p, x, s->mean, s->rstd, df_in, dx, s->rows);
  attn_nn_add(dx, df_in, s->rows * s->n);
  return ATTN_OK;
}
