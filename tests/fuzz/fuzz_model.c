/* libFuzzer target: the classifier model loader as `attn predict MODEL`
 * uses it (attn_clf_ens_load on a file, the "tokenizer" metadata through
 * attn_bpe_load), then one prediction of a short text with what loaded. */
#include <stdlib.h>
#include <string.h>

#include "apps/text/bpe.h"
#include "apps/classifier/classifier_ensemble.h"
#include "fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  attn_set_num_threads(1);
  return 0;
}

/* probabilities of a few tokens of a fixed text under e's first config */
static void predict(const attn_clf_ens *e, const attn_bpe *bpe) {
  static const char text[] = "Subject: fuzz\nFrom: a@b\n\nhello world";
  const attn_clf_config *c = &e->m[0].c;
  int32_t ids[16];
  size_t n = 0;
  const size_t cap = (size_t)(c->max_len < 16 ? c->max_len : 16);
  if (c->vocab < 1 || attn_bpe_encode(bpe, text, sizeof text - 1, ids, cap, &n) || n == 0) return;
  for (size_t i = 0; i < n; i++)
    ids[i] %= (int32_t)c->vocab; /* a model's own vocabulary */
  float *probs = malloc((size_t)c->classes * sizeof *probs);
  const int32_t len = (int32_t)n;
  if (probs) attn_clf_ens_predict(e, ids, &len, 1, (int64_t)n, probs);
  free(probs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_clf_ens e;
  attn_st *file = NULL;
  if (attn_clf_ens_load(fuzz_file_input(data, size), &e, &file)) return 0;
  const char *tok = attn_st_meta(file, "tokenizer");
  attn_bpe *bpe = NULL;
  if (tok && !attn_bpe_load(tok, &bpe)) predict(&e, bpe);
  attn_bpe_free(bpe);
  attn_st_free(file);
  attn_clf_ens_free(&e);
  return 0;
}
