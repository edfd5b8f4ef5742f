/* Monotonic alignment of cross attention (diagnose_align.h). */
#include "apps/viz/diagnose_align.h"

#include "apps/viz/viz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t row_argmax(const float *p, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; j++)
    if (p[j] > p[best]) best = j;
  return best;
}

static double row_sum(const float *p, int64_t n) {
  double s = 0;
  for (int64_t j = 0; j < n; j++)
    s += p[j];
  return s;
}

/* the row's centre of mass over its first n positions; 0 for no weight */
static int row_centre(const float *p, int64_t n, double *c) {
  double s = 0, m = 0;
  for (int64_t j = 0; j < n; j++)
    s += p[j], m += p[j] * (double)j;
  *c = s > 0 ? m / s : 0;
  return s > 0;
}

attn_status attn_diagnose_alignment_f32(const float *probs, int64_t l_out, int64_t l_src,
                                        attn_align_diag *out) {
  if (!probs || !out) return attn_set_error(ATTN_EINVAL, "alignment: NULL argument");
  if (l_out < 1 || l_src < 1)
    return attn_set_error(ATTN_EINVAL, "alignment: shape [%lld, %lld]", (long long)l_out,
                          (long long)l_src);
  memset(out, 0, sizeof *out);
  for (int64_t e = 0; e < l_out * l_src; e++)
    if (!isfinite(probs[e]) || probs[e] < 0)
      return attn_set_error(isfinite(probs[e]) ? ATTN_EINVAL : ATTN_ENUMERIC,
                            "alignment: probs[%lld, %lld] is %g", (long long)(e / l_src),
                            (long long)(e % l_src), (double)probs[e]);
  for (int64_t e = 0; e < l_out * l_src; e++)
    if (probs[e] > 0 && e % l_src + 1 > out->src_len) out->src_len = e % l_src + 1;
  const int64_t ls = out->src_len;
  /* centres of mass and argmax of the rows with weight; least squares on (i, c_i) */
  double si = 0, sc = 0, sii = 0, sic = 0;
  int64_t prev = -1, steps = 0, forward = 0, covered = 0;
  unsigned char *seen = calloc((size_t)(ls > 0 ? ls : 1), 1);
  if (!seen) return attn_set_error(ATTN_ENOMEM, "alignment: %lld positions", (long long)ls);
  for (int64_t i = 0; i < l_out; i++) {
    const float *p = probs + i * l_src;
    double c;
    if (!row_centre(p, ls, &c)) continue;
    si += (double)i, sc += c, sii += (double)i * i, sic += (double)i * c;
    out->rows++;
    int64_t a = row_argmax(p, ls);
    if (prev >= 0) steps++, forward += a >= prev;
    prev = a;
    if (!seen[a]) seen[a] = 1, covered++;
  }
  free(seen);
  if (out->rows == 0) return attn_set_error(ATTN_EINVAL, "alignment: every row is zero");
  const double n = (double)out->rows, var = sii - si * si / n;
  out->slope = var > 0 ? (sic - si * sc / n) / var : 0.0;
  out->intercept = (sc - out->slope * si) / n;
  double dist = 0;
  for (int64_t i = 0; i < l_out; i++) {
    double c;
    if (row_centre(probs + i * l_src, ls, &c))
      dist += fabs(c - (out->slope * (double)i + out->intercept));
  }
  out->diag_dist = dist / n / (double)ls;
  out->monotonic = steps ? (double)forward / (double)steps : NAN;
  out->coverage = (double)covered / (double)ls;
  out->diagonal = steps && out->monotonic >= ATTN_ALIGN_MONOTONIC_MIN && out->slope > 0 &&
                  out->diag_dist <= ATTN_ALIGN_DIST_MAX;
  return ATTN_OK;
}

attn_status attn_diagnose_alignments_f32(const float *probs, int64_t n, int64_t l_out,
                                         int64_t l_src, attn_align_diag *out) {
  if (!probs || !out || n < 1) return attn_set_error(ATTN_EINVAL, "alignment: NULL or n < 1");
  for (int64_t t = 0; t < n; t++) {
    attn_status st = attn_diagnose_alignment_f32(probs + t * l_out * l_src, l_out, l_src, &out[t]);
    if (st) return st;
  }
  return ATTN_OK;
}

void attn_diagnose_alignment_print(FILE *f, const attn_align_diag *d, int64_t layers, int64_t heads,
                                   int mean_last) {
  fprintf(f, "%-14s %9s %7s %9s %8s  %s\n", "cross attn", "monotonic", "slope", "diag dist",
          "coverage", "alignment");
  for (int64_t l = 0; l < layers; l++)
    for (int64_t h = 0; h < heads; h++) {
      const attn_align_diag *x = &d[l * heads + h];
      char name[64];
      if (mean_last && h == heads - 1)
        snprintf(name, sizeof name, "layer %lld mean", (long long)l);
      else
        snprintf(name, sizeof name, "layer %lld head %lld", (long long)l, (long long)h);
      fprintf(f, "%-14s %9.2f %7.2f %9.3f %8.2f  %s\n", name, x->monotonic, x->slope, x->diag_dist,
              x->coverage, x->diagonal ? "diagonal (monotonic)" : "not monotonic");
    }
}

void attn_alignment_path_print(FILE *f, const float *probs, int64_t l_out, int64_t l_src,
                               const char *const *out_labels, const char *const *src_labels) {
  int first = 1;
  for (int64_t i = 0; i < l_out; i++) {
    const float *p = probs + i * l_src;
    if (row_sum(p, l_src) <= 0) continue;
    int64_t a = row_argmax(p, l_src);
    fputs(first ? "" : "  ", f);
    first = 0;
    if (out_labels)
      fputs(out_labels[i], f);
    else
      fprintf(f, "%lld", (long long)i);
    fputs("->", f);
    if (src_labels)
      fputs(src_labels[a], f);
    else
      fprintf(f, "%lld", (long long)a);
    fprintf(f, " %.2f", (double)p[a]);
  }
  fputc('\n', f);
}

attn_status attn_diagnose_cross_report(FILE *f, const float *probs, int64_t layers, int64_t heads,
                                       int64_t l_out, int64_t l_src, const char *const *out_labels,
                                       const char *const *src_labels) {
  if (!f || !probs || layers < 1 || heads < 1 || l_out < 1 || l_src < 1)
    return attn_set_error(ATTN_EINVAL, "cross report: NULL or empty input");
  const int64_t per = l_out * l_src, cols = heads > 1 ? heads + 1 : 1;
  float *all = cols > heads ? attn_viz_append_mean(probs, layers, heads, per) : NULL;
  attn_align_diag *d = malloc((size_t)(layers * cols) * sizeof *d);
  const float *maps = cols > heads ? all : probs;
  attn_status st = maps && d ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "cross report");
  /* a last </s> row is where the decoder decides to stop, not a letter's sound */
  const int eos = l_out > 1 && out_labels && out_labels[l_out - 1] &&
                  !strcmp(out_labels[l_out - 1], "</s>");
  for (int64_t k = 0; !st && k < layers * cols; k++)
    st = attn_diagnose_alignment_f32(maps + k * per, l_out - eos, l_src, &d[k]);
  if (!st) {
    if (eos) fprintf(f, "(the measures leave out the last row, </s>; the path shows it)\n");
    attn_diagnose_alignment_print(f, d, layers, cols, cols > heads);
    fprintf(f, "path (layer %lld%s, output -> most attended source):\n", (long long)(layers - 1),
            cols > heads ? ", mean of heads" : "");
    attn_alignment_path_print(f, maps + (layers * cols - 1) * per, l_out, l_src, out_labels,
                              src_labels);
  }
  free(all);
  free(d);
  return st;
}
