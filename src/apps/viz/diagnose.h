/* attn apps — what does each attention head do? Per head, from its
 * probabilities [Lq, Lk]: entropy normalised by log(number of allowed keys),
 * the distance profile |i-j|, mass on the diagonal / previous / next token,
 * the most-attended key position, and (given token frequencies) whether rare
 * tokens receive more attention. Each head is then classified into the
 * patterns of the tutorial (section 4.2) and flagged when uniform (6.1).
 *
 * Positions are aligned top-left (query i sits at key i), as PyTorch's
 * is_causal does. Rows that are entirely 0 (fully masked) are skipped;
 * columns that are 0 in every row count as padding (not allowed). */
#ifndef ATTN_APPS_DIAGNOSE_H
#define ATTN_APPS_DIAGNOSE_H

#include <stdint.h>
#include <stdio.h>

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ATTN_PATTERN_DIAGONAL = 0, /* each token attends to itself */
  ATTN_PATTERN_LOCAL,        /* a band |i-j| <= 2 around the diagonal */
  ATTN_PATTERN_PREVIOUS,     /* to the previous token */
  ATTN_PATTERN_NEXT,         /* to the next token */
  ATTN_PATTERN_FOCUSED,      /* one key position takes most (first token, punctuation) */
  ATTN_PATTERN_RARE,         /* rarer tokens receive more attention */
  ATTN_PATTERN_UNIFORM,      /* dispersed to near-uniform: flagged */
  ATTN_PATTERN_SENTENCE,     /* stays within the query's sentence (hierarchical) */
  ATTN_PATTERN_MIXED,        /* none of the above */
  ATTN_PATTERN_COUNT
} attn_pattern;

/* Short name, e.g. "previous-token". */
const char *attn_pattern_name(attn_pattern p);

/* Distance bins of |i-j|: 0, 1, 2, 3-4, 5-8, 9-16, 17-32, >32 */
#define ATTN_DIAG_DIST_BINS 8

/* Thresholds of the classification (on means over rows). */
#define ATTN_DIAG_MASS_MIN 0.5      /* diagonal / previous / next / focused mass */
#define ATTN_DIAG_RARE_CORR_MIN 0.5 /* correlation of received attention with -log freq */
#define ATTN_DIAG_RARE_CV_MIN 0.25  /* ... and received attention must vary this much */
#define ATTN_DIAG_UNIFORM_MIN 0.9   /* normalised entropy */
#define ATTN_DIAG_LOCAL_MIN 0.6     /* mass within |i-j| <= 2 */
#define ATTN_DIAG_SENTENCE_MIN 0.8  /* mass within the query's sentence ... */
#define ATTN_DIAG_SENTENCE_BASE 0.5 /* ... where uniform attention would put at most this */

typedef struct {
  const float *freq;         /* [lk] key token frequencies (counts or probabilities, > 0) or NULL */
  const char *const *tokens; /* [lk] key token strings or NULL */
  int causal;                /* -1: detect (all p[i,j>i] == 0), 0: no, 1: yes */
  /* Self-attention (lq == lk) only: sentence index of each position [lk], or
   * NULL to split after the tokens ". ! ? ;" and end markers ([SEP], </s>). */
  const int32_t *sentence;
} attn_diag_opts;

typedef struct {
  attn_pattern pattern;
  int uniform_flag;     /* normalised entropy >= ATTN_DIAG_UNIFORM_MIN */
  int causal;           /* the mask assumed */
  double entropy;       /* mean of H(row) / log(allowed keys) over rows with >= 2 allowed */
  double mean_distance; /* mean over rows of sum_j p |i-j| */
  double dist_profile[ATTN_DIAG_DIST_BINS];           /* mean mass per |i-j| bin (sums to 1) */
  double diag_mass, prev_mass, next_mass, local_mass; /* means over rows where defined */
  int64_t max_col;      /* key position receiving the most attention */
  double max_col_mass;  /* its mean attention over rows */
  double rare_corr;     /* Pearson corr(received / uniform share, -log freq); NAN without freq */
  double received_cv;   /* coefficient of variation of received / uniform share */
  double sentence_mass; /* mean mass within the query's sentence; NAN if unknown */
  double sentence_base; /* the same under uniform attention over the allowed keys */
  char detail[192];     /* e.g. "key 0 (first token)"; for uniform the likely causes */
} attn_head_diag;

void attn_diag_opts_default(attn_diag_opts *o);

/* Diagnose one head, probs [lq, lk] (rows sum to 1, or are all 0). */
attn_status attn_diagnose_head_f32(const float *probs, int64_t lq, int64_t lk,
                                   const attn_diag_opts *opts, attn_head_diag *out);

/* n maps probs [n, lq, lk] -> out[n]. */
attn_status attn_diagnose_f32(const float *probs, int64_t n, int64_t lq, int64_t lk,
                              const attn_diag_opts *opts, attn_head_diag *out);

/* The table, one line per head; layers * heads entries in out (layer-major). */
void attn_diagnose_print(FILE *f, const attn_head_diag *d, int64_t layers, int64_t heads);

/* What kind of model the attention comes from: whether evenly spread
 * attention is a fault depends on it. */
typedef enum {
  ATTN_DIAG_MODEL_UNKNOWN = 0,     /* a layer file of unknown use */
  ATTN_DIAG_MODEL_POOLED,          /* a classifier that averages (mean-pools) every token */
  ATTN_DIAG_MODEL_DECODER,         /* a causal language model (predicts the next token) */
  ATTN_DIAG_MODEL_COUNT
} attn_diag_model;

/* "unknown", "classifier", "decoder" (also accepted: "layer", "pooled",
 * "mean-pooled", "causal-lm") -> enum; ATTN_EINVAL for other names. */
attn_status attn_diag_model_from_name(const char *name, attn_diag_model *out);
const char *attn_diag_model_name(attn_diag_model m);

/* What is known about the model beside its attention. */
typedef struct {
  attn_diag_model kind;
  double accuracy; /* held-out accuracy in [0, 1]; NAN: not known */
  double loss;     /* held-out loss (nats); NAN: not known */
} attn_diag_context;
void attn_diag_context_default(attn_diag_context *c); /* unknown kind, nothing known */

/* Held-out accuracy at or above which a model is called good, and at or
 * below which poor (between: neither is said). */
#define ATTN_DIAG_ACC_GOOD 0.9
#define ATTN_DIAG_ACC_POOR 0.7
/* Heads of one layer differ when their rows differ by at least this much
 * total variation (half the L1 distance), on average over head pairs. */
#define ATTN_DIAG_HEADS_DIFFER 0.2

/* Mean total variation between the heads of layer `layer` of probs
 * [layers, heads, lq, lk] over pairs of heads and rows (0: identical heads,
 * 1: disjoint); 0 for a single head. */
double attn_diagnose_head_spread(const float *probs, int64_t layer, int64_t heads, int64_t lq,
                                 int64_t lk);

/* Advice, in plain words, on the heads flagged near-uniform (d: layers x
 * heads, as for attn_diagnose_print, of attention over lk keys), qualified
 * by what the model is (ctx; NULL: unknown) and by the evidence: the
 * entropy against its maximum log(N), how many keys there are, whether the
 * heads of a layer differ (from probs [layers, heads, lq, lk]; NULL: not
 * said), the model's accuracy or loss when known. Writes nothing when no
 * head is near-uniform. Returns the number of near-uniform heads. */
int attn_diagnose_advise(FILE *f, const attn_head_diag *d, const float *probs, int64_t layers,
                         int64_t heads, int64_t lq, int64_t lk, const attn_diag_context *ctx);

/* A chart (PNG/SVG/PDF by extension): per head, bars of entropy and the
 * masses, and the pattern (uniform heads marked in red). */
attn_status attn_diagnose_chart(const char *path, const attn_head_diag *d, int64_t layers,
                                int64_t heads);

#ifdef __cplusplus
}
#endif
#endif
