/* attn predict MODEL [--precision f32|bf16|auto] [--picture DIR]
 * [--save-attention OUT.safetensors] [--member K] FILE... : label and
 * probability per raw e-mail ("-" reads one message from stdin), and on
 * request the model's attention on each message as pictures and as a file
 * for attn viz. A file that cannot be read, classified or drawn is reported
 * ("attn predict: FILE: reason") and the run goes on with the next; the exit
 * status is then 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/bpe.h"
#include "apps/classifier.h"
#include "apps/classifier_ensemble.h"
#include "apps/classifier_viz_message.h"
#include "apps/mail.h"
#include "apps/precision_probe.h"
#include "apps/trainer.h"
#include "apps/trainer_data.h"
#include "apps/viz.h"
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

/* P(class) of one raw message; its tokens in ids [*n]. */
static attn_status classify(const attn_clf_ens *e, infer_prec *ip, const attn_bpe *bpe,
                            const char *raw, size_t len, int32_t *ids, size_t *nids, float *probs) {
  const attn_clf *m = &e->m[0];
  char *text = NULL;
  size_t tlen = 0, n = 0;
  *nids = 0;
  attn_status st = attn_mail_to_text_flags(raw, len, attn_clf_mail_flags(&m->c), &text, &tlen, NULL);
  if (!st) st = attn_clf_encode(bpe, text, tlen, m->c.max_len, m->c.tail, ids, &n);
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

/* What to do beside the labels: --picture, --save-attention, --member. */
typedef struct {
  const char *picture, *save, *model;
  int member;      /* 0-based member of an ensemble to draw and save */
  int many;        /* more than one FILE: names get the file's stem */
  char **stems;    /* [files] the stems given so far (unique) */
  int nstems;
} attn_out;

/* FILE's stem for output names: its base name without the extension, bytes
 * other than [A-Za-z0-9._-] as '_', "stdin" for "-", made unique among the
 * files given before with "-2", "-3"... (malloc'd; NULL: out of memory). */
static char *file_stem(attn_out *o, const char *path) {
  const char *base = strrchr(path, '/');
  base = !strcmp(path, "-") ? "stdin" : base ? base + 1 : path;
  size_t n = strlen(base);
  const char *dot = strrchr(base, '.');
  if (dot && dot != base) n = (size_t)(dot - base);
  if (n == 0) base = "message", n = 7;
  if (n > 100) n = 100;
  char *s = malloc(n + 16);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++) {
    char c = base[i];
    s[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                   c == '-' || c == '_' ? c : '_';
  }
  s[n] = '\0';
  for (int k = 2, clash = 1; clash; k++) {
    clash = 0;
    for (int i = 0; i < o->nstems; i++) clash |= !strcmp(o->stems[i], s);
    if (clash) snprintf(s + n, 16, "-%d", k);
  }
  o->stems[o->nstems++] = s;
  return s;
}

/* "spam 0.9731" of the prediction, as the labels line says it. */
static void say_prediction(char *buf, size_t n, char names[2][LABEL_MAX], const float *p) {
  int k = p[1] > p[0];
  snprintf(buf, n, "%s %.4f", names[k], p[k]);
}

/* The attention of the drawn member on one message: saved and drawn. */
static attn_status attention_out(attn_out *o, const attn_clf_ens *e, const attn_bpe *bpe,
                                 const char *path, const int32_t *ids, size_t n, const char *pred) {
  char *stem = file_stem(o, path);
  if (!stem) return attn_set_error(ATTN_ENOMEM, "out of memory");
  attn_clf_msg_attn a;
  attn_status st = attn_clf_msg_attention(&e->m[o->member], bpe, ids, (int64_t)n, &a);
  char member[64] = "", file[4400], title[512];
  if (e->n > 1) snprintf(member, sizeof member, "%d of %d", o->member + 1, e->n);
  snprintf(title, sizeof title, "%.200s (%s%s%s)", path, pred, member[0] ? ", member " : "", member);
  if (!st && o->save) {
    size_t len = strlen(o->save);
    int ext = len > 12 && !strcmp(o->save + len - 12, ".safetensors");
    if (o->many) /* OUT.safetensors -> OUT_<stem>.safetensors */
      snprintf(file, sizeof file, "%.*s_%s.safetensors", (int)(ext ? len - 12 : len), o->save, stem);
    else
      snprintf(file, sizeof file, "%s", o->save);
    const char *kv[] = {"model.kind", "classifier",
                        "model.pool", e->m[o->member].c.pool == ATTN_CLF_POOL_MEANMAX ? "mean+max" : "mean",
                        "model.file", o->model,
                        "model.member", member[0] ? member : "1 of 1",
                        "message.file", path,
                        "prediction", pred,
                        NULL};
    st = attn_clf_msg_save(file, &a, kv);
    if (!st) fprintf(stderr, "attn predict: %s: attention saved to %s (attn viz / attn diagnose read it)\n", path, file);
    else attn_prefix_error(st, "--save-attention");
  }
  if (!st && o->picture) {
    snprintf(file, sizeof file, "%s/%s", o->picture, stem);
    st = attn_clf_msg_pictures(file, &a, title, NULL, NULL);
    int page = a.layers * a.heads * a.n * a.n <= ATTN_VIZ_HTML_MAX_VALUES;
    if (!st)
      fprintf(stderr, "attn predict: %s: pictures %s_layer*.png, %s%s, %s_diagnosis.txt (%lld "
                      "layer(s) x %lld head(s), %zu tokens%s%s)\n",
              path, file, page ? file : "no page: too many weights for ", page ? ".html" : "it",
              file, (long long)a.layers, (long long)a.heads, n, member[0] ? ", member " : "", member);
    else attn_prefix_error(st, "--picture");
  }
  attn_clf_msg_attn_free(&a);
  return st;
}

/* Reads and classifies one FILE ("-": stdin), and its attention as asked;
 * 0, or 1 after saying why not. */
static int predict_one(const char *path, const attn_clf_ens *e, infer_prec *ip, const attn_bpe *bpe,
                       int32_t *ids, char names[2][LABEL_MAX], attn_out *o) {
  char *raw = NULL;
  size_t len = 0, n = 0;
  float p[2];
  attn_status st = !strcmp(path, "-") ? attn_mail_read_fd(STDIN_FILENO, "-", &raw, &len)
                                      : attn_mail_read_file(path, &raw, &len);
  if (!st && (st = classify(e, ip, bpe, raw, len, ids, &n, p))) attn_prefix_error(st, path);
  free(raw);
  if (!st) {
    int k = p[1] > p[0];
    printf("%s\t%s\t%.4f\n", path, names[k], p[k]);
    fflush(stdout);
  }
  if (!st && (o->picture || o->save)) {
    char pred[LABEL_MAX + 16];
    say_prediction(pred, sizeof pred, names, p);
    if ((st = attention_out(o, e, bpe, path, ids, n, pred))) attn_prefix_error(st, path);
  }
  if (st) {
    fprintf(stderr, "attn predict: %s\n", attn_last_error());
    return 1;
  }
  return 0;
}

static const char usage_text[] =
    "usage: attn predict MODEL [--precision f32|bf16|auto] [--picture DIR]\n"
    "                    [--save-attention OUT.safetensors] [--member K] FILE...\n"
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
    "  --save-attention OUT.safetensors: the weights of every layer and head\n"
    "  [layers, heads, n, n] and the tokens, as 'attn viz' and 'attn diagnose' read\n"
    "  them; with several FILEs one file each, OUT_STEM.safetensors.\n"
    "  --member K: which member of an ensemble to draw and save (default 1; the\n"
    "  labels are always the whole ensemble's).\n"
    "  The attention is that of the f32 forward whatever --precision says.\n"
    "  A FILE that cannot be read, classified or drawn is reported and skipped (exit 1\n"
    "  at the end); a message may be up to %u MiB.\n";

/* DIR exists (made if missing, with its parents) and is writable; 0, or 1
 * after saying why not. */
static int ready_dir(const char *opt, const char *dir) {
  char buf[4096];
  const char *why = NULL;
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) why = "name too long";
  for (char *p = buf + 1; !why && *p; p++)
    if (*p == '/' && p[-1] != '/') {
      *p = '\0';
      if (mkdir(buf, 0777) && errno != EEXIST) why = strerror(errno);
      *p = '/';
    }
  struct stat sb;
  if (!why && mkdir(buf, 0777) && errno != EEXIST) why = strerror(errno);
  if (!why) why = stat(buf, &sb)               ? strerror(errno)
                  : !S_ISDIR(sb.st_mode)       ? "not a directory"
                  : access(buf, W_OK | X_OK)   ? strerror(errno)
                                               : NULL;
  if (why) fprintf(stderr, "attn predict: %s %s: %s\n", opt, dir, why);
  return why != NULL;
}

/* The folder OUT goes into is writable (checked before any work). */
static int ready_out(const char *out) {
  char dir[4096];
  const char *slash = strrchr(out, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) + (slash == out) : 1, slash ? out : ".");
  if (!out[0] || (slash && !slash[1])) {
    fprintf(stderr, "attn predict: --save-attention '%s': a file name is needed\n", out);
    return 1;
  }
  struct stat sb;
  const char *why = stat(dir, &sb)             ? strerror(errno)
                    : !S_ISDIR(sb.st_mode)     ? "not a directory"
                    : access(dir, W_OK | X_OK) ? strerror(errno)
                                               : NULL;
  if (why) {
    fprintf(stderr, "attn predict: --save-attention %s: %s: %s\n", out, dir, why);
    return 1;
  }
  return 0;
}

int attn_cmd_predict(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf(usage_text, ATTN_PREC_AUTO_MARGIN, (unsigned)(ATTN_MAIL_MAX_BYTES >> 20));
      return 0;
    }
  infer_prec ip = {{.precision = ATTN_PREC_F32}, 0};
  attn_out o = {0};
  const char *member = NULL;
  int nfiles = 0;
  char **files = argc > 1 ? calloc((size_t)argc, sizeof *files) : NULL;
  if (argc > 1 && !files) {
    fprintf(stderr, "attn predict: out of memory\n");
    return 1;
  }
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int opt = !strcmp(a, "--precision") || !strcmp(a, "--picture") || !strcmp(a, "--save-attention") ||
              !strcmp(a, "--member");
    if (opt && !v) {
      fprintf(stderr, "attn predict: %s needs a value (attn predict --help)\n", a);
      free(files);
      return 2;
    } else if (!strcmp(a, "--precision")) {
      if (!strcmp(v, "auto"))
        ip.decide = 1;
      else if (attn_precision_from_name(v, &ip.ctx.precision)) {
        fprintf(stderr, "attn predict: --precision: '%s' is not f32, bf16, fp16 or auto\n", v);
        free(files);
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--picture")) {
      o.picture = v, i++;
    } else if (!strcmp(a, "--save-attention")) {
      o.save = v, i++;
    } else if (!strcmp(a, "--member")) {
      member = v, i++;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "attn predict: unknown option '%s' (attn predict --help)\n", a);
      free(files);
      return 2;
    } else {
      files[nfiles++] = argv[i];
    }
  }
  if (argc < 2 || nfiles == 0) {
    fprintf(stderr, "attn predict: %s (usage: attn predict MODEL [options] FILE...; attn predict --help)\n",
            argc < 2 ? "no MODEL and no FILE" : "no FILE");
    free(files);
    return 2;
  }
  if (member) {
    char *end;
    errno = 0;
    long k = strtol(member, &end, 10);
    if (errno || end == member || *end || k < 1 || k > ATTN_CLF_ENS_MAX) {
      fprintf(stderr, "attn predict: --member: '%s' is not a member number (1, 2, ...)\n", member);
      free(files);
      return 2;
    }
    o.member = (int)k - 1;
  }
  o.model = argv[1];
  o.many = nfiles > 1;
  if ((o.picture && ready_dir("--picture", o.picture)) || (o.save && ready_out(o.save))) {
    free(files);
    return 1;
  }
  attn_clf_ens e;
  attn_st *file = NULL;
  attn_bpe *bpe = NULL;
  if (attn_clf_ens_load(argv[1], &e, &file)) {
    free(files);
    return cli_fail("predict");
  }
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
  } else if (o.member >= e.n) {
    fprintf(stderr, "attn predict: --member %d: %s holds %d member(s)\n", o.member + 1, argv[1], e.n);
    rc = 1;
  } else {
    rc = read_labels(argv[1], file, names);
  }
  if (!rc && (o.picture || o.save) && e.n > 1 && !member)
    fprintf(stderr, "attn predict: %s is an ensemble of %d: the attention shown is member 1's "
                    "(--member K for another)\n", argv[1], e.n);
  int32_t *ids = rc ? NULL : malloc((size_t)c->max_len * sizeof(int32_t));
  o.stems = rc ? NULL : calloc((size_t)nfiles, sizeof *o.stems);
  if (!rc && (!ids || !o.stems)) {
    fprintf(stderr, "attn predict: out of memory\n");
    rc = 1;
  }
  int bad = 0; /* after a bad file the others still get their label */
  if (!rc && !ip.decide && ip.ctx.precision == ATTN_PREC_BF16) {
    attn_prec_info bf;
    attn_prec_info_get(ATTN_PREC_BF16, &bf);
    if (!bf.candidate) fprintf(stderr, "attn predict: warning: --precision bf16: %s\n", bf.why);
  }
  for (int i = 0; !rc && i < nfiles; i++) bad |= predict_one(files[i], &e, &ip, bpe, ids, names, &o);
  for (int i = 0; i < o.nstems; i++) free(o.stems[i]);
  free(o.stems);
  free(files);
  free(ids);
  attn_bpe_free(bpe);
  attn_st_free(file);
  attn_clf_ens_free(&e);
  return rc || bad;
}
