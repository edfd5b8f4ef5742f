/* Per-head attention diagnosis: statistics of one probability matrix and its
 * classification into the tutorial's patterns (see diagnose.h). */
#include "apps/viz/diagnose.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const pattern_names[ATTN_PATTERN_COUNT] = {
    "diagonal",   "local",   "previous-token", "next-token", "focused",
    "rare-token", "uniform", "sentence",       "mixed"};

const char *attn_pattern_name(attn_pattern p) {
  return (unsigned)p < ATTN_PATTERN_COUNT ? pattern_names[p] : "?";
}

void attn_diag_opts_default(attn_diag_opts *o) {
  memset(o, 0, sizeof *o);
  o->causal = -1;
}

static int dist_bin(int64_t d) {
  if (d <= 2) return (int)d;
  if (d <= 4) return 3;
  if (d <= 8) return 4;
  if (d <= 16) return 5;
  if (d <= 32) return 6;
  return 7;
}

/* Token made only of ASCII punctuation (after trimming spaces and the
 * sub-word markers 'Ġ' / '▁' tokenizers prepend). */
static int is_punct_token(const char *s) {
  if (!s) return 0;
  int n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == ' ') continue;
    if (!(*p < 0x80 && ispunct(*p))) return 0;
    n++;
  }
  return n > 0;
}

static int is_special_token(const char *s) {
  size_t n = s ? strlen(s) : 0;
  return n >= 3 && ((s[0] == '[' && s[n - 1] == ']') || (s[0] == '<' && s[n - 1] == '>'));
}

static int ends_sentence(const char *s) {
  if (!s) return 0;
  while (*s == ' ')
    s++;
  return !strcmp(s, ".") || !strcmp(s, "!") || !strcmp(s, "?") || !strcmp(s, ";") ||
         !strcmp(s, "[SEP]") || !strcmp(s, "</s>");
}

/* Sentence index per position [n] from opts, or from the tokens; 0 if neither. */
static int sentence_ids(const attn_diag_opts *o, int64_t n, int32_t *ids) {
  if (o->sentence) {
    memcpy(ids, o->sentence, (size_t)n * sizeof *ids);
    return 1;
  }
  if (!o->tokens) return 0;
  int32_t s = 0;
  for (int64_t i = 0; i < n; i++) {
    ids[i] = s;
    if (ends_sentence(o->tokens[i])) s++;
  }
  return 1;
}

/* Validates probs [lq, lk] and fills the column flags; *causal_seen = every
 * p[i, j > i] is 0. */
static attn_status check_probs(const float *p, int64_t lq, int64_t lk, unsigned char *col_used,
                               unsigned char *row_used, int *causal_seen) {
  *causal_seen = 1;
  for (int64_t i = 0; i < lq; i++) {
    double s = 0;
    for (int64_t j = 0; j < lk; j++) {
      float v = p[i * lk + j];
      if (!isfinite(v))
        return attn_set_error(ATTN_ENUMERIC, "diagnose: probs[%lld, %lld] is %g", (long long)i,
                              (long long)j, (double)v);
      if (v < 0)
        return attn_set_error(ATTN_EINVAL, "diagnose: probs[%lld, %lld] = %g is negative",
                              (long long)i, (long long)j, (double)v);
      if (v > 0) {
        col_used[j] = 1;
        if (j > i) *causal_seen = 0;
      }
      s += v;
    }
    if (s != 0 && fabs(s - 1) > 1e-2)
      return attn_set_error(ATTN_EINVAL,
                            "diagnose: row %lld of probs sums to %g (attention probabilities "
                            "sum to 1 per query, or 0 when fully masked; weights after "
                            "dropout do not: capture them in eval mode)",
                            (long long)i, s);
    row_used[i] = s != 0;
  }
  return ATTN_OK;
}

static void describe_key(char *buf, size_t n, const char *what, int64_t j, int64_t lk,
                         const char *const *tokens) {
  const char *tok = tokens ? tokens[j] : NULL;
  const char *kind = j == 0                         ? " (first token)"
                     : tok && is_punct_token(tok)   ? " (punctuation)"
                     : tok && is_special_token(tok) ? " (special token)"
                     : j == lk - 1                  ? " (last token)"
                                                    : "";
  char t[48] = "";
  if (tok) {
    size_t k = 0;
    for (const char *s = tok; *s && k + 1 < sizeof t - 8; s++)
      t[k++] = (unsigned char)*s < 0x20 ? ' ' : *s;
    t[k] = '\0';
  }
  snprintf(buf, n, "%s key %lld%s%s%s%s", what, (long long)j, tok ? " '" : "", t, tok ? "'" : "",
           kind);
}

attn_status attn_diagnose_head_f32(const float *probs, int64_t lq, int64_t lk,
                                   const attn_diag_opts *opts, attn_head_diag *out) {
  attn_diag_opts o;
  if (opts)
    o = *opts;
  else
    attn_diag_opts_default(&o);
  if (!probs || !out) return attn_set_error(ATTN_EINVAL, "diagnose: NULL probs or result");
  if (lq < 1 || lk < 1 || lq > 1000000 || lk > 1000000)
    return attn_set_error(ATTN_EINVAL, "diagnose: shape [%lld, %lld] must be positive",
                          (long long)lq, (long long)lk);
  if (o.freq)
    for (int64_t j = 0; j < lk; j++)
      if (!(o.freq[j] > 0) || !isfinite(o.freq[j]))
        return attn_set_error(ATTN_EINVAL, "diagnose: freq[%lld] = %g must be finite and > 0",
                              (long long)j, (double)o.freq[j]);
  memset(out, 0, sizeof *out);
  unsigned char *col_used = calloc((size_t)lk, 1), *row_used = calloc((size_t)lq, 1);
  int32_t *sent = lq == lk ? calloc((size_t)lk, sizeof *sent) : NULL;
  double *colsum = calloc((size_t)lk, sizeof *colsum), *share = calloc((size_t)lk, sizeof *share);
  attn_status st = ATTN_OK;
  if (!col_used || !row_used || !colsum || !share || (lq == lk && !sent)) {
    st = attn_set_error(ATTN_ENOMEM, "diagnose: out of memory for Lk = %lld", (long long)lk);
    goto done;
  }
  int causal_seen;
  if ((st = check_probs(probs, lq, lk, col_used, row_used, &causal_seen))) goto done;
  if (o.causal == 1 && !causal_seen) {
    st = attn_set_error(ATTN_EINVAL, "diagnose: causal mask given but some p[i, j > i] != 0");
    goto done;
  }
  int causal = o.causal >= 0 ? o.causal : (causal_seen && lq >= 2 && lk >= 2);
  out->causal = causal;

  int have_sent = sent && sentence_ids(&o, lk, sent);
  int64_t rows = 0, ent_rows = 0, prev_rows = 0, next_rows = 0, diag_rows = 0;
  double ent = 0, dist = 0, diag = 0, prev = 0, next = 0, local = 0, same = 0, same_base = 0;
  for (int64_t i = 0; i < lq; i++) {
    if (!row_used[i]) continue;
    const float *p = probs + i * lk;
    int64_t allowed = 0;
    double h = 0;
    for (int64_t j = 0; j < lk; j++) {
      int ok = col_used[j] && (!causal || j <= i);
      allowed += ok;
      double v = p[j];
      if (v > 0) h -= v * log(v);
      int64_t d = i > j ? i - j : j - i;
      dist += v * (double)d;
      out->dist_profile[dist_bin(d)] += v;
      if (d <= 2) local += v;
      colsum[j] += v;
    }
    for (int64_t j = 0; j < lk; j++) { /* each allowed key's share under uniform attention */
      if (!col_used[j] || (causal && j > i)) continue;
      share[j] += 1.0 / (double)allowed;
      if (have_sent && sent[j] == sent[i]) same_base += 1.0 / (double)allowed;
    }
    if (have_sent)
      for (int64_t j = 0; j < lk; j++)
        if (sent[j] == sent[i]) same += p[j];
    if (allowed >= 2) ent += h / log((double)allowed), ent_rows++;
    if (i < lk) diag += p[i], diag_rows++;
    if (i >= 1 && i - 1 < lk) prev += p[i - 1], prev_rows++;
    if (i + 1 < lk && !causal) next += p[i + 1], next_rows++;
    rows++;
  }
  if (rows == 0) {
    st = attn_set_error(ATTN_EINVAL, "diagnose: every row of probs is 0 (fully masked)");
    goto done;
  }
  out->entropy = ent_rows ? ent / (double)ent_rows : 0.0;
  out->mean_distance = dist / (double)rows;
  for (int b = 0; b < ATTN_DIAG_DIST_BINS; b++)
    out->dist_profile[b] /= (double)rows;
  out->diag_mass = diag_rows ? diag / (double)diag_rows : 0.0;
  out->prev_mass = prev_rows ? prev / (double)prev_rows : 0.0;
  out->next_mass = next_rows ? next / (double)next_rows : 0.0;
  out->local_mass = local / (double)rows;
  out->sentence_mass = have_sent ? same / (double)rows : NAN;
  out->sentence_base = have_sent ? same_base / (double)rows : NAN;
  out->max_col = 0;
  for (int64_t j = 1; j < lk; j++)
    if (colsum[j] > colsum[out->max_col]) out->max_col = j;
  out->max_col_mass = colsum[out->max_col] / (double)rows;

  /* received attention relative to the uniform share: 1 everywhere for uniform heads */
  double n = 0, mr = 0, mr2 = 0, mf = 0, mf2 = 0, mrf = 0;
  for (int64_t j = 0; j < lk; j++) {
    if (share[j] <= 0) continue;
    double r = colsum[j] / share[j], f = o.freq ? -log((double)o.freq[j]) : 0.0;
    n += 1, mr += r, mr2 += r * r, mf += f, mf2 += f * f, mrf += r * f;
  }
  mr /= n, mr2 /= n, mf /= n, mf2 /= n, mrf /= n;
  double vr = fmax(mr2 - mr * mr, 0.0), vf = fmax(mf2 - mf * mf, 0.0);
  out->received_cv = mr > 0 ? sqrt(vr) / mr : 0.0;
  out->rare_corr = NAN;
  if (o.freq) out->rare_corr = vr > 1e-12 && vf > 1e-12 ? (mrf - mr * mf) / sqrt(vr * vf) : 0.0;

  /* classification: the strongest single-position patterns first */
  out->uniform_flag = out->entropy >= ATTN_DIAG_UNIFORM_MIN;
  char *d = out->detail;
  size_t dn = sizeof out->detail;
  if (out->diag_mass >= ATTN_DIAG_MASS_MIN) {
    out->pattern = ATTN_PATTERN_DIAGONAL;
    snprintf(d, dn, "%.0f%% on the token itself", 100 * out->diag_mass);
  } else if (out->prev_mass >= ATTN_DIAG_MASS_MIN) {
    out->pattern = ATTN_PATTERN_PREVIOUS;
    snprintf(d, dn, "%.0f%% on the previous token", 100 * out->prev_mass);
  } else if (out->next_mass >= ATTN_DIAG_MASS_MIN) {
    out->pattern = ATTN_PATTERN_NEXT;
    snprintf(d, dn, "%.0f%% on the next token", 100 * out->next_mass);
  } else if (out->max_col_mass >= ATTN_DIAG_MASS_MIN) {
    out->pattern = ATTN_PATTERN_FOCUSED;
    char what[32];
    snprintf(what, sizeof what, "%.0f%% on", 100 * out->max_col_mass);
    describe_key(d, dn, what, out->max_col, lk, o.tokens);
  } else if (o.freq && out->rare_corr >= ATTN_DIAG_RARE_CORR_MIN &&
             out->received_cv >= ATTN_DIAG_RARE_CV_MIN) {
    out->pattern = ATTN_PATTERN_RARE;
    snprintf(d, dn, "received attention vs -log freq: r = %.2f", out->rare_corr);
  } else if (out->uniform_flag) {
    out->pattern = ATTN_PATTERN_UNIFORM; /* whether that is a fault: attn_diagnose_advise */
    snprintf(d, dn, "spread evenly: entropy %.2f of the maximum", out->entropy);
  } else if (have_sent && out->sentence_mass >= ATTN_DIAG_SENTENCE_MIN &&
             out->sentence_base <= ATTN_DIAG_SENTENCE_BASE &&
             out->sentence_mass - out->local_mass >= 0.2) { /* beyond the local band */
    out->pattern = ATTN_PATTERN_SENTENCE;
    snprintf(d, dn, "%.0f%% within the sentence (uniform: %.0f%%)", 100 * out->sentence_mass,
             100 * out->sentence_base);
  } else if (out->local_mass >= ATTN_DIAG_LOCAL_MIN) {
    out->pattern = ATTN_PATTERN_LOCAL;
    snprintf(d, dn, "%.0f%% within |i-j| <= 2", 100 * out->local_mass);
  } else {
    out->pattern = ATTN_PATTERN_MIXED;
    snprintf(d, dn, "mean distance %.1f", out->mean_distance);
  }
done:
  free(col_used), free(row_used), free(colsum), free(share), free(sent);
  return st;
}

attn_status attn_diagnose_f32(const float *probs, int64_t n, int64_t lq, int64_t lk,
                              const attn_diag_opts *opts, attn_head_diag *out) {
  if (!probs || !out || n < 1)
    return attn_set_error(ATTN_EINVAL, "diagnose: NULL probs/result or n = %lld < 1", (long long)n);
  for (int64_t h = 0; h < n; h++) {
    attn_status st = attn_diagnose_head_f32(probs + h * lq * lk, lq, lk, opts, &out[h]);
    if (st) {
      char what[32];
      snprintf(what, sizeof what, "head %lld", (long long)h);
      return attn_prefix_error(st, what);
    }
  }
  return ATTN_OK;
}

void attn_diagnose_print(FILE *f, const attn_head_diag *d, int64_t layers, int64_t heads) {
  fprintf(f, "%5s %4s  %-14s %7s %6s %5s %5s %5s %5s %8s %6s  %s\n", "layer", "head", "pattern",
          "entropy", "dist", "diag", "prev", "next", "local", "max key", "rare", "detail");
  for (int64_t l = 0; l < layers; l++)
    for (int64_t h = 0; h < heads; h++) {
      const attn_head_diag *x = &d[l * heads + h];
      char maxk[32], rare[16];
      snprintf(maxk, sizeof maxk, "%lld:%.2f", (long long)x->max_col, x->max_col_mass);
      if (isnan(x->rare_corr))
        snprintf(rare, sizeof rare, "-");
      else
        snprintf(rare, sizeof rare, "%.2f", x->rare_corr);
      fprintf(f, "%5lld %4lld  %-14s %7.3f %6.2f %5.2f %5.2f %5.2f %5.2f %8s %6s  %s%s\n",
              (long long)l, (long long)h, attn_pattern_name(x->pattern), x->entropy,
              x->mean_distance, x->diag_mass, x->prev_mass, x->next_mass, x->local_mass, maxk, rare,
              x->uniform_flag && x->pattern != ATTN_PATTERN_UNIFORM ? "[near-uniform] " : "",
              x->detail);
    }
}
