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

#include "apps/text/bpe.h"
#include "apps/classifier/classifier.h"

/* The label drawn for token id (malloc'd; NULL when out of memory): a
 * printable ASCII label for its bytes: space '_', newline "\n", other bytes
 * outside printable ASCII as \xNN; "[pad]" for an empty token. */
char *attn_clf_token_label(const attn_bpe *bpe, int32_t id);

attn_status attn_clf_picture(const attn_clf *m, const attn_bpe *bpe, const int32_t *ids, int64_t n,
                             int64_t show, const char *dir, const char *title, double accuracy,
                             FILE *log);

#endif
