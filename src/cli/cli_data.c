/* attn data / attn nb: the mail corpus, its split, and the Naive Bayes
 * baseline (docs/DATA.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "apps/text/bpe.h"
#include "apps/classifier/dataset.h"
#include "apps/classifier/mail.h"
#include "apps/classifier/metrics.h"
#include "apps/classifier/naive_bayes.h"
#include "attn.h"
#include "cli/commands.h"

typedef struct {
  const char *data, *split, *show;
  int headers; /* 1: ATTN_MAIL_MORE_HEADERS */
  unsigned long long seed;
  int train_pct, val_pct, vocab, max_chunk;
  long train_bytes, max_bytes;
  double alpha;
  int counts;
} data_opts;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void data_usage(FILE *f, const char *cmd) {
  fprintf(f,
          "usage: attn %s [--data DIR] [--seed S] [--split FILE] [--train-pct P] [--val-pct P]%s\n"
          "  --data DIR      corpus folder, one sub-folder per group (default data/spamassassin;\n"
          "                  fetch it with: tools/fetch_data.sh DIR); group names containing\n"
          "                  \"spam\" are spam, the others ham (docs/DATA.md)\n"
          "  --seed S        split seed (default 1)\n"
          "  --split FILE    split file: used if it exists, else written (default\n"
          "                  DIR/split-seed<S>.tsv, or DIR/split-seed<S>-<P>-<P>.tsv for\n"
          "                  other percentages)\n"
          "  --train-pct P, --val-pct P   split percentages (default 80, 10; the rest is test)\n",
          cmd,
          !strcmp(cmd, "nb")
              ? " [--vocab V] [--train-bytes N] [--max-bytes N] [--alpha A] [--counts]\n"
                "         [--threads N]"
              : " [--show FILE]");
  if (!strcmp(cmd, "nb"))
    fprintf(
        f,
        "  --vocab V       BPE vocabulary size incl. specials and bytes (default 8000)\n"
        "  --train-bytes N BPE learns from the first N bytes of each training text (default 4096)\n"
        "  --max-bytes N   Naive Bayes reads the first N bytes of each text (default 65536;\n"
        "                  0 = all)\n"
        "  --alpha A       Laplace smoothing (default 1)\n"
        "  --counts        token counts as features (default: presence, boolean multinomial NB)\n"
        "  --threads N     threads of the tokenizer (default: all cores this process may use,\n"
        "                  or $ATTN_NUM_THREADS; results do not depend on it)\n");
  else
    fprintf(f, "  --show FILE     print the text extracted from one message file, and its parse report\n");
  fprintf(f, "  --headers basic|more   Subject and From only (default), or also To, Cc, Reply-To,\n"
             "                  Date, Message-ID, X-Mailer, User-Agent, Content-Type (as attn train)\n");
}

/* Returns 0 ok, 2 usage error (message printed), 1 for --help. */
static int parse_opts(int argc, char **argv, data_opts *o) {
  o->data = "data/spamassassin";
  o->split = NULL;
  o->show = NULL;
  o->headers = 0;
  o->seed = 1;
  o->train_pct = 80;
  o->val_pct = 10;
  o->vocab = 8000;
  o->max_chunk = 64;
  o->train_bytes = 4096;
  o->max_bytes = 65536;
  o->alpha = 1.0;
  o->counts = 0;
  const int nb = !strcmp(argv[0], "nb");
  static const cli_opt data_opts_table[] = {
      {"--data", CLI_VALUE},    {"--split", CLI_VALUE},   {"--seed", CLI_VALUE},
      {"--train-pct", CLI_VALUE}, {"--val-pct", CLI_VALUE}, {"--headers", CLI_VALUE},
      {"--show", CLI_VALUE},    {NULL, 0}};
  static const cli_opt nb_opts_table[] = {{"--data", CLI_VALUE},
                                          {"--split", CLI_VALUE},
                                          {"--seed", CLI_VALUE},
                                          {"--train-pct", CLI_VALUE},
                                          {"--val-pct", CLI_VALUE},
                                          {"--headers", CLI_VALUE},
                                          {"--vocab", CLI_VALUE},
                                          {"--train-bytes", CLI_VALUE},
                                          {"--max-bytes", CLI_VALUE},
                                          {"--alpha", CLI_VALUE},
                                          {"--counts", CLI_FLAG},
                                          {"--threads", CLI_VALUE},
                                          {NULL, 0}};
  cli_args args;
  cli_args_init(&args, argc, argv, 1, nb ? nb_opts_table : data_opts_table);
  int r;
  while ((r = cli_args_next(&args)) > 0) {
    const char *a = args.opt, *v = args.val;
    char *end = NULL;
    if (r == CLI_ARG) {
      cli_usage("unexpected argument '%s' (see attn %s --help)", v, argv[0]);
      return 2;
    }
    if (!strcmp(a, "--counts")) o->counts = 1;
    else if (!strcmp(a, "--threads")) {
      if (cli_set_threads(a, v)) return 2;
    } else if (!strcmp(a, "--data"))
      o->data = v;
    else if (!strcmp(a, "--split")) o->split = v;
    else if (!strcmp(a, "--show")) o->show = v;
    else if (!strcmp(a, "--headers")) {
      if (strcmp(v, "basic") && strcmp(v, "more")) {
        cli_usage("--headers basic|more");
        return 2;
      }
      o->headers = !strcmp(v, "more");
    }
    else if (!strcmp(a, "--seed")) o->seed = strtoull(v, &end, 10);
    else if (!strcmp(a, "--train-pct")) o->train_pct = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--val-pct")) o->val_pct = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--vocab")) o->vocab = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--train-bytes")) o->train_bytes = strtol(v, &end, 10);
    else if (!strcmp(a, "--max-bytes")) o->max_bytes = strtol(v, &end, 10);
    else o->alpha = strtod(v, &end); /* --alpha */
    if (end && (*end || end == v)) {
      cli_usage("%s: '%s' is not a number", a, v);
      return 2;
    }
  }
  if (r == CLI_HELP) {
    data_usage(stdout, argv[0]);
    return 1;
  }
  if (r < 0) return 2;
  if (o->train_bytes < 0 || o->max_bytes < 0) {
    cli_usage("byte limits must be >= 0");
    return 2;
  }
  if (o->train_pct < 0 || o->val_pct < 0 || o->train_pct + o->val_pct > 100) {
    cli_usage("--train-pct %d and --val-pct %d: each >= 0, together <= 100", o->train_pct, o->val_pct);
    return 2;
  }
  return 0;
}

static int show_message(const char *path, unsigned flags) {
  char *text;
  size_t len;
  attn_mail_info info;
  if (attn_mail_file_to_text_flags(path, flags, &text, &len, &info)) return cli_fail(path);
  fwrite(text, 1, len, stdout);
  printf("\n---\n%s: %d text part(s), %d attachment(s)%s%s%s\n", path, info.text_parts,
         info.attachments, info.malformed ? ", malformed" : "", info.unparsable ? ", unparsable" : "",
         info.no_text ? ", no text part" : "");
  for (int k = 1; k < ATTN_MAIL_ISSUE_COUNT; k++)
    if (info.issues & (1u << k)) printf("  issue: %s\n", attn_mail_issue_name(k));
  free(text);
  return 0;
}

/* Scans, splits (or reads the split file) and parses the corpus; prints
 * counts per group and split and the parse report. NULL on failure (printed). */
static attn_corpus *open_corpus(const data_opts *o) {
  struct stat sb;
  if (stat(o->data, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    cli_error(o->data, "no corpus here (fetch it with: tools/fetch_data.sh %s)", o->data);
    return NULL;
  }
  attn_corpus *c;
  if (attn_corpus_scan(o->data, &c)) {
    cli_fail(o->data);
    return NULL;
  }
  c->mail_flags = o->headers ? ATTN_MAIL_MORE_HEADERS : 0u;
  char split_path[4096];
  if (o->split) snprintf(split_path, sizeof split_path, "%s", o->split);
  else if (o->train_pct == 80 && o->val_pct == 10)
    snprintf(split_path, sizeof split_path, "%s/split-seed%llu.tsv", o->data, o->seed);
  else
    snprintf(split_path, sizeof split_path, "%s/split-seed%llu-%d-%d.tsv", o->data, o->seed, o->train_pct,
             o->val_pct);
  if (stat(split_path, &sb) == 0) {
    if (attn_corpus_load_split(c, split_path)) {
      cli_fail(split_path);
      attn_corpus_free(c);
      return NULL;
    }
    printf("split: read %s\n", split_path);
  } else {
    char note[256];
    snprintf(note, sizeof note, "attn split: seed %llu, %d/%d/%d %% train/val/test, stratified by group",
             o->seed, o->train_pct, o->val_pct, 100 - o->train_pct - o->val_pct);
    if (attn_corpus_split(c, o->seed, o->train_pct, o->val_pct)) {
      cli_fail(NULL);
      attn_corpus_free(c);
      return NULL;
    }
    if (attn_corpus_save_split(c, split_path, note))
      cli_warn("%s (continuing; the split is deterministic anyway)", attn_last_error());
    else
      printf("split: wrote %s (seed %llu)\n", split_path, o->seed);
  }
  printf("%-14s %5s %6s %6s %6s %6s\n", "group", "label", "total", "train", "val", "test");
  for (int g = 0; g < c->n_groups; g++) {
    int cnt[4] = {0, 0, 0, 0};
    for (int i = 0; i < c->n; i++)
      if (c->group[i] == g) cnt[3]++, cnt[c->split[i]]++;
    printf("%-14s %5s %6d %6d %6d %6d\n", c->group_names[g], c->group_label[g] ? "spam" : "ham", cnt[3],
           cnt[0], cnt[1], cnt[2]);
  }
  printf("%-14s %5s %6d %6d %6d %6d\n", "all", "", c->n, attn_corpus_count(c, 0, -1),
         attn_corpus_count(c, 1, -1), attn_corpus_count(c, 2, -1));
  double t0 = now_s();
  if (attn_corpus_load_texts(c)) {
    cli_fail(o->data);
    attn_corpus_free(c);
    return NULL;
  }
  double t1 = now_s();
  size_t bytes = 0;
  for (int i = 0; i < c->n; i++) bytes += c->text_len[i];
  printf("read %d messages in %.2f s: %.1f MB of text; %ld malformed, %ld unparsable, %ld without a text part\n",
         c->n, t1 - t0, (double)bytes / 1e6, c->mail.malformed, c->mail.unparsable, c->mail.no_text);
  for (int k = 1; k < ATTN_MAIL_ISSUE_COUNT; k++)
    if (c->mail.issues[k])
      printf("  %-32s %5ld message(s)%s\n", attn_mail_issue_name(k), c->mail.issues[k],
             attn_mail_issue_is_fatal(k) ? " (counted as malformed)" : "");
  return c;
}

int attn_cmd_data(int argc, char **argv) {
  data_opts o;
  int r = parse_opts(argc, argv, &o);
  if (r) return r == 1 ? 0 : 2;
  if (o.show) return show_message(o.show, o.headers ? ATTN_MAIL_MORE_HEADERS : 0u);
  attn_corpus *c = open_corpus(&o);
  if (!c) return 1;
  attn_corpus_free(c);
  return 0;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

/* Tokens per message: where to cut sequences for a model. */
static void print_length_percentiles(const size_t *n_ids, int n) {
  size_t *v = malloc((size_t)n * sizeof *v);
  if (!v || n == 0) {
    free(v);
    return;
  }
  memcpy(v, n_ids, (size_t)n * sizeof *v);
  qsort(v, (size_t)n, sizeof *v, cmp_size);
  printf("bpe: tokens per message: median %zu, p90 %zu, p99 %zu, max %zu\n", v[n / 2],
         v[(size_t)n * 9 / 10], v[(size_t)n * 99 / 100], v[n - 1]);
  free(v);
}

int attn_cmd_nb(int argc, char **argv) {
  data_opts o;
  int r = parse_opts(argc, argv, &o);
  if (r) return r == 1 ? 0 : 2;
  attn_corpus *c = open_corpus(&o);
  if (!c) return 1;
  int rc = 1, n = c->n, n_train = 0;
  const char **tr_text = malloc((size_t)n * sizeof *tr_text);
  size_t *tr_len = malloc((size_t)n * sizeof *tr_len);
  int32_t **ids = calloc((size_t)n, sizeof *ids);
  size_t *n_ids = calloc((size_t)n, sizeof *n_ids);
  int *tr_label = malloc((size_t)n * sizeof *tr_label);
  attn_bpe *bpe = NULL;
  attn_nb *nb = NULL;
  if (!tr_text || !tr_len || !ids || !n_ids || !tr_label) {
    cli_error(NULL, "out of memory");
    goto done;
  }
  for (int i = 0; i < n; i++)
    if (c->split[i] == ATTN_SPLIT_TRAIN) {
      tr_text[n_train] = c->text[i];
      tr_len[n_train++] = c->text_len[i];
    }
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  cfg.vocab_size = o.vocab;
  cfg.max_text_bytes = (size_t)o.train_bytes;
  double t0 = now_s();
  if (attn_bpe_train(tr_text, tr_len, n_train, &cfg, &bpe)) {
    cli_fail(NULL);
    goto done;
  }
  double t1 = now_s();
  printf("bpe: %d merges (vocab %d) learned from %d training texts (first %ld bytes each) in %.2f s\n",
         attn_bpe_n_merges(bpe), attn_bpe_vocab_size(bpe), n_train, o.train_bytes, t1 - t0);
  size_t total_tokens = 0, total_bytes = 0;
  for (int i = 0; i < n; i++) { /* the texts cut to --max-bytes */
    tr_text[i] = c->text[i];
    tr_len[i] = c->text_len[i];
    if (o.max_bytes && tr_len[i] > (size_t)o.max_bytes) tr_len[i] = (size_t)o.max_bytes;
    total_bytes += tr_len[i];
  }
  if (attn_bpe_encode_many(bpe, tr_text, tr_len, n, 0, ids, n_ids)) {
    cli_fail(NULL);
    goto done;
  }
  for (int i = 0; i < n; i++) total_tokens += n_ids[i];
  double t2 = now_s();
  printf("bpe: encoded %d texts (%.1f MB) in %.2f s: %zu tokens, %.2f bytes/token\n", n,
         (double)total_bytes / 1e6, t2 - t1, total_tokens,
         total_tokens ? (double)total_bytes / (double)total_tokens : 0.0);
  print_length_percentiles(n_ids, n);
  const int32_t **tr_ids = malloc((size_t)n * sizeof *tr_ids);
  if (!tr_ids) {
    cli_error(NULL, "out of memory");
    goto done;
  }
  n_train = 0;
  for (int i = 0; i < n; i++)
    if (c->split[i] == ATTN_SPLIT_TRAIN) {
      tr_ids[n_train] = ids[i];
      tr_len[n_train] = n_ids[i];
      tr_label[n_train++] = c->label[i];
    }
  attn_status st = attn_nb_train(tr_ids, tr_len, tr_label, n_train, attn_bpe_vocab_size(bpe), o.alpha, !o.counts, &nb);
  free(tr_ids);
  if (st) {
    cli_fail(NULL);
    goto done;
  }
  for (int sp = ATTN_SPLIT_VAL; sp <= ATTN_SPLIT_TEST; sp++) {
    attn_binary_metrics m = {0};
    for (int i = 0; i < n; i++) {
      if (c->split[i] != sp) continue;
      int pred;
      if (attn_nb_predict(nb, ids[i], n_ids[i], NULL, &pred)) {
        cli_fail(NULL);
        goto done;
      }
      attn_binary_metrics_add(&m, pred, c->label[i]);
    }
    attn_binary_metrics_finish(&m);
    char title[64];
    snprintf(title, sizeof title, "naive bayes (BPE %s, alpha %g) %s", o.counts ? "counts" : "presence",
             o.alpha, attn_split_name(sp));
    attn_binary_metrics_print(stdout, title, &m);
  }
  rc = 0;
done:
  if (ids)
    for (int i = 0; i < n; i++) free(ids[i]);
  free(ids);
  free(n_ids);
  free(tr_text);
  free(tr_len);
  free(tr_label);
  attn_bpe_free(bpe);
  attn_nb_free(nb);
  attn_corpus_free(c);
  return rc;
}
