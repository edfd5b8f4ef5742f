/* attn hf run DIR --input-ids 101,7592,102 [--token-type-ids ...] [--layers N]
 *             [--out FILE.safetensors] [--show N] [--backend math|flash|auto]
 * attn hf export-tokenizer MODEL.safetensors OUT.json
 * Hugging Face BERT / GPT-2 checkpoints run with attn's layers (apps/hf.h),
 * and the classifier's BPE tokenizer as a tokenizers-library tokenizer.json
 * (apps/hf_tokenizer.h). docs/HF.md has the name map. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bpe.h"
#include "apps/hf.h"
#include "apps/hf_tokenizer.h"
#include "attn.h"
#include "cli/commands.h"

static void hf_usage(FILE *f) {
  fprintf(f,
          "usage: attn hf run DIR --input-ids ID,ID,... [options]\n"
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
  int layers, show;
  attn_backend backend;
} run_opts;

static int need_value(int i, int argc, const char *opt) {
  if (i + 1 < argc) return 1;
  fprintf(stderr, "attn hf run: %s needs a value\n", opt);
  return 0;
}

static int int_arg(const char *s, const char *opt, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < 0 || v > 1000000) {
    fprintf(stderr, "attn hf run: %s '%s' is not a non-negative integer\n", opt, s);
    return 0;
  }
  *out = (int)v;
  return 1;
}

/* 0 ok, 2 usage error (message printed), 3 --help */
static int parse_run(int argc, char **argv, run_opts *o) {
  memset(o, 0, sizeof *o);
  o->layers = -1;
  o->show = 8;
  o->backend = ATTN_BACKEND_AUTO;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 3;
    if (!strcmp(a, "--input-ids") || !strcmp(a, "--token-type-ids") || !strcmp(a, "--out") ||
        !strcmp(a, "--layers") || !strcmp(a, "--show") || !strcmp(a, "--backend")) {
      if (!need_value(i, argc, a)) return 2;
      const char *v = argv[++i];
      if (!strcmp(a, "--input-ids")) o->ids = v;
      else if (!strcmp(a, "--token-type-ids")) o->types = v;
      else if (!strcmp(a, "--out")) o->out = v;
      else if (!strcmp(a, "--layers")) { if (!int_arg(v, a, &o->layers)) return 2; }
      else if (!strcmp(a, "--show")) { if (!int_arg(v, a, &o->show)) return 2; }
      else if (attn_backend_from_name(v, &o->backend)) {
        fprintf(stderr, "attn hf run: --backend: %s\n", attn_last_error());
        return 2;
      }
      continue;
    }
    if (a[0] == '-' && a[1]) {
      fprintf(stderr, "attn hf run: unknown option '%s'\n", a);
      return 2;
    }
    if (o->dir) {
      fprintf(stderr, "attn hf run: one checkpoint directory only ('%s' and '%s')\n", o->dir, a);
      return 2;
    }
    o->dir = a;
  }
  if (!o->dir || !o->ids) {
    fprintf(stderr, "attn hf run: %s is required\n", !o->dir ? "DIR" : "--input-ids");
    return 2;
  }
  return 0;
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
  if (rc == 3) {
    hf_usage(stdout);
    return 0;
  }
  if (rc) {
    hf_usage(stderr);
    return 2;
  }
  int32_t *ids = NULL, *types = NULL;
  int64_t L = 0, nt = 0;
  if (attn_hf_parse_ids(o.ids, &ids, &L)) return cli_fail("hf run: --input-ids");
  if (o.types && attn_hf_parse_ids(o.types, &types, &nt)) {
    free(ids);
    return cli_fail("hf run: --token-type-ids");
  }
  if (o.types && nt != L) {
    fprintf(stderr, "attn: hf run: %lld token type ids for %lld input ids\n", (long long)nt,
            (long long)L);
    free(ids);
    free(types);
    return 1;
  }
  attn_hf *h = NULL;
  if (attn_hf_load(o.dir, &h)) {
    free(ids);
    free(types);
    return cli_fail("hf run");
  }
  const attn_hf_config *c = &h->c;
  int64_t E = c->hidden_size, V = c->vocab_size;
  if (o.layers > c->num_layers) {
    fprintf(stderr, "attn: hf run: --layers %d, but the model has %lld layers\n", o.layers,
            (long long)c->num_layers);
    free(ids);
    free(types);
    attn_hf_free(h);
    return 1;
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
                      : attn_hf_model_forward(&h->m, &h->p, &ctx, ids, types, 1, L, o.layers,
                                              hidden, pooled, logits);
  rc = 0;
  if (s) {
    rc = cli_fail("hf run");
  } else {
    int nl = o.layers < 0 ? (int)c->num_layers : o.layers;
    printf("model: %s, %d of %lld layers, hidden %lld, %lld heads, vocab %lld%s\n", h->model_type,
           nl, (long long)c->num_layers, (long long)E, (long long)c->num_heads, (long long)V,
           pooled ? ", pooler" : "");
    if (h->ignored)
      printf("ignored: %d tensors of the checkpoint (e.g. '%s')\n", h->ignored, h->first_ignored);
    int64_t sh[3] = {1, L, E}, sp[2] = {1, E}, sl[3] = {1, L, V};
    print_values("last_hidden_state", sh, 3, hidden, L * E, o.show);
    if (pooled) print_values("pooler_output", sp, 2, pooled, E, o.show);
    if (logits) {
      const float *last = logits + (L - 1) * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; v++)
        if (last[v] > last[best]) best = v;
      print_values("logits", sl, 3, logits, L * V, o.show);
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
  if (argc != 4 || argv[2][0] == '-' || argv[3][0] == '-') {
    hf_usage(stderr);
    return 2;
  }
  attn_st *file = NULL;
  if (attn_st_load(argv[2], &file)) return cli_fail(argv[2]);
  attn_bpe *bpe = NULL;
  const char *tok = attn_st_meta(file, "tokenizer");
  attn_status s = tok ? attn_bpe_load(tok, &bpe)
                      : attn_set_error(ATTN_EINVAL, "no BPE tokenizer in its metadata (a model "
                                       "written by attn train has one)");
  attn_st_free(file);
  if (s) return cli_fail(argv[2]);
  int aliased = 0;
  s = attn_hf_tokenizer_save(bpe, argv[3], &aliased);
  int rc = s ? cli_fail(argv[3]) : 0;
  if (!s && aliased)
    fprintf(stderr,
            "attn: hf export-tokenizer: warning: %d token ids repeat the bytes of an earlier "
            "token; tokenizer.json gives those bytes the earlier id (docs/HF.md)\n",
            aliased);
  if (!s)
    printf("wrote %s: %d tokens, %d merges\n", argv[3], attn_bpe_vocab_size(bpe),
           attn_bpe_n_merges(bpe));
  attn_bpe_free(bpe);
  return rc;
}

int attn_cmd_hf(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    hf_usage(stdout);
    return 0;
  }
  if (argc >= 2 && !strcmp(argv[1], "run")) return hf_run(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "export-tokenizer")) return hf_export_tokenizer(argc, argv);
  if (argc >= 2) fprintf(stderr, "attn hf: unknown subcommand '%s'\n", argv[1]);
  hf_usage(stderr);
  return 2;
}
