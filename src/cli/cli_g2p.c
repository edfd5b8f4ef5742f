/* attn g2p: grapheme-to-phoneme on CMUdict (docs/G2P.md): split, train,
 * eval, predict. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/seq2seq/g2p_attention.h"
#include "apps/seq2seq/g2p_budget.h"
#include "apps/seq2seq/g2p_eval.h"
#include "apps/seq2seq/g2p_precision.h"
#include "apps/seq2seq/g2p_rescore.h"
#include "apps/seq2seq/g2p_train.h"
#include "apps/train/train_plan.h"
#include "attn/kernels.h"
#include "cli/cli_g2p_models.h"
#include "cli/cli_outpath.h"
#include "cli/commands.h"

#define DEFAULT_DATA "data/cmudict"

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: attn g2p split [--data PATH] [--out FILE]   the word-level train/val/test split\n"
      "       attn g2p train [options] --out DIR          train; OUT/best.safetensors is the "
      "model\n"
      "       attn g2p eval MODEL [options]               WER / PER on val and test\n"
      "       attn g2p predict MODEL WORD...              ARPAbet for each word\n"
      "       attn g2p average --out FILE MODEL...       the mean of a run's checkpoints\n"
      "data:\n"
      "  --data PATH       dict.txt of CMUdict, or its folder (default " DEFAULT_DATA
      "; tools/fetch_cmudict.sh)\n"
      "model (train):\n"
      "  --dim E --heads H --ff F --layers N   (default 128 4 512 3: N encoder and N decoder "
      "layers)\n"
      "  --enc-layers N --dec-layers N  --dropout P (0)  --untied (own output projection)\n"
      "  --no-stress       phonemes without stress digits (39 + specials; the file says so:\n"
      "                    eval scores it with stress removed, predict writes AH, not AH0)\n"
      "  --reverse         a right-to-left model: it writes the last phoneme first (for\n"
      "                    --rescore; eval and predict put its output back in order)\n"
      "  --both-directions one model trained left to right and right to left (each\n"
      "                    pronunciation both ways: epochs twice as long); it decodes left\n"
      "                    to right and rescores its own beam: --rescore with the same file\n"
      "training:\n"
      "  --epochs N (10) --batch B (128) --lr LR (1.5e-3) --min-lr LR (1e-5) --warmup STEPS (4 "
      "%%)\n"
      "  --batch-tokens N  batches by a budget of N padded tokens (a word costs the longer of\n"
      "                    its letters and phonemes + 1; sorted by length) instead of --batch\n"
      "  --schedule cosine|inv-sqrt  after the linear warm-up: cosine decay to --min-lr over\n"
      "                    the run (default), or lr * sqrt(warmup / step)\n"
      "  --smoothing S (0.1) --weight-decay W (0.01) --clip C (1) --seed S (1)\n"
      "  --resume          continue OUT/last.safetensors (the same options give the same bits)\n"
      "  --max-steps N     stop after global step N (OUT/last.safetensors then resumes)\n"
      "  --save-every N    also write OUT/last.safetensors every N steps\n"
      "  --keep-epochs     also keep each epoch's model, OUT/epoch_NNN.safetensors (for\n"
      "                    attn g2p average and selection by decoding the validation set)\n"
      "  --train-words N   only the first N training words (quick checks)\n"
      "  --time-budget SECONDS  at most the epochs (of --epochs) that fit: a probe of this\n"
      "                    model's step on this machine gives an epoch's seconds; the run's\n"
      "                    schedule is set for the epochs chosen (not with --resume)\n"
      "  --shards K        each batch as K shards of consecutive words, one thread each\n"
      "                    where there are threads (data parallelism: the small model's\n"
      "                    kernels scale poorly over cores), gradients added in shard order\n"
      "                    (the same bits for any thread count; not 1 shard's bits)\n"
      "  --progress auto|bar|plain|quiet\n"
      "  --bench STEPS     no training run: time STEPS steps (after one warm-up), print tokens/s\n"
      "                    and write the batches to OUT/bench_batches.bin for\n"
      "                    tools/bench_g2p_torch.py (make bench-g2p)\n"
      "eval / predict:\n"
      "  --split val|test|both (both)  --worst N (10)  --limit N (first N words)  --batch B (128)\n"
      "  --beam K          beam search of width K (default 1: greedy)\n"
      "  --n-best N        predict: the N best hypotheses of each word with their scores (1..K)\n"
      "  --length-penalty A  rank finished hypotheses by logp / ((5 + len) / 6)^A (0.6; 0: none)\n"
      "  --ensemble F[,F...]  decode with MODEL and these models together: each step the\n"
      "                    mean of their probabilities (the same graphemes; up to 16 models)\n"
      "  --rescore R[,R...]  right-to-left models (--reverse, or --both-directions: MODEL\n"
      "                    itself) score each of the beam's K hypotheses; logp + W * their\n"
      "                    logp picks (needs --beam K >= 2)\n"
      "  --rescore-weight W  (1)\n"
      "  --save-attention OUT.safetensors  predict: the cross attention of every decoder\n"
      "                    layer and head on each word's (best) output, phonemes down, letters\n"
      "                    across, for attn viz / attn diagnose; with several words one file\n"
      "                    per word, OUT_<word>.safetensors (docs/G2P.md)\n"
      "all:\n"
      "  --precision auto|f32|bf16  Linears (and flash attention in training) in bf16 with f32\n"
      "                    master weights; auto (train's default; eval / predict: f32) takes bf16\n"
      "                    only where a bf16 unit runs it and a probe measures >= 1.1x f32\n"
      "  --threads T       threads (default: all cores; results do not depend on it)\n");
}

static const cli_opt opts[] = {{"--data", CLI_VALUE},
                               {"--out", CLI_VALUE},
                               {"--dim", CLI_VALUE},
                               {"--heads", CLI_VALUE},
                               {"--ff", CLI_VALUE},
                               {"--layers", CLI_VALUE},
                               {"--enc-layers", CLI_VALUE},
                               {"--dec-layers", CLI_VALUE},
                               {"--dropout", CLI_VALUE},
                               {"--untied", CLI_FLAG},
                               {"--epochs", CLI_VALUE},
                               {"--batch", CLI_VALUE},
                               {"--lr", CLI_VALUE},
                               {"--min-lr", CLI_VALUE},
                               {"--warmup", CLI_VALUE},
                               {"--smoothing", CLI_VALUE},
                               {"--weight-decay", CLI_VALUE},
                               {"--clip", CLI_VALUE},
                               {"--seed", CLI_VALUE},
                               {"--resume", CLI_FLAG},
                               {"--max-steps", CLI_VALUE},
                               {"--save-every", CLI_VALUE},
                               {"--train-words", CLI_VALUE},
                               {"--progress", CLI_VALUE},
                               {"--split", CLI_VALUE},
                               {"--worst", CLI_VALUE},
                               {"--limit", CLI_VALUE},
                               {"--threads", CLI_VALUE},
                               {"--beam", CLI_VALUE},
                               {"--n-best", CLI_VALUE},
                               {"--length-penalty", CLI_VALUE},
                               {"--precision", CLI_VALUE},
                               {"--bench", CLI_VALUE},
                               {"--save-attention", CLI_VALUE},
                               {"--keep-epochs", CLI_FLAG},
                               {"--ensemble", CLI_VALUE},
                               {"--time-budget", CLI_VALUE},
                               {"--no-stress", CLI_FLAG},
                               {"--reverse", CLI_FLAG},
                               {"--both-directions", CLI_FLAG},
                               {"--batch-tokens", CLI_VALUE},
                               {"--shards", CLI_VALUE},
                               {"--schedule", CLI_VALUE},
                               {"--rescore", CLI_VALUE},
                               {"--rescore-weight", CLI_VALUE},
                               {NULL, 0}};

typedef struct {
  const char *data, *out, *split;
  const char *save; /* --save-attention */
  const char *ensemble; /* --ensemble FILE[,FILE...] */
  const char *rescore;  /* --rescore FILE[,FILE...] */
  float rescore_weight; /* --rescore-weight W */
  int model_opt;        /* an option that shapes a new model (train only) */
  int resume, threads, worst, limit, batch, train_words, n_best_set;
  int prec_set, prec_auto; /* --precision given; auto */
  int bench;               /* --bench STEPS */
  double time_budget;      /* --time-budget SECONDS (0: none) */
  double t_start;          /* when the command started (attn_train_now) */
  attn_precision prec;
  attn_g2p_config mc;
  attn_g2p_decode_opts dec;
  attn_g2p_train_opts to;
  const char *args[4096];
  int nargs;
} g2p_opts;

static int set_opt(g2p_opts *o, const char *k, const char *v) {
  double d = 0;
  int r = CLI_OK;
#define INT(name, lo, hi, field)                                                                   \
  if (!strcmp(k, name)) {                                                                          \
    if (!(r = cli_parse_num(k, v, lo, hi, &d))) field = (__typeof__(field))d;                      \
    return r;                                                                                      \
  }
  if (!strcmp(k, "--n-best")) o->n_best_set = 1;
  if (!strcmp(k, "--data")) o->data = v;
  else if (!strcmp(k, "--out")) o->out = v;
  else if (!strcmp(k, "--save-attention")) o->save = v;
  else if (!strcmp(k, "--ensemble")) o->ensemble = v;
  else if (!strcmp(k, "--split")) o->split = v;
  else if (!strcmp(k, "--rescore")) o->rescore = v;
  else if (!strcmp(k, "--untied")) o->mc.tied = 0;
  else if (!strcmp(k, "--no-stress")) o->mc.stress = 0, o->model_opt = 1;
  else if (!strcmp(k, "--reverse")) o->mc.reverse = 1, o->model_opt = 1;
  else if (!strcmp(k, "--both-directions"))
    o->mc.both = 1, o->model_opt = 1;
  else if (!strcmp(k, "--schedule")) {
    if (!strcmp(v, "cosine")) o->to.schedule = ATTN_SCHED_WARMUP_COSINE;
    else if (!strcmp(v, "inv-sqrt")) o->to.schedule = ATTN_SCHED_WARMUP_INV_SQRT;
    else return cli_usage("--schedule: cosine or inv-sqrt, not '%s'", v);
  }
  else if (!strcmp(k, "--resume")) o->resume = 1;
  else if (!strcmp(k, "--keep-epochs")) o->to.keep_epochs = 1;
  else if (!strcmp(k, "--precision")) {
    o->prec_set = 1;
    o->prec_auto = !strcmp(v, "auto");
    if (!o->prec_auto && (strcmp(v, "f32") && strcmp(v, "bf16")))
      return cli_usage("--precision: auto, f32 or bf16, not '%s'", v);
    if (!o->prec_auto) attn_precision_from_name(v, &o->prec);
  } else if (!strcmp(k, "--batch") && (r = cli_parse_num(k, v, 1, 1e5, &d)) == CLI_OK)
    o->to.batch = o->batch = o->dec.batch = (int)d;
  else if (!strcmp(k, "--layers")) {
    if (!(r = cli_parse_num(k, v, 1, 64, &d))) o->mc.enc_layers = o->mc.dec_layers = (int64_t)d;
  } else if (!strcmp(k, "--progress")) {
    const char *m[4] = {"plain", "bar", "quiet", "auto"};
    int i = 0;
    while (i < 4 && strcmp(v, m[i])) i++;
    if (i == 4) return cli_usage("--progress: auto, bar, plain or quiet, not '%s'", v);
    o->to.progress = i == 3 ? -1 : i;
  } else {
    INT("--dim", 2, 4096, o->mc.d_model)
    INT("--heads", 1, 256, o->mc.heads)
    INT("--ff", 1, 65536, o->mc.ff)
    INT("--enc-layers", 1, 64, o->mc.enc_layers)
    INT("--dec-layers", 1, 64, o->mc.dec_layers)
    INT("--dropout", 0, 0.99, o->mc.dropout)
    INT("--epochs", 1, 1e6, o->to.epochs)
    INT("--lr", 0, 10, o->to.lr)
    INT("--min-lr", 0, 10, o->to.min_lr)
    INT("--warmup", 0, 1e12, o->to.warmup)
    INT("--smoothing", 0, 0.99, o->to.smoothing)
    INT("--weight-decay", 0, 10, o->to.weight_decay)
    INT("--clip", 0, 1e9, o->to.clip)
    INT("--seed", 0, 1e15, o->to.seed)
    INT("--max-steps", 1, 1e15, o->to.stop_after)
    INT("--save-every", 1, 1e15, o->to.save_every)
    INT("--train-words", 1, 1e9, o->train_words)
    INT("--worst", 0, 1e6, o->worst)
    INT("--limit", 1, 1e9, o->limit)
    INT("--threads", 1, 4096, o->threads)
    INT("--beam", 1, 4096, o->dec.beam)
    INT("--bench", 1, 1e6, o->bench)
    INT("--n-best", 1, 4096, o->dec.n_best)
    INT("--length-penalty", 0, 100, o->dec.alpha)
    INT("--time-budget", 1, 1e9, o->time_budget)
    INT("--batch-tokens", 1, 1e9, o->to.batch_tokens)
    INT("--shards", 1, 64, o->to.shards)
    INT("--rescore-weight", 0, 1000, o->rescore_weight)
  }
#undef INT
  return r;
}

static int parse(int argc, char **argv, g2p_opts *o) {
  memset(o, 0, sizeof *o);
  o->t_start = attn_train_now();
  o->data = DEFAULT_DATA;
  o->split = "both";
  o->worst = 10;
  o->batch = 128;
  o->rescore_weight = 1.0f;
  attn_g2p_config_default(&o->mc);
  attn_g2p_train_opts_default(&o->to);
  attn_g2p_decode_opts_default(&o->dec);
  cli_args a;
  cli_args_init(&a, argc, argv, 2, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_ARG) {
      if (o->nargs == (int)(sizeof o->args / sizeof o->args[0])) return cli_usage("too many words");
      o->args[o->nargs++] = a.val;
    } else if ((r = set_opt(o, a.opt, a.val)) != CLI_OK) {
      return r;
    }
  }
  if (r == CLI_HELP) usage(stdout);
  if (r < 0) return cli_args_exit(r) == CLI_OK ? -1 : CLI_USAGE;
  if (o->dec.n_best > o->dec.beam)
    return cli_usage("--n-best %d: at most the beam's width (--beam %d)", o->dec.n_best, o->dec.beam);
  if (o->threads > 0) attn_set_num_threads(o->threads);
  return CLI_OK;
}

/* --data: the file, or dict.txt in the folder */
static int load_dict(const char *data, attn_g2p_dict *d) {
  char path[4096];
  struct stat sb;
  if (!stat(data, &sb) && S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/dict.txt", data);
  else
    snprintf(path, sizeof path, "%s", data);
  if (stat(path, &sb))
    return cli_error(path, "no dictionary here (fetch it with tools/fetch_cmudict.sh)");
  if (attn_g2p_dict_load(path, d)) return cli_fail(NULL);
  if (d->skipped)
    cli_warn("%s: %d entr%s left out: the word is not printable ASCII (line %d)", path, d->skipped,
             d->skipped == 1 ? "y" : "ies", d->skipped_line);
  return CLI_OK;
}

static int cmd_split(g2p_opts *o) {
  attn_g2p_dict d;
  int r = load_dict(o->data, &d);
  if (r) return r;
  int w[3], p[3];
  attn_g2p_split_counts(&d, w, p);
  if (o->out && attn_g2p_split_write(&d, o->out)) r = cli_fail(o->out);
  for (int k = 0; !r && k < 3; k++)
    printf("%-5s %6d words %6d pronunciations\n", attn_g2p_split_name(k), w[k], p[k]);
  attn_g2p_dict_free(&d);
  return r;
}

static int mkdirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *s = buf + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(buf, 0777);
      *s = '/';
    }
  return mkdir(buf, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

/* The run's expected duration from a probe of its step here, and with
 * --time-budget (a fresh run) the epochs that fit what is left of it. Sets
 * o->to.epochs and eta; the lines go to plan (printed after the header). */
static attn_status plan_run(g2p_opts *o, const attn_g2p_model *m, const attn_g2p_set *tr,
                            const attn_g2p_set *va, attn_train_eta *eta, char *plan, size_t cap) {
  attn_g2p_cost c;
  attn_status st = attn_g2p_cost_probe(m, tr, va, &o->to, &c);
  if (st) return st;
  const double epoch = attn_g2p_cost_epoch_seconds(&c);
  char a[32], b[32], fit[320] = "";
  if (o->time_budget > 0 && o->resume) {
    snprintf(fit, sizeof fit, "g2p: --time-budget not applied to a resumed run (it goes on with "
             "its --epochs)\n");
  } else if (o->time_budget > 0) {
    const double left = o->time_budget - (attn_train_now() - o->t_start);
    const int want = o->to.epochs;
    o->to.epochs = attn_g2p_cost_fit(&c, left, want);
    attn_fmt_duration(a, sizeof a, left);
    snprintf(fit, sizeof fit, "g2p: time budget %.0f s, %s left: %d of %d epoch%s fit%s\n",
             o->time_budget, a, o->to.epochs, want, want > 1 ? "s" : "",
             o->to.epochs * epoch > left ? " (not even 1: it runs anyway)" : "");
  }
  attn_fmt_duration(a, sizeof a, (attn_train_now() - o->t_start) + o->to.epochs * epoch);
  attn_fmt_duration(b, sizeof b, epoch);
  snprintf(plan, cap,
           "%sg2p: expected duration ~%s%s: %d epoch%s of ~%s (%d steps, %.2fM tokens at %.1fk "
           "tokens/s; validation %.0fk tokens at %.1fk tokens/s; probe %.1f s)\n",
           fit, a, o->resume ? " for the whole run (a resumed run: less)" : "", o->to.epochs,
           o->to.epochs > 1 ? "s" : "", b, c.steps, c.train_tokens / 1e6,
           c.train_tokens_per_s / 1e3, c.val_tokens / 1e3, c.val_tokens_per_s / 1e3,
           c.probe_seconds);
  memset(eta, 0, sizeof *eta);
  eta->steps_total = (int64_t)o->to.epochs * c.steps;
  eta->predicted_s = o->to.epochs * epoch;
  o->to.eta = eta;
  return ATTN_OK;
}

static int cmd_train(g2p_opts *o) {
  if (!o->out) return cli_usage("train needs --out DIR");
  attn_g2p_dict d;
  int r = load_dict(o->data, &d);
  if (r) return r;
  attn_g2p_model m;
  attn_adam opt;
  attn_g2p_train_state s = {0};
  attn_g2p_set tr = {0}, va = {0};
  attn_status st = ATTN_OK;
  char last[4200];
  snprintf(last, sizeof last, "%s/last.safetensors", o->out);
  if (o->resume) {
    st = attn_g2p_train_resume(last, &o->to, &m, &opt, &s);
    if (st) {
      attn_g2p_dict_free(&d);
      return cli_fail(last);
    }
    if (o->model_opt &&
        (m.c.stress != o->mc.stress || m.c.reverse != o->mc.reverse || m.c.both != o->mc.both)) {
      r = cli_error(last,
                    "a %s, %s model: --resume goes on with it as it is (leave out "
                    "--no-stress / --reverse / --both-directions, or give them as it was "
                    "trained)",
                    m.c.stress ? "stressed" : "stress-free",
                    m.c.both      ? "both-directions"
                    : m.c.reverse ? "right-to-left"
                                  : "left-to-right");
      attn_adam_free(&opt);
      attn_g2p_free(&m);
      attn_g2p_dict_free(&d);
      return r;
    }
  } else {
    attn_g2p_graphemes g;
    attn_g2p_train_chars(&d, &g);
    st = attn_g2p_create(&m, &o->mc, &g);
    if (!st) st = attn_g2p_init(&m, o->to.seed);
    if (!st) st = attn_g2p_adam_init(&opt, &m, &o->to);
    if (st) {
      attn_g2p_dict_free(&d);
      if (!m.p.data) return cli_fail(NULL);
      attn_g2p_free(&m);
      return cli_fail(NULL);
    }
  }
  st = attn_g2p_set_make(&d, ATTN_G2P_TRAIN, &m.g, m.c.max_src, m.c.max_tgt, &tr);
  if (!st) st = attn_g2p_set_make(&d, ATTN_G2P_VAL, &m.g, m.c.max_src, m.c.max_tgt, &va);
  int merged = 0, merged_val = 0; /* --no-stress: pronunciations equal without stress */
  if (!st) attn_g2p_set_targets(&tr, (int)m.c.stress, (int)m.c.reverse, &merged);
  if (!st) attn_g2p_set_targets(&va, (int)m.c.stress, (int)m.c.reverse, &merged_val);
  if (!st && o->train_words > 0) {  // the first N words: cut after the last example of word N
    int words = 0, i = 0;
    for (; i < tr.n; i++) {
      words += i == 0 || tr.word[i] != tr.word[i - 1];
      if (words > o->train_words) break;
    }
    tr.n = i;
  }
  const int n_tr = tr.n, n_va = va.n; /* pronunciations (each twice for --both-directions) */
  if (!st && m.c.both) st = attn_g2p_set_both(&tr);
  if (!st && m.c.both) st = attn_g2p_set_both(&va);
  if (!st && mkdirs(o->out)) st = attn_set_error(ATTN_EIO, "cannot create '%s': %s", o->out, strerror(errno));
  char why[512], plan[1024] = "";
  attn_train_eta eta;
  if (!st) {
    o->to.precision = o->prec;
    st = attn_g2p_prec_train(&m, &tr, o->to.batch, o->to.shards, o->to.seed,
                             !o->prec_set || o->prec_auto, &o->to.precision, why, sizeof why);
  }
  if (!st && !o->bench) st = plan_run(o, &m, &tr, &va, &eta, plan, sizeof plan);
  if (!st) {
    o->to.out_dir = o->out;
    char shards_note[48] = "";
    if (o->to.shards > 1) snprintf(shards_note, sizeof shards_note, ", %d shards", o->to.shards);
    printf("g2p: %d training pronunciations (%d left out as too long), %d validation%s; "
           "%lld parameters\n"
           "g2p: d_model %lld, %lld heads, ff %lld, %lld + %lld layers, dropout %g, %s output; "
           "%d epochs of batch %d, lr %g, smoothing %g, seed %llu, %d threads%s%s\n",
           n_tr, tr.skipped, n_va, m.c.both ? ", each both ways" : "", (long long)m.p.numel,
           (long long)m.c.d_model, (long long)m.c.heads, (long long)m.c.ff,
           (long long)m.c.enc_layers, (long long)m.c.dec_layers, (double)m.c.dropout,
           m.c.tied ? "tied" : "untied", o->to.epochs, o->to.batch, o->to.lr,
           (double)o->to.smoothing, (unsigned long long)o->to.seed, attn_get_num_threads(),
           shards_note, o->resume ? ", resumed" : "");
    char batching[64];
    if (o->to.batch_tokens > 0)
      snprintf(batching, sizeof batching, "batches of up to %lld tokens",
               (long long)o->to.batch_tokens);
    else
      snprintf(batching, sizeof batching, "batches of %d words", o->to.batch);
    printf("g2p: targets %s, %s (%d + %d pronunciations equal without stress merged); %s, "
           "%s schedule\n",
           m.c.stress ? "with stress" : "without stress",
           m.c.both      ? "both ways (left to right from <s>, right to left from <unk>)"
           : m.c.reverse ? "right to left (last phoneme first)"
                         : "left to right",
           merged, merged_val, batching,
           o->to.schedule == ATTN_SCHED_WARMUP_INV_SQRT ? "warm-up + inverse square root"
                                                        : "warm-up + cosine");
    printf("g2p: precision %s (%s)\n%s", attn_precision_name(o->to.precision), why, plan);
    fflush(stdout);
    if (o->bench) {
      char dump[4200];
      double tokens = 0, secs = 0;
      snprintf(dump, sizeof dump, "%s/bench_batches.bin", o->out);
      st = attn_g2p_train_bench(&m, &opt, &tr, &o->to, o->bench, dump, &tokens, &secs);
      if (!st)
        printf("bench: attn %d steps, %.0f tokens in %.2f s: %.1f tokens/s (%s, %d threads); "
               "batches in %s\n",
               o->bench, tokens, secs, secs > 0 ? tokens / secs : 0.0,
               attn_precision_name(o->to.precision), attn_get_num_threads(), dump);
    } else {
      st = attn_g2p_train_run(&m, &opt, &s, &tr, &va, &o->to, NULL, 0);
    }
  }
  if (o->bench)
    ; /* no model: the bench line said it all */
  else if (!st && s.best_epoch > 0)
    printf("g2p: %s after step %lld; best validation loss %.4f (epoch %d): %s/best.safetensors\n",
           s.epoch >= o->to.epochs ? "done" : "stopped", (long long)s.step, s.best_val,
           s.best_epoch, o->out);
  else if (!st)
    printf("g2p: stopped after step %lld, before the first epoch ended (no model yet); "
           "--resume continues %s\n", (long long)s.step, last);
  r = st ? cli_fail(NULL) : CLI_OK;
  attn_g2p_set_free(&tr);
  attn_g2p_set_free(&va);
  attn_adam_free(&opt);
  attn_g2p_free(&m);
  attn_g2p_dict_free(&d);
  return r;
}

/* MODEL and --ensemble's files; with --rescore, the rescoring models in *rs */
static cli_g2p_models *models_load(const g2p_opts *o, cli_g2p_models **rs, int *r) {
  *rs = NULL;
  if (!o->args[0]) {
    *r = cli_usage("which model? (attn g2p eval|predict MODEL ...)");
    return NULL;
  }
  cli_g2p_models *e = cli_g2p_models_load(o->args[0], o->ensemble, "--ensemble", r);
  if (e && o->rescore) {
    *rs = cli_g2p_models_load(NULL, o->rescore, "--rescore", r);
    if (*rs && attn_g2p_rescore_check(e->ms, e->n, (*rs)->ms, (*rs)->n)) *r = cli_fail(o->rescore);
    if (*r) {
      cli_g2p_models_free(e);
      cli_g2p_models_free(*rs);
      e = *rs = NULL;
    }
  }
  return e;
}

static int cmd_eval(g2p_opts *o) {
  if (o->nargs != 1) return cli_usage("eval takes one MODEL");
  int sides[2] = {ATTN_G2P_VAL, ATTN_G2P_TEST}, from = 0, to = 2;
  if (!strcmp(o->split, "val")) to = 1;
  else if (!strcmp(o->split, "test")) from = 1;
  else if (strcmp(o->split, "both")) return cli_usage("--split: val, test or both, not '%s'", o->split);
  int r;
  cli_g2p_models *rs;
  cli_g2p_models *e = models_load(o, &rs, &r);
  if (!e) return r;
  const attn_g2p_model *m = e->ms[0];
  attn_g2p_dict d;
  if ((r = load_dict(o->data, &d))) {
    cli_g2p_models_free(e);
    cli_g2p_models_free(rs);
    return r;
  }
  if (e->n > 1) printf("ensemble of %d models (the mean of their probabilities)\n", e->n);
  if (!m->c.stress)
    printf("a stress-free model (--no-stress): scored with stress removed only\n");
  if (m->c.reverse) printf("a right-to-left model (--reverse): its output read back in order\n");
  if (m->c.both)
    printf("a both-directions model (--both-directions): decoded left to right%s\n",
           rs ? "" : " (--rescore with the same file: its right-to-left pass rescores)");
  if (rs)
    printf("the beam's %d hypotheses rescored by %d right-to-left model%s: logp + %g x theirs\n",
           o->dec.beam, rs->n, rs->n > 1 ? "s" : "", (double)o->rescore_weight);
  for (int k = from; !r && k < to; k++) {
    attn_g2p_set set;
    attn_g2p_eval_result res;
    if (attn_g2p_set_make(&d, sides[k], &m->g, m->c.max_src, m->c.max_tgt, &set)) {
      r = cli_fail(NULL);
      break;
    }
    attn_nn_ctx ctx = {.precision = o->prec};
    char why[512];
    if (o->prec_set && k == from) {
      const int32_t *ws[32];
      for (int i = 0; i < set.n && i < 32; i++) ws[i] = set.src[i];
      if (attn_g2p_prec_infer(m, ws, set.src_len, set.n, o->prec_auto, &o->prec, why, sizeof why)) {
        r = cli_fail(NULL);
        attn_g2p_set_free(&set);
        break;
      }
      printf("precision: %s (%s)\n", attn_precision_name(o->prec), why);
      ctx.precision = o->prec;
    }
    if (attn_g2p_evaluate_rescored(e->ms, e->n, rs ? rs->ms : NULL, rs ? rs->n : 0,
                                   o->rescore_weight, &ctx, &o->dec, &set, o->limit, &res)) {
      r = cli_fail(NULL);
    } else {
      printf("%-4s decoding: %d words in %.2f s: %.0f words/s (%s %d, batch %d, %d threads)\n",
             attn_g2p_split_name(sides[k]), res.nwords, res.decode_seconds,
             res.decode_seconds > 0 ? res.nwords / res.decode_seconds : 0.0,
             o->dec.beam > 1 ? "beam" : "greedy, beam", o->dec.beam, o->dec.batch,
             attn_get_num_threads());
      char ws[16] = "   --", ps[16] = "   --"; /* a stress-free model has no stress to score */
      if (res.stress) {
        snprintf(ws, sizeof ws, "%5.2f", 100 * attn_g2p_wer(&res.stress_score));
        snprintf(ps, sizeof ps, "%5.2f", 100 * attn_g2p_per(&res.stress_score));
      }
      printf("%-4s %6d words  WER %s %%  PER %s %%   "
             "stress removed: WER %5.2f %%  PER %5.2f %%%s\n",
             attn_g2p_split_name(sides[k]), res.nwords, ws, ps, 100 * attn_g2p_wer(&res.no_stress),
             100 * attn_g2p_per(&res.no_stress), set.skipped ? " (longer words left out)" : "");
      if (o->worst > 0 && k == to - 1) {
        printf("\nworst errors (%s, edits per reference phoneme):\n", attn_g2p_split_name(sides[k]));
        attn_g2p_print_worst(stdout, &res, &set, &d, m->c.max_tgt, o->worst);
      }
      attn_g2p_eval_result_free(&res);
    }
    attn_g2p_set_free(&set);
  }
  attn_g2p_dict_free(&d);
  cli_g2p_models_free(e);
  cli_g2p_models_free(rs);
  return r;
}

/* --save-attention: each word's cross attention on its best output, one
 * file per word when there are several (OUT_<word>.safetensors). */
static int save_attention(const g2p_opts *o, const attn_g2p_model *m, const attn_nn_ctx *ctx,
                          const int32_t *const *src, const int32_t *sl, const attn_g2p_hyps *h) {
  const int n = o->nargs - 1;
  cli_stems stems = {calloc((size_t)n, sizeof(char *)), 0};
  int r = stems.stems ? CLI_OK : cli_error(NULL, "out of memory");
  char decoding[64], phones[1024], file[4400];
  if (o->dec.beam > 1) snprintf(decoding, sizeof decoding, "beam %d, the best", o->dec.beam);
  else snprintf(decoding, sizeof decoding, "greedy");
  for (int i = 0; !r && i < n; i++) {
    const char *word = o->args[i + 1], *stem = cli_stem(&stems, word, 0);
    const int64_t j = (int64_t)i * h->n_best;
    const int len = h->count[i] > 0 ? h->len[j] : 0;
    int32_t ph[4096]; /* in the order the decoder wrote them (right to left: last first) */
    for (int t = 0; t < len && t < 4096; t++)
      ph[t] = h->ph[j * h->max_tgt + (m->c.reverse ? len - 1 - t : t)];
    attn_g2p_phones_format(ph, len, (int)m->c.stress, phones, sizeof phones);
    if (!stem) {
      r = cli_error(NULL, "out of memory");
      break;
    }
    if (cli_out_name(file, sizeof file, o->save, n > 1, stem)) {
      r = cli_error(NULL, "--save-attention %s: name too long", o->save);
      break;
    }
    const char *kv[] = {"model.file", o->args[0], "word", word, "prediction", phones,
                        "decoding", decoding, NULL};
    attn_g2p_cross c;
    attn_status st = attn_g2p_cross_attention(m, ctx, src[i], sl[i], ph, len,
                                              len < m->c.max_tgt - 1, &c);
    if (!st) st = attn_g2p_cross_save(file, &c, kv);
    if (st) r = cli_fail(file);
    else
      fprintf(stderr, "attn g2p predict: %s: cross attention (%lld layer(s) x %lld head(s), %lld "
                      "output x %lld letters) saved to %s (attn viz / attn diagnose read it)\n",
              word, (long long)c.layers, (long long)c.heads, (long long)c.l_out,
              (long long)c.l_src, file);
    attn_g2p_cross_free(&c);
  }
  cli_stems_free(&stems);
  return r;
}

static int cmd_average(g2p_opts *o) {
  if (o->nargs < 1) return cli_usage("average takes one or more MODEL files");
  if (!o->out) return cli_usage("average needs --out FILE (the averaged model)");
  if (cli_out_file_ready("--out", o->out)) return CLI_FAILED;
  attn_g2p_model m;
  if (attn_g2p_average((const char *const *)o->args, o->nargs, &m)) return cli_fail(NULL);
  char n[32];
  snprintf(n, sizeof n, "%d", o->nargs);
  const char *kv[] = {"g2p.averaged_checkpoints", n, NULL};
  int r = attn_g2p_save(o->out, &m, NULL, kv) ? cli_fail(o->out) : CLI_OK;
  if (!r) printf("g2p: the mean of %d model(s) (%lld parameters) written to %s\n", o->nargs,
                 (long long)m.p.numel, o->out);
  attn_g2p_free(&m);
  return r;
}

static int cmd_predict(g2p_opts *o) {
  if (o->nargs < 2) return cli_usage("predict takes MODEL and at least one WORD");
  if ((o->ensemble || o->rescore) && o->save)
    return cli_usage("--save-attention saves one model's cross attention: not with --ensemble "
                     "or --rescore");
  int r;
  cli_g2p_models *rs;
  cli_g2p_models *e = models_load(o, &rs, &r);
  if (!e) return r;
  const attn_g2p_model *m = e->ms[0];
  int n = o->nargs - 1;
  int32_t *ids = malloc((size_t)((int64_t)n * m->c.max_src) * sizeof *ids);
  const int32_t **src = malloc((size_t)n * sizeof *src);
  int32_t *sl = malloc((size_t)n * sizeof *sl);
  if (!ids || !src || !sl) r = cli_error(NULL, "out of memory");
  // every word is checked before anything is printed
  for (int i = 0; !r && i < n; i++) {
    const char *w = o->args[i + 1];
    size_t len = strlen(w);
    if (len == 0) {
      r = cli_error(NULL, "word %d is empty", i + 1);
    } else if ((int64_t)len > m->c.max_src) {
      r = cli_error(NULL, "word %d has %zu characters; this model reads words of 1 to %lld", i + 1,
                    len, (long long)m->c.max_src);
    } else {
      src[i] = ids + (int64_t)i * m->c.max_src;
      sl[i] = (int32_t)len;
      if (attn_g2p_graphemes_encode(&m->g, w, (int)len, ids + (int64_t)i * m->c.max_src)) {
        int k = 0;
        while (ids[(int64_t)i * m->c.max_src + k] != ATTN_G2P_UNK) k++;
        unsigned char c = (unsigned char)w[k];
        if (c >= 0x20 && c < 0x7f)
          r = cli_error(NULL, "'%s': character '%c' was never seen in training", w, c);
        else
          r = cli_error(NULL, "'%.64s': byte 0x%02x was never seen in training (the model reads "
                              "the dictionary's ASCII letters, digits and . ' - _)", w, c);
      }
    }
  }
  attn_nn_ctx ctx = {.precision = o->prec};
  char why[512];
  if (!r && o->prec_set) {
    if (attn_g2p_prec_infer(m, src, sl, n, o->prec_auto, &o->prec, why, sizeof why))
      r = cli_fail(NULL);
    else
      fprintf(stderr, "precision: %s (%s)\n", attn_precision_name(o->prec), why);
    ctx.precision = o->prec;
  }
  if (!r && o->save && cli_out_file_ready("--save-attention", o->save)) r = CLI_FAILED;
  attn_g2p_hyps h = {0};
  attn_g2p_decode_opts dec = o->dec;
  if (rs) dec.n_best = dec.beam; /* every hypothesis of the beam, rescored */
  if (!r && attn_g2p_search_ensemble(e->ms, e->n, &ctx, &dec, src, sl, n, &h)) r = cli_fail(NULL);
  if (!r && rs &&
      attn_g2p_rescore(&h, rs->ms, rs->n, o->rescore_weight, o->dec.alpha, &ctx, src, sl,
                       o->dec.batch))
    r = cli_fail(NULL);
  // WORD<TAB>PHONES; with --n-best: WORD<TAB>rank<TAB>score<TAB>PHONES per hypothesis
  char buf[1024];
  for (int i = 0; !r && i < n; i++)
    for (int k = 0; k < h.count[i] && k < o->dec.n_best && (k == 0 || o->n_best_set); k++) {
      const int64_t j = (int64_t)i * h.n_best + k;
      attn_g2p_phones_format(h.ph + j * h.max_tgt, h.len[j], (int)m->c.stress, buf, sizeof buf);
      if (o->n_best_set)
        printf("%s\t%d\t%.4f\t%s\n", o->args[i + 1], k + 1, (double)h.score[j], buf);
      else
        printf("%s\t%s\n", o->args[i + 1], buf);
    }
  if (!r && o->save) r = save_attention(o, m, &ctx, src, sl, &h);
  attn_g2p_hyps_free(&h);
  free(ids);
  free(src);
  free(sl);
  cli_g2p_models_free(e);
  cli_g2p_models_free(rs);
  return r;
}

int attn_cmd_g2p(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (argv[1][0] == '-') {  // --help, or an option said before the subcommand
    static const cli_opt none[] = {{NULL, 0}};
    cli_args a;
    cli_args_init(&a, argc, argv, 1, none);
    int r = cli_args_next(&a);
    if (r == CLI_HELP) usage(stdout);
    if (r < 0) return cli_args_exit(r);
    return cli_usage("a subcommand first: split, train, eval or predict");
  }
  static const char *const subs[] = {"split", "train", "eval", "predict", "average"};
  static const char *const names[] = {"g2p split", "g2p train", "g2p eval", "g2p predict",
                                      "g2p average"};
  int k = 0;
  while (k < 5 && strcmp(argv[1], subs[k])) k++;
  if (k == 5)
    return cli_usage("unknown subcommand '%s' (split, train, eval, predict or average)", argv[1]);
  cli_set_command(names[k]);
  g2p_opts *o = malloc(sizeof *o);
  if (!o) return cli_error(NULL, "out of memory");
  int r = parse(argc, argv, o);
  if (r == -1) r = CLI_OK;  // --help
  else if (!r) {
    if (k < 2 && o->nargs) r = cli_usage("unexpected argument '%s'", o->args[0]);
    else if (k != 3 && o->save) r = cli_usage("--save-attention is an option of predict");
    else if (k != 1 && (o->model_opt || o->to.batch_tokens > 0 ||
                        o->to.schedule != ATTN_SCHED_WARMUP_COSINE))
      r = cli_usage("--no-stress, --reverse, --both-directions, --batch-tokens and --schedule "
                    "are options of train (a model file says how it was trained)");
    else if (k != 2 && k != 3 && (o->rescore || o->rescore_weight != 1.0f))
      r = cli_usage("--rescore and --rescore-weight are options of eval and predict");
    else if (o->rescore && o->dec.beam < 2)
      r = cli_usage("--rescore rescores the beam's hypotheses: give --beam K with K >= 2");
    else if (k == 4) r = cmd_average(o);
    else r = k == 0 ? cmd_split(o) : k == 1 ? cmd_train(o) : k == 2 ? cmd_eval(o) : cmd_predict(o);
  }
  free(o);
  return r;
}
