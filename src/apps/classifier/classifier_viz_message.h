/* A classifier's attention on one message of one's own (`attn predict
 * --picture DIR --save-attention OUT`): the weights of every layer and head
 * with the message's tokens, saved in the format `attn viz` / `attn
 * diagnose` read, and drawn per head and per layer:
 *   PREFIX_layer<L>.png          layer L, mean of its heads
 *   PREFIX_layer<L>_heads.png    layer L, every head side by side
 *   PREFIX_layer<L>_head<H>.png  layer L, head H
 *   PREFIX.html                  every layer and head, interactive
 *   PREFIX_diagnosis.txt         what each head does, and advice
 * Every file is written to a temporary name and renamed when complete.
 * Token labels are by character (attn_clf_token_labels); the pictures may
 * show the attention merged into the characters or words of the message
 * (attn_viz_merge_f32). */
#ifndef ATTN_APPS_CLASSIFIER_VIZ_MESSAGE_H
#define ATTN_APPS_CLASSIFIER_VIZ_MESSAGE_H

#include <stdio.h>

#include "apps/classifier/classifier.h"
#include "apps/text/bpe.h"
#include "apps/text/token_chars.h"
#include "apps/viz/diagnose.h"

typedef struct {
  int64_t layers, heads, n;
  float *probs;  /* [layers, heads, n, n] */
  char **tokens; /* [n] labels of the message's tokens */
  attn_tok_bytes bytes; /* the tokens' bytes (for merging, and saved with them) */
} attn_clf_msg_attn;

/* The attention of m on the message ids [n] (1 <= n <= max_len); gap: the
 * token after a cut of a long message (attn_clf_encode_gap), 0: none. */
attn_status attn_clf_msg_attention(const attn_clf *m, const attn_bpe *bpe, const int32_t *ids,
                                   int64_t n, int64_t gap, attn_clf_msg_attn *out);
void attn_clf_msg_attn_free(attn_clf_msg_attn *a); /* a zeroed struct is a valid empty one */

/* Writes tensor "attn" F32 [layers, heads, n, n] and metadata "tokens" (a
 * JSON array of the labels), "token_bytes" and "token_breaks" (apps/text/
 * token_bytes.h) plus the pairs kv[0] = kv[1], kv[2] = kv[3], ... up to a
 * NULL key (kv may be NULL). Atomic. */
attn_status attn_clf_msg_save(const char *path, const attn_clf_msg_attn *a, const char *const *kv);

/* The pictures and the diagnosis above, PREFIX = prefix (its folder must
 * exist); name goes into every title (e.g. the message's file name); ctx:
 * what the diagnosis knows about the model (NULL: a pooled classifier,
 * nothing else known). units: ATTN_UNITS_TOKENS draws the tokens,
 * ATTN_UNITS_CHARS / _WORDS the attention merged into the message's
 * characters / words (attn_viz_merge_f32), which every title then names;
 * the diagnosis is always of the tokens (what the heads do). log (may be
 * NULL) gets one line per kind of file. */
attn_status attn_clf_msg_pictures(const char *prefix, const attn_clf_msg_attn *a, const char *name,
                                  const attn_diag_context *ctx, attn_unit_kind units, FILE *log);

#endif
