/* A classifier's attention on one message: computed, saved for `attn viz`,
 * drawn per head and per layer (see classifier_viz_message.h). */
#include "apps/classifier/classifier_viz_message.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/classifier/classifier_viz.h"
#include "apps/viz/viz.h"
#include "io/tmpname.h"

void attn_clf_msg_attn_free(attn_clf_msg_attn *a) {
  if (!a) return;
  free(a->probs);
  attn_viz_labels_free(a->tokens, a->n);
  attn_tok_bytes_free(&a->bytes);
  memset(a, 0, sizeof *a);
}

attn_status attn_clf_msg_attention(const attn_clf *m, const attn_bpe *bpe, const int32_t *ids,
                                   int64_t n, int64_t gap, attn_clf_msg_attn *out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "message attention: NULL result");
  memset(out, 0, sizeof *out);
  if (!m || !bpe || !ids || n < 1 || n > m->c.max_len)
    return attn_set_error(ATTN_EINVAL, "message attention: NULL argument or %lld tokens (1..%lld)",
                          (long long)n, (long long)(m ? m->c.max_len : 0));
  if (m->c.layers < 1) return attn_set_error(ATTN_EINVAL, "message attention: the model has no attention layer");
  out->layers = m->c.layers, out->heads = m->c.heads, out->n = n;
  out->probs = malloc((size_t)(out->layers * out->heads * n * n) * sizeof(float));
  attn_status st =
      !out->probs ? attn_set_error(ATTN_ENOMEM, "message attention: out of memory for %lld tokens",
                                   (long long)n)
                  : attn_clf_attention(m, ids, n, out->probs);
  if (!st) st = attn_clf_token_bytes(bpe, ids, n, gap, &out->bytes);
  if (!st) st = attn_tok_char_labels(&out->bytes, ATTN_CLF_LABEL_CHARS, &out->tokens);
  if (st) attn_clf_msg_attn_free(out);
  return st;
}

attn_status attn_clf_msg_save(const char *path, const attn_clf_msg_attn *a, const char *const *kv) {
  if (!path || !a || !a->probs) return attn_set_error(ATTN_EINVAL, "save attention: NULL argument");
  const char *const *tok = (const char *const *)a->tokens;
  char *bytes = NULL, *breaks = NULL;
  attn_status st = attn_tok_bytes_to_json(&a->bytes, &bytes, &breaks);
  size_t nkv = 0;
  while (kv && kv[nkv])
    nkv += 2;
  const char **all = st ? NULL : malloc((nkv + 5) * sizeof *all);
  if (!st && !all) st = attn_set_error(ATTN_ENOMEM, "save attention: out of memory");
  if (!st) {
    if (nkv) memcpy(all, kv, nkv * sizeof *all);
    size_t k = nkv;
    all[k++] = "token_bytes", all[k++] = bytes;
    if (breaks) all[k++] = "token_breaks", all[k++] = breaks;
    all[k] = NULL;
    st = attn_viz_save_f32(path, a->probs, a->layers, a->heads, a->n, a->n, tok, tok, all);
  }
  free(all), free(bytes), free(breaks);
  return st;
}

/* path = prefix + suffix in buf [n]; ATTN_EINVAL when it does not fit. */
static attn_status name(char *buf, size_t n, const char *prefix, const char *suffix) {
  if ((size_t)snprintf(buf, n, "%s%s", prefix, suffix) >= n)
    return attn_set_error(ATTN_EINVAL, "pictures: output name '%s%s' too long", prefix, suffix);
  return ATTN_OK;
}

/* The diagnosis table and its advice into path, atomically. */
static attn_status write_diagnosis(const char *path, const attn_clf_msg_attn *a, const char *title,
                                   const attn_diag_context *ctx) {
  int64_t L = a->layers, H = a->heads, n = a->n;
  attn_head_diag *d = calloc((size_t)(L * H), sizeof *d);
  if (!d) return attn_set_error(ATTN_ENOMEM, "diagnosis: out of memory");
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  o.causal = 0; /* the classifier's encoder sees every token */
  o.tokens = (const char *const *)a->tokens;
  attn_status st = attn_diagnose_f32(a->probs, L * H, n, n, &o, d);
  char *tmp = st ? NULL : attn_tmp_name(path);
  FILE *f = tmp ? fopen(tmp, "w") : NULL;
  if (!st && !f) st = attn_set_error(tmp ? ATTN_EIO : ATTN_ENOMEM, "cannot write '%s'", path);
  if (f) {
    fprintf(f, "%s: %lld layer(s) x %lld head(s), %lld tokens\n", title, (long long)L, (long long)H,
            (long long)n);
    attn_diagnose_print(f, d, L, H);
    attn_diagnose_advise(f, d, a->probs, L, H, n, n, ctx);
    int bad = ferror(f) | (fflush(f) != 0) | (fsync(fileno(f)) != 0);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
      unlink(tmp);
      st = attn_set_error(ATTN_EIO, "cannot write '%s'", path);
    }
  }
  free(tmp);
  free(d);
  return st;
}

attn_status attn_clf_msg_pictures(const char *prefix, const attn_clf_msg_attn *a, const char *nm,
                                  const attn_diag_context *ctx, attn_unit_kind units, FILE *log) {
  if (!prefix || !prefix[0] || !a || !a->probs || !nm)
    return attn_set_error(ATTN_EINVAL, "pictures: NULL argument");
  int64_t L = a->layers, H = a->heads, n = a->n;
  attn_diag_context pooled;
  if (!ctx) {
    attn_diag_context_default(&pooled);
    pooled.kind = ATTN_DIAG_MODEL_POOLED;
    ctx = &pooled;
  }
  /* what is drawn: the tokens, or the characters / words they make up */
  const float *probs = a->probs;
  const char *const *tok = (const char *const *)a->tokens;
  const char *noun = attn_unit_kind_noun(units);
  char from[64] = ""; /* ", from 96 tokens" when merged */
  attn_tok_units u = {0};
  float *merged = NULL, *mean = NULL;
  attn_status st = ATTN_OK;
  if (units != ATTN_UNITS_TOKENS) {
    st = attn_tok_units_make(&a->bytes, units, ATTN_CLF_LABEL_CHARS, &u);
    if (!st) st = attn_viz_merge_f32(a->probs, L * H, n, n, &u, &u, &merged);
    if (!st) {
      probs = merged, tok = (const char *const *)u.labels, n = u.n_units;
      snprintf(from, sizeof from, " (from %lld tokens)", (long long)a->n);
    }
  }
  int64_t per = n * n;
  if (!st && !(mean = malloc((size_t)per * sizeof *mean)))
    st = attn_set_error(ATTN_ENOMEM, "pictures: out of memory for %lld %s", (long long)n, noun);
  char path[4200], suffix[64], title[600];
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.title = title;
  o.row_norm = 1; /* a softmax row over n keys is near black on one shared scale */
  if (units != ATTN_UNITS_TOKENS) o.units = noun;
  for (int64_t l = 0; !st && l < L; l++) {
    const float *layer = probs + l * H * per;
    for (int64_t e = 0; e < per; e++) {
      float s = 0;
      for (int64_t h = 0; h < H; h++) s += layer[h * per + e];
      mean[e] = s / (float)H;
    }
    snprintf(suffix, sizeof suffix, "_layer%lld.png", (long long)l);
    snprintf(title, sizeof title, "%.300s: layer %lld, mean of %lld heads, %s 0-%lld%s", nm,
             (long long)l, (long long)H, noun, (long long)(n - 1), from);
    st = name(path, sizeof path, prefix, suffix);
    if (!st) st = attn_viz_heatmap_f32(path, mean, n, n, tok, tok, &o);
    snprintf(suffix, sizeof suffix, "_layer%lld_heads.png", (long long)l);
    snprintf(title, sizeof title, "%.300s: layer %lld, each of %lld heads, %s%s", nm, (long long)l,
             (long long)H, noun, from);
    if (!st) st = name(path, sizeof path, prefix, suffix);
    if (!st) st = attn_viz_heads_f32(path, layer, H, n, n, tok, tok, &o);
    for (int64_t h = 0; !st && h < H; h++) {
      snprintf(suffix, sizeof suffix, "_layer%lld_head%lld.png", (long long)l, (long long)h);
      snprintf(title, sizeof title, "%.300s: layer %lld, head %lld, %s 0-%lld%s", nm, (long long)l,
               (long long)h, noun, (long long)(n - 1), from);
      st = name(path, sizeof path, prefix, suffix);
      if (!st) st = attn_viz_heatmap_f32(path, layer + h * per, n, n, tok, tok, &o);
    }
  }
  free(mean);
  if (!st && log)
    fprintf(log,
            "wrote %s_layer<L>.png (mean of the heads), %s_layer<L>_heads.png and "
            "%s_layer<L>_head<H>.png for %lld layer(s) x %lld head(s), %lld %s%s\n",
            prefix, prefix, prefix, (long long)L, (long long)H, (long long)n, noun, from);
  if (!st && L * H * per > ATTN_VIZ_HTML_MAX_VALUES) {
    if (log) fprintf(log, "no %s.html: %lld weights are more than the page holds (%d)\n", prefix,
                     (long long)(L * H * per), ATTN_VIZ_HTML_MAX_VALUES);
  } else if (!st) {
    st = name(path, sizeof path, prefix, ".html");
    snprintf(title, sizeof title, "%.300s: %lld layer(s) x %lld head(s)%s%s%s", nm, (long long)L,
             (long long)H, units != ATTN_UNITS_TOKENS ? ", " : "",
             units != ATTN_UNITS_TOKENS ? noun : "", from);
    if (!st) st = attn_viz_html_f32(path, probs, L, H, n, n, tok, tok, title);
    if (!st && log) fprintf(log, "wrote %s (every layer and head, interactive)\n", path);
  }
  free(merged);
  attn_tok_units_free(&u);
  if (!st) st = name(path, sizeof path, prefix, "_diagnosis.txt");
  if (!st) st = write_diagnosis(path, a, nm, ctx);
  if (!st && log) fprintf(log, "wrote %s (what each head does)\n", path);
  return st;
}
