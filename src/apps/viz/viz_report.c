/* All pictures and the diagnosis of one input in one call (see viz.h). */
#include <stdlib.h>
#include <string.h>

#include "apps/viz/diagnose.h"
#include "apps/viz/viz.h"

attn_status attn_viz_report_f32(const char *prefix, const float *probs, int64_t layers,
                                int64_t heads, int64_t lq, int64_t lk, const char *const *q_labels,
                                const char *const *k_labels, int64_t layer, int64_t head,
                                const attn_viz_opts *opts, FILE *table) {
  if (!prefix || !prefix[0] || strlen(prefix) > 4000)
    return attn_set_error(ATTN_EINVAL, "report: empty or overlong output prefix");
  if (!probs) return attn_set_error(ATTN_EINVAL, "report: NULL probs");
  if (layers < 1 || heads < 1 || layer < 0 || layer >= layers || head < 0 || head >= heads)
    return attn_set_error(ATTN_EINVAL,
                          "report: layer %lld / head %lld out of range for %lld x %lld heads",
                          (long long)layer, (long long)head, (long long)layers, (long long)heads);
  attn_viz_opts o;
  if (opts)
    o = *opts;
  else
    attn_viz_opts_default(&o);
  size_t n = strlen(prefix) + 32;
  char *path = malloc(n);
  attn_head_diag *d = calloc((size_t)(layers * heads), sizeof *d);
  attn_status st = ATTN_OK;
  if (!path || !d) {
    st = attn_set_error(ATTN_ENOMEM, "report: out of memory");
    goto done;
  }
  int64_t per = lq * lk;
  char title[160];
  const char *user_title = o.title;
  snprintf(title, sizeof title, "layer %lld, head %lld", (long long)layer, (long long)head);
  o.title = user_title ? user_title : title;
  snprintf(path, n, "%s_heatmap.png", prefix);
  st = attn_viz_heatmap_f32(path, probs + (layer * heads + head) * per, lq, lk, q_labels, k_labels,
                            &o);
  if (st) goto done;
  snprintf(title, sizeof title, "layer %lld: all %lld heads", (long long)layer, (long long)heads);
  o.title = title;
  snprintf(path, n, "%s_heads.png", prefix);
  st = attn_viz_heads_f32(path, probs + layer * heads * per, heads, lq, lk, q_labels, k_labels, &o);
  if (st) goto done;
  snprintf(title, sizeof title, "%lld layers x %lld heads", (long long)layers, (long long)heads);
  snprintf(path, n, "%s_model.png", prefix);
  st = attn_viz_model_f32(path, probs, layers, heads, lq, lk, &o);
  if (st) goto done;
  attn_diag_opts dopt;
  attn_diag_opts_default(&dopt);
  dopt.tokens = k_labels;
  st = attn_diagnose_f32(probs, layers * heads, lq, lk, &dopt, d);
  if (st) goto done;
  if (table) attn_diagnose_print(table, d, layers, heads);
  snprintf(path, n, "%s_diagnosis.png", prefix);
  st = attn_diagnose_chart(path, d, layers, heads);
  if (st) goto done;
  snprintf(path, n, "%s.html", prefix);
  st = attn_viz_html_f32(path, probs, layers, heads, lq, lk, q_labels, k_labels,
                         user_title ? user_title : "attention");
done:
  free(path);
  free(d);
  return st;
}
