/* attn predict MODEL FILE... : label and probability per raw e-mail
 * ("-" reads one message from stdin). A file that cannot be read or
 * classified is reported ("attn predict: FILE: reason") and the run goes on
 * with the next; the exit status is then 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bpe.h"
#include "apps/classifier.h"
#include "apps/classifier_ensemble.h"
#include "apps/mail.h"
#include "apps/trainer.h"
#include "apps/trainer_data.h"
#include "attn.h"
#include "cli/commands.h"

#define LABEL_MAX 128

/* P(class) of one raw message. */
static attn_status classify(const attn_clf_ens *e, const attn_bpe *bpe, const char *raw, size_t len,
                            int32_t *ids, float *probs) {
  const attn_clf *m = &e->m[0];
  char *text = NULL;
  size_t tlen = 0, n = 0;
  attn_status st = attn_mail_to_text_flags(raw, len, attn_clf_mail_flags(&m->c), &text, &tlen, NULL);
  if (!st) st = attn_clf_encode(bpe, text, tlen, m->c.max_len, m->c.tail, ids, &n);
  int32_t l = (int32_t)n;
  if (!st) st = attn_clf_ens_predict(e, ids, &l, 1, l, probs);
  free(text);
  return st;
}

/* The class names: metadata "labels" ("ham,spam" by default), exactly one
 * non-empty name per class. */
static int read_labels(const char *model, const attn_st *file, char names[2][LABEL_MAX]) {
  const char *lm = attn_st_meta(file, "labels");
  if (!lm) lm = "ham,spam";
  const char *comma = strchr(lm, ',');
  size_t n0 = comma ? (size_t)(comma - lm) : 0, n1 = comma ? strlen(comma + 1) : 0;
  if (!comma || strchr(comma + 1, ',') || n0 == 0 || n1 == 0 || n0 >= LABEL_MAX ||
      n1 >= LABEL_MAX) {
    fprintf(stderr,
            "attn predict: %s: metadata labels '%.200s' is not two comma-separated names (the "
            "model has 2 classes)\n",
            model, lm);
    return 1;
  }
  memcpy(names[0], lm, n0);
  names[0][n0] = '\0';
  memcpy(names[1], comma + 1, n1 + 1);
  return 0;
}

/* Reads and classifies one FILE ("-": stdin); 0, or 1 after saying why not. */
static int predict_one(const char *path, const attn_clf_ens *e, const attn_bpe *bpe, int32_t *ids,
                       char names[2][LABEL_MAX]) {
  char *raw = NULL;
  size_t len = 0;
  float p[2];
  attn_status st = !strcmp(path, "-") ? attn_mail_read_fd(STDIN_FILENO, "-", &raw, &len)
                                      : attn_mail_read_file(path, &raw, &len);
  if (!st && (st = classify(e, bpe, raw, len, ids, p))) attn_prefix_error(st, path);
  free(raw);
  if (st) {
    fprintf(stderr, "attn predict: %s\n", attn_last_error());
    return 1;
  }
  int k = p[1] > p[0];
  printf("%s\t%s\t%.4f\n", path, names[k], p[k]);
  return 0;
}

int attn_cmd_predict(int argc, char **argv) {
  if (argc < 3 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    fprintf(argc < 3 && !(argc == 2 && argv[1][0] == '-') ? stderr : stdout,
            "usage: attn predict MODEL FILE... ('-' reads one message from stdin)\n"
            "  prints FILE<TAB>label<TAB>P(label) per raw e-mail; MODEL from attn train.\n"
            "  A FILE that cannot be read or classified is reported and skipped (exit 1 at the\n"
            "  end); a message may be up to %u MiB.\n",
            (unsigned)(ATTN_MAIL_MAX_BYTES >> 20));
    return argc < 3 ? 2 : 0;
  }
  attn_clf_ens e;
  attn_st *file = NULL;
  attn_bpe *bpe = NULL;
  if (attn_clf_ens_load(argv[1], &e, &file)) return cli_fail("predict");
  const attn_clf_config *c = &e.m[0].c;  // every member's
  char names[2][LABEL_MAX];
  int rc = 0;
  const char *tok = attn_st_meta(file, "tokenizer");
  if (c->classes != 2) {
    fprintf(stderr, "attn predict: %s: a model of %lld classes (predict reads 2-class models)\n",
            argv[1], (long long)c->classes);
    rc = 1;
  } else if (!tok || attn_bpe_load(tok, &bpe)) {
    fprintf(stderr, "attn predict: %s: no usable \"tokenizer\" metadata\n", argv[1]);
    rc = 1;
  } else {
    rc = read_labels(argv[1], file, names);
  }
  int32_t *ids = rc ? NULL : malloc((size_t)c->max_len * sizeof(int32_t));
  if (!rc && !ids) {
    fprintf(stderr, "attn predict: out of memory\n");
    rc = 1;
  }
  int bad = 0; /* after a bad file the others still get their label */
  for (int i = 2; !rc && i < argc; i++) bad |= predict_one(argv[i], &e, bpe, ids, names);
  free(ids);
  attn_bpe_free(bpe);
  attn_st_free(file);
  attn_clf_ens_free(&e);
  return rc || bad;
}
