/* attn predict's --picture, --save-attention and --member: the attention of
 * one member of the model on each message, drawn and saved
 * (cli_predict_attention.h). */
#include "cli/cli_predict_attention.h"

#include <stdio.h>
#include <string.h>

#include "apps/classifier/classifier_viz_message.h"
#include "apps/viz/viz.h"

int cli_predict_out_ready(const cli_predict_out *o) {
  return (o->picture && cli_out_dir_ready("--picture", o->picture)) ||
         (o->save && cli_out_file_ready("--save-attention", o->save));
}

void cli_predict_out_free(cli_predict_out *o) { cli_stems_free(&o->stems); }

/* The attention of the drawn member on one message: saved and drawn. */
attn_status cli_predict_out_write(cli_predict_out *o, const attn_clf_ens *e, const attn_bpe *bpe,
                                  const char *path, const int32_t *ids, size_t n, size_t gap,
                                  const char *pred) {
  const char *stem = cli_stem(&o->stems, path, 1);
  if (!stem) return attn_set_error(ATTN_ENOMEM, "out of memory");
  attn_clf_msg_attn a;
  attn_status st = attn_clf_msg_attention(&e->m[o->member], bpe, ids, (int64_t)n, (int64_t)gap, &a);
  char member[64] = "", file[4400], title[512];
  if (e->n > 1) snprintf(member, sizeof member, "%d of %d", o->member + 1, e->n);
  snprintf(title, sizeof title, "%.200s (%s%s%s)", path, pred, member[0] ? ", member " : "", member);
  if (!st && o->save) {
    cli_out_name(file, sizeof file, o->save, o->many, stem); /* OUT_<stem>.safetensors */
    const char *kv[] = {"model.kind", "classifier",
                        "model.pool", e->m[o->member].c.pool == ATTN_CLF_POOL_MEANMAX ? "mean+max" : "mean",
                        "model.file", o->model,
                        "model.member", member[0] ? member : "1 of 1",
                        "message.file", path,
                        "prediction", pred,
                        NULL};
    st = attn_clf_msg_save(file, &a, kv);
    if (!st) fprintf(stderr, "attn predict: %s: attention saved to %s (attn viz / attn diagnose read it)\n", path, file);
    else attn_prefix_error(st, "--save-attention");
  }
  if (!st && o->picture) {
    snprintf(file, sizeof file, "%s/%s", o->picture, stem);
    st = attn_clf_msg_pictures(file, &a, title, NULL, o->merge, NULL);
    int64_t units = a.n; /* what the page holds: tokens, or the units they make up */
    char merged[64] = "";
    if (o->merge != ATTN_UNITS_TOKENS) {
      attn_tok_units u = {0};
      if (!st && !attn_tok_units_make(&a.bytes, o->merge, 0, &u)) units = u.n_units;
      attn_tok_units_free(&u);
      snprintf(merged, sizeof merged, ", merged into %lld %s", (long long)units,
               attn_unit_kind_noun(o->merge));
    }
    int page = a.layers * a.heads * units * units <= ATTN_VIZ_HTML_MAX_VALUES;
    if (!st)
      fprintf(stderr,
              "attn predict: %s: pictures %s_layer*.png, %s%s, %s_diagnosis.txt (%lld "
              "layer(s) x %lld head(s), %zu tokens%s%s%s)\n",
              path, file, page ? file : "no page: too many weights for ", page ? ".html" : "it",
              file, (long long)a.layers, (long long)a.heads, n, merged,
              member[0] ? ", member " : "", member);
    else attn_prefix_error(st, "--picture");
  }
  attn_clf_msg_attn_free(&a);
  return st;
}
