/* attn predict MODEL FILE... : label and probability per raw e-mail
 * ("-" reads one message from stdin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bpe.h"
#include "apps/classifier.h"
#include "apps/classifier_ensemble.h"
#include "apps/mail.h"
#include "apps/trainer.h"
#include "apps/trainer_data.h"
#include "attn.h"
#include "cli/commands.h"

static char *read_stdin(size_t *len) {
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, stdin);
    n += got;
    if (got == 0) break;
    if (n == cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        return NULL;
      }
      buf = nb;
      cap *= 2;
    }
  }
  *len = n;
  return buf;
}

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

int attn_cmd_predict(int argc, char **argv) {
  if (argc < 3 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    fprintf(argc < 3 && !(argc == 2 && argv[1][0] == '-') ? stderr : stdout,
            "usage: attn predict MODEL FILE... ('-' reads one message from stdin)\n"
            "  prints FILE<TAB>label<TAB>P(label) per raw e-mail; MODEL from attn train\n");
    return argc < 3 ? 2 : 0;
  }
  attn_clf_ens e;
  attn_st *file = NULL;
  attn_bpe *bpe = NULL;
  if (attn_clf_ens_load(argv[1], &e, &file)) return cli_fail("model");
  const attn_clf_config *c = &e.m[0].c;  // every member's
  int rc = 0;
  const char *tok = attn_st_meta(file, "tokenizer");
  if (!tok || attn_bpe_load(tok, &bpe)) {
    fprintf(stderr, "attn predict: %s: no usable \"tokenizer\" metadata\n", argv[1]);
    rc = 1;
  }
  char labels[256] = "ham,spam";
  const char *lm = attn_st_meta(file, "labels");
  if (lm) snprintf(labels, sizeof labels, "%s", lm);
  char *names[2] = {labels, strchr(labels, ',')};
  if (names[1]) *names[1]++ = 0;
  else names[1] = "class1";
  int32_t *ids = malloc((size_t)c->max_len * sizeof(int32_t));
  for (int i = 2; !rc && i < argc; i++) {
    size_t len = 0;
    char *raw = NULL;
    if (!strcmp(argv[i], "-")) raw = read_stdin(&len);
    else {
      FILE *f = fopen(argv[i], "rb");
      if (f) {
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        raw = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
        if (raw) len = fread(raw, 1, (size_t)sz, f);
        fclose(f);
      }
    }
    float p[8];
    if (!raw || !ids) {
      fprintf(stderr, "attn predict: cannot read %s\n", argv[i]);
      rc = 1;
    } else if (c->classes != 2 || classify(&e, bpe, raw, len, ids, p)) {
      rc = cli_fail(argv[i]);
    } else {
      int k = p[1] > p[0];
      printf("%s\t%s\t%.4f\n", argv[i], names[k], p[k]);
    }
    free(raw);
  }
  free(ids);
  attn_bpe_free(bpe);
  attn_st_free(file);
  attn_clf_ens_free(&e);
  return rc;
}
