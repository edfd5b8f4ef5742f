/* attn apps — how monotonic is a cross-attention alignment? For one head (or
 * a mean of heads) of a sequence-to-sequence model, probs [l_out, l_src]
 * (output steps down, source positions across; rows sum to 1, or are all 0
 * for padded output steps, which are skipped):
 *
 *   monotonic  fraction of consecutive output steps whose most-attended
 *              source position does not go back (argmax_{i+1} >= argmax_i):
 *              1 for a left-to-right path such as letters -> phonemes;
 *   slope, intercept  the least-squares line through the centres of mass
 *              c_i = sum_j p_ij j (source positions per output step);
 *   diag_dist  mean |c_i - (slope i + intercept)| / l_src: how far the
 *              centres stray from that diagonal, as a fraction of the source
 *              (0 on a straight path, ~0.25 for a random order);
 *   coverage   fraction of the source positions that some output step
 *              attends most (a path that skips letters covers less).
 *
 * l_src counts up to the last source position with any weight (padding
 * columns, all zero, are left out). A head is called diagonal when
 * monotonic >= ATTN_ALIGN_MONOTONIC_MIN, slope > 0 and diag_dist <=
 * ATTN_ALIGN_DIST_MAX. */
#ifndef ATTN_APPS_DIAGNOSE_ALIGN_H
#define ATTN_APPS_DIAGNOSE_ALIGN_H

#include <stdint.h>
#include <stdio.h>

#include "attn/status.h"

#define ATTN_ALIGN_MONOTONIC_MIN 0.9
#define ATTN_ALIGN_DIST_MAX 0.1

typedef struct {
  int64_t rows;      /* output steps with weight */
  int64_t src_len;   /* source positions up to the last with weight */
  double monotonic;  /* NAN with fewer than 2 rows */
  double slope, intercept;
  double diag_dist;
  double coverage;
  int diagonal; /* the verdict above */
} attn_align_diag;

/* One map probs [l_out, l_src]; every value finite and >= 0. */
attn_status attn_diagnose_alignment_f32(const float *probs, int64_t l_out, int64_t l_src,
                                        attn_align_diag *out);

/* n maps [n, l_out, l_src] -> out[n] (e.g. layers x heads, layer-major). */
attn_status attn_diagnose_alignments_f32(const float *probs, int64_t n, int64_t l_out,
                                         int64_t l_src, attn_align_diag *out);

/* The table, one line per map: "layer L head H" (head == heads: "mean"
 * when the caller appended the mean as one more head). */
void attn_diagnose_alignment_print(FILE *f, const attn_align_diag *d, int64_t layers,
                                   int64_t heads, int mean_last);

/* The path as text: for each output step with weight, its label, the
 * most-attended source label and that weight, e.g. "K->c .93  AE1->a .88".
 * Labels may be NULL (indices). */
void attn_alignment_path_print(FILE *f, const float *probs, int64_t l_out, int64_t l_src,
                               const char *const *out_labels, const char *const *src_labels);

/* The report of `attn diagnose --cross` for probs [layers, heads, l_out,
 * l_src]: the table of every head and (with several heads) each layer's mean
 * of heads, then the path of the last layer's mean with the labels. A last
 * output row labelled "</s>" (the step that ends the output, attending
 * wherever the decoder decides to stop) is left out of the table's measures,
 * not out of the path. */
attn_status attn_diagnose_cross_report(FILE *f, const float *probs, int64_t layers, int64_t heads,
                                       int64_t l_out, int64_t l_src,
                                       const char *const *out_labels,
                                       const char *const *src_labels);

#endif
