/* Corpus -> token sets per split, and the test report next to Naive Bayes. */
#include "apps/classifier/classifier_data.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "apps/classifier/metrics.h"
#include "apps/classifier/naive_bayes.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

unsigned attn_clf_mail_flags(const attn_clf_config *c) {
  return c->headers ? ATTN_MAIL_MORE_HEADERS : 0u;
}

attn_status attn_clf_encode(const attn_bpe *bpe, const char *text, size_t len, int64_t max_len,
                            int64_t tail, int32_t *ids, size_t *n) {
  size_t gap;
  return attn_clf_encode_gap(bpe, text, len, max_len, tail, ids, n, &gap);
}

attn_status attn_clf_encode_gap(const attn_bpe *bpe, const char *text, size_t len, int64_t max_len,
                                int64_t tail, int32_t *ids, size_t *n, size_t *gap) {
  *n = 0, *gap = 0;
  if (max_len <= 0 || tail < 0 || tail >= max_len)
    return attn_set_error(ATTN_EINVAL, "clf_encode: max_len %lld, tail %lld", (long long)max_len,
                          (long long)tail);
  attn_status st;
  if (tail == 0) {
    st = attn_bpe_encode(bpe, text, len, ids, (size_t)max_len, n);
  } else {
    int32_t *all = NULL;
    size_t m = 0;
    st = attn_bpe_encode_alloc(bpe, text, len, &all, &m);
    if (!st) {
      size_t head = m <= (size_t)max_len ? m : (size_t)(max_len - tail);
      memcpy(ids, all, head * sizeof *ids);
      if (m > (size_t)max_len) memcpy(ids + head, all + m - (size_t)tail, (size_t)tail * sizeof *ids);
      if (m > (size_t)max_len) *gap = head;
      *n = m <= (size_t)max_len ? m : (size_t)max_len;
    }
    free(all);
  }
  if (!st && *n == 0) ids[(*n)++] = ATTN_BPE_BYTE0 + ' ';  // an empty text: one space
  return st;
}

attn_status attn_clf_corpus_open(const char *dir, const char *split_path, uint64_t split_seed,
                                 unsigned mail_flags, FILE *log, attn_corpus **out) {
  *out = NULL;
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return attn_set_error(ATTN_EIO, "no corpus at '%s' (fetch it with: tools/fetch_data.sh %s)", dir, dir);
  attn_corpus *c;
  attn_status st = attn_corpus_scan(dir, &c);
  if (st) return st;
  c->mail_flags = mail_flags;
  if (stat(split_path, &sb) == 0) {
    st = attn_corpus_load_split(c, split_path);
    if (!st) fprintf(log, "split: read %s\n", split_path);
  } else {
    char note[160];
    snprintf(note, sizeof note, "attn split: seed %llu, 80/10/10 %% train/val/test, stratified by group",
             (unsigned long long)split_seed);
    st = attn_corpus_split(c, split_seed, 80, 10);
    if (!st) {
      if (attn_corpus_save_split(c, split_path, note))
        fprintf(log, "split: could not write %s (%s); the split is deterministic anyway\n", split_path,
                attn_last_error());
      else
        fprintf(log, "split: wrote %s (seed %llu)\n", split_path, (unsigned long long)split_seed);
    }
  }
  double t0 = now_s();
  if (!st) st = attn_corpus_load_texts(c);
  if (st) {
    attn_corpus_free(c);
    return st;
  }
  int spam = 0;
  for (int i = 0; i < c->n; i++) spam += c->label[i];
  fprintf(log, "corpus: %d messages (%d spam) in %d groups, read in %.1f s; %ld malformed, %ld unparsable\n",
          c->n, spam, c->n_groups, now_s() - t0, c->mail.malformed, c->mail.unparsable);
  for (int s = 0; s < ATTN_SPLIT_COUNT; s++)
    fprintf(log, "  %-5s %5d messages: %4d ham, %4d spam\n", attn_split_name(s), attn_corpus_count(c, s, -1),
            attn_corpus_count(c, s, 0), attn_corpus_count(c, s, 1));
  *out = c;
  return ATTN_OK;
}

attn_status attn_clf_bpe_train(const attn_corpus *c, int vocab, attn_bpe **out) {
  const char **t = malloc((size_t)c->n * sizeof *t);
  size_t *l = malloc((size_t)c->n * sizeof *l);
  attn_status st = (!t || !l) ? attn_set_error(ATTN_ENOMEM, "bpe: out of memory") : ATTN_OK;
  int n = 0;
  for (int i = 0; !st && i < c->n; i++)
    if (c->split[i] == ATTN_SPLIT_TRAIN) {
      t[n] = c->text[i];
      l[n++] = c->text_len[i];
    }
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  cfg.vocab_size = vocab;
  if (!st) st = attn_bpe_train(t, l, n, &cfg, out);
  free(t);
  free(l);
  return st;
}

attn_status attn_clf_data_make(attn_clf_data *d, attn_corpus *c, const attn_bpe *bpe,
                               int64_t max_len, int64_t tail) {
  memset(d, 0, sizeof *d);
  d->c = c;
  d->bpe = bpe;
  d->n = c->n;
  d->ids = calloc((size_t)c->n, sizeof *d->ids);
  d->lens = calloc((size_t)c->n, sizeof *d->lens);
  if (!d->ids || !d->lens) return attn_set_error(ATTN_ENOMEM, "data: out of memory");
  attn_status st = ATTN_OK;
  for (int i = 0; !st && i < c->n; i++) {
    d->ids[i] = malloc((size_t)max_len * sizeof(int32_t));
    if (!d->ids[i]) return attn_set_error(ATTN_ENOMEM, "data: out of memory");
    size_t n = 0;
    st = attn_clf_encode(bpe, c->text[i], c->text_len[i], max_len, tail, d->ids[i], &n);
    d->lens[i] = (int32_t)n;
  }
  for (int s = 0; !st && s < ATTN_SPLIT_COUNT; s++) {
    int k = attn_corpus_count(c, s, -1);
    d->idx[s] = malloc((size_t)(k ? k : 1) * sizeof(int));
    d->sids[s] = malloc((size_t)(k ? k : 1) * sizeof(int32_t *));
    d->slens[s] = malloc((size_t)(k ? k : 1) * sizeof(int32_t));
    d->slabels[s] = malloc((size_t)(k ? k : 1) * sizeof(int));
    if (!d->idx[s] || !d->sids[s] || !d->slens[s] || !d->slabels[s])
      return attn_set_error(ATTN_ENOMEM, "data: out of memory");
    for (int i = 0; i < c->n; i++)
      if (c->split[i] == s) {
        int j = d->cnt[s]++;
        d->idx[s][j] = i;
        d->sids[s][j] = d->ids[i];
        d->slens[s][j] = d->lens[i];
        d->slabels[s][j] = c->label[i];
      }
  }
  return st;
}

attn_tok_set attn_clf_data_set(const attn_clf_data *d, int split) {
  attn_tok_set t = {d->cnt[split], d->sids[split], d->slens[split], d->slabels[split]};
  return t;
}

void attn_clf_data_free(attn_clf_data *d) {
  if (!d) return;
  if (d->ids)
    for (int i = 0; i < d->n; i++) free(d->ids[i]);
  free(d->ids);
  free(d->lens);
  for (int s = 0; s < ATTN_SPLIT_COUNT; s++) {
    free(d->idx[s]);
    free(d->sids[s]);
    free(d->slens[s]);
    free(d->slabels[s]);
  }
  memset(d, 0, sizeof *d);
}

/* Naive Bayes predictions for the test split (trained on the training split). */
static attn_status nb_test(const attn_clf_data *d, int *pred) {
  const attn_corpus *c = d->c;
  int n = c->n, ntr = 0;
  int32_t **ids = calloc((size_t)n, sizeof *ids);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  const int32_t **tr = malloc((size_t)n * sizeof *tr);
  size_t *trl = malloc((size_t)n * sizeof *trl);
  int *trlab = malloc((size_t)n * sizeof *trlab);
  attn_nb *nb = NULL;
  attn_status st = (!ids || !lens || !tr || !trl || !trlab) ? attn_set_error(ATTN_ENOMEM, "nb: out of memory") : ATTN_OK;
  for (int i = 0; !st && i < n; i++) {
    if (c->split[i] != ATTN_SPLIT_TRAIN && c->split[i] != ATTN_SPLIT_TEST) continue;
    size_t len = c->text_len[i] > 65536 ? 65536 : c->text_len[i];
    st = attn_bpe_encode_alloc(d->bpe, c->text[i], len, &ids[i], &lens[i]);
    if (!st && c->split[i] == ATTN_SPLIT_TRAIN) {
      tr[ntr] = ids[i];
      trl[ntr] = lens[i];
      trlab[ntr++] = c->label[i];
    }
  }
  if (!st) st = attn_nb_train(tr, trl, trlab, ntr, attn_bpe_vocab_size(d->bpe), 1.0, 1, &nb);
  for (int j = 0; !st && j < d->cnt[ATTN_SPLIT_TEST]; j++) {
    int i = d->idx[ATTN_SPLIT_TEST][j];
    st = attn_nb_predict(nb, ids[i], lens[i], NULL, &pred[j]);
  }
  if (ids)
    for (int i = 0; i < n; i++) free(ids[i]);
  free(ids);
  free(lens);
  free(tr);
  free(trl);
  free(trlab);
  attn_nb_free(nb);
  return st;
}

static void row(FILE *out, const char *name, const attn_binary_metrics *m) {
  fprintf(out, "  %-22s %8.2f%% %9.4f %8.4f %8.4f %6ld %5ld %5ld %5ld\n", name, 100 * m->accuracy,
          m->precision, m->recall, m->f1, m->tp, m->fp, m->tn, m->fn);
}

/* One table row per ensemble member, each alone. */
static attn_status report_members(const attn_clf *m, int n, const attn_nn_ctx *ctx,
                                  const attn_tok_set *t, int batch, FILE *out) {
  int *pred = malloc((size_t)t->n * sizeof(int));
  attn_status st = pred ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "report: out of memory");
  for (int k = 0; !st && k < n; k++) {
    attn_binary_metrics mk;
    st = attn_clf_evaluate_ctx(&m[k], ctx, t, batch, NULL, NULL, pred, NULL);
    if (!st) st = attn_binary_metrics_compute(pred, t->labels, t->n, &mk);
    char name[48];
    snprintf(name, sizeof name, "  member %d of %d", k + 1, n);
    if (!st) row(out, name, &mk);
  }
  free(pred);
  return st;
}

attn_status attn_clf_report_test(const attn_clf *m, int n, const attn_clf_data *d, int batch,
                                 FILE *out, float *p_spam) {
  return attn_clf_report_test_ctx(m, n, NULL, d, batch, out, p_spam);
}

attn_status attn_clf_report_test_ctx(const attn_clf *m, int n, const attn_nn_ctx *ctx,
                                     const attn_clf_data *d, int batch, FILE *out, float *p_spam) {
  attn_tok_set t = attn_clf_data_set(d, ATTN_SPLIT_TEST);
  if (t.n <= 0) return attn_set_error(ATTN_EINVAL, "report: the test split is empty");
  int *pred = malloc((size_t)t.n * sizeof(int)), *nbp = malloc((size_t)t.n * sizeof(int));
  float *pp = malloc((size_t)t.n * sizeof(float));
  attn_status st = (!pred || !nbp || !pp) ? attn_set_error(ATTN_ENOMEM, "report: out of memory") : ATTN_OK;
  double loss = 0, acc = 0, t0 = now_s();
  if (!st) st = attn_clf_evaluate_members_ctx(m, n, ctx, &t, batch, &loss, &acc, pred, pp);
  double t1 = now_s();
  if (!st) st = nb_test(d, nbp);
  attn_binary_metrics mt, mn;
  if (!st) st = attn_binary_metrics_compute(pred, t.labels, t.n, &mt);
  if (!st) st = attn_binary_metrics_compute(nbp, t.labels, t.n, &mn);
  if (!st) {
    int spam = 0;
    for (int i = 0; i < t.n; i++) spam += t.labels[i];
    fprintf(out, "\nTest split: %d messages (%d ham, %d spam); transformer loss %.6f, %.1f s\n", t.n,
            t.n - spam, spam, loss, t1 - t0);
    fprintf(out, "  %-22s %9s %9s %8s %8s %6s %5s %5s %5s\n", "model", "accuracy", "precision",
            "recall", "F1", "TP", "FP", "TN", "FN");
    row(out, n > 1 ? "transformer ensemble" : "transformer (attn)", &mt);
    row(out, "naive bayes (BPE)", &mn);
    if (n > 1) st = report_members(m, n, ctx, &t, batch, out);
    fprintf(out, "\n");
    attn_binary_metrics_print(out, "transformer (attn), test", &mt);
    attn_binary_metrics_print(out, "naive bayes (BPE presence, alpha 1), test", &mn);
    int wrong = 0;  // the messages either model gets wrong, side by side
    for (int i = 0; i < t.n; i++) wrong += pred[i] != t.labels[i] || nbp[i] != t.labels[i];
    if (wrong) {
      fprintf(out, "misclassified by either model: %d\n  %-5s %-12s %-12s %s\n", wrong, "truth",
              "attn P(spam)", "naive bayes", "message");
      for (int i = 0; i < t.n; i++)
        if (pred[i] != t.labels[i] || nbp[i] != t.labels[i])
          fprintf(out, "  %-5s %-6.4f %-5s %-12s %s\n", t.labels[i] ? "spam" : "ham", (double)pp[i],
                  pred[i] == t.labels[i] ? "ok" : "WRONG", nbp[i] == t.labels[i] ? "ok" : "WRONG",
                  d->c->paths[d->idx[ATTN_SPLIT_TEST][i]]);
    }
    if (p_spam) memcpy(p_spam, pp, (size_t)t.n * sizeof(float));
  }
  free(pred);
  free(nbp);
  free(pp);
  return st;
}
