/* Pictures of the classifier's attention on one message (apps/viz.h) and
 * the per-head diagnosis (apps/diagnose.h). */
#include "apps/classifier/classifier_viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/token_chars.h"
#include "apps/viz/diagnose.h"
#include "apps/viz/viz.h"

attn_status attn_clf_token_bytes(const attn_bpe *bpe, const int32_t *ids, int64_t n, int64_t gap,
                                 attn_tok_bytes *out) {
  memset(out, 0, sizeof *out);
  if (!bpe || !ids || n < 0 || gap < 0 || gap >= (n > 0 ? n : 1))
    return attn_set_error(ATTN_EINVAL, "token bytes: NULL argument, %lld tokens or gap %lld",
                          (long long)n, (long long)gap);
  const char **tok = malloc((size_t)(n ? n : 1) * sizeof *tok);
  size_t *len = malloc((size_t)(n ? n : 1) * sizeof *len);
  unsigned char *brk = gap ? calloc((size_t)n, 1) : NULL;
  attn_status st = !tok || !len || (gap && !brk)
                       ? attn_set_error(ATTN_ENOMEM, "token bytes: out of memory")
                       : ATTN_OK;
  for (int64_t i = 0; !st && i < n; i++)
    if (!(tok[i] = attn_bpe_token(bpe, ids[i], &len[i])))
      st = attn_set_error(ATTN_EINVAL, "token %lld: id %d is outside the vocabulary", (long long)i,
                          ids[i]);
  if (brk) brk[gap] = 1;
  if (!st) st = attn_tok_bytes_make(out, (const char *const *)tok, len, n, brk);
  free(tok), free(len), free(brk);
  return st;
}

attn_status attn_clf_token_labels(const attn_bpe *bpe, const int32_t *ids, int64_t n, int64_t gap,
                                  char ***labels) {
  *labels = NULL;
  attn_tok_bytes t;
  attn_status st = attn_clf_token_bytes(bpe, ids, n, gap, &t);
  if (!st) st = attn_tok_char_labels(&t, ATTN_CLF_LABEL_CHARS, labels);
  attn_tok_bytes_free(&t);
  return st;
}

attn_status attn_clf_picture(const attn_clf *m, const attn_bpe *bpe, const int32_t *ids, int64_t n,
                             int64_t show, const char *dir, const char *title, double accuracy,
                             FILE *log) {
  if (!m || !bpe || !ids || n <= 0 || !dir)
    return attn_set_error(ATTN_EINVAL, "clf_picture: NULL argument or empty message");
  int64_t Ly = m->c.layers, H = m->c.heads;
  if (Ly <= 0) return attn_set_error(ATTN_EINVAL, "clf_picture: the model has no attention layer");
  if (show <= 0 || show > n) show = n;
  float *probs = malloc((size_t)(Ly * H * n * n) * sizeof(float));
  float *avg = malloc((size_t)(n * n) * sizeof(float));
  char **lab = NULL;
  attn_head_diag *dg = malloc((size_t)(Ly * H) * sizeof *dg);
  attn_status st =
      (!probs || !avg || !dg) ? attn_set_error(ATTN_ENOMEM, "clf_picture: out of memory") : ATTN_OK;
  if (!st) st = attn_clf_attention(m, ids, n, probs);
  /* ids are a test message's as attn_clf_encode gave them: a message of
   * max_len tokens may have been cut before its last `tail` tokens. A break
   * there keeps a character from being read across the cut (when nothing
   * was cut, a character split exactly there shows as bytes) */
  int64_t gap = m->c.tail > 0 && n == m->c.max_len ? n - m->c.tail : 0;
  if (!st) st = attn_clf_token_labels(bpe, ids, n, gap, &lab);
  // last layer, averaged over heads
  const float *last = probs + (Ly - 1) * H * n * n;
  for (int64_t e = 0; !st && e < n * n; e++) {
    float acc = 0;
    for (int64_t h = 0; h < H; h++) acc += last[h * n * n + e];
    avg[e] = acc / (float)H;
  }
  char path[4096], sub[160];
  /* a softmax row over n keys cropped to `show` and averaged over heads is
   * near black on one shared scale: each row is scaled to its maximum */
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.title = title;
  o.subtitle = sub;
  o.row_norm = 1;
  o.q1 = show;
  o.k1 = show;
  snprintf(sub, sizeof sub, "layer %lld (last), mean of %lld heads", (long long)(Ly - 1),
           (long long)H);
  if (!st) {
    snprintf(path, sizeof path, "%s/attention.png", dir);
    st = attn_viz_heatmap_f32(path, avg, n, n, (const char *const *)lab, (const char *const *)lab, &o);
    if (!st && log) fprintf(log, "wrote %s (%s, first %lld tokens, rows scaled to their max)\n", path, sub, (long long)show);
  }
  if (!st) {  // the heads of the last layer, on the first tokens
    int64_t k = show < 32 ? show : 32;
    o.q1 = o.k1 = k;
    snprintf(sub, sizeof sub, "layer %lld (last), each of %lld heads", (long long)(Ly - 1),
             (long long)H);
    snprintf(path, sizeof path, "%s/heads.png", dir);
    st = attn_viz_heads_f32(path, last, H, n, n, (const char *const *)lab, (const char *const *)lab, &o);
    if (!st && log) fprintf(log, "wrote %s (%s, first %lld tokens)\n", path, sub, (long long)k);
  }
  if (!st) {
    snprintf(path, sizeof path, "%s/attention.html", dir);
    st = attn_viz_html_f32(path, probs, Ly, H, n, n, (const char *const *)lab, (const char *const *)lab, title);
    if (!st && log) fprintf(log, "wrote %s (every layer and head, interactive)\n", path);
  }
  if (!st) {
    attn_diag_opts dopt;
    attn_diag_opts_default(&dopt);
    dopt.causal = 0;
    st = attn_diagnose_f32(probs, Ly * H, n, n, &dopt, dg);
  }
  if (!st) {
    snprintf(path, sizeof path, "%s/diagnosis.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) st = attn_set_error(ATTN_EIO, "cannot write %s", path);
    else {
      attn_diag_context ctx; /* spread attention is legitimate in a pooled classifier */
      attn_diag_context_default(&ctx);
      ctx.kind = ATTN_DIAG_MODEL_POOLED;
      ctx.accuracy = accuracy;
      attn_diagnose_print(f, dg, Ly, H);
      attn_diagnose_advise(f, dg, probs, Ly, H, n, n, &ctx);
      fclose(f);
      if (log) attn_diagnose_print(log, dg, Ly, H);
      if (log) attn_diagnose_advise(log, dg, probs, Ly, H, n, n, &ctx);
    }
    snprintf(path, sizeof path, "%s/diagnosis.png", dir);
    if (!st) st = attn_diagnose_chart(path, dg, Ly, H);
    if (!st && log) fprintf(log, "wrote %s/diagnosis.txt and %s\n", dir, path);
  }
  if (lab)
    for (int64_t i = 0; i < n; i++) free(lab[i]);
  free(lab);
  free(probs);
  free(avg);
  free(dg);
  return st;
}
