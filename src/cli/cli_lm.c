/* attn lm: a decoder-only language model on the State of the Union addresses
 * (docs/LM.md): train, generate, eval. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/lm/lm_data.h"
#include "apps/lm/lm_generate.h"
#include "apps/lm/lm_ngram.h"
#include "apps/lm/lm_train.h"
#include "apps/train/train_progress.h"
#include "apps/viz/viz.h"
#include "attn/kernels.h"
#include "cli/commands.h"

#define DEFAULT_DATA "data/sotu"

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: attn lm train --out DIR [options]          train; DIR/best.safetensors is the model\n"
      "       attn lm generate MODEL [options]           continue a prompt, streaming the tokens\n"
      "       attn lm eval MODEL [FILE...] [--data DIR]  perplexity of each FILE, or of the\n"
      "                                                  validation addresses next to the "
      "n-gram's\n"
      "data:\n"
      "  --data PATH       a folder of .txt documents (default " DEFAULT_DATA
      "; tools/fetch_sotu.sh);\n"
      "                    document i (by name) is validation when i %% 10 == 4\n"
      "model (train):\n"
      "  --vocab N (4096)  BPE vocabulary, learned on the training documents\n"
      "  --dim E --heads H --ff F --layers N   (default 128 4 512 4)\n"
      "  --max-len N (2048) the longest context generate / eval accept   --untied\n"
      "training:\n"
      "  --seq T (128) --batch B (16) --epochs N (1) --lr LR (3e-3) --min-lr LR (3e-4)\n"
      "  --warmup F (0.05 of the steps) --weight-decay W (0.1) --clip C (1) --seed S (1)\n"
      "  --max-steps N     at most N steps\n"
      "  --time-budget SECONDS  train for as many steps (of --epochs) as fit: a probe of\n"
      "                    this model's step on this machine gives the tokens/s\n"
      "  --ngram-order N (3) the Kneser-Ney baseline's order (2 or 3)\n"
      "generate:\n"
      "  --prompt TEXT | --prompt-file FILE   (default \"Mr. Speaker, \")\n"
      "  --tokens N (200)  new tokens     --seed S (1)\n"
      "  --temperature T (0.8; 0: greedy) --top-k K (40; 0: all) --top-p P (0.95, in (0, 1])\n"
      "  --kv-cache f32    the cache's storage: f32 | f16 | bf16 | int8, each contiguous or\n"
      "                    -paged (f16-paged; paged = f32-paged)\n"
      "  --kv-page-size N  tokens a page of a paged cache (16)\n"
      "  --weights f32     the Linears' and head's weights: f32, or int8 (per output channel,\n"
      "                    quantized on load; activations per row at run time)\n"
      "  --save-attention OUT.safetensors  each new token's attention over the prompt and\n"
      "                    the tokens before it (every layer and head), for attn viz\n"
      "  --quiet           print only the text (no tokens/s line)\n"
      "eval:\n"
      "  --seq T           window length (default: the training's)  --batch B (16)\n"
      "all:\n"
      "  --threads T       threads (default: all cores; results do not depend on it)\n");
}

static const cli_opt opts[] = {{"--data", CLI_VALUE},
                               {"--out", CLI_VALUE},
                               {"--vocab", CLI_VALUE},
                               {"--dim", CLI_VALUE},
                               {"--heads", CLI_VALUE},
                               {"--ff", CLI_VALUE},
                               {"--layers", CLI_VALUE},
                               {"--max-len", CLI_VALUE},
                               {"--untied", CLI_FLAG},
                               {"--seq", CLI_VALUE},
                               {"--batch", CLI_VALUE},
                               {"--epochs", CLI_VALUE},
                               {"--lr", CLI_VALUE},
                               {"--min-lr", CLI_VALUE},
                               {"--warmup", CLI_VALUE},
                               {"--weight-decay", CLI_VALUE},
                               {"--clip", CLI_VALUE},
                               {"--seed", CLI_VALUE},
                               {"--max-steps", CLI_VALUE},
                               {"--time-budget", CLI_VALUE},
                               {"--ngram-order", CLI_VALUE},
                               {"--prompt", CLI_VALUE},
                               {"--prompt-file", CLI_VALUE},
                               {"--tokens", CLI_VALUE},
                               {"--temperature", CLI_VALUE},
                               {"--top-k", CLI_VALUE},
                               {"--top-p", CLI_VALUE},
                               {"--kv-cache", CLI_VALUE},
                               {"--kv-page-size", CLI_VALUE},
                               {"--weights", CLI_VALUE},
                               {"--save-attention", CLI_VALUE},
                               {"--quiet", CLI_FLAG},
                               {"--threads", CLI_VALUE},
                               {NULL, 0}};

typedef struct {
  const char *data, *prompt, *prompt_file, *kv_name, *save;
  int data_set, seq_set, quiet, threads, vocab, int8_weights;
  int64_t tokens, kv_page; /* kv_page -1: not given */
  attn_lm_config mc;
  attn_lm_train_opts to;
  attn_lm_sampling smp;
  const char *args[256];
  int nargs;
} lm_opts;

static int set_opt(lm_opts *o, const char *k, const char *v) {
  double d = 0;
  int r = CLI_OK;
#define NUM(name, lo, hi, field)                                                                   \
  if (!strcmp(k, name)) {                                                                          \
    if (!(r = cli_parse_num(k, v, lo, hi, &d))) field = (__typeof__(field))d;                      \
    return r;                                                                                      \
  }
  if (!strcmp(k, "--data"))
    o->data = v, o->data_set = 1;
  else if (!strcmp(k, "--out"))
    o->to.out = v;
  else if (!strcmp(k, "--untied"))
    o->mc.tied = 0;
  else if (!strcmp(k, "--quiet"))
    o->quiet = o->to.quiet = 1;
  else if (!strcmp(k, "--prompt"))
    o->prompt = v;
  else if (!strcmp(k, "--prompt-file"))
    o->prompt_file = v;
  else if (!strcmp(k, "--kv-cache"))
    o->kv_name = v;
  else if (!strcmp(k, "--weights")) {
    if (strcmp(v, "f32") && strcmp(v, "int8")) return cli_usage("--weights '%s': f32 or int8", v);
    o->int8_weights = !strcmp(v, "int8");
  } else if (!strcmp(k, "--kv-page-size")) {
    /* 0 and above reach the cache's own check (attn_lm_kv_spec_parse) */
    if (!cli_parse_i64(v, &o->kv_page) || o->kv_page < 0)
      return cli_usage("--kv-page-size %s: a page holds 1..%d tokens", v, ATTN_LM_KV_PAGE_MAX);
  } else if (!strcmp(k, "--save-attention"))
    o->save = v;
  else if (!strcmp(k, "--top-p")) {
    /* any number parses; (0, 1] is the sampler's check, with its message */
    char *end = NULL;
    double p = strtod(v, &end);
    if (!*v || *end) return cli_usage("--top-p: '%s' is not a number", v);
    o->smp.top_p = (float)p;
  } else {
    if (!strcmp(k, "--seq")) o->seq_set = 1;
    NUM("--vocab", ATTN_BPE_MERGE0, 1 << 20, o->vocab)
    NUM("--dim", 2, 8192, o->mc.d_model)
    NUM("--heads", 1, 1024, o->mc.heads)
    NUM("--ff", 1, 65536, o->mc.ff)
    NUM("--layers", 1, 128, o->mc.layers)
    NUM("--max-len", 2, 1 << 20, o->mc.max_len)
    NUM("--seq", 2, 1 << 20, o->to.seq)
    NUM("--batch", 1, 1e5, o->to.batch)
    NUM("--epochs", 1, 1e6, o->to.epochs)
    NUM("--lr", 0, 10, o->to.lr)
    NUM("--min-lr", 0, 10, o->to.min_lr)
    NUM("--warmup", 0, 0.99, o->to.warmup_frac)
    NUM("--weight-decay", 0, 10, o->to.weight_decay)
    NUM("--clip", 0, 1e9, o->to.clip)
    NUM("--seed", 0, 1e15, o->to.seed)
    NUM("--max-steps", 1, 1e15, o->to.max_steps)
    NUM("--time-budget", 1, 1e9, o->to.time_budget)
    NUM("--ngram-order", 2, 3, o->to.ngram_order)
    NUM("--tokens", 1, 1 << 20, o->tokens)
    NUM("--temperature", 0, 1e6, o->smp.temperature)
    NUM("--top-k", 0, 1 << 20, o->smp.top_k)
    NUM("--threads", 1, 4096, o->threads)
  }
#undef NUM
  return r;
}

static int parse(int argc, char **argv, lm_opts *o) {
  memset(o, 0, sizeof *o);
  o->data = DEFAULT_DATA;
  o->vocab = 4096;
  o->tokens = 200;
  o->kv_page = -1;
  attn_lm_config_default(&o->mc);
  attn_lm_train_opts_default(&o->to);
  attn_lm_sampling_default(&o->smp);
  cli_args a;
  cli_args_init(&a, argc, argv, 2, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_ARG) {
      if (o->nargs == (int)(sizeof o->args / sizeof o->args[0])) return cli_usage("too many files");
      o->args[o->nargs++] = a.val;
    } else if ((r = set_opt(o, a.opt, a.val)) != CLI_OK) {
      return r;
    }
  }
  if (r == CLI_HELP) usage(stdout);
  if (r < 0) return cli_args_exit(r) == CLI_OK ? -1 : CLI_USAGE;
  o->smp.seed = o->to.seed;
  if (o->threads > 0) attn_set_num_threads(o->threads);
  return CLI_OK;
}

static int cmd_train(lm_opts *o) {
  if (o->nargs) return cli_usage("unexpected argument '%s' (the corpus is --data)", o->args[0]);
  if (!o->to.out) return cli_usage("train needs --out DIR");
  o->mc.vocab = o->vocab;
  if (attn_lm_config_check(&o->mc)) return cli_usage("%s", attn_last_error());
  cli_keep_freed_memory(); /* the step's buffers stay in the heap (cli_train.c) */
  const double t0 = attn_train_now();
  attn_lm_data d;
  if (attn_lm_data_load(o->data, o->vocab, &d)) return cli_fail(NULL);
  if (!o->quiet)
    printf("tokenizer: %d ids learned and the corpus encoded in %.1f s\n",
           attn_bpe_vocab_size(d.bpe), attn_train_now() - t0);
  double best = 0;
  attn_status st = attn_lm_train_run(&o->mc, &d, &o->to, &best);
  attn_lm_data_free(&d);
  return st ? cli_fail(NULL) : CLI_OK;
}

/* the model and its tokenizer */
static int load_model(const char *path, attn_lm_model *m, attn_bpe **bpe, int64_t *train_seq) {
  attn_st *st = NULL;
  if (attn_lm_load(path, m, &st)) return cli_fail(path);
  const char *t = attn_st_meta(st, "tokenizer");
  const char *s = attn_st_meta(st, "lm.train_seq");
  *train_seq = s ? atoll(s) : 0;
  attn_status e =
      t ? attn_bpe_load(t, bpe) : attn_set_error(ATTN_EINVAL, "no tokenizer in the file");
  if (!e && attn_bpe_vocab_size(*bpe) != m->c.vocab)
    e = attn_set_error(ATTN_EINVAL, "the tokenizer has %d ids, the model %lld",
                       attn_bpe_vocab_size(*bpe), (long long)m->c.vocab);
  attn_st_free(st);
  if (e) {
    if (*bpe) attn_bpe_free(*bpe);
    *bpe = NULL;
    attn_lm_free(m);
    return cli_fail(path);
  }
  return CLI_OK;
}

typedef struct {
  const attn_bpe *bpe;
} stream_ctx;

static void print_token(int32_t id, void *user) {
  const stream_ctx *s = user;
  size_t n = 0;
  const char *b = attn_bpe_token(s->bpe, id, &n);
  if (b && n) fwrite(b, 1, n, stdout);
  fflush(stdout);
}

static const char *bpe_bytes(const void *tok, int32_t id, size_t *len) {
  return attn_bpe_token(tok, id, len);
}

static int cmd_generate(lm_opts *o) {
  if (o->nargs != 1) return cli_usage("generate takes one MODEL file");
  attn_lm_kv_spec kv;
  if (attn_lm_kv_spec_parse(o->kv_name, o->kv_page, &kv)) return cli_usage("%s", attn_last_error());
  if (attn_lm_sampling_check(&o->smp)) return cli_usage("%s", attn_last_error());
  if (o->prompt && o->prompt_file) return cli_usage("--prompt or --prompt-file, not both");
  char *text = NULL;
  size_t tlen = 0;
  if (o->prompt_file && attn_lm_read_file(o->prompt_file, &text, &tlen)) return cli_fail(NULL);
  const char *p = o->prompt_file ? text : o->prompt ? o->prompt : "Mr. Speaker, ";
  if (!o->prompt_file) tlen = strlen(p);
  attn_lm_model m;
  attn_bpe *bpe = NULL;
  int64_t tseq = 0;
  int r = load_model(o->args[0], &m, &bpe, &tseq);
  if (r) {
    free(text);
    return r;
  }
  int32_t *ids = NULL;
  size_t np = 0;
  attn_lm_generation g = {0};
  attn_status st = attn_bpe_encode_alloc(bpe, p, tlen, &ids, &np);
  if (!st && np == 0) st = attn_set_error(ATTN_EINVAL, "the prompt is empty (at least one token)");
  if (!st && (int64_t)np + o->tokens > m.c.max_len)
    st = attn_set_error(ATTN_EINVAL,
                        "the prompt is %zu tokens long; with --tokens %lld that exceeds the "
                        "model's context of %lld tokens",
                        np, (long long)o->tokens, (long long)m.c.max_len);
  o->smp.min_id = ATTN_BPE_BYTE0;
  stream_ctx sc = {bpe};
  if (!st) {
    if (!o->quiet) fwrite(p, 1, tlen, stdout);
    st = attn_lm_generate(&m, ids, (int64_t)np, o->tokens, &o->smp, &kv, o->int8_weights,
                          o->save != NULL, print_token, &sc, &g);
  }
  if (st)
    r = cli_fail(NULL);
  else {
    char kvn[64];
    printf("\n");
    if (!o->quiet)
      printf("-- %lld tokens in %.2f s: %.1f tokens/s (prompt: %zu tokens in %.2f s; context %lld "
             "tokens; kv cache %s; %d threads)\n",
             (long long)g.n, g.decode_s, g.decode_s > 0 ? (double)g.n / g.decode_s : 0.0, np,
             g.prefill_s, (long long)g.context, attn_lm_kv_spec_name(&kv, kvn, sizeof kvn),
             attn_get_num_threads());
    if (o->save && attn_lm_save_attention(o->save, &g, m.c.layers, m.c.heads, ids, (int64_t)np,
                                          bpe_bytes, bpe))
      r = cli_fail(o->save);
  }
  attn_lm_generation_free(&g);
  free(ids);
  free(text);
  attn_bpe_free(bpe);
  attn_lm_free(&m);
  return r;
}

static int cmd_eval(lm_opts *o) {
  if (o->nargs < 1) return cli_usage("eval takes a MODEL file, then FILEs (or --data DIR)");
  attn_lm_model m;
  attn_bpe *bpe = NULL;
  int64_t tseq = 0;
  int r = load_model(o->args[0], &m, &bpe, &tseq);
  if (r) return r;
  const int64_t seq = o->seq_set ? o->to.seq : tseq > 1 ? tseq : 128;
  attn_status st = ATTN_OK;
  for (int i = 1; !st && i < o->nargs; i++) {
    char *t = NULL;
    size_t n = 0, k = 0;
    int32_t *ids = NULL;
    double ppl = 0;
    st = attn_lm_read_file(o->args[i], &t, &n);
    if (!st) st = attn_bpe_encode_alloc(bpe, t, n, &ids, &k);
    if (!st && k < 2)
      st = attn_set_error(ATTN_EINVAL, "%s: %zu tokens (at least 2 to predict one)", o->args[i], k);
    if (!st) st = attn_lm_perplexity(&m, ids, (int64_t)k, seq, o->to.batch, &ppl);
    if (!st) printf("%s: %zu tokens, perplexity %.2f\n", o->args[i], k, ppl);
    free(t);
    free(ids);
  }
  if (!st && (o->data_set || o->nargs == 1)) {
    attn_lm_corpus c;
    char *tx[2] = {NULL, NULL};
    size_t n[2] = {0, 0}, k[2] = {0, 0};
    int32_t *ids[2] = {NULL, NULL};
    st = attn_lm_corpus_read(o->data, &c);
    for (int v = 0; !st && v < 2; v++) {
      st = attn_lm_corpus_join(&c, v, &tx[v], &n[v]);
      if (!st) st = attn_bpe_encode_alloc(bpe, tx[v], n[v], &ids[v], &k[v]);
    }
    if (!st && k[1] < 2) st = attn_set_error(ATTN_EINVAL, "%s: no validation documents", o->data);
    double ppl = 0, ng = 0;
    attn_lm_ngram g = {0};
    if (!st) st = attn_lm_perplexity(&m, ids[1], (int64_t)k[1], seq, o->to.batch, &ppl);
    if (!st) st = attn_lm_ngram_train(&g, o->to.ngram_order, m.c.vocab, ids[0], (int64_t)k[0]);
    if (!st) st = attn_lm_ngram_perplexity(&g, ids[1], (int64_t)k[1], &ng);
    if (!st)
      printf("%s: %d validation documents, %zu tokens: perplexity %.2f (windows of %lld); "
             "Kneser-Ney order-%d n-gram on the %d training documents: %.2f\n",
             o->data, c.n_val, k[1], ppl, (long long)seq, o->to.ngram_order, c.n_train, ng);
    attn_lm_ngram_free(&g);
    if (!st || c.n) attn_lm_corpus_free(&c);
    for (int v = 0; v < 2; v++)
      free(tx[v]), free(ids[v]);
  }
  if (st) r = cli_fail(NULL);
  attn_bpe_free(bpe);
  attn_lm_free(&m);
  return r;
}

int attn_cmd_lm(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (argv[1][0] == '-') {
    static const cli_opt none[] = {{NULL, 0}};
    cli_args a;
    cli_args_init(&a, argc, argv, 1, none);
    int r = cli_args_next(&a);
    if (r == CLI_HELP) usage(stdout);
    if (r < 0) return cli_args_exit(r);
    return cli_usage("a subcommand first: train, generate or eval");
  }
  static const char *const subs[] = {"train", "generate", "eval"};
  static const char *const names[] = {"lm train", "lm generate", "lm eval"};
  int k = 0;
  while (k < 3 && strcmp(argv[1], subs[k]))
    k++;
  if (k == 3) return cli_usage("unknown subcommand '%s' (train, generate or eval)", argv[1]);
  cli_set_command(names[k]);
  lm_opts *o = malloc(sizeof *o);
  if (!o) return cli_error(NULL, "out of memory");
  int r = parse(argc, argv, o);
  if (r == -1)
    r = CLI_OK;
  else if (!r)
    r = k == 0 ? cmd_train(o) : k == 1 ? cmd_generate(o) : cmd_eval(o);
  free(o);
  return r;
}
