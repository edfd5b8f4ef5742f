/* attn train / attn eval: the seeds' text classifier on a mail corpus
 * (docs/CLASSIFIER.md). */
#include <errno.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/tools/bench.h"
#include "apps/classifier/classifier_data.h"
#include "apps/classifier/classifier_ensemble.h"
#include "apps/classifier/classifier_precision.h"
#include "apps/classifier/classifier_viz.h"
#include "apps/train/dist_run.h"
#include "apps/train/train_plan.h"
#include "apps/train/train_replan.h"
#include "attn.h"
#include "cli/cli_train_bench.h"
#include "cli/commands.h"
#include "io/json.h"

/* --time-budget on a fresh run in one process: the plan revisited at every
 * epoch end from the measured throughput (apps/train/train_replan.h). */
typedef struct {
  int on;
  attn_train_plan p;    /* the run's sizes and the probe's rates */
  attn_train_pos pos;   /* the running member */
  attn_train_next next; /* the plan from it on */
  attn_train_measured meas;
  double budget, t_start;
  int64_t steps_before; /* steps of the members before the running one */
  attn_train_eta *eta;
} replan_state;

typedef struct {
  const char *data, *split, *out, *resume, *picture;
  unsigned long long split_seed;
  int vocab, threads, eval_only;
  int shards;     /* --shards S: each batch as S shards, the twin of mpirun -np S (0: 1) */
  int init_only; /* --init: weights and tokenizer from the checkpoint, fresh optimizer */
  int prec_auto;  /* --precision auto: chosen by attn_prec_probe once the data is read */
  int bench_varlen; /* --bench-varlen N: time N batches padded and packed, then stop */
  double time_budget; /* --time-budget SECONDS (0: none) for the whole command */
  double t_start;     /* when the command started (attn_train_now) */
  int dir_members;    /* > 1: the members' folders OUT/member<k> (the members asked for: a
                       * re-planned run keeps them whatever its final count) */
  replan_state rp;
  attn_clf_config mc;
  attn_train_opts to;
} train_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: attn train [options]          train the classifier, evaluate it on the test split\n"
          "       attn train --bench [...]      the training benchmark (attn bench train)\n"
          "       attn eval MODEL [options]     evaluate a saved model on the test split (its\n"
          "                                     forward in f32 unless --precision bf16|auto)\n"
          "data:\n"
          "  --data DIR            corpus folder (default data/spamassassin; tools/fetch_data.sh)\n"
          "  --split FILE          split file (default DIR/split-seed<S>.tsv: read if present, else written)\n"
          "  --split-seed S        seed of the stratified 80/10/10 split (default 1)\n"
          "  --vocab V             BPE vocabulary (default 8000)\n"
          "model:\n"
          "  --dim E --heads H --ff F --layers N --max-len L   (default 128 8 512 2 512)\n"
          "  --dropout P (0.1)  --attn-dropout P (on the attention probabilities; default 0: the\n"
          "                        flash path; > 0 makes the probabilities explicit, ~2x slower)\n"
          "  --sinusoidal (fixed positions)  --norm-first  --gelu\n"
          "  --headers basic|more  mail headers in the text: Subject and From (basic), or also To, Cc,\n"
          "                        Reply-To, Date, Message-ID, X-Mailer, User-Agent, Content-Type\n"
          "                        (more, default)\n"
          "  --pool mean|meanmax   pooling over the tokens: the mean (default), or mean and max\n"
          "                        concatenated (the head sees 2 dim)\n"
          "  --tail T              a message over max-len tokens keeps its first max-len - T and\n"
          "                        its last T tokens (default max-len / 4; 0: the first max-len)\n"
          "training:\n"
          "  --seed S (1)  --epochs N (7)  --batch B (32)  --lr LR (1e-3)  --min-lr LR (1e-5)\n"
          "  --warmup FRAC (0.05 of the steps)  --weight-decay WD (0.01)  --clip NORM (1; 0 off)\n"
          "  --label-smoothing E (0)  --select loss|acc (best checkpoint by val loss)\n"
          "  --token-dropout P (0.4)  leave each training token out with probability P (per step;\n"
          "                        augmentation, reproducible by seed)\n"
          "  --ema DECAY           keep an exponential moving average of the weights (e.g. 0.995;\n"
          "                        0 off, the default): validated and kept as the best model; each\n"
          "                        epoch line adds the raw weights' figures\n"
          "  --members K           train K models (seeds S, S+1000, ...; OUT/member<k>/) and keep\n"
          "                        their average as the model (OUT/best.safetensors; default 2;\n"
          "                        1: one model, OUT/best.safetensors and OUT/last.safetensors)\n"
          "  --checkpoint-activations   keep only layer inputs, recompute in backward\n"
          "  --threads T (all)  --progress auto|bar|plain|quiet  --backend auto|math|flash\n"
          "  --varlen auto|on|off  packed batches: each batch's real tokens only, no padding rows\n"
          "                        (varlen attention; same numbers up to float rounding); auto\n"
          "                        (default): a batch whose padding is >= 10 %% of its tokens\n"
          "                        (--qat and --attn-dropout > 0 train padded)\n"
          "  --bench-varlen N      time N of the first epoch's batches padded and packed (forward\n"
          "                        + backward, --precision f32 (default) or bf16|fp16, a fresh\n"
          "                        model or --init/--resume's) and stop\n"
          "  --precision auto|f32|bf16|fp16   Linears and attention (f32 master weights); fp16 adds\n"
          "                        dynamic loss scaling (skipped steps reported); auto (default):\n"
          "                        a probe times a few steps of this model in f32 and bf16 on this\n"
          "                        CPU and keeps bf16 only if >= 1.1x f32 (the log says why); a\n"
          "                        precision slower than f32 here runs with a warning naming the cost\n"
          "  --time-budget SECONDS the whole command should take at most this: from the measured\n"
          "                        throughput, fewer epochs (down to 70 %%), then fewer members,\n"
          "                        then fewer epochs, before training starts; re-planned at every\n"
          "                        epoch end from the speed the epochs measure (up to --members x\n"
          "                        --epochs; said in the log; not with --resume)\n"
          "  --qat                 quantization-aware training (fake int8 in every Linear); then\n"
          "                        attn quantize OUT/best.safetensors -o MODEL.int8.safetensors\n"
          "  --qat-act tensor|row  QAT activations per tensor over an EMA min/max observer (torch's\n"
          "                        static QAT; default) or per row, as the int8 model runs them\n"
          "  --init CKPT           start from CKPT's weights and tokenizer with a fresh optimizer\n"
          "                        (e.g. QAT fine-tuning of an f32 model); the starting model is\n"
          "                        validated first and stays the best unless an epoch beats it\n"
          "  --out DIR (runs/train): DIR/best.safetensors, DIR/last.safetensors\n"
          "  --resume [CKPT]       continue from CKPT (default OUT/last.safetensors), identically\n"
          "  --stop-after STEPS    stop after this many steps (checkpoint written; --resume goes on)\n"
          "  --save-every STEPS    also write last.safetensors every STEPS steps\n"
          "  --picture DIR         attention pictures + diagnosis of the first test message\n"
          "data parallel (docs/DISTRIBUTED.md):\n"
          "  mpirun -np P attn train ...   P processes, each a 1/P shard of every batch, the\n"
          "                        gradients summed in rank order (an MPI build: attn version)\n"
          "  --shards S            one process computing each batch as S shards: the same numbers\n"
          "                        as mpirun -np S, to the bit\n");
}

static const cli_opt train_opts_table[] = {
    {"--data", CLI_VALUE},           {"--split", CLI_VALUE},
    {"--split-seed", CLI_VALUE},     {"--vocab", CLI_VALUE},
    {"--dim", CLI_VALUE},            {"--heads", CLI_VALUE},
    {"--ff", CLI_VALUE},             {"--layers", CLI_VALUE},
    {"--max-len", CLI_VALUE},        {"--dropout", CLI_VALUE},
    {"--attn-dropout", CLI_VALUE},   {"--sinusoidal", CLI_FLAG},
    {"--norm-first", CLI_FLAG},      {"--gelu", CLI_FLAG},
    {"--headers", CLI_VALUE},        {"--pool", CLI_VALUE},
    {"--tail", CLI_VALUE},           {"--seed", CLI_VALUE},
    {"--epochs", CLI_VALUE},         {"--batch", CLI_VALUE},
    {"--lr", CLI_VALUE},             {"--min-lr", CLI_VALUE},
    {"--warmup", CLI_VALUE},         {"--weight-decay", CLI_VALUE},
    {"--clip", CLI_VALUE},           {"--label-smoothing", CLI_VALUE},
    {"--select", CLI_VALUE},         {"--token-dropout", CLI_VALUE},
    {"--ema", CLI_VALUE},            {"--members", CLI_VALUE},
    {"--checkpoint-activations", CLI_FLAG},
    {"--threads", CLI_VALUE},        {"--progress", CLI_VALUE},
    {"--backend", CLI_VALUE},        {"--precision", CLI_VALUE},
    {"--time-budget", CLI_VALUE},    {"--qat", CLI_FLAG},
    {"--qat-act", CLI_VALUE},        {"--init", CLI_VALUE},
    {"--out", CLI_VALUE},            {"--resume", CLI_MAYBE_VALUE},
    {"--stop-after", CLI_VALUE},     {"--save-every", CLI_VALUE},
    {"--picture", CLI_VALUE},
    {"--shards", CLI_VALUE},  /* data parallel: docs/DISTRIBUTED.md */
    {"--varlen", CLI_VALUE},         {"--bench-varlen", CLI_VALUE},
    {NULL, 0}};

/* attn eval reads the model's own config: only where the data is, and the
 * pictures. */
static const cli_opt eval_opts_table[] = {
    {"--data", CLI_VALUE},      {"--split", CLI_VALUE},   {"--split-seed", CLI_VALUE},
    {"--picture", CLI_VALUE},   {"--threads", CLI_VALUE}, {"--precision", CLI_VALUE},
    {"--backend", CLI_VALUE},   {"--varlen", CLI_VALUE},  {NULL, 0}};

static void eval_usage(FILE *f) {
  fprintf(f,
          "usage: attn eval MODEL [--data DIR] [--split FILE | --split-seed S] [--picture DIR]\n"
          "                 [--precision f32|bf16|fp16|auto] [--backend auto|math|flash] [--threads T]\n"
          "                 [--varlen auto|on|off]\n"
          "  evaluates MODEL (a checkpoint of attn train, an ensemble, or an int8 model of attn\n"
          "  quantize) on the test split: the report attn train ends with. The corpus is read as\n"
          "  the model reads mail (its config's headers); MODEL's tokenizer encodes it.\n"
          "  --data DIR       corpus folder (default data/spamassassin)\n"
          "  --split FILE     split file (default DIR/split-seed<S>.tsv: read if present, else written)\n"
          "  --split-seed S   seed of the stratified 80/10/10 split (default 1)\n"
          "  --picture DIR    attention pictures + diagnosis of the first test spam message\n"
          "  --precision P    the forward's Linears and attention (default f32, the reference);\n"
          "                   auto: bf16 where an inference probe of the first test messages\n"
          "                   measures it >= %.2fx f32 on this CPU, else f32 (said in the report)\n"
          "  --backend B      attention: math, flash or auto (default)\n"
          "  --varlen V       packed batches (as attn train --varlen; default auto)\n"
          "  --threads T      threads (default: all cores)\n", ATTN_PREC_AUTO_MARGIN);
}

/* The options of table into o; with model (attn eval), the one argument
 * there. Returns 0, 1 after --help (printed), 2 after a usage error (said). */
static int parse(int argc, char **argv, train_opts *o, const cli_opt *table, const char **model) {
  cli_args args;
  cli_args_init(&args, argc, argv, 1, table);
  int r;
  while ((r = cli_args_next(&args)) > 0) {
    const char *a = args.opt, *v = args.val;
    if (r == CLI_ARG && model && !*model) {
      *model = v;
      continue;
    }
    if (r == CLI_ARG) {
      cli_usage("unexpected argument '%s' (see attn %s --help)", v, argv[0]);
      return 2;
    }
    if (!strcmp(a, "--sinusoidal")) { o->mc.sinusoidal = 1; continue; }
    if (!strcmp(a, "--norm-first")) { o->mc.norm_first = 1; continue; }
    if (!strcmp(a, "--gelu")) { o->mc.activation = ATTN_ACT_GELU; continue; }
    if (!strcmp(a, "--checkpoint-activations")) { o->to.ckpt_acts = 1; continue; }
    if (!strcmp(a, "--qat")) { o->to.qat = 1; continue; }
    if (!strcmp(a, "--resume")) {
      o->resume = v ? v : "";
      continue;
    }
    char *end = NULL;
    errno = 0;
    if (!strcmp(a, "--data")) o->data = v;
    else if (!strcmp(a, "--split")) o->split = v;
    else if (!strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--picture")) o->picture = v;
    else if (!strcmp(a, "--split-seed")) o->split_seed = strtoull(v, &end, 10);
    else if (!strcmp(a, "--seed")) o->to.seed = strtoull(v, &end, 10);
    else if (!strcmp(a, "--vocab")) o->vocab = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--dim")) o->mc.d_model = strtoll(v, &end, 10);
    else if (!strcmp(a, "--heads")) o->mc.heads = strtoll(v, &end, 10);
    else if (!strcmp(a, "--ff")) o->mc.ff = strtoll(v, &end, 10);
    else if (!strcmp(a, "--layers")) o->mc.layers = strtoll(v, &end, 10);
    else if (!strcmp(a, "--max-len")) o->mc.max_len = strtoll(v, &end, 10);
    else if (!strcmp(a, "--tail")) o->mc.tail = strtoll(v, &end, 10);
    else if (!strcmp(a, "--pool")) {
      if (strcmp(v, "mean") && strcmp(v, "meanmax")) {
        cli_usage("--pool mean|meanmax");
        return 2;
      }
      o->mc.pool = !strcmp(v, "meanmax") ? ATTN_CLF_POOL_MEANMAX : ATTN_CLF_POOL_MEAN;
    }
    else if (!strcmp(a, "--dropout")) o->mc.dropout = strtof(v, &end);
    else if (!strcmp(a, "--attn-dropout")) o->mc.attn_dropout = strtof(v, &end);
    else if (!strcmp(a, "--epochs")) o->to.epochs = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--batch")) o->to.batch = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--lr")) o->to.lr = strtod(v, &end);
    else if (!strcmp(a, "--min-lr")) o->to.min_lr = strtod(v, &end);
    else if (!strcmp(a, "--warmup")) o->to.warmup_frac = strtod(v, &end);
    else if (!strcmp(a, "--weight-decay")) o->to.weight_decay = strtod(v, &end);
    else if (!strcmp(a, "--clip")) o->to.clip = strtod(v, &end);
    else if (!strcmp(a, "--label-smoothing")) o->to.label_smoothing = strtof(v, &end);
    else if (!strcmp(a, "--token-dropout")) {
      o->to.token_dropout = strtof(v, &end);
      if (!(o->to.token_dropout >= 0.0f && o->to.token_dropout < 1.0f)) {
        cli_usage("--token-dropout %s: must be in [0, 1)", v);
        return 2;
      }
    }
    else if (!strcmp(a, "--ema")) {
      o->to.ema = strtod(v, &end);
      if (!(o->to.ema >= 0.0 && o->to.ema < 1.0)) {
        cli_usage("--ema %s: must be in [0, 1) (0: off)", v);
        return 2;
      }
    }
    else if (!strcmp(a, "--members")) {
      o->to.members = (int)strtol(v, &end, 10);
      if (o->to.members < 1 || o->to.members > ATTN_CLF_ENS_MAX) {
        cli_usage("--members %s: must be in 1..%d", v, ATTN_CLF_ENS_MAX);
        return 2;
      }
    }
    else if (!strcmp(a, "--threads")) o->threads = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--shards")) o->shards = (int)strtol(v, &end, 10);  // docs/DISTRIBUTED.md
    else if (!strcmp(a, "--stop-after")) o->to.stop_after = strtoll(v, &end, 10);
    else if (!strcmp(a, "--save-every")) o->to.save_every = strtoll(v, &end, 10);
    else if (!strcmp(a, "--select")) {
      if (strcmp(v, "loss") && strcmp(v, "acc")) {
        cli_usage("--select loss|acc");
        return 2;
      }
      o->to.select_by_acc = !strcmp(v, "acc");
    } else if (!strcmp(a, "--progress")) {
      static const char *const modes[] = {"plain", "bar", "quiet"};
      o->to.progress = -1;
      for (int k = 0; k < 3; k++)
        if (!strcmp(v, modes[k])) o->to.progress = k;
      if (o->to.progress < 0 && strcmp(v, "auto")) {
        cli_usage("--progress auto|bar|plain|quiet");
        return 2;
      }
    } else if (!strcmp(a, "--headers")) {
      if (strcmp(v, "basic") && strcmp(v, "more")) {
        cli_usage("--headers basic|more");
        return 2;
      }
      o->mc.headers = !strcmp(v, "more");
    } else if (!strcmp(a, "--init")) {
      o->resume = v;
      o->init_only = 1;
      o->to.eval_start = 1;
    } else if (!strcmp(a, "--qat-act")) {
      if (strcmp(v, "tensor") && strcmp(v, "row")) {
        cli_usage("--qat-act tensor|row");
        return 2;
      }
      o->to.qat_act = !strcmp(v, "row") ? ATTN_QAT_ACT_ROW : ATTN_QAT_ACT_TENSOR;
    } else if (!strcmp(a, "--bench-varlen")) {
      o->bench_varlen = (int)strtol(v, &end, 10);
      if (*end || o->bench_varlen <= 0) {
        cli_usage("--bench-varlen %s: a number of batches > 0", v);
        return 2;
      }
    } else if (!strcmp(a, "--varlen")) {
      if (attn_clf_varlen_from_name(v, &o->to.varlen)) return cli_fail("--varlen"), 2;
    } else if (!strcmp(a, "--precision")) {
      o->prec_auto = !strcmp(v, "auto");
      if (!o->prec_auto && attn_precision_from_name(v, &o->to.precision))
        return cli_fail("--precision"), 2;
    } else if (!strcmp(a, "--time-budget")) {
      o->time_budget = strtod(v, &end);
      if (!(o->time_budget > 0)) {
        cli_usage("--time-budget %s: seconds > 0", v);
        return 2;
      }
    } else { /* --backend */
      if (attn_backend_from_name(v, &o->to.backend)) return cli_fail("--backend"), 2;
    }
    if (end && (*end || end == v || errno)) {
      cli_usage("%s: '%s' is not a number", a, v);
      return 2;
    }
  }
  if (r == CLI_HELP) {
    if (table == eval_opts_table) eval_usage(stdout);
    else usage(stdout);
    return 1;
  }
  if (r < 0) return 2;
  if (o->mc.tail < 0) o->mc.tail = o->mc.max_len / 4;
  if (o->vocab < ATTN_BPE_MERGE0 || o->to.epochs <= 0 || o->to.batch <= 0 || o->to.batch > 4096) {
    cli_usage("need --vocab >= %d, --epochs > 0, 0 < --batch <= 4096", ATTN_BPE_MERGE0);
    return 2;
  }
  return 0;
}

static void defaults(train_opts *o) {
  memset(o, 0, sizeof *o);
  o->data = "data/spamassassin";
  o->out = "runs/train";
  o->split_seed = 1;
  o->vocab = 8000;
  attn_clf_config_default(&o->mc);
  attn_train_opts_default(&o->to);
  /* the tuned defaults (docs/CLASSIFIER.md, "Results"): 512 tokens, head and
   * tail, the sender's headers, dropout 0.1 on the residuals and the
   * feed-forward but none on the attention probabilities (flash), token
   * dropout 0.4, 7 epochs */
  o->mc.max_len = 512;
  o->mc.tail = -1; /* max_len / 4 unless --tail */
  o->mc.headers = 1;
  o->mc.dropout = 0.1f;
  o->mc.attn_dropout = 0.0f;
  o->to.epochs = 7;
  o->to.token_dropout = 0.4f;
  /* an ensemble of two (docs/CLASSIFIER.md, "The defaults: an ensemble"), bf16
   * Linears and attention where the probe finds them faster than f32 */
  o->to.members = 2;
  o->prec_auto = 1;
  o->to.varlen = ATTN_CLF_VARLEN_AUTO;  // packed batches where they save >= 10 % of the tokens
}

static int mkdirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(buf, 0777);
      *p = '/';
    }
  return mkdir(buf, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

/* Report on the test split, and the pictures of its first spam message (an
 * ensemble's: its first member's attention). */
static int finish(const attn_clf *m, int n, const attn_nn_ctx *ctx, const attn_clf_data *d,
                  const attn_bpe *bpe, const train_opts *o) {
  attn_tok_set t = attn_clf_data_set(d, ATTN_SPLIT_TEST);
  float *p_spam = malloc((size_t)(t.n > 0 ? t.n : 1) * sizeof(float));
  if (!p_spam) return cli_error(NULL, "out of memory");
  if (attn_clf_report_test_ctx(m, n, ctx, d, o->to.eval_batch, stdout, p_spam)) {
    free(p_spam);
    return cli_fail(NULL);
  }
  double right = 0;  // the test accuracy: evidence for the diagnosis's advice
  for (int i = 0; i < t.n; i++) right += (p_spam[i] > 0.5f) == (t.labels[i] == 1);
  double accuracy = t.n ? right / t.n : NAN;
  free(p_spam);
  if (o->picture) {
    if (mkdirs(o->picture)) {
      return cli_syserr(o->picture, "cannot create the folder");
    }
    int j = 0;  // the first test spam message: the more telling picture
    for (int i = 0; i < t.n; i++)
      if (t.labels[i] == 1) {
        j = i;
        break;
      }
    float probs[2];
    attn_clf_ens ens = {n, (attn_clf *)m};
    if (attn_clf_ens_predict(&ens, t.ids[j], &t.lens[j], 1, t.lens[j], probs)) return cli_fail(NULL);
    char title[512];
    snprintf(title, sizeof title, "%s: %s, P(spam) = %.3f", d->c->paths[d->idx[ATTN_SPLIT_TEST][j]],
             t.labels[j] ? "spam" : "ham", probs[1]);
    printf("\nattention of test message %s%s\n", title, n > 1 ? " (member 1's attention)" : "");
    if (attn_clf_picture(m, bpe, t.ids[j], t.lens[j], 40, o->picture, title, accuracy, stdout))
      return cli_fail(o->picture);
  }
  return 0;
}

/* attn eval's precision: --precision P, or auto: bf16 where an inference
 * probe on the first test messages (up to 8, one batch) measures it >=
 * ATTN_PREC_AUTO_MARGIN x f32, else f32 (as attn predict decides). Says
 * which, and why. */
static int eval_precision(const attn_clf *m, int n, const attn_clf_data *d, const train_opts *o,
                          attn_nn_ctx *ctx) {
  memset(ctx, 0, sizeof *ctx);
  ctx->backend = o->to.backend;
  ctx->precision = o->to.precision;
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  if (!o->prec_auto) {
    printf("precision: %s (--precision)\n", attn_precision_name(ctx->precision));
    if (ctx->precision == ATTN_PREC_BF16 && !bf.candidate)
      printf("warning: --precision bf16: %s\n", bf.why);
    return 0;
  }
  attn_tok_set t = attn_clf_data_set(d, ATTN_SPLIT_TEST);
  int64_t B = t.n < 8 ? t.n : 8, L = 1;
  if (B < 1) return attn_set_error(ATTN_EINVAL, "evaluation: the test split is empty"), cli_fail(NULL), 1;
  for (int64_t i = 0; i < B; i++) L = t.lens[i] > L ? t.lens[i] : L;
  int32_t *ids = calloc((size_t)B * (size_t)L, sizeof(int32_t));
  if (!ids) return attn_set_error(ATTN_ENOMEM, "precision probe: out of memory"), cli_fail(NULL), 1;
  for (int64_t i = 0; i < B; i++) memcpy(ids + i * L, t.ids[i], (size_t)t.lens[i] * sizeof(int32_t));
  attn_clf_ens e = {n, (attn_clf *)m};
  char why[256];
  attn_status st = attn_prec_auto_infer(&e, ids, t.lens, B, L, &ctx->precision, why, sizeof why);
  free(ids);
  if (st) return cli_fail(NULL), 1;
  printf("precision: %s (auto: inference probe of %lld test messages: %s)\n",
         attn_precision_name(ctx->precision), (long long)B, why);
  return 0;
}

static double set_tokens(const attn_clf_data *d, int split) {
  attn_tok_set t = attn_clf_data_set(d, split);
  double n = 0;
  for (int i = 0; i < t.n; i++) n += t.lens[i];
  return n;
}

/* The precision (--precision auto: the probe's choice; an explicit one: a
 * warning when it is slower than f32 here), the expected duration and
 * --time-budget's plan, from a probe of this run's model on its own data.
 * Sets o->to.precision, members, epochs (a fresh run) and eta. */
static int plan_run(train_opts *o, const attn_clf_data *d, int resumed, attn_train_eta *eta) {
  attn_tok_set tr = attn_clf_data_set(d, ATTN_SPLIT_TRAIN);
  int rows_max = 64;
  int32_t *ids = malloc((size_t)(rows_max * o->mc.max_len) * sizeof(int32_t));
  int32_t lens[64];
  int labels[64];
  int64_t B = 0, L = 0;
  attn_prec_probe_result r;
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  attn_precision cands[1];
  int nc = 0;
  if (o->prec_auto && bf.candidate && !o->to.qat) cands[nc++] = ATTN_PREC_BF16;
  else if (!o->prec_auto && o->to.precision != ATTN_PREC_F32) cands[nc++] = o->to.precision;
  attn_prec_probe_opts po = {o->to.backend, o->to.ckpt_acts, o->to.qat, o->to.qat_act, o->to.seed, 0, 0};
  if (!ids) return cli_error(NULL, "out of memory");
  attn_status st = attn_prec_probe_batch(&tr, o->mc.max_len, rows_max < o->to.batch ? rows_max : o->to.batch,
                                         4096, o->to.token_dropout, o->to.seed, ids, lens, labels, &B, &L);
  if (!st) st = attn_prec_probe(&o->mc, &po, ids, lens, labels, B, L, cands, nc, &r);
  free(ids);
  if (st) return cli_fail(NULL);
  printf("probe: %.2f s, %lld x %lld tokens: f32 %.1fk tokens/s", r.seconds, (long long)B,
         (long long)L, r.t[0].tokens_per_s / 1e3);
  for (int i = 1; i < r.n; i++)
    printf(", %s %.1fk (%.2fx%s)", attn_precision_name(r.t[i].prec), r.t[i].tokens_per_s / 1e3,
           attn_prec_probe_ratio(&r, r.t[i].prec), r.t[i].dropped ? ", dropped early: under half of f32" : "");
  printf("; inference %.1fk tokens/s\n", r.eval_tokens_per_s / 1e3);
  char why[320];
  if (o->prec_auto) {
    attn_precision was = o->to.precision;
    o->to.precision = attn_prec_auto_choose(&r, o->to.qat, why, sizeof why);
    printf("precision: %s (%s)%s\n", attn_precision_name(o->to.precision), why,
           resumed && was != o->to.precision ? "; the run had another: it will not continue identically" : "");
  } else {
    double ratio = attn_prec_probe_ratio(&r, o->to.precision);
    attn_prec_info pi;
    attn_prec_info_get(o->to.precision, &pi);
    printf("precision: %s (--precision %s", attn_precision_name(o->to.precision),
           attn_precision_name(o->to.precision));
    if (o->to.precision != ATTN_PREC_F32) printf("; probe %.2fx f32 here, %s", ratio, pi.units);
    printf(")\n");
    /* bf16 without a unit, or anything measured clearly slower than f32
     * (fp16 runs f32 FMAs: ~1x, within the probe's noise) */
    int no_unit = o->to.precision == ATTN_PREC_BF16 && !pi.candidate;
    if (o->to.precision != ATTN_PREC_F32 && (ratio < 0.9 || no_unit)) {
      char msg[512];
      snprintf(msg, sizeof msg, "warning: --precision %s runs at %.2fx f32's tokens/s on this CPU "
               "(probe; %s level, %s%s%s): this training takes ~%.1fx as long as with f32; "
               "--precision auto picks the faster", attn_precision_name(o->to.precision), ratio,
               attn_isa_name(attn_isa_active()), pi.units, no_unit ? ": " : "",
               no_unit ? pi.why : "", ratio > 0 ? 1.0 / ratio : 0.0);
      printf("%s\n", msg);
      cli_error(NULL, "%s", msg);
    }
  }
  const attn_prec_timing *t = attn_prec_probe_timing(&r, o->to.precision);
  /* a testing aid: ATTN_TRAIN_PROBE_SCALE=F scales the probe's training rates as if
   * the machine had been F x as fast during the probe (0.001: very busy) */
  const char *ps = getenv("ATTN_TRAIN_PROBE_SCALE");
  double scale = ps && strtod(ps, NULL) > 0 ? strtod(ps, NULL) : 1.0;
  if (scale != 1.0)
    printf("probe: its training rates scaled by %g (ATTN_TRAIN_PROBE_SCALE)\n", scale);
  attn_train_plan p = {o->to.members, o->to.epochs, (tr.n + o->to.batch - 1) / o->to.batch,
                       set_tokens(d, ATTN_SPLIT_TRAIN) * (1.0 - o->to.token_dropout),
                       set_tokens(d, ATTN_SPLIT_VAL), set_tokens(d, ATTN_SPLIT_TEST),
                       scale * (t ? t->tokens_per_s : r.t[0].tokens_per_s),
                       r.step_fixed_seconds / scale, r.eval_tokens_per_s, o->picture ? 10.0 : 1.0};
  char note[320], a[32], b[32];
  if (o->time_budget > 0 && resumed) {
    printf("--time-budget: not applied to a resumed run (it goes on with its own plan)\n");
  } else if (o->time_budget > 0) {
    double left = o->time_budget - (attn_train_now() - o->t_start);
    int want_members = o->to.members, want_epochs = o->to.epochs;
    int fit = attn_train_plan_fit(&p, left, note, sizeof note);
    o->rp.on = !o->to.dist; // ranks would measure apart: one process only
    o->rp.p = p;
    o->rp.pos = (attn_train_pos){want_members, want_epochs, 0, p.epochs, 0};
    o->rp.next = (attn_train_next){p.epochs, p.members, p.epochs};
    o->rp.budget = o->time_budget;
    o->rp.t_start = o->t_start;
    o->rp.eta = eta;
    if (fit) {
      printf("%s (%.0f s of the budget used before training)\n", note,
             attn_train_now() - o->t_start);
      if (fit < 0) cli_error(NULL, "%s", note);
      o->to.members = p.members;
      o->to.epochs = p.epochs;
      if (p.members < 2 && want_members >= 2)
        printf("accuracy: the budget holds 1 member, not the ensemble of %d that beats the Naive "
               "Bayes baseline: the result may fall below it%s\n",
               want_members,
               o->rp.on ? " (re-planned at every epoch end from the measured speed)" : "");
    } else {
      attn_fmt_duration(a, sizeof a, left);
      printf("time budget: %s left, the plan fits\n", a);
    }
  }
  double done = attn_train_now() - o->t_start;
  attn_fmt_duration(a, sizeof a, done + attn_train_plan_seconds(&p));
  attn_fmt_duration(b, sizeof b, attn_train_plan_epoch_seconds(&p));
  char members[32] = "";
  if (p.members > 1) snprintf(members, sizeof members, "%d members x ", p.members);
  printf("expected duration: ~%s (%.0f s of it done)%s: %s%d epoch%s of %d steps, ~%s per epoch "
         "(%.2fM tokens at %.1fk tokens/s, %s, measured by the probe), then the test report\n", a,
         done, resumed ? " for the whole plan (a resumed run: less)" : "", members, p.epochs,
         p.epochs > 1 ? "s" : "", p.batches, b, p.train_tokens / 1e6,
         p.train_tokens_per_s / 1e3, attn_precision_name(o->to.precision));
  fflush(stdout);
  eta->steps_total = (int64_t)p.members * p.epochs * p.batches;
  eta->predicted_s = p.members * p.epochs * attn_train_plan_epoch_seconds(&p);
  if (o->rp.on)
    printf("re-planning: at every epoch end, from the tokens/s the epochs measure (a member's "
           "schedule is fixed at its start: later members may be added, dropped or given other "
           "epochs; the running one may end early, at >= 70%% of its epochs)\n");
  else if (o->time_budget > 0 && !resumed)
    printf("re-planning: off (data parallel: the ranks keep rank 0's plan)\n");
  return 0;
}

/* attn_train_opts.epoch_end of a re-planned run: the measured epoch into
 * the plan; the running member's end (its epochs). */
static int replan_epoch_end(void *user, const attn_train_epoch_info *e) {
  replan_state *r = user;
  r->meas.epochs++;
  r->meas.train_tokens += e->train_tokens;
  r->meas.train_seconds += e->train_seconds;
  r->meas.val_tokens += e->val_tokens;
  r->meas.val_seconds += e->val_seconds;
  r->pos.done = e->epochs_done;
  double left = r->budget - (attn_train_now() - r->t_start);
  int fits = 0;
  char note[640];
  if (attn_train_replan(&r->p, &r->pos, &r->meas, left, &r->next, &fits, note, sizeof note)) {
    printf("%s\n", note);
    fflush(stdout);
    if (!fits) cli_error(NULL, "%s", note);
    int64_t nb = r->p.batches;
    r->eta->steps_total = r->steps_before + (int64_t)r->next.stop * nb +
                          (int64_t)(r->next.members - r->pos.member - 1) * r->next.epochs * nb;
  }
  return r->next.stop;
}

/* Where member k of the run keeps its checkpoints: OUT itself for a single
 * model, OUT/member<k+1> in an ensemble; with file, that file in it. */
static void member_dir(const train_opts *o, int k, const char *file, char *buf, size_t n) {
  if (o->dir_members <= 1)
    snprintf(buf, n, "%s%s%s", o->out, file ? "/" : "", file ? file : "");
  else snprintf(buf, n, "%s/member%d%s%s", o->out, k + 1, file ? "/" : "", file ? file : "");
}

static int file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Trains member k (1 of 1 for a single model) to the end, or until
 * --stop-after (*stopped = 1). m: the model to go on from (loaded from a
 * checkpoint: resume = 1 restores its optimizer and state from `from` too)
 * or, when m->p.data is NULL, a fresh one with the member's seed. */
static int train_member(train_opts *o, int k, attn_clf *m, const char *from, int resume,
                        const attn_clf_data *d, const attn_st *meta, attn_train_eta *eta,
                        int *stopped) {
  int rc = 1;
  char dir[4096];
  member_dir(o, k, NULL, dir, sizeof dir);
  attn_train_opts to = o->to;
  to.seed = o->to.seed + 1000ull * (unsigned long long)k;
  to.out_dir = dir;
  to.eta = eta;
  int nb = attn_clf_data_set(d, ATTN_SPLIT_TRAIN).n;
  eta->steps_before = o->rp.on ? o->rp.steps_before
                               : (int64_t)k * o->to.epochs * ((nb + o->to.batch - 1) / o->to.batch);
  if (o->rp.on) {
    to.epoch_end = replan_epoch_end;
    to.epoch_end_user = &o->rp;
  }
  attn_adam opt;
  memset(&opt, 0, sizeof opt);
  attn_train_state s;
  attn_train_state_init(&s);
  if (o->to.members > 1) {
    char left[32];
    attn_fmt_duration(left, sizeof left, attn_train_eta_left(eta, eta->steps_before));
    printf("\nmember %d of %d: seed %llu, %s (ETA of the training: %s)\n", k + 1, o->to.members,
           (unsigned long long)to.seed, dir, left);
    fflush(stdout);
  }
  if (!m->p.data && (attn_clf_create(m, &o->mc) || attn_clf_init(m, to.seed))) {
    cli_fail(NULL);
    goto done;
  }
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  ac.weight_decay = to.weight_decay;
  if (attn_adam_init(&opt, &m->p, &ac) || attn_adam_set_decay_rule(&opt, &m->p, attn_clf_decay_rule, NULL)) {
    cli_fail(NULL);
    goto done;
  }
  if (resume && attn_clf_load_train_state(from, m, &opt, &s)) {
    cli_fail(from);
    goto done;
  }
  if (from && !resume) printf("initialised from %s (fresh optimizer)\n", from);
  if (resume && s.epoch >= to.epochs) printf("already trained (%d epochs): %s\n", s.epoch, from);
  else if (resume)
    printf("resuming at epoch %d, batch %d (step %lld)%s\n", s.epoch + 1, s.batch, (long long)s.step,
           s.scaler.enabled && to.precision != ATTN_PREC_F16
               ? "; the checkpoint's fp16 loss scaler is dropped (not an fp16 run)" : "");
  if (resume && s.scaler.enabled && to.precision == ATTN_PREC_F16)
    printf("fp16 loss scaler restored: scale %g, %lld good steps since its last change, "
           "%lld of %lld steps skipped\n", (double)s.scaler.scale,
           (long long)s.scaler.growth_tracker, (long long)s.scaler.skipped,
           (long long)s.scaler.steps);
  if (mkdirs(dir)) {
    cli_syserr(dir, "cannot create the folder");
    goto done;
  }
  char *cfg = NULL;
  attn_clf_config_to_json(&m->c, &cfg);
  printf("model: %s, %lld parameters\n", cfg ? cfg : "", (long long)m->p.numel);
  free(cfg);
  char ema_note[64] = "";
  if (to.ema > 0 || s.ema.avg)
    snprintf(ema_note, sizeof ema_note, ", weight EMA %g", to.ema > 0 ? to.ema : s.ema.decay);
  attn_tok_set tr = attn_clf_data_set(d, ATTN_SPLIT_TRAIN), va = attn_clf_data_set(d, ATTN_SPLIT_VAL);
  printf("training: %d epochs of %d batches of %d, lr %g (warm-up %g, cosine to %g), AdamW wd %g, "
         "clip %g, dropout %g (attention %g), label smoothing %g, token dropout %g%s, seed %llu, %d threads%s, %s%s\n",
         to.epochs, (tr.n + to.batch - 1) / to.batch, to.batch, to.lr, to.warmup_frac,
         to.min_lr, to.weight_decay, to.clip, (double)m->c.dropout,
         (double)(m->c.attn_dropout >= 0.0f ? m->c.attn_dropout : m->c.dropout), (double)to.label_smoothing,
         (double)to.token_dropout, ema_note, (unsigned long long)to.seed, attn_get_num_threads(),
         to.ckpt_acts ? ", checkpointing activations" : "",
         attn_precision_name(to.precision),
         !to.qat ? "" : to.qat_act == ATTN_QAT_ACT_ROW ? ", QAT (activations per row)"
                                                      : ", QAT (activations per tensor)");
  if (to.dist)
    printf("data parallel: each batch as %d shards (%s, %d process%s; docs/DISTRIBUTED.md)\n",
           attn_dist_shards(to.dist), attn_dist_kind(to.dist), attn_dist_size(to.dist),
           attn_dist_size(to.dist) > 1 ? "es" : "");
  fflush(stdout);
  if (s.epoch < to.epochs && attn_train_run(m, &opt, &to, &tr, &va, &s, meta, NULL, 0)) {
    cli_fail(NULL);
    goto done;
  }
  int end_at = o->rp.on ? o->rp.next.stop : to.epochs;   // re-planned: it may end early
  if (s.epoch < end_at) {
    if (o->dir_members > 1)
      printf("stopped at step %lld; continue with: attn train --resume --out %s ...\n",
             (long long)s.step, o->out);
    else
      printf("stopped at step %lld; continue with: attn train --resume %s/last.safetensors ...\n",
             (long long)s.step, dir);
    *stopped = 1;
    rc = 0;
    goto done;
  }
  char best_at[32];
  if (s.best_epoch == ATTN_TRAIN_BEST_START) snprintf(best_at, sizeof best_at, "the starting model");
  else snprintf(best_at, sizeof best_at, "epoch %d", s.best_epoch + 1);
  if (s.epoch < to.epochs)
    printf("ended after %d of its %d epochs (re-planned to fit the budget; its schedule stays "
           "that of %d)\n",
           s.epoch, to.epochs, to.epochs);
  printf("trained %d epochs in %.0f s; best: %s (val %s %.4f)\n", s.epoch, s.seconds, best_at,
         to.select_by_acc ? "acc" : "loss", to.select_by_acc ? -s.best : s.best);
  rc = 0;
done:
  attn_adam_free(&opt);
  attn_train_state_free(&s);
  return rc;
}

/* The members' best checkpoints; an ensemble's written as OUT/best.safetensors. */
static int load_best(const train_opts *o, const attn_st *meta, attn_clf_ens *e) {
  int n = o->to.members;
  char path[4200];
  e->m = calloc((size_t)n, sizeof *e->m);
  if (!e->m) return cli_error(NULL, "out of memory");
  for (int k = 0; k < n; k++) {
    member_dir(o, k, "best.safetensors", path, sizeof path);
    if (attn_clf_load(path, &e->m[k], NULL)) return cli_fail(path);
    e->n++;
  }
  snprintf(path, sizeof path, "%s/best.safetensors", o->out);
  if ((n > 1 || o->dir_members > 1) && attn_clf_ens_save(path, e->m, n, meta))
    return cli_fail(path);
  printf("\nbest checkpoint: %s%s\n", path, n > 1 ? " (the ensemble of the members' best)" : "");
  return 0;
}

static int run(train_opts *o, const char *model_path) {
  if (o->threads > 0) attn_set_num_threads(o->threads);
  char split_path[4096], path[4200];
  if (o->split) snprintf(split_path, sizeof split_path, "%s", o->split);
  else snprintf(split_path, sizeof split_path, "%s/split-seed%llu.tsv", o->data, o->split_seed);
  int rc = 1, K = o->to.members;
  o->dir_members = K;  // the members asked for (a time budget may change the count)
  attn_corpus *c = NULL;
  attn_bpe *bpe = NULL;
  attn_clf_ens ens = {0, NULL}; /* eval: the model; training: the members' best */
  attn_clf m;
  memset(&m, 0, sizeof m);
  attn_clf_data d;
  memset(&d, 0, sizeof d);
  attn_st *meta = NULL, *file = NULL;
  const char *from = model_path;
  if (!from && o->resume) {
    if (o->resume[0] && K > 1) {
      cli_usage("an ensemble (--members %d) resumes from its folder: --resume "
                      "without a file, --out %s", K, o->out);
      return 2;
    }
    if (o->resume[0]) from = o->resume;
    else {
      member_dir(o, 0, "last.safetensors", path, sizeof path);
      from = path;
    }
  }
  if (from) {  // model, config and tokenizer from the checkpoint
    if (model_path ? attn_clf_ens_load(from, &ens, &file) : attn_clf_load(from, &m, &file)) {
      cli_fail(from);
      goto done;
    }
    const char *tok = attn_st_meta(file, "tokenizer");
    if (!tok || attn_bpe_load(tok, &bpe)) {
      cli_error(from, "no usable \"tokenizer\" metadata");
      goto done;
    }
    const attn_clf *first = model_path ? &ens.m[0] : &m;
    if (ens.n > 1) printf("model: %s (an ensemble of %d, %lld parameters each)\n", from, ens.n,
                          (long long)first->p.numel);
    else printf("model: %s (%lld parameters)\n", from, (long long)first->p.numel);
    o->mc = first->c;  // fresh members of a resumed ensemble: the same config
  }
  // the corpus is read as the model reads mail (its config's headers)
  if (attn_clf_corpus_open(o->data, split_path, o->split_seed, attn_clf_mail_flags(&o->mc), stdout, &c)) {
    cli_fail(o->data);
    goto done;
  }
  if (!from) {
    double t0 = attn_bench_now();
    if (attn_clf_bpe_train(c, o->vocab, &bpe)) {
      cli_fail(NULL);
      goto done;
    }
    printf("tokenizer: byte-level BPE, %d merges (vocab %d), learned on the training split in %.1f s\n",
           attn_bpe_n_merges(bpe), attn_bpe_vocab_size(bpe), attn_bench_now() - t0);
    o->mc.vocab = attn_bpe_vocab_size(bpe);
  }
  if (attn_clf_data_make(&d, c, bpe, o->mc.max_len, o->mc.tail)) {
    cli_fail(NULL);
    goto done;
  }
  long tokens = 0, trunc = 0;
  for (int i = 0; i < d.n; i++) tokens += d.lens[i], trunc += d.lens[i] == o->mc.max_len;
  printf("tokens: %.1f per message on average (%ld of %d messages cut at %lld)\n", (double)tokens / d.n,
         trunc, d.n, (long long)o->mc.max_len);
  if (o->bench_varlen > 0) {  // padded vs packed on this run's batches, then stop
    attn_tok_set tr = attn_clf_data_set(&d, ATTN_SPLIT_TRAIN);
    rc = cli_train_bench_varlen(&o->mc, from ? &m : NULL, &o->to, &tr, o->bench_varlen);
    goto done;
  }
  if (o->eval_only) {
    attn_nn_ctx ectx;
    for (int k = 0; k < ens.n; k++) ens.m[k].varlen = o->to.varlen;
    rc = eval_precision(ens.m, ens.n, &d, o, &ectx);
    if (!rc) rc = finish(ens.m, ens.n, &ectx, &d, bpe, o);
    goto done;
  }
  attn_train_eta eta;
  memset(&eta, 0, sizeof eta);
  if (plan_run(o, &d, o->resume && !o->init_only, &eta)) goto done;
  if (o->to.dist) {  // every rank trains rank 0's plan (the probe's choice is timed)
    int64_t plan[3] = {o->to.precision, o->to.members, o->to.epochs};
    if (attn_dist_bcast_i64(o->to.dist, plan, 3)) {
      cli_fail("the plan");
      goto done;
    }
    o->to.precision = (attn_precision)plan[0];
    o->to.members = (int)plan[1];
    o->to.epochs = (int)plan[2];
  }
  K = o->to.members;
  char *tok = NULL;
  if (attn_st_new(&meta) || attn_bpe_save(bpe, &tok) || attn_st_set_meta(meta, "tokenizer", tok) ||
      attn_st_set_meta(meta, "labels", "ham,spam")) {
    free(tok);
    cli_fail(NULL);
    goto done;
  }
  free(tok);
  char sj[128];
  snprintf(sj, sizeof sj, "%llu", o->split_seed);
  attn_st_set_meta(meta, "split.seed", sj);
  attn_st_set_meta(meta, "split.file", split_path);
  char *oj = NULL;  // so that --resume goes on with these options
  if (attn_train_opts_to_json(&o->to, &oj) || attn_st_set_meta(meta, "train.options", oj)) {
    free(oj);
    cli_fail(NULL);
    goto done;
  }
  free(oj);
  for (int k = 0; k < K; k++) {
    int stopped = 0, resume = 0;
    const char *mfrom = NULL;
    char last[4200];
    if (k == 0 && from) {  // loaded above: --resume, or --init's starting weights
      mfrom = from;
      resume = !o->init_only;
    } else if (o->resume && !o->init_only) {  // an ensemble's later members: where they got to
      member_dir(o, k, "last.safetensors", last, sizeof last);
      if (file_exists(last)) {
        if (attn_clf_load(last, &m, NULL)) {
          cli_fail(last);
          goto done;
        }
        mfrom = last;
        resume = 1;
      }
    }
    if (o->rp.on) {  // a re-planned run: this member's epochs are the plan's now
      if (k > 0) o->to.epochs = o->rp.next.epochs;
      o->rp.pos.member = k;
      o->rp.pos.sched = o->to.epochs;
      o->rp.pos.done = 0;
      o->rp.next.stop = o->to.epochs;
      /* what a resume goes on with: this member's epochs, and the members asked for
       * (their folders; a resumed run has no budget and trains them all) */
      attn_train_opts tj = o->to;
      tj.members = o->dir_members;
      char *oj2 = NULL;
      if (attn_train_opts_to_json(&tj, &oj2) || attn_st_set_meta(meta, "train.options", oj2)) {
        free(oj2);
        cli_fail(NULL);
        goto done;
      }
      free(oj2);
    }
    if (train_member(o, k, &m, mfrom, resume, &d, meta, &eta, &stopped)) goto done;
    if (o->rp.on) {
      o->rp.steps_before += (int64_t)o->rp.next.stop * o->rp.p.batches;
      K = o->to.members = o->rp.next.members;
    }
    attn_clf_free(&m);
    memset(&m, 0, sizeof m);
    if (stopped) {
      rc = 0;
      goto done;
    }
  }
  if (attn_dist_rank(o->to.dist) > 0) {  // rank 0 evaluates and reports
    rc = 0;
    goto done;
  }
  if (load_best(o, meta, &ens)) goto done;
  for (int k = 0; k < ens.n; k++) ens.m[k].varlen = o->to.varlen;
  if (ens.n > 1) {  // the ensemble on the validation split, as the epoch lines show each member
    attn_tok_set va = attn_clf_data_set(&d, ATTN_SPLIT_VAL);
    double vl = 0, vacc = 0;
    if (attn_clf_evaluate_members(ens.m, ens.n, &va, o->to.eval_batch, &vl, &vacc, NULL, NULL)) {
      cli_fail(NULL);
      goto done;
    }
    printf("Ensemble of %d | Val Loss: %.4f | Val Acc: %.2f%%\n", ens.n, vl, 100.0 * vacc);
  }
  rc = finish(ens.m, ens.n, NULL, &d, bpe, o);
done:
  attn_clf_data_free(&d);
  attn_corpus_free(c);
  attn_bpe_free(bpe);
  attn_clf_free(&m);
  attn_clf_ens_free(&ens);
  attn_st_free(meta);
  attn_st_free(file);
  return rc;
}

/* The nn layer allocates its saved activations afresh every step (MBs each):
 * keep freed memory in the heap instead of fresh mmaps (page faults and
 * zeroing every step; ~7-10 % of a training step's CPU time). */
void cli_keep_freed_memory(void) {
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD) && defined(M_TOP_PAD)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
#endif
}

/* --resume: the run goes on with the options it was started with (the
 * checkpoint's "train.options"), then the command line's on top; the ones
 * that differ from the checkpoint's are named (the run then no longer
 * continues identically). Checkpoints without them: the command line. */
static int resume_options(int argc, char **argv, train_opts *o) {
  char path[4096];
  if (o->resume[0]) snprintf(path, sizeof path, "%s", o->resume);
  else snprintf(path, sizeof path, "%s/last.safetensors", o->out);
  if (!o->resume[0] && !file_exists(path))  // an ensemble: its first member's
    snprintf(path, sizeof path, "%s/member1/last.safetensors", o->out);
  attn_st *f = NULL;
  if (attn_st_load(path, &f)) return cli_fail(path);
  const char *json = attn_st_meta(f, "train.options");
  if (!json) {
    printf("%s holds no training options (an older checkpoint): those of the command line and "
           "the defaults apply; pass the run's own to continue it identically\n", path);
    attn_st_free(f);
    return 0;
  }
  train_opts saved;
  defaults(&saved);
  saved.to.members = 1;  // a run from before ensembles (no "members") trained one model
  int rc = attn_train_opts_from_json(json, &saved.to) ? (cli_fail(path), 1) : 0;
  saved.prec_auto = 0;  // the run's own precision, unless the command line says auto
  attn_st_free(f);
  if (rc) return rc;
  train_opts mine = saved;
  if (parse(argc, argv, &mine, train_opts_table, NULL)) return 2;
  char *a = NULL, *b = NULL;
  json_value *va = NULL, *vb = NULL;
  char err[64];
  int differ = 0;
  if (!attn_train_opts_to_json(&saved.to, &a) && !attn_train_opts_to_json(&mine.to, &b) &&
      !attn_json_parse(a, strlen(a), &va, err, sizeof err) &&
      !attn_json_parse(b, strlen(b), &vb, err, sizeof err)) {
    for (size_t i = 0; i < va->count; i++) {  // the same keys in the same order
      const json_value *x = &va->items[i], *y = &vb->items[i];
      if (x->type == JSON_STRING ? !strcmp(x->str, y->str) : x->number == y->number) continue;
      if (!differ++)
        printf("resuming with options that differ from the run's own (it will not continue "
               "identically):\n");
      if (x->type == JSON_STRING) printf("  %s: %s -> %s\n", va->keys[i], x->str, y->str);
      else printf("  %s: %g -> %g\n", va->keys[i], x->number, y->number);
    }
  }
  if (!differ) printf("resuming with the run's own training options\n");
  attn_json_free(va);
  attn_json_free(vb);
  free(a);
  free(b);
  *o = mine;
  return 0;
}

int attn_cmd_train(int argc, char **argv) {
  double t_start = attn_train_now();
  cli_keep_freed_memory();
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--bench")) {  // attn train --bench ARGS == attn bench train ARGS
      argv[i] = argv[0];
      return attn_bench_train_main(argc - i, argv + i);
    }
  train_opts o;
  defaults(&o);
  int r = parse(argc, argv, &o, train_opts_table, NULL);
  if (r) return r == 1 ? 0 : 2;
  attn_dist *dist = NULL;  // mpirun, or --shards: docs/DISTRIBUTED.md
  if (attn_dist_run_open(&dist, o.shards, "train")) return 1;
  if (o.resume && !o.init_only && (r = resume_options(argc, argv, &o)))
    return attn_dist_run_close(dist, r, "train");
  o.t_start = t_start;
  if (o.init_only && o.to.members > 1) {
    cli_usage("--init starts one model; train an ensemble's members from scratch");
    return attn_dist_run_close(dist, 2, "train");
  }
  o.to.dist = attn_dist_shards(dist) > 1 ? dist : NULL;
  if (attn_dist_rank(dist) > 0) o.to.progress = 2;
  return attn_dist_run_close(dist, run(&o, NULL), "train");
}

int attn_cmd_eval(int argc, char **argv) {
  train_opts o;
  defaults(&o);
  o.prec_auto = 0; /* eval: f32 unless --precision says otherwise */
  o.to.precision = ATTN_PREC_F32;
  const char *model = NULL;
  int r = parse(argc, argv, &o, eval_opts_table, &model);
  if (r) return r == 1 ? CLI_OK : CLI_USAGE;
  if (!model) return cli_usage("expected MODEL (usage: attn eval MODEL [options]; see attn eval --help)");
  o.eval_only = 1;
  return run(&o, model);
}
