/* attn hf generate DIR [--prompt TEXT | --prompt-file FILE | --input-ids LIST] [options]
 * A Hugging Face GPT-2 checkpoint continues a prompt, the tokens streamed as
 * they are drawn (apps/hf/hf_generate.h; the tokenizer of apps/text/gpt2_bpe.h).
 * docs/HF.md "Generation". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/hf/hf_generate.h"
#include "apps/lm/lm_data.h"
#include "apps/text/gpt2_bpe.h"
#include "attn.h"
#include "cli/commands.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: attn hf generate DIR [options]\n"
          "  DIR: a GPT-2 checkpoint (config.json, model.safetensors) and its tokenizer\n"
          "  (tokenizer.json, or vocab.json + merges.txt). Continues the prompt, streaming the\n"
          "  text, then prints the tokens/s. Options:\n"
          "  --prompt TEXT | --prompt-file FILE   the prompt (default: the bos token alone)\n"
          "  --input-ids LIST  the prompt as token ids (no tokenizer needed; without one the\n"
          "                    new tokens are printed as ids)\n"
          "  --tokenizer DIR   the tokenizer's folder (default: the checkpoint's;\n"
          "                    tools/fetch_gpt2_tokenizer.sh fetches GPT-2's)\n"
          "  --tokens N (64)   new tokens at most     --seed S (1)\n"
          "  --temperature T (0.8; 0: greedy) --top-k K (40; 0: all) --top-p P (0.95)\n"
          "  --ignore-eos      go on after the eos token (config.json's eos_token_id)\n"
          "  --weights f32     the Linears' and LM head's weights: f32 (the checkpoint's) or\n"
          "                    int8 (per output channel, quantized on load; activations per\n"
          "                    row at run time: a quarter of the bytes a token reads)\n"
          "  --kv-cache f32    the cache's storage: f32 | f16 | bf16 | int8, each contiguous or\n"
          "                    -paged          --kv-page-size N  tokens a page (16)\n"
          "  --save-attention OUT.safetensors  each new token's attention over the prompt\n"
          "                    and the tokens before it (every layer and head), for attn viz\n"
          "  --quiet           print only the text\n"
          "  --threads N       threads (results do not depend on it)\n");
}

typedef struct {
  const char *dir, *prompt, *prompt_file, *ids, *tok_dir, *kv_name, *save;
  int64_t tokens, kv_page;
  int ignore_eos, quiet;
  attn_hf_weights weights;
  attn_lm_sampling smp;
} gen_opts;

static int parse(int argc, char **argv, gen_opts *o) {
  static const cli_opt opts[] = {{"--prompt", CLI_VALUE},
                                 {"--prompt-file", CLI_VALUE},
                                 {"--input-ids", CLI_VALUE},
                                 {"--tokenizer", CLI_VALUE},
                                 {"--tokens", CLI_VALUE},
                                 {"--seed", CLI_VALUE},
                                 {"--temperature", CLI_VALUE},
                                 {"--top-k", CLI_VALUE},
                                 {"--top-p", CLI_VALUE},
                                 {"--ignore-eos", CLI_FLAG},
                                 {"--kv-cache", CLI_VALUE},
                                 {"--kv-page-size", CLI_VALUE},
                                 {"--quiet", CLI_FLAG},
                                 {"--threads", CLI_VALUE},
                                 {"--weights", CLI_VALUE},
                                 {"--save-attention", CLI_VALUE},
                                 {NULL, 0}};
  memset(o, 0, sizeof *o);
  o->tokens = 64;
  o->kv_page = -1;
  attn_lm_sampling_default(&o->smp);
  cli_args a;
  cli_args_init(&a, argc, argv, 2, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {
    const char *k = a.opt, *v = a.val;
    int64_t x;
    if (r == CLI_ARG) {
      if (o->dir) return cli_usage("one checkpoint directory only ('%s' and '%s')", o->dir, v);
      o->dir = v;
    } else if (!strcmp(k, "--prompt")) {
      o->prompt = v;
    } else if (!strcmp(k, "--prompt-file")) {
      o->prompt_file = v;
    } else if (!strcmp(k, "--input-ids")) {
      o->ids = v;
    } else if (!strcmp(k, "--tokenizer")) {
      o->tok_dir = v;
    } else if (!strcmp(k, "--kv-cache")) {
      o->kv_name = v;
    } else if (!strcmp(k, "--save-attention")) {
      o->save = v;
    } else if (!strcmp(k, "--weights")) {
      if (strcmp(v, "f32") && strcmp(v, "int8")) return cli_usage("--weights '%s': f32 or int8", v);
      o->weights = !strcmp(v, "int8") ? ATTN_HF_WEIGHTS_INT8 : ATTN_HF_WEIGHTS_F32;
    } else if (!strcmp(k, "--ignore-eos")) {
      o->ignore_eos = 1;
    } else if (!strcmp(k, "--quiet")) {
      o->quiet = 1;
    } else if (!strcmp(k, "--threads")) {
      if (cli_set_threads(k, v)) return CLI_USAGE;
    } else if (!strcmp(k, "--temperature") || !strcmp(k, "--top-p")) {
      char *end = NULL;
      double d = strtod(v, &end);
      if (!*v || *end) return cli_usage("%s: '%s' is not a number", k, v);
      if (!strcmp(k, "--top-p"))
        o->smp.top_p = (float)d;
      else
        o->smp.temperature = (float)d;
    } else {
      if (!cli_parse_i64(v, &x) || x < 0)
        return cli_usage("%s: '%s' is not a non-negative integer", k, v);
      if (!strcmp(k, "--tokens")) {
        if (x < 1 || x > (1 << 20)) return cli_usage("--tokens %s: 1 .. %d", v, 1 << 20);
        o->tokens = x;
      } else if (!strcmp(k, "--seed")) {
        o->smp.seed = (uint64_t)x;
      } else if (!strcmp(k, "--top-k")) {
        if (x > (1 << 30)) return cli_usage("--top-k %s is absurd", v);
        o->smp.top_k = (int)x;
      } else { /* --kv-page-size: 0 and above reach the cache's own check */
        o->kv_page = x;
      }
    }
  }
  if (r == CLI_HELP) {
    usage(stdout);
    return -1;
  }
  if (r < 0) return CLI_USAGE;
  if (!o->dir) return cli_usage("DIR is required (see attn hf generate --help)");
  if (!!o->prompt + !!o->prompt_file + !!o->ids > 1)
    return cli_usage("one of --prompt, --prompt-file and --input-ids");
  if (attn_lm_sampling_check(&o->smp)) return cli_usage("%s", attn_last_error());
  return CLI_OK;
}

static const char *tok_bytes(const void *tok, int32_t id, size_t *len) {
  return attn_gpt2_bpe_token(tok, id, len);
}

/* without a tokenizer: the id as the label (copied by the caller at once) */
static const char *id_bytes(const void *tok, int32_t id, size_t *len) {
  static char buf[16];
  (void)tok;
  *len = (size_t)snprintf(buf, sizeof buf, "%d", (int)id);
  return buf;
}

typedef struct {
  const attn_gpt2_bpe *tok;
  int32_t eos;
  int quiet;
} stream_ctx;

static void print_token(int32_t id, void *user) {
  const stream_ctx *s = user;
  size_t n = 0;
  const char *b = s->tok ? attn_gpt2_bpe_token(s->tok, id, &n) : NULL;
  if (s->tok && id == s->eos) return; /* the end, not text */
  if (b)
    fwrite(b, 1, n, stdout);
  else
    printf(" %d", (int)id);
  fflush(stdout);
}

/* the prompt's ids: from --input-ids, the tokenizer, or the bos token */
static attn_status prompt_ids(const gen_opts *o, const attn_hf *h, const attn_gpt2_bpe *tok,
                              int32_t **ids, int64_t *np, char **text, size_t *tlen) {
  *text = NULL;
  *tlen = 0;
  if (o->ids) return attn_hf_parse_ids(o->ids, ids, np);
  if (!o->prompt && !o->prompt_file) {
    if (h->bos_token_id < 0)
      return attn_set_error(ATTN_EINVAL, "no prompt and no bos_token_id in config.json");
    if (!(*ids = malloc(sizeof **ids))) return attn_set_error(ATTN_ENOMEM, "out of memory");
    **ids = (int32_t)h->bos_token_id;
    *np = 1;
    return ATTN_OK;
  }
  if (!tok)
    return attn_set_error(ATTN_EINVAL, "a text prompt needs a tokenizer (--tokenizer DIR, or "
                                       "--input-ids)");
  attn_status st = ATTN_OK;
  if (o->prompt_file)
    st = attn_lm_read_file(o->prompt_file, text, tlen);
  else if ((*text = strdup(o->prompt)))
    *tlen = strlen(o->prompt);
  else
    st = attn_set_error(ATTN_ENOMEM, "out of memory");
  size_t n = 0;
  if (!st) st = attn_gpt2_bpe_encode(tok, *text, *tlen, ids, &n);
  *np = (int64_t)n;
  if (!st && !n) st = attn_set_error(ATTN_EINVAL, "the prompt is empty (at least one token)");
  return st;
}

int attn_cmd_hf_generate(int argc, char **argv) {
  gen_opts o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc < 0 ? CLI_OK : rc;
  attn_lm_kv_spec kv;
  if (attn_lm_kv_spec_parse(o.kv_name, o.kv_page, &kv)) return cli_usage("%s", attn_last_error());
  attn_hf *h = NULL;
  if (attn_hf_load(o.dir, &h)) return cli_fail(NULL);
  if (h->c.arch != ATTN_HF_GPT2) {
    rc = cli_error(o.dir, "model_type '%s' is an encoder; generation needs gpt2", h->model_type);
    attn_hf_free(h);
    return rc;
  }
  attn_gpt2_bpe *tok = NULL;
  attn_status st = ATTN_OK;
  st = attn_gpt2_bpe_load_dir(o.tok_dir ? o.tok_dir : o.dir, &tok);
  /* no tokenizer in the checkpoint: ids in, ids out */
  if (st == ATTN_EIO && !o.tok_dir && !o.prompt && !o.prompt_file) st = ATTN_OK;
  if (!st && tok && attn_gpt2_bpe_vocab_size(tok) > h->c.vocab_size)
    st = attn_set_error(ATTN_EINVAL, "the tokenizer has %d tokens, the model's vocabulary %lld",
                        (int)attn_gpt2_bpe_vocab_size(tok), (long long)h->c.vocab_size);
  int32_t *ids = NULL;
  int64_t np = 0;
  char *text = NULL;
  size_t tlen = 0;
  if (!st) st = prompt_ids(&o, h, tok, &ids, &np, &text, &tlen);
  if (!st && np + o.tokens > h->c.max_positions) /* said before the prompt is printed */
    st = attn_set_error(ATTN_EINVAL,
                        "the prompt is %lld tokens long; with --tokens %lld that exceeds the "
                        "model's %lld positions (n_positions)",
                        (long long)np, (long long)o.tokens, (long long)h->c.max_positions);
  const int32_t eos = o.ignore_eos ? -1 : (int32_t)h->eos_token_id;
  stream_ctx sc = {tok, eos, o.quiet};
  attn_lm_generation g = {0};
  if (!st && !o.quiet) {
    if (text)
      fwrite(text, 1, tlen, stdout);
    else if (tok) {
      char *p = NULL;
      size_t pl = 0;
      if (!attn_gpt2_bpe_decode(tok, ids, (size_t)np, &p, &pl)) fwrite(p, 1, pl, stdout);
      free(p);
    }
  }
  if (!st)
    st = attn_hf_generate(h, ids, np, o.tokens, &o.smp, &kv, o.weights, eos, o.save != NULL,
                          print_token, &sc, &g);
  if (st) {
    rc = cli_fail(NULL);
  } else {
    char kvn[64];
    printf("\n");
    if (!o.quiet)
      printf("-- %lld tokens in %.2f s: %.1f tokens/s (prompt: %lld tokens in %.2f s; context "
             "%lld tokens; %s%s; %s weights; kv cache %s; %d threads)\n",
             (long long)g.n, g.decode_s, g.decode_s > 0 ? (double)g.n / g.decode_s : 0.0,
             (long long)np, g.prefill_s, (long long)g.context, h->model_type,
             g.n && g.ids[g.n - 1] == eos ? ", stopped at eos" : "",
             o.weights == ATTN_HF_WEIGHTS_INT8 ? "int8" : "f32",
             attn_lm_kv_spec_name(&kv, kvn, sizeof kvn), attn_get_num_threads());
  }
  if (!st && o.save &&
      attn_lm_save_attention(o.save, &g, h->c.num_layers, h->c.num_heads, ids, np,
                             tok ? tok_bytes : id_bytes, tok))
    rc = cli_fail(o.save);
  attn_lm_generation_free(&g);
  free(ids);
  free(text);
  attn_gpt2_bpe_free(tok);
  attn_hf_free(h);
  return rc;
}
