/* Adam and AdamW with torch.optim semantics, over the flat parameter buffer.
 * The per-element float operations follow torch 1.13's _single_tensor_adam(w)
 * in order (scalars rounded to float as ATen does; ATen's CPU kernels compute
 * a + alpha*b and addcmul as fused multiply-adds, and so do we), which makes
 * the results bit-identical to torch's on the golden tests. Elementwise, hence identical for any thread count; the AVX-512 path
 * (adamw_avx512.c) gives the same bits as the portable loop. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/kernels.h"
#include "attn/train.h"
#include "kernels/iface.h"

#define ADAM_CHUNK 16384 /* floats per work item */

attn_adam_config attn_adam_defaults(attn_adam_kind kind) {
  attn_adam_config c = {kind, 0.9, 0.999, 1e-8, kind == ATTN_ADAMW ? 1e-2 : 0.0};
  return c;
}

void attn_adam_free(attn_adam *opt) {
  if (!opt) return;
  free(opt->m);
  free(opt->v);
  free(opt->decay);
  free(opt->chunk_begin);
  free(opt->chunk_len);
  free(opt->chunk_view);
  memset(opt, 0, sizeof *opt);
}

static attn_status check_config(const attn_adam_config *c) {
  if (c->kind != ATTN_ADAM && c->kind != ATTN_ADAMW)
    return attn_set_error(ATTN_EINVAL, "adam: unknown kind %d", (int)c->kind);
  if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
    return attn_set_error(ATTN_EINVAL, "adam: betas (%g, %g) must be in [0, 1)", c->beta1,
                          c->beta2);
  if (!(c->eps >= 0) || !isfinite(c->eps))
    return attn_set_error(ATTN_EINVAL, "adam: eps %g must be finite and >= 0", c->eps);
  if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
    return attn_set_error(ATTN_EINVAL, "adam: weight_decay %g must be finite and >= 0",
                          c->weight_decay);
  return ATTN_OK;
}

attn_status attn_adam_init(attn_adam *opt, const attn_params *p, const attn_adam_config *cfg) {
  if (!opt || !p || !cfg) return attn_set_error(ATTN_EINVAL, "attn_adam_init: NULL argument");
  memset(opt, 0, sizeof *opt);
  if (!p->data || !p->grad)
    return attn_set_error(ATTN_EINVAL, "attn_adam_init: parameters not allocated");
  attn_status s = check_config(cfg);
  if (s) return s;
  opt->cfg = *cfg;
  opt->numel = p->numel;
  opt->nviews = p->count;
  size_t bytes = (size_t)(p->numel ? p->numel : 16) * sizeof(float);
  opt->m = aligned_alloc(64, bytes);
  opt->v = aligned_alloc(64, bytes);
  opt->decay = malloc((size_t)(p->count ? p->count : 1));
  int nchunks = 0;
  for (int i = 0; i < p->count; i++)
    nchunks += (int)((p->views[i].numel + ADAM_CHUNK - 1) / ADAM_CHUNK);
  size_t nc = (size_t)(nchunks ? nchunks : 1);
  opt->chunk_begin = malloc(nc * sizeof(int64_t));
  opt->chunk_len = malloc(nc * sizeof(int64_t));
  opt->chunk_view = malloc(nc * sizeof(int));
  if (!opt->m || !opt->v || !opt->decay || !opt->chunk_begin || !opt->chunk_len ||
      !opt->chunk_view) {
    attn_adam_free(opt);
    return attn_set_error(ATTN_ENOMEM, "attn_adam_init: out of memory (%zu bytes x 2)", bytes);
  }
  memset(opt->m, 0, bytes);
  memset(opt->v, 0, bytes);
  memset(opt->decay, 1, (size_t)p->count);
  for (int i = 0; i < p->count; i++) {
    const attn_param_view *v = &p->views[i];
    for (int64_t at = 0; at < v->numel; at += ADAM_CHUNK) {
      opt->chunk_begin[opt->nchunks] = v->offset + at;
      opt->chunk_len[opt->nchunks] = v->numel - at < ADAM_CHUNK ? v->numel - at : ADAM_CHUNK;
      opt->chunk_view[opt->nchunks] = i;
      opt->nchunks++;
    }
  }
  return ATTN_OK;
}

int attn_decay_rule_default(const char *name, void *user) {
  size_t n = strlen(name);
  if (n >= 4 && strcasecmp(name + n - 4, "bias") == 0) return 0;
  for (size_t i = 0; i + 4 <= n; i++)
    if (strncasecmp(name + i, "norm", 4) == 0) return 0;
  return 1;
}

static attn_status check_bound(const attn_adam *opt, const attn_params *p, const char *fn) {
  if (!opt || !p) return attn_set_error(ATTN_EINVAL, "%s: NULL argument", fn);
  if (!opt->m) return attn_set_error(ATTN_EINVAL, "%s: optimizer not initialised", fn);
  if (!p->data || !p->grad || p->numel != opt->numel || p->count != opt->nviews)
    return attn_set_error(ATTN_EINVAL,
                          "%s: parameters (%d tensors, %lld floats) do not match the optimizer "
                          "(%d tensors, %lld floats)",
                          fn, p->count, (long long)p->numel, opt->nviews, (long long)opt->numel);
  return ATTN_OK;
}

attn_status attn_adam_set_decay_rule(attn_adam *opt, const attn_params *p, attn_decay_rule rule,
                                     void *user) {
  attn_status s = check_bound(opt, p, "attn_adam_set_decay_rule");
  if (s) return s;
  if (!rule) return attn_set_error(ATTN_EINVAL, "attn_adam_set_decay_rule: rule is NULL");
  for (int i = 0; i < p->count; i++) opt->decay[i] = rule(p->views[i].name, user) ? 1 : 0;
  return ATTN_OK;
}

attn_status attn_adam_set_decay(attn_adam *opt, int view_index, int decay) {
  if (!opt || !opt->decay || view_index < 0 || view_index >= opt->nviews)
    return attn_set_error(ATTN_EINVAL, "attn_adam_set_decay: bad parameter index %d", view_index);
  opt->decay[view_index] = decay ? 1 : 0;
  return ATTN_OK;
}

attn_status attn_adam_step(attn_adam *opt, attn_params *p, double lr) {
  attn_status s = check_bound(opt, p, "attn_adam_step");
  if (s) return s;
  if (!(lr >= 0) || !isfinite(lr))
    return attn_set_error(ATTN_EINVAL, "attn_adam_step: lr %g must be finite and >= 0", lr);
  opt->step++;
  const attn_adam_config *c = &opt->cfg;
  double bc1 = 1.0 - pow(c->beta1, (double)opt->step);
  double bc2 = 1.0 - pow(c->beta2, (double)opt->step);
  attn_adam_scalars k;
  k.adamw = c->kind == ATTN_ADAMW;
  k.wd = (float)c->weight_decay;
  k.decay_mul = (float)(1.0 - lr * c->weight_decay);
  k.beta1 = (float)c->beta1;
  k.one_minus_beta1 = (float)(1.0 - c->beta1);
  k.beta2 = (float)c->beta2;
  k.one_minus_beta2 = (float)(1.0 - c->beta2);
  k.neg_step_size = (float)(-(lr / bc1));
  k.bc2_sqrt = (float)sqrt(bc2);
  k.eps = (float)c->eps;
  int nt = attn_get_num_threads();
  void (*adam)(const attn_adam_scalars *, float *, const float *, float *, float *, int64_t) =
      attn_kernels_adam();
  const attn_adam *o = opt;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int ch = 0; ch < o->nchunks; ch++) {
    int64_t b = o->chunk_begin[ch];
    attn_adam_scalars kc = k;
    if (!o->decay[o->chunk_view[ch]]) {
      kc.wd = 0.0f;
      kc.decay_mul = 1.0f;
    }
    adam(&kc, p->data + b, p->grad + b, o->m + b, o->v + b, o->chunk_len[ch]);
  }
  return ATTN_OK;
}
