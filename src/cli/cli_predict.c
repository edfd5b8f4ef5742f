/* attn predict MODEL [--precision f32|bf16|auto] FILE... : label and
 * probability per raw e-mail ("-" reads one message from stdin). A file that cannot be read or
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
#include "apps/precision_probe.h"
#include "apps/trainer.h"
#include "apps/trainer_data.h"
#include "attn.h"
#include "cli/commands.h"

#define LABEL_MAX 128

/* How the messages are classified: ctx.precision, and for --precision auto
 * the choice still to make (on the first message's tokens). */
typedef struct {
  attn_nn_ctx ctx;
  int decide;
} infer_prec;

/* --precision auto on the first message: bf16 where the inference probe
 * measures it >= ATTN_PREC_AUTO_MARGIN x f32 (a bf16 unit runs it), else
 * f32; said on stderr (stdout holds the labels). */
static attn_status decide(infer_prec *ip, const attn_clf_ens *e, const int32_t *ids, int32_t l) {
  ip->decide = 0;
  double r = 0;
  attn_status st = attn_prec_probe_infer(e, ids, &l, 1, l, &r);
  if (st) return st;
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  ip->ctx.precision = r >= ATTN_PREC_AUTO_MARGIN ? ATTN_PREC_BF16 : ATTN_PREC_F32;
  if (!bf.candidate)
    fprintf(stderr, "attn predict: precision f32 (auto: bf16: %s)\n", bf.why);
  else
    fprintf(stderr, "attn predict: precision %s (auto: probe of the first message: bf16 %.2fx f32%s; %s)\n",
            attn_precision_name(ip->ctx.precision), r,
            r >= ATTN_PREC_AUTO_MARGIN ? "" : ", under the margin", bf.units);
  return ATTN_OK;
}

/* P(class) of one raw message. */
static attn_status classify(const attn_clf_ens *e, infer_prec *ip, const attn_bpe *bpe,
                            const char *raw, size_t len, int32_t *ids, float *probs) {
  const attn_clf *m = &e->m[0];
  char *text = NULL;
  size_t tlen = 0, n = 0;
  attn_status st = attn_mail_to_text_flags(raw, len, attn_clf_mail_flags(&m->c), &text, &tlen, NULL);
  if (!st) st = attn_clf_encode(bpe, text, tlen, m->c.max_len, m->c.tail, ids, &n);
  int32_t l = (int32_t)n;
  if (!st && ip->decide) st = decide(ip, e, ids, l);
  if (!st) st = attn_clf_ens_predict_ctx(e, &ip->ctx, ids, &l, 1, l, probs);
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
static int predict_one(const char *path, const attn_clf_ens *e, infer_prec *ip, const attn_bpe *bpe,
                       int32_t *ids, char names[2][LABEL_MAX]) {
  char *raw = NULL;
  size_t len = 0;
  float p[2];
  attn_status st = !strcmp(path, "-") ? attn_mail_read_fd(STDIN_FILENO, "-", &raw, &len)
                                      : attn_mail_read_file(path, &raw, &len);
  if (!st && (st = classify(e, ip, bpe, raw, len, ids, p))) attn_prefix_error(st, path);
  free(raw);
  if (st) {
    fprintf(stderr, "attn predict: %s\n", attn_last_error());
    return 1;
  }
  int k = p[1] > p[0];
  printf("%s\t%s\t%.4f\n", path, names[k], p[k]);
  return 0;
}

/* The options are known and have their values (cli_args: an unknown one is
 * answered with the nearest); CLI_HELP for -h/--help anywhere, CLI_BAD
 * after saying what is wrong, else CLI_END. */
static int check_options(int argc, char **argv) {
  static const cli_opt opts[] = {{"--precision", CLI_VALUE}, {NULL, 0}};
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {}
  return r;
}

int attn_cmd_predict(int argc, char **argv) {
  const int checked = check_options(argc, argv), help = checked == CLI_HELP;
  if (checked == CLI_BAD) return CLI_USAGE;
  if (argc < 3 || help) {
    fprintf(help ? stdout : stderr,
            "usage: attn predict MODEL [--precision f32|bf16|auto] FILE... ('-' reads one message\n"
            "       from stdin)\n"
            "  prints FILE<TAB>label<TAB>P(label) per raw e-mail; MODEL from attn train.\n"
            "  --precision: the Linears and attention of the forward (default f32, the\n"
            "  reference); auto: bf16 where a probe of the first message measures it >= %.2fx\n"
            "  f32 on this CPU (a bf16 unit: AVX512_BF16 or AMX), else f32; the choice goes to\n"
            "  stderr.\n"
            "  A FILE that cannot be read or classified is reported and skipped (exit 1 at the\n"
            "  end); a message may be up to %u MiB.\n",
            ATTN_PREC_AUTO_MARGIN, (unsigned)(ATTN_MAIL_MAX_BYTES >> 20));
    return help ? CLI_OK : CLI_USAGE;
  }
  infer_prec ip = {{.precision = ATTN_PREC_F32}, 0};
  int first = 2;
  if (!strcmp(argv[2], "--precision")) {
    const char *v = argc > 3 ? argv[3] : NULL;
    if (v && !strcmp(v, "auto"))
      ip.decide = 1;
    else if (!v || attn_precision_from_name(v, &ip.ctx.precision)) {
      fprintf(stderr, "attn predict: --precision: '%s' is not f32, bf16, fp16 or auto\n", v ? v : "");
      return 2;
    }
    first = 4;
    if (first >= argc) {
      fprintf(stderr, "attn predict: no FILE (usage: attn predict MODEL [--precision P] FILE...)\n");
      return 2;
    }
  }
  attn_clf_ens e;
  attn_st *file = NULL;
  attn_bpe *bpe = NULL;
  if (attn_clf_ens_load(argv[1], &e, &file)) return cli_fail(argv[1]);
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
  if (!rc && !ip.decide && ip.ctx.precision == ATTN_PREC_BF16) {
    attn_prec_info bf;
    attn_prec_info_get(ATTN_PREC_BF16, &bf);
    if (!bf.candidate) fprintf(stderr, "attn predict: warning: --precision bf16: %s\n", bf.why);
  }
  for (int i = first; !rc && i < argc; i++) bad |= predict_one(argv[i], &e, &ip, bpe, ids, names);
  free(ids);
  attn_bpe_free(bpe);
  attn_st_free(file);
  attn_clf_ens_free(&e);
  return rc || bad;
}
