/* attn hf run DIR --input-ids 101,7592,102 [--token-type-ids ...] [--layers N]
 *             [--out FILE.safetensors] [--show N] [--backend math|flash|auto] [--threads N]
 * attn hf export-tokenizer MODEL.safetensors OUT.json
 * Hugging Face BERT / GPT-2 checkpoints run with attn's layers (apps/hf.h),
 * and the classifier's BPE tokenizer as a tokenizers-library tokenizer.json
 * (apps/hf_tokenizer.h). docs/HF.md has the name map. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/bpe.h"
#include "apps/hf/hf.h"
#include "apps/text/hf_tokenizer.h"
#include "attn.h"
#include "cli/commands.h"

static void hf_usage(FILE *f) {
  fprintf(f, "usage: attn hf run DIR --input-ids ID,ID,... [options]\n"
             "       attn hf generate DIR [--prompt TEXT] [options]   (attn hf generate --help)\n"
             "       attn hf export-tokenizer MODEL.safetensors OUT.json\n"
             "\n"
             "run: DIR holds a Hugging Face checkpoint, config.json + model.safetensors, of a\n"
             "  BERT encoder (model_type bert) or GPT-2 (gpt2); runs it on one sequence (f32,\n"
             "  inference) and prints the last hidden state (BERT: and the pooler output;\n"
             "  GPT-2: the logits and the argmax next token id). Options:\n"
             "  --input-ids LIST        comma-separated token ids (required)\n"
             "  --token-type-ids LIST   BERT segment ids, as many as input ids (default 0s)\n"
             "  --layers N              run the first N layers only (GPT-2: then ln_f, head)\n"
             "  --out FILE.safetensors  write last_hidden_state [1, L, E], pooler_output,\n"
             "                          logits [1, L, V] in full\n"
             "  --show N                values printed per output (default 8)\n"
             "  --backend math|flash|auto   attention backend (default auto)\n"
             "  --threads N             threads (default: all cores this process may use, or\n"
             "                          $ATTN_NUM_THREADS; results do not depend on it)\n"
             "export-tokenizer: the BPE tokenizer of a model written by attn train as a\n"
             "  Hugging Face tokenizer.json (docs/HF.md: what it cannot express).\n");
}

static void print_values(const char *name, const int64_t *shape, int ndim, const float *v,
                         int64_t n, int show) {
  printf("%s [", name);
  for (int d = 0; d < ndim; d++) printf("%s%lld", d ? ", " : "", (long long)shape[d]);
  printf("]:");
  for (int64_t i = 0; i < n && i < show; i++) printf(" %.6g", (double)v[i]);
  printf("%s\n", n > show ? " ..." : "");
}

typedef struct {
  const char *dir, *ids, *types, *out;
  int64_t layers, show;
  attn_backend backend;
} run_opts;

/* CLI_OK with o filled, CLI_USAGE (said), or -1 after --help */
static int parse_run(int argc, char **argv, run_opts *o) {
  static const cli_opt opts[] = {{"--input-ids", CLI_VALUE}, {"--token-type-ids", CLI_VALUE},
                                 {"--out", CLI_VALUE},       {"--layers", CLI_VALUE},
                                 {"--show", CLI_VALUE},      {"--backend", CLI_VALUE},
                                 {"--threads", CLI_VALUE},   {NULL, 0}};
  memset(o, 0, sizeof *o);
  o->layers = -1;
  o->show = 8;
  o->backend = ATTN_BACKEND_AUTO;
  cli_args a;
  cli_args_init(&a, argc, argv, 2, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_ARG) {
      if (o->dir) return cli_usage("one checkpoint directory only ('%s' and '%s')", o->dir, a.val);
      o->dir = a.val;
    } else if (!strcmp(a.opt, "--input-ids")) {
      o->ids = a.val;
    } else if (!strcmp(a.opt, "--token-type-ids")) {
      o->types = a.val;
    } else if (!strcmp(a.opt, "--out")) {
      o->out = a.val;
    } else if (!strcmp(a.opt, "--backend")) {
      if (attn_backend_from_name(a.val, &o->backend)) return cli_fail("--backend"), CLI_USAGE;
    } else if (!strcmp(a.opt, "--threads")) {
      if (cli_set_threads(a.opt, a.val)) return CLI_USAGE;
    } else { /* --layers, --show */
      int64_t *dst = !strcmp(a.opt, "--layers") ? &o->layers : &o->show;
      if (!cli_parse_i64(a.val, dst) || *dst < 0 || *dst > 1000000)
        return cli_usage("%s '%s' is not a non-negative integer", a.opt, a.val);
    }
  }
  if (r == CLI_HELP) {
    hf_usage(stdout);
    return -1;
  }
  if (r < 0) return CLI_USAGE;
  if (!o->dir || !o->ids) return cli_usage("%s is required (see attn hf --help)",
                                           !o->dir ? "DIR" : "--input-ids");
  return CLI_OK;
}

static attn_status save_outputs(const char *path, const attn_hf *h, int64_t L, const float *hidden,
                                const float *pooled, const float *logits) {
  attn_st *st = NULL;
  int64_t E = h->c.hidden_size, V = h->c.vocab_size;
  int64_t sh[3] = {1, L, E}, sp[2] = {1, E}, sl[3] = {1, L, V};
  attn_status s = attn_st_new(&st);
  if (!s) s = attn_st_set_meta(st, "model_type", h->model_type);
  if (!s) s = attn_st_add_f32(st, "last_hidden_state", 3, sh, hidden);
  if (!s && pooled) s = attn_st_add_f32(st, "pooler_output", 2, sp, pooled);
  if (!s && logits) s = attn_st_add_f32(st, "logits", 3, sl, logits);
  if (!s) s = attn_st_save(st, path);
  attn_st_free(st);
  return s;
}

static int hf_run(int argc, char **argv) {
  run_opts o;
  int rc = parse_run(argc, argv, &o);
  if (rc) return rc < 0 ? CLI_OK : rc;
  int32_t *ids = NULL, *types = NULL;
  int64_t L = 0, nt = 0;
  if (attn_hf_parse_ids(o.ids, &ids, &L)) return cli_fail("--input-ids"), CLI_USAGE;
  if (o.types && attn_hf_parse_ids(o.types, &types, &nt)) {
    free(ids);
    return cli_fail("--token-type-ids"), CLI_USAGE;
  }
  if (o.types && nt != L) {
    free(ids);
    free(types);
    return cli_usage("%lld token type ids for %lld input ids", (long long)nt, (long long)L);
  }
  attn_hf *h = NULL;
  if (attn_hf_load(o.dir, &h)) {
    free(ids);
    free(types);
    return cli_fail(NULL);
  }
  const attn_hf_config *c = &h->c;
  int64_t E = c->hidden_size, V = c->vocab_size;
  if (o.layers > c->num_layers) {
    rc = cli_error(o.dir, "--layers %lld, but the model has %lld layers", (long long)o.layers,
                   (long long)c->num_layers);
    free(ids);
    free(types);
    attn_hf_free(h);
    return rc;
  }
  int bert = c->arch == ATTN_HF_BERT;
  float *hidden = malloc((size_t)(L * E) * sizeof(float));
  float *pooled = bert && c->pooler ? malloc((size_t)E * sizeof(float)) : NULL;
  float *logits = bert ? NULL : malloc((size_t)(L * V) * sizeof(float));
  attn_nn_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.backend = o.backend;
  attn_status s = !hidden || (bert && c->pooler && !pooled) || (!bert && !logits)
                      ? attn_set_error(ATTN_ENOMEM, "out of memory for %lld ids", (long long)L)
                      : attn_hf_model_forward(&h->m, &h->p, &ctx, ids, types, 1, L,
                                              (int)o.layers, hidden, pooled, logits);
  rc = CLI_OK;
  if (s) {
    rc = cli_fail(NULL);
  } else {
    int nl = o.layers < 0 ? (int)c->num_layers : (int)o.layers;
    printf("model: %s, %d of %lld layers, hidden %lld, %lld heads, vocab %lld%s\n", h->model_type,
           nl, (long long)c->num_layers, (long long)E, (long long)c->num_heads, (long long)V,
           pooled ? ", pooler" : "");
    if (h->ignored)
      printf("ignored: %d tensors of the checkpoint (e.g. '%s')\n", h->ignored, h->first_ignored);
    int64_t sh[3] = {1, L, E}, sp[2] = {1, E}, sl[3] = {1, L, V};
    int show = (int)o.show;
    print_values("last_hidden_state", sh, 3, hidden, L * E, show);
    if (pooled) print_values("pooler_output", sp, 2, pooled, E, show);
    if (logits) {
      const float *last = logits + (L - 1) * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; v++)
        if (last[v] > last[best]) best = v;
      print_values("logits", sl, 3, logits, L * V, show);
      printf("next token: %lld (logit %.6g)\n", (long long)best, (double)last[best]);
    }
    if (o.out && save_outputs(o.out, h, L, hidden, pooled, logits)) rc = cli_fail(o.out);
  }
  free(hidden);
  free(pooled);
  free(logits);
  free(ids);
  free(types);
  attn_hf_free(h);
  return rc;
}

static int hf_export_tokenizer(int argc, char **argv) {
  const char *paths[2] = {NULL, NULL};
  int np = 0, r;
  cli_args a;
  cli_args_init(&a, argc, argv, 2, NULL);
  while ((r = cli_args_next(&a)) > 0) {
    if (np == 2) return cli_usage("unexpected argument '%s' (see attn hf --help)", a.val);
    paths[np++] = a.val;
  }
  if (r == CLI_HELP) hf_usage(stdout);
  if (r < 0) return cli_args_exit(r);
  if (np != 2) return cli_usage("expected MODEL.safetensors and OUT.json (see attn hf --help)");
  const char *model = paths[0], *out = paths[1];
  attn_st *file = NULL;
  if (attn_st_load(model, &file)) return cli_fail(model);
  attn_bpe *bpe = NULL;
  const char *tok = attn_st_meta(file, "tokenizer");
  attn_status s = tok ? attn_bpe_load(tok, &bpe)
                      : attn_set_error(ATTN_EINVAL, "no BPE tokenizer in its metadata (a model "
                                       "written by attn train has one)");
  attn_st_free(file);
  if (s) return cli_fail(model);
  int aliased = 0;
  s = attn_hf_tokenizer_save(bpe, out, &aliased);
  int rc = s ? cli_fail(out) : CLI_OK;
  if (!s && aliased)
    cli_warn("%d token ids repeat the bytes of an earlier token; tokenizer.json gives those "
             "bytes the earlier id (docs/HF.md)", aliased);
  if (!s)
    printf("wrote %s: %d tokens, %d merges\n", out, attn_bpe_vocab_size(bpe),
           attn_bpe_n_merges(bpe));
  attn_bpe_free(bpe);
  return rc;
}

int attn_cmd_hf(int argc, char **argv) {
  static const char *const subs[] = {"run", "generate", "export-tokenizer"};
  cli_args a;
  cli_args_init(&a, argc, argv, 1, NULL);
  int r = cli_args_next(&a);
  if (r == CLI_HELP) hf_usage(stdout);
  if (r < 0) return cli_args_exit(r);
  if (r == CLI_END) {
    hf_usage(stderr);
    return CLI_USAGE;
  }
  if (!strcmp(a.val, "run")) {
    cli_set_command("hf run");
    return hf_run(argc, argv);
  }
  if (!strcmp(a.val, "generate")) {
    cli_set_command("hf generate");
    return attn_cmd_hf_generate(argc, argv);
  }
  if (!strcmp(a.val, "export-tokenizer")) {
    cli_set_command("hf export-tokenizer");
    return hf_export_tokenizer(argc, argv);
  }
  const char *near = cli_nearest(a.val, subs, 3);
  if (near) return cli_usage("unknown subcommand '%s'; did you mean '%s'?", a.val, near);
  cli_usage("unknown subcommand '%s'", a.val);
  hf_usage(stderr);
  return CLI_USAGE;
}
