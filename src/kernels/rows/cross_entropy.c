/* Cross-entropy from logits, as torch.nn.CrossEntropyLoss(ignore_index=...,
 * label_smoothing=eps, reduction='mean').
 * logits, dlogits [rows, C]; targets [rows]. For each row i not ignored,
 * with log-probabilities lp = logits - logsumexp(logits) (stable: max first):
 *   loss_i = (1 - eps) * (-lp[t_i]) + (eps / C) * sum_c (-lp[c])
 * loss = sum_i loss_i / N, N = number of rows not ignored (N = 0: loss 0).
 * dlogits[i, c] = (softmax[i, c] - (1 - eps) [c == t_i] - eps / C) / N, and 0
 * on ignored rows. Per-row work is split over threads; the row losses are
 * added in row order, so the result does not depend on the thread count. */
#include <math.h>
#include <stdlib.h>

#include "attn/kernels.h"
#include "kernels/rows/elementwise_internal.h"

#define PAR_MIN_ELEMS 32768

// one row x [C]: returns loss_i, writes d [C] (scaled by inv_n) if non-NULL
static double cross_entropy_row(const float *x, int32_t t, int64_t C, float eps, float inv_n,
                                float *d) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < C; c++) m = x[c] > m ? x[c] : m;
  float sx = 0.0f;
#pragma omp simd reduction(+ : sx)
  for (int64_t c = 0; c < C; c++) sx += x[c];
  /* d doubles as the exp(x - m) scratch */
  float s = attn_exp_sub_sum_f32(x, d, C, m), lse = m + logf(s);
  double nll = (double)lse - x[t];
  double smooth = (double)C * lse - sx;
  if (d) {
    float off = eps / (float)C, on = 1.0f - eps;
    float inv_s = 1.0f / s; /* softmax = exp(x - m) / s */
    for (int64_t c = 0; c < C; c++) d[c] = (d[c] * inv_s - off) * inv_n;
    d[t] -= on * inv_n;
  }
  return (1.0 - eps) * nll + (eps / (double)C) * smooth;
}

attn_status attn_cross_entropy_f32(const float *logits, const int32_t *targets, int64_t rows,
                                   int64_t classes, int32_t ignore_index, float label_smoothing,
                                   float *loss, float *dlogits) {
  return attn_cross_entropy_norm_f32(logits, targets, rows, classes, ignore_index, label_smoothing,
                                     0, loss, dlogits);
}

attn_status attn_cross_entropy_norm_f32(const float *logits, const int32_t *targets, int64_t rows,
                                        int64_t classes, int32_t ignore_index,
                                        float label_smoothing, int64_t norm, float *loss,
                                        float *dlogits) {
  if (norm < 0)
    return attn_set_error(ATTN_EINVAL, "cross_entropy: normaliser %lld < 0", (long long)norm);
  if (rows < 0 || classes < 0)
    return attn_set_error(ATTN_EINVAL, "cross_entropy: negative size rows=%lld classes=%lld",
                          (long long)rows, (long long)classes);
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f))
    return attn_set_error(ATTN_EINVAL, "cross_entropy: label_smoothing must be in [0, 1), got %g",
                          (double)label_smoothing);
  if (rows > 0 && (!logits || !targets))
    return attn_set_error(ATTN_EINVAL, "cross_entropy: logits or targets is NULL");
  int64_t valid = 0;
  for (int64_t i = 0; i < rows; i++) {
    if (targets[i] == ignore_index) continue;
    if (targets[i] < 0 || targets[i] >= classes)
      return attn_set_error(ATTN_EINVAL,
                            "cross_entropy: targets[%lld] = %d is outside [0, %lld) and is not "
                            "ignore_index %d",
                            (long long)i, (int)targets[i], (long long)classes, (int)ignore_index);
    valid++;
  }
  double *row_loss = NULL;
  if (loss && valid > 0) {
    row_loss = malloc((size_t)rows * sizeof *row_loss);
    if (!row_loss) return attn_set_error(ATTN_ENOMEM, "cross_entropy: %lld row losses",
                                         (long long)rows);
  }
  if (norm > 0) valid = norm; /* a shard of a larger batch: that batch's count */
  float inv_n = valid > 0 ? 1.0f / (float)valid : 0.0f;
#pragma omp parallel for num_threads(attn_get_num_threads()) if (rows * classes >= PAR_MIN_ELEMS && rows > 1)
  for (int64_t i = 0; i < rows; i++) {
    float *d = dlogits ? dlogits + i * classes : NULL;
    if (targets[i] == ignore_index) {
      if (d)
        for (int64_t c = 0; c < classes; c++) d[c] = 0.0f;
      if (row_loss) row_loss[i] = 0.0;
      continue;
    }
    double l = cross_entropy_row(logits + i * classes, targets[i], classes, label_smoothing,
                                 inv_n, d);
    if (row_loss) row_loss[i] = l;
  }
  if (loss) {
    double sum = 0.0;
    for (int64_t i = 0; row_loss && i < rows; i++) sum += row_loss[i];
    *loss = valid > 0 ? (float)(sum / (double)valid) : 0.0f;
  }
  free(row_loss);
  return ATTN_OK;
}
