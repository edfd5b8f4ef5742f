/* attn diagnose IN.safetensors [--chart OUT.png] [--causal yes|no|auto]
 * [--model KIND] [--accuracy A] [--loss L]: what each attention head does,
 * as a table (and a chart), and advice on near-uniform heads qualified by
 * what the model is. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/diagnose.h"
#include "apps/viz/diagnose_align.h"
#include "apps/viz/viz.h"
#include "attn.h"
#include "cli/commands.h"
#include "core/parse_bool.h"

static const char usage_text[] =
    "usage: attn diagnose IN.safetensors [--chart OUT.(png|svg|pdf)] [--causal yes|no|auto]\n"
    "                     [--tensor NAME] [--model classifier|decoder|unknown]\n"
    "                     [--accuracy A] [--loss L] [--cross]\n"
    "\n"
    "Per attention head: entropy normalised by log(allowed keys), mean distance |i-j|,\n"
    "mass on the diagonal / previous / next token and within |i-j| <= 2, the most\n"
    "attended key, and a pattern: diagonal, local, previous-token, next-token, focused\n"
    "(one position, e.g. the first token or punctuation), sentence (stays within its\n"
    "sentence, split at . ! ? ; [SEP] </s>), rare-token (needs a tensor\n"
    "'freq' [Lk] of key token frequencies), uniform (flagged; whether that is a fault\n"
    "depends on the model: see --model) or mixed.\n"
    "IN is as for 'attn viz': tensor 'attn' [Lq,Lk], [H,Lq,Lk] or [Layers,H,Lq,Lk], token\n"
    "labels in __metadata__ 'tokens' or 'key_tokens'.\n"
    "  --chart   also draw the table as a chart\n"
    "  --causal  the mask to assume: yes, no (any boolean: true/false, 1/0, on/off) or auto\n"
    "            (causal if every weight above the diagonal is 0; the default)\n"
    "  --model   what the attention comes from (default: IN's metadata 'model.kind',\n"
    "            written by 'attn predict --save-attention'; else unknown). Evenly\n"
    "            spread attention is often legitimate in a mean-pooled classifier, a\n"
    "            fault in a decoder; the advice says which.\n"
    "  --accuracy, --loss  the model's held-out accuracy (0..1 or a percentage) or\n"
    "            loss, as evidence (default: IN's 'model.accuracy' / 'model.loss')\n"
    "  --cross   IN is cross attention (output steps down, source positions across):\n"
    "            per head and per layer's mean of heads, how monotonic the alignment is\n"
    "            (share of steps whose most attended source position does not go back,\n"
    "            distance of the centres of mass from a fitted diagonal as a share of the\n"
    "            source, source positions covered), and the path of the last layer\n";

/* A number in [lo, hi] from s ("99.5%" or 99.5 divided by 100 when pct); 0
 * if it is not one. */
static int parse_number(const char *s, double lo, double hi, int pct, double *out) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (pct && end != s && *end == '%') x /= 100, end++;
  else if (pct && x > 1 && x <= 100) x /= 100;
  if (errno || end == s || *end || !(x >= lo && x <= hi)) return 0;
  *out = x;
  return 1;
}

/* --model / --accuracy / --loss, else (from_file) what IN's metadata says:
 * CLI_OK, or after saying why not CLI_USAGE (a bad option) or CLI_FAILED
 * (bad metadata, the file's fault). */
static int model_context(const char *in_path, int from_file, const char *kind, const char *acc,
                         const char *loss, attn_diag_context *c) {
  attn_diag_context_default(c);
  attn_st *f = NULL;
  if (from_file && (!kind || !acc || !loss) && attn_st_load(in_path, &f)) return cli_fail(in_path);
  const char *k = kind ? kind : attn_st_meta(f, "model.kind");
  const char *a = acc ? acc : attn_st_meta(f, "model.accuracy");
  const char *l = loss ? loss : attn_st_meta(f, "model.loss");
  int rc = CLI_OK;
  if (k && attn_diag_model_from_name(k, &c->kind))
    rc = kind ? cli_usage("--model: %s", attn_last_error()) : cli_fail(in_path);
  else if (a && !parse_number(a, 0, 1, 1, &c->accuracy))
    rc = acc ? cli_usage("--accuracy: '%s' is not an accuracy in 0..1 (or 0..100 %%)", a)
             : cli_error(in_path, "metadata 'model.accuracy' '%s' is not an accuracy", a);
  else if (l && !parse_number(l, 0, INFINITY, 0, &c->loss))
    rc = loss ? cli_usage("--loss: '%s' is not a loss >= 0", l)
              : cli_error(in_path, "metadata 'model.loss' '%s' is not a loss >= 0", l);
  attn_st_free(f);
  return rc;
}

int attn_cmd_diagnose(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"--chart", CLI_VALUE}, {"--causal", CLI_VALUE},   {"--tensor", CLI_VALUE},
      {"--model", CLI_VALUE}, {"--accuracy", CLI_VALUE}, {"--loss", CLI_VALUE},
      {"--cross", CLI_FLAG},  {NULL, 0}};
  const char *in_path = NULL, *chart = NULL, *tensor = NULL, *kind = NULL, *acc = NULL, *loss = NULL;
  int cross = 0;
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_ARG) {
      if (in_path) return cli_usage("unexpected argument '%s' (see attn diagnose --help)", a.val);
      in_path = a.val;
    } else if (!strcmp(a.opt, "--cross")) {
      cross = 1;
    } else if (!strcmp(a.opt, "--chart")) {
      chart = a.val;
    } else if (!strcmp(a.opt, "--tensor")) {
      tensor = a.val;
    } else if (!strcmp(a.opt, "--model")) {
      kind = a.val;
    } else if (!strcmp(a.opt, "--accuracy")) {
      acc = a.val;
    } else if (!strcmp(a.opt, "--loss")) {
      loss = a.val;
    } else if (!strcmp(a.val, "auto")) { /* --causal */
      o.causal = -1;
    } else if (!attn_parse_bool(a.val, &o.causal)) {
      return cli_usage("--causal '%s': yes, no or auto", a.val);
    }
  }
  if (r == CLI_HELP) fputs(usage_text, stdout);
  if (r < 0) return cli_args_exit(r);
  if (!in_path) {
    cli_usage("expected IN.safetensors");
    fputs(usage_text, stderr);
    return CLI_USAGE;
  }
  attn_viz_input in;
  if (attn_viz_input_load(in_path, tensor, &in)) return cli_fail(in_path);
  cross |= in.cross; /* metadata "attention": "cross" (attn g2p predict --save-attention) */
  if (cross && chart) {
    attn_viz_input_free(&in);
    return cli_usage("--chart draws the self-attention table; not with --cross (or a file of cross attention)");
  }
  /* the model context qualifies the self-attention advice; cross attention only checks the options */
  attn_diag_context ctx;
  int crc = model_context(in_path, !cross, kind, acc, loss, &ctx);
  if (crc) {
    attn_viz_input_free(&in);
    return crc;
  }
  int64_t n = in.layers * in.heads;
  attn_head_diag *d = calloc((size_t)n, sizeof *d);
  int rc = 0;
  o.freq = in.freq;
  o.tokens = (const char *const *)in.k_labels;
  if (!d) {
    rc = cli_error(in_path, "out of memory for %lld heads", (long long)n);
  } else if (cross) {
    printf("%s: cross attention, %lld layer(s) x %lld head(s), %lld output x %lld source\n",
           in_path, (long long)in.layers, (long long)in.heads, (long long)in.lq, (long long)in.lk);
    if (attn_diagnose_cross_report(stdout, in.probs, in.layers, in.heads, in.lq, in.lk,
                                   (const char *const *)in.q_labels,
                                   (const char *const *)in.k_labels))
      rc = cli_fail(in_path);
  } else if (attn_diagnose_f32(in.probs, n, in.lq, in.lk, &o, d)) {
    rc = cli_fail(in_path);
  } else {
    printf("%s: %lld layer(s) x %lld head(s), Lq %lld, Lk %lld%s\n", in_path, (long long)in.layers,
           (long long)in.heads, (long long)in.lq, (long long)in.lk,
           in.freq ? ", with token frequencies" : "");
    attn_diagnose_print(stdout, d, in.layers, in.heads);
    attn_diagnose_advise(stdout, d, in.probs, in.layers, in.heads, in.lq, in.lk, &ctx);
    if (chart) {
      if (attn_diagnose_chart(chart, d, in.layers, in.heads))
        rc = cli_fail(chart);
      else
        printf("wrote %s\n", chart);
    }
  }
  free(d);
  attn_viz_input_free(&in);
  return rc;
}
