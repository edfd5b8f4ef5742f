/* attn predict MODEL [--precision f32|bf16|auto] [--picture DIR]
 * [--merge chars|words] [--save-attention OUT.safetensors] [--member K]
 * [--threads N] FILE... : label and
 * probability per raw e-mail ("-" reads one message from stdin), and on
 * request the model's attention on each message as pictures and as a file
 * for attn viz. A file that cannot be read, classified or drawn is reported
 * ("attn predict: FILE: reason") and the run goes on with the next; the exit
 * status is then 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/text/bpe.h"
#include "apps/classifier/classifier.h"
#include "apps/classifier/classifier_data.h"
#include "apps/classifier/classifier_ensemble.h"
#include "apps/classifier/classifier_precision.h"
#include "apps/classifier/classifier_train.h"
#include "apps/classifier/mail.h"
#include "attn.h"
#include "cli/cli_predict_attention.h"
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
  char why[256];
  attn_status st = attn_prec_auto_infer(e, ids, &l, 1, l, &ip->ctx.precision, why, sizeof why);
  if (!st)
    fprintf(stderr, "attn predict: precision %s (auto: probe of the first message: %s)\n",
            attn_precision_name(ip->ctx.precision), why);
  return st;
}

/* P(class) of one raw message; its tokens in ids [*n], a cut of a long
 * message before token *gap (0: none). */
static attn_status classify(const attn_clf_ens *e, infer_prec *ip, const attn_bpe *bpe,
                            const char *raw, size_t len, int32_t *ids, size_t *nids, size_t *gap,
                            float *probs) {
  const attn_clf *m = &e->m[0];
  char *text = NULL;
  size_t tlen = 0, n = 0;
  *nids = 0;
  attn_status st = attn_mail_to_text_flags(raw, len, attn_clf_mail_flags(&m->c), &text, &tlen, NULL);
  if (!st) st = attn_clf_encode_gap(bpe, text, tlen, m->c.max_len, m->c.tail, ids, &n, gap);
  int32_t l = (int32_t)n;
  if (!st && ip->decide) st = decide(ip, e, ids, l);
  if (!st) st = attn_clf_ens_predict_ctx(e, &ip->ctx, ids, &l, 1, l, probs);
  if (!st) *nids = n;
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

/* "spam 0.9731" of the prediction, as the labels line says it. */
static void say_prediction(char *buf, size_t n, char names[2][LABEL_MAX], const float *p) {
  int k = p[1] > p[0];
  snprintf(buf, n, "%s %.4f", names[k], p[k]);
}

/* Reads and classifies one FILE ("-": stdin), and its attention as asked;
 * 0, or 1 after saying why not. */
static int predict_one(const char *path, const attn_clf_ens *e, infer_prec *ip, const attn_bpe *bpe,
                       int32_t *ids, char names[2][LABEL_MAX], cli_predict_out *o) {
  char *raw = NULL;
  size_t len = 0, n = 0, gap = 0;
  float p[2];
  attn_status st = !strcmp(path, "-") ? attn_mail_read_fd(STDIN_FILENO, "-", &raw, &len)
                                      : attn_mail_read_file(path, &raw, &len);
  if (!st && (st = classify(e, ip, bpe, raw, len, ids, &n, &gap, p))) attn_prefix_error(st, path);
  free(raw);
  if (!st) {
    int k = p[1] > p[0];
    printf("%s\t%s\t%.4f\n", path, names[k], p[k]);
    fflush(stdout);
  }
  if (!st && (o->picture || o->save)) {
    char pred[LABEL_MAX + 16];
    say_prediction(pred, sizeof pred, names, p);
    if ((st = cli_predict_out_write(o, e, bpe, path, ids, n, gap, pred)))
      attn_prefix_error(st, path);
  }
  if (st) {
    fprintf(stderr, "attn predict: %s\n", attn_last_error());
    return 1;
  }
  return 0;
}

static const char usage_text[] =
    "usage: attn predict MODEL [--precision f32|bf16|auto] [--picture DIR]\n"
    "                    [--merge chars|words] [--save-attention OUT.safetensors]\n"
    "                    [--member K] [--threads N] FILE...\n"
    "  prints FILE<TAB>label<TAB>P(label) per raw e-mail ('-' reads one message from\n"
    "  stdin); MODEL from attn train (a single model or an ensemble).\n"
    "  --precision: the Linears and attention of the forward (default f32, the\n"
    "  reference); auto: bf16 where a probe of the first message measures it >= %.2fx\n"
    "  f32 on this CPU (a bf16 unit: AVX512_BF16 or AMX), else f32; the choice goes to\n"
    "  stderr.\n"
    "  --picture DIR: the model's attention on each message, drawn into DIR (created\n"
    "  if missing) under the file's name without its extension, STEM:\n"
    "    STEM_layer<L>.png (mean of the layer's heads), STEM_layer<L>_heads.png,\n"
    "    STEM_layer<L>_head<H>.png, STEM.html (interactive), STEM_diagnosis.txt\n"
    "  token labels by character: a character cut over several tokens (most Chinese\n"
    "  characters, every emoji) shows in each, '\xC2\xB7' where it is cut (\xE4\xBC\x9A\xC2\xB7 "
    "then\n"
    "  \xC2\xB7\xE4\xBC\x9A); bytes that are not UTF-8 as \\xNN.\n"
    "  --merge chars|words: draw the attention of the message's characters or words\n"
    "  instead of its tokens (a unit's keys summed, its queries averaged; rows still\n"
    "  sum to 1); words: split at whitespace, each CJK character a word, punctuation\n"
    "  a unit of its own. The titles say which; the diagnosis stays per token.\n"
    "  --save-attention OUT.safetensors: the weights of every layer and head\n"
    "  [layers, heads, n, n] and the tokens, as 'attn viz' and 'attn diagnose' read\n"
    "  them; with several FILEs one file each, OUT_STEM.safetensors.\n"
    "  --member K: which member of an ensemble to draw and save (default 1; the\n"
    "  labels are always the whole ensemble's).\n"
    "  The attention is that of the f32 forward whatever --precision says.\n"
    "  --threads N: threads (default: all cores this process may use, or\n"
    "  $ATTN_NUM_THREADS; the labels do not depend on it).\n"
    "  A FILE that cannot be read, classified or drawn is reported and skipped (exit 1\n"
    "  at the end); a message may be up to %u MiB.\n";

int attn_cmd_predict(int argc, char **argv) {
  static const cli_opt opts[] = {{"--precision", CLI_VALUE}, {"--picture", CLI_VALUE},
                                 {"--merge", CLI_VALUE},     {"--save-attention", CLI_VALUE},
                                 {"--member", CLI_VALUE},    {"--threads", CLI_VALUE},
                                 {NULL, 0}};
  infer_prec ip = {{.precision = ATTN_PREC_F32}, 0};
  cli_predict_out o = {0};
  const char *model = NULL;
  int64_t member = 0;
  int nfiles = 0, r;
  char **files = calloc((size_t)argc + 1, sizeof *files);
  if (!files) return cli_error(NULL, "out of memory");
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_ARG) {
      if (model) files[nfiles++] = (char *)a.val;
      else model = a.val;
    } else if (!strcmp(a.opt, "--precision")) {
      if (!strcmp(a.val, "auto")) {
        ip.decide = 1;
      } else if (attn_precision_from_name(a.val, &ip.ctx.precision)) {
        r = cli_usage("--precision: '%s' is not f32, bf16, fp16 or auto", a.val);
        break;
      }
    } else if (!strcmp(a.opt, "--picture")) {
      o.picture = a.val;
    } else if (!strcmp(a.opt, "--merge")) {
      if (attn_unit_kind_from_name(a.val, &o.merge)) {
        r = cli_usage("--merge: '%s' is not chars or words (the units the pictures show)", a.val);
        break;
      }
    } else if (!strcmp(a.opt, "--save-attention")) {
      o.save = a.val;
    } else if (!strcmp(a.opt, "--threads")) {
      if ((r = cli_set_threads(a.opt, a.val)) != CLI_OK) break;
    } else if (!cli_parse_i64(a.val, &member) || member < 1 || member > ATTN_CLF_ENS_MAX) {
      r = cli_usage("--member: '%s' is not a member number (1, 2, ...)", a.val); /* --member */
      break;
    }
  }
  if (r == CLI_HELP) printf(usage_text, ATTN_PREC_AUTO_MARGIN, (unsigned)(ATTN_MAIL_MAX_BYTES >> 20));
  if (r == CLI_OK && nfiles == 0) {
    r = cli_usage("%s (usage: attn predict MODEL [options] FILE...; attn predict --help)",
                  model ? "no FILE" : "no MODEL and no FILE");
  }
  if (r == CLI_OK && o.merge != ATTN_UNITS_TOKENS && !o.picture)
    r = cli_usage("--merge needs --picture DIR (it chooses what the pictures show)");
  if (r != CLI_OK) {
    free(files);
    return r == CLI_USAGE ? CLI_USAGE : cli_args_exit(r);
  }
  o.member = member ? (int)member - 1 : 0;
  o.model = model;
  o.many = nfiles > 1;
  attn_clf_ens e;
  attn_st *file = NULL;
  attn_bpe *bpe = NULL;
  if (attn_clf_ens_load(model, &e, &file)) {
    free(files);
    return cli_fail(model);
  }
  const attn_clf_config *c = &e.m[0].c;  // every member's
  char names[2][LABEL_MAX];
  int rc = 0;
  const char *tok = attn_st_meta(file, "tokenizer");
  if (c->classes != 2)
    rc = cli_error(model, "a model of %lld classes (predict reads 2-class models)",
                   (long long)c->classes);
  else if (!tok)
    rc = cli_error(model,
                   "no \"tokenizer\" metadata: a message is read (and its pictures are "
                   "labelled) with the tokenizer attn train saves in the model%s",
                   o.picture || o.save ? "; nothing was written" : "");
  else if (attn_bpe_load(tok, &bpe))
    rc = cli_error(model, "metadata \"tokenizer\": %s", attn_last_error());
  else if (o.member >= e.n)
    rc = cli_error(model, "--member %d: the model holds %d member(s)", o.member + 1, e.n);
  else
    rc = read_labels(model, file, names);
  /* DIR (made if missing) and OUT's folder checked once the model is known
   * to be usable: a model that cannot be read leaves nothing behind */
  if (!rc && cli_predict_out_ready(&o)) rc = CLI_FAILED;
  if (!rc && (o.picture || o.save) && e.n > 1 && !member)
    fprintf(stderr, "attn predict: %s is an ensemble of %d: the attention shown is member 1's "
                    "(--member K for another)\n", model, e.n);
  int32_t *ids = rc ? NULL : malloc((size_t)c->max_len * sizeof(int32_t));
  o.stems.stems = rc ? NULL : calloc((size_t)nfiles, sizeof *o.stems.stems);
  if (!rc && (!ids || !o.stems.stems)) rc = cli_error(NULL, "out of memory");
  int bad = 0; /* after a bad file the others still get their label */
  if (!rc && !ip.decide && ip.ctx.precision == ATTN_PREC_BF16) {
    attn_prec_info bf;
    attn_prec_info_get(ATTN_PREC_BF16, &bf);
    if (!bf.candidate) cli_warn("--precision bf16: %s", bf.why);
  }
  for (int i = 0; !rc && i < nfiles; i++) bad |= predict_one(files[i], &e, &ip, bpe, ids, names, &o);
  cli_predict_out_free(&o);
  free(files);
  free(ids);
  attn_bpe_free(bpe);
  attn_st_free(file);
  attn_clf_ens_free(&e);
  return rc || bad;
}
