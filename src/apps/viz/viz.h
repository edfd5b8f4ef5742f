/* attn apps — pictures of attention weights (cairo: PNG, SVG or PDF, chosen by
 * the output file's extension, with real text: Pango lays out every label
 * and fontconfig supplies fonts for any script, CJK and emoji included).
 *
 *   attn_viz_heatmap_f32   one head: query tokens down, key tokens across
 *                          (rotated 90°), a colour bar, 'bone' or 'viridis'
 *   attn_viz_heads_f32     all heads of one layer as small multiples
 *   attn_viz_model_f32     layers × heads overview (bertviz's "model view")
 *   attn_viz_alignment_f32 cross-attention: source across, output down
 *   attn_viz_cross_f32     cross-attention, layers x (heads + mean), labelled
 *
 * Probabilities are row-major f32; every value must be finite. Files are
 * written to PATH.tmp.<pid> and renamed over PATH when complete. Built without
 * cairo and pangocairo, the drawing functions return ATTN_EUNSUPPORTED naming
 * the packages. Token labels are drawn at least 10 px high: a long axis gets
 * every n-th label (with its index) rather than smaller text. */
#ifndef ATTN_APPS_VIZ_H
#define ATTN_APPS_VIZ_H

#include <stdint.h>
#include <stdio.h>

#include "apps/text/token_chars.h"
#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ATTN_CMAP_BONE = 0, /* matplotlib's 'bone' (the seed's plot_attention) */
  ATTN_CMAP_VIRIDIS   /* perceptually uniform */
} attn_viz_cmap;

typedef struct {
  attn_viz_cmap cmap;
  const char *title;  /* NULL: none */
  const char *q_name; /* axis caption down; NULL: "query" */
  const char *k_name; /* axis caption across; NULL: "key" */
  /* Region [q0,q1) x [k0,k1) to draw; q1 = 0 (k1 = 0) means to the end. */
  int64_t q0, q1, k0, k1;
  int max_labels; /* labels per axis at most (thinned beyond); 0: 60 */
  /* Colour scale. vmin == vmax: the drawn data's min..max (as matplotlib's
   * matshow does), or 0..1 with row_norm. */
  float vmin, vmax;
  /* Fields added later; zero keeps the earlier behaviour. */
  const char *subtitle; /* second line under the title, e.g. "layer 1, mean of 8 heads";
                         * the token range drawn is always added to it */
  int row_norm;         /* 1: each drawn row divided by its largest drawn value (a
                         * cropped or averaged softmax row is otherwise near black) */
  const char *bar_name; /* colour bar caption; NULL: "weight" or "weight / row max" */
  const char *units;    /* what a position is, in the subtitle's range when both axes are
                         * alike: NULL "tokens"; "words", "characters" for merged weights */
} attn_viz_opts;

/* Defaults: bone, no title, full matrix, 60 labels, autoscale, raw weights. */
void attn_viz_opts_default(attn_viz_opts *o);

/* The colour of t in [0,1] (clamped; NaN gives black) exactly as matplotlib's
 * 256-entry colormaps map it: entry min(floor(t*256), 255). rgb in [0,1]. */
void attn_viz_cmap_rgb(attn_viz_cmap cmap, double t, double rgb[3]);
/* "bone"/"viridis" -> enum; ATTN_EINVAL for other names. */
attn_status attn_viz_cmap_from_name(const char *name, attn_viz_cmap *out);

/* Label stride for n labels with at most max_labels shown: ceil(n/max). */
int64_t attn_viz_label_stride(int64_t n, int max_labels);

/* One heatmap of probs [lq, lk]. q_labels [lq] and k_labels [lk] are UTF-8
 * strings (each may be NULL: indices are shown). */
attn_status attn_viz_heatmap_f32(const char *path, const float *probs, int64_t lq, int64_t lk,
                                 const char *const *q_labels, const char *const *k_labels,
                                 const attn_viz_opts *opts);

/* Cross-attention alignment probs [l_out, l_src]: source tokens across,
 * output tokens down (axis captions "source" / "output"). */
attn_status attn_viz_alignment_f32(const char *path, const float *probs, int64_t l_out,
                                   int64_t l_src, const char *const *out_labels,
                                   const char *const *src_labels, const attn_viz_opts *opts);

/* All heads of one layer, probs [heads, lq, lk], as a grid of small heatmaps
 * sharing one colour scale. Labels are drawn on the tiles when short enough. */
attn_status attn_viz_heads_f32(const char *path, const float *probs, int64_t heads, int64_t lq,
                               int64_t lk, const char *const *q_labels, const char *const *k_labels,
                               const attn_viz_opts *opts);

/* Cross attention of an encoder-decoder, probs [layers, heads, l_out, l_src]:
 * one row of tiles per layer, one column per head and a last column with the
 * mean of the layer's heads (none for one head), each tile captioned "layer
 * L, head H" / "layer L, mean"; output tokens down, source tokens across
 * (axis names "output" / "source" unless opts name them), token labels on
 * the tiles up to 32 tokens per axis; one colour scale for every tile. */
attn_status attn_viz_cross_f32(const char *path, const float *probs, int64_t layers,
                               int64_t heads, int64_t l_out, int64_t l_src,
                               const char *const *out_labels, const char *const *src_labels,
                               const attn_viz_opts *opts);

/* probs [layers, heads, n] with each layer's mean of its heads appended:
 * [layers, heads + 1, n], malloc'd; NULL (error set) when out of memory. */
float *attn_viz_append_mean(const float *probs, int64_t layers, int64_t heads, int64_t n);

/* Overview probs [layers, heads, lq, lk]: one row per layer, one column per head. */
attn_status attn_viz_model_f32(const char *path, const float *probs, int64_t layers, int64_t heads,
                               int64_t lq, int64_t lk, const attn_viz_opts *opts);

/* Self-contained HTML page (inline CSS/JS, no network) with a head view:
 * pick layer and heads, hover a query token to see its attention to the
 * keys: lines and key shading scaled to the row's largest weight (so they
 * show at 512 tokens too), each key's weight in a tooltip.
 * probs [layers, heads, lq, lk] (at most ATTN_VIZ_HTML_MAX_VALUES weights);
 * labels as above. */
#define ATTN_VIZ_HTML_MAX_VALUES (1 << 22) /* ~5.6 MB of weights in the page */
attn_status attn_viz_html_f32(const char *path, const float *probs, int64_t layers, int64_t heads,
                              int64_t lq, int64_t lk, const char *const *q_labels,
                              const char *const *k_labels, const char *title);

/* The same page for cross attention probs [layers, heads, l_out, l_src]:
 * output tokens on the left, source tokens on the right, and the text says
 * "output" / "source" instead of "query" / "key". */
attn_status attn_viz_html_cross_f32(const char *path, const float *probs, int64_t layers,
                                    int64_t heads, int64_t l_out, int64_t l_src,
                                    const char *const *out_labels, const char *const *src_labels,
                                    const char *title);

/* Frees the font caches of this thread (Pango's font map, cairo's static
 * data): for LeakSanitizer before exit. Drawing afterwards loads them again.
 * Does nothing in a build without pictures. */
void attn_viz_release_fonts(void);

/* Parse a JSON array of strings (e.g. safetensors metadata "tokens") into a
 * malloc'd array of malloc'd UTF-8 strings; free with attn_viz_labels_free. */
attn_status attn_viz_labels_parse(const char *json, char ***out, int64_t *n);
void attn_viz_labels_free(char **labels, int64_t n);

/* Everything about one input at once (what `make demo` shows), probs
 * [layers, heads, lq, lk] of self-attention or cross-attention:
 *   PREFIX_heatmap.png    head (layer, head), the seed's picture
 *   PREFIX_heads.png      all heads of that layer
 *   PREFIX_model.png      layers x heads overview
 *   PREFIX_diagnosis.png  the per-head diagnosis chart
 *   PREFIX.html           the interactive head view
 * and the diagnosis table on `table` (NULL: not printed). opts as for the
 * heatmap (title, cmap, region...). Stops at the first failure. */
attn_status attn_viz_report_f32(const char *prefix, const float *probs, int64_t layers,
                                int64_t heads, int64_t lq, int64_t lk, const char *const *q_labels,
                                const char *const *k_labels, int64_t layer, int64_t head,
                                const attn_viz_opts *opts, FILE *table);

/* Attention weights from a safetensors file, as PyTorch users save them:
 * tensor `name` (NULL: "attn"), F32/F16/BF16 of shape [Lq, Lk], [H, Lq, Lk]
 * or [Layers, H, Lq, Lk]; token labels from __metadata__ "tokens" (a JSON
 * array of strings, for both axes) or "query_tokens" / "key_tokens"; key
 * token frequencies from an optional tensor "freq" [Lk]. */
typedef struct {
  float *probs; /* [layers, heads, lq, lk] */
  int64_t layers, heads, lq, lk;
  int rank;        /* rank of the tensor in the file */
  char **q_labels; /* [lq] or NULL */
  char **k_labels; /* [lk] or NULL */
  float *freq;     /* [lk] or NULL */
  /* Fields added later. */
  int cross; /* __metadata__ "attention" is "cross": output steps down, source
              * positions across (attn viz and attn diagnose then default to --cross) */
  /* The tokens' bytes (apps/text/token_bytes.h) from metadata "token_bytes"
   * and "token_breaks" for both axes, or "query_token_bytes" /
   * "key_token_bytes" (+ "..._breaks"); NULL when absent. An axis with bytes
   * and no labels gets labels by character (apps/text/token_chars.h). */
  attn_tok_bytes *q_bytes, *k_bytes;
  attn_unit_kind merged;  /* ATTN_UNITS_TOKENS until attn_viz_input_merge */
  int64_t tok_lq, tok_lk; /* the token counts before merging */
} attn_viz_input;

attn_status attn_viz_input_load(const char *path, const char *name, attn_viz_input *out);
void attn_viz_input_free(attn_viz_input *in);

/* Attention of tokens as attention of the characters or words they make up
 * (apps/text/token_chars.h: the units and each token's share of bytes in
 * them): probs [mats, lq, lk] -> *out [mats, Uq, Uk] (malloc'd), with
 *   out[u][v] = sum_i w(i,u) sum_j share(j,v) probs[i][j],
 *   w(i,u) = share(i,u) / sum_i' share(i',u):
 * the keys of a unit summed, its queries averaged (each token by its share,
 * 1 for a token wholly inside the unit), the rule commonly used for the
 * attention of words made of sub-word tokens. A row of probs that sums to 1
 * gives rows that sum to 1. q (k) NULL: that axis stays as it is. */
attn_status attn_viz_merge_f32(const float *probs, int64_t mats, int64_t lq, int64_t lk,
                               const attn_tok_units *q, const attn_tok_units *k, float **out);

/* Merges a loaded input in place: its probs, sizes and labels become those
 * of the units (labels as attn_tok_units_make gives them). ATTN_EINVAL
 * naming the metadata needed when an axis has no token bytes. */
attn_status attn_viz_input_merge(attn_viz_input *in, attn_unit_kind kind);

/* The inverse: tensor "attn" F32 probs [layers, heads, lq, lk] into path
 * (atomically), with the labels as metadata "tokens" when q_labels ==
 * k_labels (one array for both axes), else "query_tokens" / "key_tokens"
 * (either may be NULL: none), plus the pairs kv[0] = kv[1], kv[2] = kv[3],
 * ... up to a NULL key (kv may be NULL; kv "attention" = "cross" marks cross
 * attention). */
attn_status attn_viz_save_f32(const char *path, const float *probs, int64_t layers, int64_t heads,
                              int64_t lq, int64_t lk, const char *const *q_labels,
                              const char *const *k_labels, const char *const *kv);

#ifdef __cplusplus
}
#endif
#endif
