/* attn predict's --picture DIR, --save-attention OUT, --member K and --merge
 * chars|words: member K's attention on each message, drawn into DIR under
 * the file's stem (per token, or merged into the message's characters or
 * words) and saved for attn viz / attn diagnose
 * (apps/classifier_viz_message.h). */
#ifndef ATTN_CLI_PREDICT_ATTENTION_H
#define ATTN_CLI_PREDICT_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "apps/classifier/classifier_ensemble.h"
#include "apps/text/bpe.h"
#include "apps/text/token_chars.h"
#include "cli/cli_outpath.h"

typedef struct {
  const char *picture, *save, *model;
  int member;   /* 0-based member of an ensemble to draw and save */
  attn_unit_kind merge; /* what the pictures show: tokens, characters or words */
  int many;       /* more than one FILE: saved files get the file's stem */
  cli_stems stems; /* .stems [files] calloc'd by the caller */
} cli_predict_out;

/* DIR exists (made if missing) and is writable, OUT's folder too: 0, or 1
 * after saying why not on stderr. */
int cli_predict_out_ready(const cli_predict_out *o);

/* The message `path` (tokens ids [n], a cut before token gap when not 0,
 * predicted `pred`, e.g. "spam 0.9731"): its attention saved and drawn as o
 * asks; progress on stderr. */
attn_status cli_predict_out_write(cli_predict_out *o, const attn_clf_ens *e, const attn_bpe *bpe,
                                  const char *path, const int32_t *ids, size_t n, size_t gap,
                                  const char *pred);

void cli_predict_out_free(cli_predict_out *o); /* the stems */

#endif
