#include "apps/classifier/metrics.h"

#include <string.h>

void attn_binary_metrics_add(attn_binary_metrics *m, int pred, int label) {
  if (pred) label ? m->tp++ : m->fp++;
  else label ? m->fn++ : m->tn++;
}

void attn_binary_metrics_finish(attn_binary_metrics *m) {
  long n = m->tp + m->fp + m->tn + m->fn;
  m->accuracy = n ? (double)(m->tp + m->tn) / (double)n : 0.0;
  m->precision = m->tp + m->fp ? (double)m->tp / (double)(m->tp + m->fp) : 0.0;
  m->recall = m->tp + m->fn ? (double)m->tp / (double)(m->tp + m->fn) : 0.0;
  m->f1 = m->precision + m->recall > 0 ? 2 * m->precision * m->recall / (m->precision + m->recall) : 0.0;
}

attn_status attn_binary_metrics_compute(const int *pred, const int *label, long n,
                                        attn_binary_metrics *m) {
  if (!m || n < 0 || (n > 0 && (!pred || !label)))
    return attn_set_error(ATTN_EINVAL, "metrics: NULL argument or n = %ld < 0", n);
  memset(m, 0, sizeof *m);
  for (long i = 0; i < n; i++) {
    if ((pred[i] != 0 && pred[i] != 1) || (label[i] != 0 && label[i] != 1))
      return attn_set_error(ATTN_EINVAL, "metrics: pred[%ld] = %d, label[%ld] = %d: expected 0 or 1", i,
                            pred[i], i, label[i]);
    attn_binary_metrics_add(m, pred[i], label[i]);
  }
  attn_binary_metrics_finish(m);
  return ATTN_OK;
}

void attn_binary_metrics_print(FILE *f, const char *title, const attn_binary_metrics *m) {
  fprintf(f, "%s: accuracy %.4f  precision %.4f  recall %.4f  F1 %.4f  (n = %ld)\n", title,
          m->accuracy, m->precision, m->recall, m->f1, m->tp + m->fp + m->tn + m->fn);
  fprintf(f, "  confusion     pred ham  pred spam\n");
  fprintf(f, "  true ham    %10ld %10ld\n", m->tn, m->fp);
  fprintf(f, "  true spam   %10ld %10ld\n", m->fn, m->tp);
}
