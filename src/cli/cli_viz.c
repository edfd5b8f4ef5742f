/* attn viz IN.safetensors OUT.(png|svg|pdf|html) [options]: pictures of
 * attention weights saved from attn or from PyTorch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apps/viz/viz.h"
#include "attn.h"
#include "cli/commands.h"

static const char usage_text[] =
    "usage: attn viz IN.safetensors OUT.(png|svg|pdf|html) [--layer L] [--head H | --all-heads |\n"
    "                --model] [--cmap bone|viridis] [--region q0:q1,k0:k1] [--title T]\n"
    "                [--cross] [--max-labels N] [--tensor NAME] [--html PAGE.html]\n"
    "                [--row-norm] [--mean] [--merge chars|words]\n"
    "\n"
    "Draws attention weights: query tokens down, key tokens across, a colour bar.\n"
    "IN holds a tensor 'attn' (F32/F16/BF16) of shape [Lq,Lk], [H,Lq,Lk] or\n"
    "[Layers,H,Lq,Lk]; its __metadata__ may hold 'tokens' (a JSON array of strings for\n"
    "both axes) or 'query_tokens' and 'key_tokens'. From PyTorch:\n"
    "  save_file({'attn': w.float().contiguous()}, 'a.safetensors',\n"
    "            metadata={'tokens': json.dumps(tokens)})\n"
    "or from a classifier on your own message:\n"
    "  attn predict MODEL my.eml --save-attention a.safetensors\n"
    "The format follows OUT's extension (.png, .svg, .pdf; .html: interactive page).\n"
    "  --layer L      layer to draw (default 0)\n"
    "  --head H       one head as a heatmap (default 0)\n"
    "  --mean         the mean of the layer's heads as one heatmap\n"
    "  --all-heads    every head of the layer as small multiples\n"
    "  --model        layers x heads overview\n"
    "  --cmap         bone (the tutorial's, default) or viridis (perceptual)\n"
    "  --region       crop to queries [q0,q1) and keys [k0,k1), e.g. 0:40,0:40\n"
    "  --cross        cross-attention: label the axes output (down) / source (across);\n"
    "                 with --all-heads or --model a row per layer of every head and\n"
    "                 the mean of the heads, token labels on the tiles; the default\n"
    "                 for a file whose metadata 'attention' is 'cross' (attn g2p\n"
    "                 predict --save-attention)\n"
    "  --max-labels   labels per axis before thinning (default 60; labels stay >= 10 px\n"
    "                 high, so a long axis may show fewer)\n"
    "  --row-norm     scale each row to its largest drawn value (colour bar 0..1,\n"
    "                 'weight / row max'): for cropped or averaged rows that are\n"
    "                 otherwise near black\n"
    "  --html PAGE    also write the interactive page (head view) to PAGE\n"
    "  --merge chars|words  the attention of the characters or words the tokens make\n"
    "                 up (a unit's keys summed, its queries averaged, a token cut over\n"
    "                 two units shared by its bytes: rows still sum to 1); words split\n"
    "                 at whitespace, each CJK character a word, punctuation a unit of\n"
    "                 its own. Needs the tokens' bytes, metadata 'token_bytes' (a JSON\n"
    "                 array of hex strings), which attn predict --save-attention and\n"
    "                 attn.viz write; --region then counts units\n"
    "Labels: with 'token_bytes' and no 'tokens', each token is labelled by the\n"
    "characters it holds, '\xC2\xB7' where a character is cut over tokens.\n";

/* "a:b" -> [a, b); either side may be empty (start / end). */
static int parse_range(const char *s, size_t n, int64_t *a, int64_t *b) {
  char buf[64];
  if (n >= sizeof buf) return 0;
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *colon = strchr(buf, ':');
  if (!colon) return 0;
  *colon = '\0';
  *a = 0, *b = 0;
  if (buf[0] && !cli_parse_i64(buf, a)) return 0;
  if (colon[1] && !cli_parse_i64(colon + 1, b)) return 0;
  return 1;
}

static int has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  return n > e && !strcasecmp(path + n - e, ext);
}

int attn_cmd_viz(int argc, char **argv) {
  const char *in_path = NULL, *out_path = NULL, *html_path = NULL, *tensor = NULL, *title = NULL;
  int64_t layer = 0, head = 0;
  int all_heads = 0, model = 0, cross = 0, head_given = 0, mean = 0;
  attn_unit_kind merge = ATTN_UNITS_TOKENS;
  float *avg = NULL; /* --mean: [heads + 1, lq, lk], the mean last */
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  static const cli_opt opts[] = {
      {"--all-heads", CLI_FLAG}, {"--model", CLI_FLAG},   {"--cross", CLI_FLAG},
      {"--layer", CLI_VALUE},    {"--head", CLI_VALUE},   {"--max-labels", CLI_VALUE},
      {"--cmap", CLI_VALUE},     {"--region", CLI_VALUE}, {"--title", CLI_VALUE},
      {"--tensor", CLI_VALUE},   {"--html", CLI_VALUE},   {"--row-norm", CLI_FLAG},
      {"--mean", CLI_FLAG},      {"--merge", CLI_VALUE},  {NULL, 0}};
  cli_args args;
  cli_args_init(&args, argc, argv, 1, opts);
  int r;
  while ((r = cli_args_next(&args)) > 0) {
    const char *a = args.opt, *v = args.val;
    if (r == CLI_ARG) {
      if (!in_path) in_path = v;
      else if (!out_path) out_path = v;
      else return cli_usage("unexpected argument '%s' (see attn viz --help)", v);
    } else if (!strcmp(a, "--all-heads")) {
      all_heads = 1;
    } else if (!strcmp(a, "--model")) {
      model = 1;
    } else if (!strcmp(a, "--cross")) {
      cross = 1;
    } else if (!strcmp(a, "--mean")) {
      mean = 1;
    } else if (!strcmp(a, "--row-norm")) {
      o.row_norm = 1;
    } else if (!strcmp(a, "--layer") || !strcmp(a, "--head") || !strcmp(a, "--max-labels")) {
      int64_t x;
      if (!cli_parse_i64(v, &x) || x < 0 || x > 1000000)
        return cli_usage("%s: '%s' is not a non-negative integer", a, v);
      if (!strcmp(a, "--layer")) layer = x;
      if (!strcmp(a, "--head")) head = x, head_given = 1;
      if (!strcmp(a, "--max-labels")) o.max_labels = x ? (int)x : 60;
    } else if (!strcmp(a, "--cmap")) {
      if (attn_viz_cmap_from_name(v, &o.cmap)) return cli_fail("--cmap"), CLI_USAGE;
    } else if (!strcmp(a, "--region")) {
      const char *comma = strchr(v, ',');
      if (!comma || !parse_range(v, (size_t)(comma - v), &o.q0, &o.q1) ||
          !parse_range(comma + 1, strlen(comma + 1), &o.k0, &o.k1))
        return cli_usage("--region '%s': expected q0:q1,k0:k1", v);
    } else if (!strcmp(a, "--title")) {
      title = v;
    } else if (!strcmp(a, "--tensor")) {
      tensor = v;
    } else if (!strcmp(a, "--merge")) {
      if (attn_unit_kind_from_name(v, &merge))
        return cli_usage("--merge: '%s' is not chars or words (the units to draw)", v);
    } else { /* --html */
      html_path = v;
    }
  }
  if (r == CLI_HELP) fputs(usage_text, stdout);
  if (r < 0) return cli_args_exit(r);
  if (!in_path || (!out_path && !html_path)) {
    cli_usage("expected IN.safetensors and OUT.(png|svg|pdf|html)");
    fputs(usage_text, stderr);
    return CLI_USAGE;
  }
  if (all_heads + model + head_given + mean > 1)
    return cli_usage("choose one of --head, --mean, --all-heads, --model");
  attn_viz_input in;
  if (attn_viz_input_load(in_path, tensor, &in)) return cli_fail(in_path);
  int rc = 0;
  if (merge != ATTN_UNITS_TOKENS && attn_viz_input_merge(&in, merge)) {
    rc = cli_fail(in_path); /* before anything is written */
    goto done;
  }
  if (layer >= in.layers || head >= in.heads) {
    rc = cli_error(in_path, "layer %lld / head %lld out of range: the file has %lld layers of %lld heads",
                   (long long)layer, (long long)head, (long long)in.layers, (long long)in.heads);
    goto done;
  }
  cross |= in.cross; /* metadata "attention": "cross" (attn g2p predict --save-attention) */
  const char *const *ql = (const char *const *)in.q_labels;
  const char *const *kl = (const char *const *)in.k_labels;
  int64_t per = in.lq * in.lk;
  char auto_title[192], units[64] = ""; /* ", words (from 96 tokens)" */
  if (merge != ATTN_UNITS_TOKENS) {
    o.units = attn_unit_kind_noun(merge);
    if (in.tok_lq == in.tok_lk)
      snprintf(units, sizeof units, ", %s (from %lld tokens)", o.units, (long long)in.tok_lq);
    else
      snprintf(units, sizeof units, ", %s (from %lld x %lld tokens)", o.units, (long long)in.tok_lq,
               (long long)in.tok_lk);
  }
  if (!title) {
    if (model)
      snprintf(auto_title, sizeof auto_title, "%lld layers x %lld heads", (long long)in.layers,
               (long long)in.heads);
    else if (all_heads)
      snprintf(auto_title, sizeof auto_title, "layer %lld: all heads", (long long)layer);
    else if (mean)
      snprintf(auto_title, sizeof auto_title, "layer %lld, mean of %lld heads", (long long)layer,
               (long long)in.heads);
    else
      snprintf(auto_title, sizeof auto_title, "layer %lld, head %lld", (long long)layer,
               (long long)head);
    if (in.rank == 2) snprintf(auto_title, sizeof auto_title, "attention");
    if (units[0]) strncat(auto_title, units, sizeof auto_title - strlen(auto_title) - 1);
    title = in.rank == 2 && !units[0] ? NULL : auto_title;
  }
  o.title = title;
  if (cross) o.q_name = "output", o.k_name = "source";
  if (out_path && has_ext(out_path, ".html") && !html_path) html_path = out_path, out_path = NULL;
  attn_status st = ATTN_OK;
  if (out_path) {
    if (cross && (model || all_heads))
      st = attn_viz_cross_f32(out_path, in.probs + (model ? 0 : layer * in.heads * per),
                              model ? in.layers : 1, in.heads, in.lq, in.lk, ql, kl, &o);
    else if (model)
      st = attn_viz_model_f32(out_path, in.probs, in.layers, in.heads, in.lq, in.lk, &o);
    else if (all_heads)
      st = attn_viz_heads_f32(out_path, in.probs + layer * in.heads * per, in.heads, in.lq, in.lk,
                              ql, kl, &o);
    else if (mean && !(avg = attn_viz_append_mean(in.probs + layer * in.heads * per, 1, in.heads, per)))
      st = ATTN_ENOMEM;
    else
      st = attn_viz_heatmap_f32(out_path, mean ? avg + in.heads * per : in.probs + (layer * in.heads + head) * per,
                                in.lq, in.lk, ql, kl, &o);
    if (st) {
      rc = cli_fail(out_path);
      goto done;
    }
    printf("wrote %s\n", out_path);
  }
  if (html_path) {
    char page_title[256];
    snprintf(page_title, sizeof page_title, "attention: %lld layer(s) x %lld head(s)%s",
             (long long)in.layers, (long long)in.heads, units);
    const char *pt = title == auto_title || !title ? page_title : title;
    if (cross)
      st = attn_viz_html_cross_f32(html_path, in.probs, in.layers, in.heads, in.lq, in.lk, ql, kl,
                                   pt);
    else
      st = attn_viz_html_f32(html_path, in.probs, in.layers, in.heads, in.lq, in.lk, ql, kl, pt);
    if (st) {
      rc = cli_fail(html_path);
      goto done;
    }
    printf("wrote %s\n", html_path);
  }
done:
  free(avg);
  attn_viz_input_free(&in);
  return rc;
}
