/* The classifier's attention on one message as pictures (apps/viz.h) and a
 * per-head diagnosis (apps/diagnose.h), written into dir:
 *   attention.png   last layer, mean over heads, the first `show` tokens
 *   heads.png       last layer, every head, the first 32 tokens
 *   attention.html  every layer and head, interactive (self-contained)
 *   diagnosis.txt / diagnosis.png   what each head does (also printed to log)
 * ids [n]: the message's tokens (n <= max_len); accuracy: the model's
 * held-out accuracy (NAN: not known), evidence for the diagnosis's advice. */
#ifndef ATTN_APPS_CLASSIFIER_VIZ_H
#define ATTN_APPS_CLASSIFIER_VIZ_H

#include <stdio.h>

#include "apps/classifier/classifier.h"
#include "apps/text/bpe.h"
#include "apps/text/token_bytes.h"

/* Characters a token's label keeps: a longer token (a run of '_' or '-' in a
 * mail) is cut to its first ATTN_CLF_LABEL_CHARS - 1 and an ellipsis, so it
 * cannot cover the picture. */
#define ATTN_CLF_LABEL_CHARS 16

/* The bytes of the tokens ids [n] into *out, with a break at token gap
 * (0: none; attn_clf_encode_gap says where a long message was cut). */
attn_status attn_clf_token_bytes(const attn_bpe *bpe, const int32_t *ids, int64_t n, int64_t gap,
                                 attn_tok_bytes *out);
/* The labels drawn for the tokens ids [n] (*labels [n], malloc'd strings):
 * by character, read from the bytes of the whole message (a character cut
 * over tokens shows in each, '·' where it is cut: apps/text/token_chars.h),
 * spaces, newlines and tabs made visible, bytes that are not UTF-8 as \xNN,
 * at most ATTN_CLF_LABEL_CHARS characters; "[pad]" for a special token. */
attn_status attn_clf_token_labels(const attn_bpe *bpe, const int32_t *ids, int64_t n, int64_t gap,
                                  char ***labels);

attn_status attn_clf_picture(const attn_clf *m, const attn_bpe *bpe, const int32_t *ids, int64_t n,
                             int64_t show, const char *dir, const char *title, double accuracy,
                             FILE *log);

#endif
