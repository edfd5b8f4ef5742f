/* attn diagnose IN.safetensors [--chart OUT.png] [--causal yes|no|auto]
 * [--model KIND] [--accuracy A]: what each attention head does, as a table
 * (and a chart), and advice on near-uniform heads qualified by the model. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/diagnose.h"
#include "apps/viz.h"
#include "attn.h"
#include "cli/commands.h"

static const char usage_text[] =
    "usage: attn diagnose IN.safetensors [--chart OUT.(png|svg|pdf)] [--causal yes|no|auto]\n"
    "                     [--tensor NAME] [--model classifier|decoder|unknown]\n"
    "                     [--accuracy A] [--loss L]\n"
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
    "  --causal  the mask to assume (auto: causal if every weight above the diagonal is 0)\n"
    "  --model   what the attention comes from (default: IN's metadata 'model.kind',\n"
    "            written by 'attn predict --save-attention'; else unknown). Evenly\n"
    "            spread attention is often legitimate in a mean-pooled classifier, a\n"
    "            fault in a decoder; the advice says which.\n"
    "  --accuracy, --loss  the model's held-out accuracy (0..1 or a percentage) or\n"
    "            loss, as evidence (default: IN's 'model.accuracy' / 'model.loss')\n";

/* A number in [lo, hi] from s ("99.5%" divided by 100 when pct); 0 if not. */
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

/* --model / --accuracy / --loss, else what IN's metadata says. */
static int model_context(const char *in_path, const char *kind, const char *acc, const char *loss,
                         attn_diag_context *c) {
  attn_diag_context_default(c);
  attn_st *f = NULL;
  if ((!kind || !acc || !loss) && attn_st_load(in_path, &f)) return cli_fail(in_path);
  const char *k = kind ? kind : attn_st_meta(f, "model.kind");
  const char *a = acc ? acc : attn_st_meta(f, "model.accuracy");
  const char *l = loss ? loss : attn_st_meta(f, "model.loss");
  int rc = 0; /* a bad option: usage (2); bad metadata: the file's fault (1) */
  if (k && attn_diag_model_from_name(k, &c->kind)) {
    fprintf(stderr, "attn diagnose: %s: %s\n", kind ? "--model" : in_path, attn_last_error());
    rc = kind ? 2 : 1;
  } else if (a && !parse_number(a, 0, 1, 1, &c->accuracy)) {
    fprintf(stderr, "attn diagnose: %s: '%s' is not an accuracy in 0..1 (or 0..100 %%)\n",
            acc ? "--accuracy" : in_path, a);
    rc = acc ? 2 : 1;
  } else if (l && !parse_number(l, 0, INFINITY, 0, &c->loss)) {
    fprintf(stderr, "attn diagnose: %s: '%s' is not a loss >= 0\n", loss ? "--loss" : in_path, l);
    rc = loss ? 2 : 1;
  }
  attn_st_free(f);
  return rc;
}

int attn_cmd_diagnose(int argc, char **argv) {
  const char *in_path = NULL, *chart = NULL, *tensor = NULL, *kind = NULL, *acc = NULL, *loss = NULL;
  attn_diag_opts o;
  attn_diag_opts_default(&o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return 0;
    } else if ((!strcmp(a, "--chart") || !strcmp(a, "--causal") || !strcmp(a, "--tensor") ||
                !strcmp(a, "--model") || !strcmp(a, "--accuracy") || !strcmp(a, "--loss")) &&
               !v) {
      fprintf(stderr, "attn diagnose: %s needs a value\n", a);
      return 2;
    } else if (!strcmp(a, "--chart")) {
      chart = v, i++;
    } else if (!strcmp(a, "--tensor")) {
      tensor = v, i++;
    } else if (!strcmp(a, "--model")) {
      kind = v, i++;
    } else if (!strcmp(a, "--accuracy")) {
      acc = v, i++;
    } else if (!strcmp(a, "--loss")) {
      loss = v, i++;
    } else if (!strcmp(a, "--causal")) {
      if (!strcmp(v, "yes"))
        o.causal = 1;
      else if (!strcmp(v, "no"))
        o.causal = 0;
      else if (!strcmp(v, "auto"))
        o.causal = -1;
      else {
        fprintf(stderr, "attn diagnose: --causal '%s': yes, no or auto\n", v);
        return 2;
      }
      i++;
    } else if (a[0] == '-' || in_path) {
      fprintf(stderr, "attn diagnose: unexpected '%s'\n%s", a, usage_text);
      return 2;
    } else {
      in_path = a;
    }
  }
  if (!in_path) {
    fputs(usage_text, stderr);
    return 2;
  }
  attn_diag_context ctx;
  int crc = model_context(in_path, kind, acc, loss, &ctx);
  if (crc) return crc;
  attn_viz_input in;
  if (attn_viz_input_load(in_path, tensor, &in)) return cli_fail(in_path);
  int64_t n = in.layers * in.heads;
  attn_head_diag *d = calloc((size_t)n, sizeof *d);
  int rc = 0;
  o.freq = in.freq;
  o.tokens = (const char *const *)in.k_labels;
  if (!d) {
    attn_set_error(ATTN_ENOMEM, "out of memory for %lld heads", (long long)n);
    rc = cli_fail("diagnose");
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
