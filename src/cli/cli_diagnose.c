/* attn diagnose IN.safetensors [--chart OUT.png] [--causal yes|no|auto]:
 * what each attention head does, as a table (and a chart). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/diagnose.h"
#include "apps/viz.h"
#include "attn.h"
#include "cli/commands.h"
#include "core/parse_bool.h"

static const char usage_text[] =
    "usage: attn diagnose IN.safetensors [--chart OUT.(png|svg|pdf)] [--causal yes|no|auto]\n"
    "                     [--tensor NAME]\n"
    "\n"
    "Per attention head: entropy normalised by log(allowed keys), mean distance |i-j|,\n"
    "mass on the diagonal / previous / next token and within |i-j| <= 2, the most\n"
    "attended key, and a pattern: diagonal, local, previous-token, next-token, focused\n"
    "(one position, e.g. the first token or punctuation), sentence (stays within its\n"
    "sentence, split at . ! ? ; [SEP] </s>), rare-token (needs a tensor\n"
    "'freq' [Lk] of key token frequencies), uniform (flagged, with likely causes) or mixed.\n"
    "IN is as for 'attn viz': tensor 'attn' [Lq,Lk], [H,Lq,Lk] or [Layers,H,Lq,Lk], token\n"
    "labels in __metadata__ 'tokens' or 'key_tokens'.\n"
    "  --chart   also draw the table as a chart\n"
    "  --causal  the mask to assume: yes, no (any boolean: true/false, 1/0, on/off) or auto\n"
    "            (causal if every weight above the diagonal is 0; the default)\n";

int attn_cmd_diagnose(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"--chart", CLI_VALUE}, {"--causal", CLI_VALUE}, {"--tensor", CLI_VALUE}, {NULL, 0}};
  const char *in_path = NULL, *chart = NULL, *tensor = NULL;
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_ARG) {
      if (in_path) return cli_usage("unexpected argument '%s' (see attn diagnose --help)", a.val);
      in_path = a.val;
    } else if (!strcmp(a.opt, "--chart")) {
      chart = a.val;
    } else if (!strcmp(a.opt, "--tensor")) {
      tensor = a.val;
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
  int64_t n = in.layers * in.heads;
  attn_head_diag *d = calloc((size_t)n, sizeof *d);
  int rc = 0;
  o.freq = in.freq;
  o.tokens = (const char *const *)in.k_labels;
  if (!d) {
    rc = cli_error(in_path, "out of memory for %lld heads", (long long)n);
  } else if (attn_diagnose_f32(in.probs, n, in.lq, in.lk, &o, d)) {
    rc = cli_fail(in_path);
  } else {
    printf("%s: %lld layer(s) x %lld head(s), Lq %lld, Lk %lld%s\n", in_path, (long long)in.layers,
           (long long)in.heads, (long long)in.lq, (long long)in.lk,
           in.freq ? ", with token frequencies" : "");
    attn_diagnose_print(stdout, d, in.layers, in.heads);
    int uniform = 0;
    for (int64_t i = 0; i < n; i++)
      uniform += d[i].pattern == ATTN_PATTERN_UNIFORM;
    if (uniform)
      printf("warning: %d head(s) near-uniform (tutorial 6.1): check initialisation "
             "(xavier_uniform_ on W_q, W_k), 1/sqrt(d_k) scaling, whether Q and K are "
             "near-identical; LayerNorm helps\n",
             uniform);
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
