/* Binary classification metrics (positive class = 1, spam): confusion
 * matrix, accuracy, precision, recall, F1. Precision (recall) is 0 when
 * nothing is predicted (present) positive; F1 is 0 when both are 0. */
#ifndef ATTN_APPS_METRICS_H
#define ATTN_APPS_METRICS_H

#include <stdio.h>

#include "attn/status.h"

typedef struct {
  long tp, fp, tn, fn; /* confusion matrix: predicted x true */
  double accuracy, precision, recall, f1;
} attn_binary_metrics;

/* pred[i], label[i] in {0, 1} for i < n (ATTN_EINVAL naming the first
 * other value); n may be 0 (all metrics 0). */
attn_status attn_binary_metrics_compute(const int *pred, const int *label, long n,
                                        attn_binary_metrics *m);
/* Adds one (pred, label) to the counts; call attn_binary_metrics_finish after. */
void attn_binary_metrics_add(attn_binary_metrics *m, int pred, int label);
void attn_binary_metrics_finish(attn_binary_metrics *m);
/* Prints the metrics and the confusion matrix (rows: true ham/spam). */
void attn_binary_metrics_print(FILE *f, const char *title, const attn_binary_metrics *m);

#endif
