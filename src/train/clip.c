/* Global gradient L2 norm (double, fixed chunking: same bits for any thread
 * count), clip-to-max-norm as torch.nn.utils.clip_grad_norm_, NaN/Inf check. */
#include <math.h>
#include <stdlib.h>

#include "attn/kernels.h"
#include "attn/train.h"

#define CLIP_CHUNK 4096 /* floats per partial sum */

typedef struct {
  int64_t begin, len; /* into the flat grad buffer */
  int view;
} grad_chunk;

/* Splits every view into CLIP_CHUNK pieces, in declaration order. */
static attn_status make_chunks(const attn_params *p, grad_chunk **out, int *n, const char *fn) {
  *out = NULL;
  *n = 0;
  if (!p || !p->grad) return attn_set_error(ATTN_EINVAL, "%s: parameters not allocated", fn);
  int64_t count = 0;
  for (int i = 0; i < p->count; i++) count += (p->views[i].numel + CLIP_CHUNK - 1) / CLIP_CHUNK;
  grad_chunk *c = malloc((size_t)(count ? count : 1) * sizeof *c);
  if (!c) return attn_set_error(ATTN_ENOMEM, "%s: out of memory", fn);
  int k = 0;
  for (int i = 0; i < p->count; i++) {
    const attn_param_view *v = &p->views[i];
    for (int64_t at = 0; at < v->numel; at += CLIP_CHUNK) {
      c[k].begin = v->offset + at;
      c[k].len = v->numel - at < CLIP_CHUNK ? v->numel - at : CLIP_CHUNK;
      c[k].view = i;
      k++;
    }
  }
  *out = c;
  *n = k;
  return ATTN_OK;
}

/* sum of squares of x [n] in double with 8 fixed accumulators */
static double sumsq_f64(const float *x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += (double)x[i + j] * (double)x[i + j];
  for (int j = 0; i < n; i++, j++) acc[j] += (double)x[i] * (double)x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

attn_status attn_grad_norm(const attn_params *p, double *norm) {
  if (!norm) return attn_set_error(ATTN_EINVAL, "attn_grad_norm: norm is NULL");
  *norm = 0;
  grad_chunk *c;
  int n;
  attn_status s = make_chunks(p, &c, &n, "attn_grad_norm");
  if (s) return s;
  double *part = malloc((size_t)(n ? n : 1) * sizeof *part);
  if (!part) {
    free(c);
    return attn_set_error(ATTN_ENOMEM, "attn_grad_norm: out of memory");
  }
  int nt = attn_get_num_threads();
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int i = 0; i < n; i++) part[i] = sumsq_f64(p->grad + c[i].begin, c[i].len);
  double total = 0;
  for (int i = 0; i < n; i++) total += part[i];
  *norm = sqrt(total);
  free(part);
  free(c);
  return ATTN_OK;
}

attn_status attn_grads_check_finite(const attn_params *p) {
  grad_chunk *c;
  int n;
  attn_status s = make_chunks(p, &c, &n, "attn_grads_check_finite");
  if (s) return s;
  int64_t *bad = malloc((size_t)(n ? n : 1) * sizeof *bad); /* first bad index in chunk, or -1 */
  if (!bad) {
    free(c);
    return attn_set_error(ATTN_ENOMEM, "attn_grads_check_finite: out of memory");
  }
  int nt = attn_get_num_threads();
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int i = 0; i < n; i++) {
    const float *g = p->grad + c[i].begin;
    bad[i] = -1;
    for (int64_t j = 0; j < c[i].len; j++) {
      if (!isfinite(g[j])) {
        bad[i] = j;
        break;
      }
    }
  }
  s = ATTN_OK;
  for (int i = 0; i < n; i++) {
    if (bad[i] < 0) continue;
    const attn_param_view *v = &p->views[c[i].view];
    int64_t idx = c[i].begin + bad[i] - v->offset;
    float x = p->grad[c[i].begin + bad[i]];
    s = attn_set_error(ATTN_ENUMERIC, "gradient of '%s' is %s at flat index %lld", v->name,
                       isnan(x) ? "NaN" : (x > 0 ? "+Inf" : "-Inf"), (long long)idx);
    break;
  }
  free(bad);
  free(c);
  return s;
}

attn_status attn_clip_grad_norm(attn_params *p, double max_norm, double *norm_out) {
  if (norm_out) *norm_out = 0;
  if (!(max_norm > 0) || !isfinite(max_norm))
    return attn_set_error(ATTN_EINVAL, "attn_clip_grad_norm: max_norm %g must be finite and > 0",
                          max_norm);
  double norm;
  attn_status s = attn_grad_norm(p, &norm);
  if (s) return s;
  if (norm_out) *norm_out = norm;
  if (!isfinite(norm)) {
    s = attn_grads_check_finite(p);
    return s ? s : attn_set_error(ATTN_ENUMERIC, "gradient norm is not finite");
  }
  double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return ATTN_OK;
  float cf = (float)coef;
  grad_chunk *c;
  int n;
  if ((s = make_chunks(p, &c, &n, "attn_clip_grad_norm"))) return s;
  int nt = attn_get_num_threads();
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int i = 0; i < n; i++) {
    float *g = p->grad + c[i].begin;
    for (int64_t j = 0; j < c[i].len; j++) g[j] *= cf;
  }
  free(c);
  return ATTN_OK;
}
