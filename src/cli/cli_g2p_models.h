/* attn g2p eval / predict: the models a command decodes with (MODEL and
 * --ensemble F[,F...]) and those that rescore its beam (--rescore
 * F[,F...]), loaded from comma-separated lists of files. */
#ifndef ATTN_CLI_G2P_MODELS_H
#define ATTN_CLI_G2P_MODELS_H

#include "apps/seq2seq/g2p_decode.h"

typedef struct {
  attn_g2p_model m[ATTN_G2P_MAX_MODELS];
  const attn_g2p_model *ms[ATTN_G2P_MAX_MODELS]; /* ms[k] = &m[k], k < n */
  int n;
} cli_g2p_models;

/* A new list holding first (may be NULL: none) and the files of list (may be
 * NULL; opt names it in messages, "--ensemble"); NULL, with *r the exit
 * status after a message, on failure. */
cli_g2p_models *cli_g2p_models_load(const char *first, const char *list, const char *opt, int *r);
void cli_g2p_models_free(cli_g2p_models *e);

#endif
