/* libFuzzer target: the BPE tokenizer (apps/bpe.h). The input is read as a
 * saved tokenizer (attn_bpe_load; one that loads must save, load again with
 * the same vocabulary and round-trip its own text) and as text: encoded
 * and decoded by a tokenizer trained on it and by one trained on a fixed
 * text, decode(encode(s)) must give s back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/bpe.h"
#include "attn.h"

static attn_bpe *fixed; /* trained once on a fixed text */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  attn_set_num_threads(1);
  static const char text[] =
      "the quick brown fox jumps over the lazy dog; the dog sleeps. "
      "Subject: Re: offer 100% free!!! \xe4\xbd\xa0\xe5\xa5\xbd \xe4\xbd\xa0";
  const char *texts[1] = {text};
  const size_t lens[1] = {sizeof text - 1};
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  cfg.vocab_size = ATTN_BPE_MERGE0 + 40;
  cfg.min_count = 1;
  if (attn_bpe_train(texts, lens, 1, &cfg, &fixed)) abort();
  return 0;
}

static void fail(const char *what) {
  fprintf(stderr, "fuzz: bpe: %s\n", what);
  abort();
}

/* decode(encode(s)) == s */
static void round_trip(const attn_bpe *b, const char *s, size_t n) {
  int32_t *ids = NULL;
  size_t n_ids = 0, len = 0;
  char *back = NULL;
  if (attn_bpe_encode_alloc(b, s, n, &ids, &n_ids)) return; /* out of memory only */
  if (attn_bpe_decode(b, ids, n_ids, &back, &len)) fail("its own ids do not decode");
  if (len != n || memcmp(back, s, n)) fail("decode(encode(s)) != s");
  free(ids);
  free(back);
}

/* s as a saved tokenizer */
static void load_save(const char *s) {
  attn_bpe *b = NULL;
  if (attn_bpe_load(s, &b)) return;
  char *saved = NULL;
  if (attn_bpe_save(b, &saved)) fail("a loaded tokenizer does not save");
  attn_bpe *again = NULL;
  if (attn_bpe_load(saved, &again)) fail("a saved tokenizer does not load");
  if (attn_bpe_vocab_size(again) != attn_bpe_vocab_size(b)) fail("vocab changed by save + load");
  round_trip(b, s, strlen(s));
  attn_bpe_free(again);
  free(saved);
  attn_bpe_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  load_save(s);
  round_trip(fixed, s, size);
  const char *texts[1] = {s};
  const size_t lens[1] = {size};
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  cfg.vocab_size = ATTN_BPE_MERGE0 + 64;
  cfg.max_chunk = 2 + (size ? data[0] % 63 : 0);
  cfg.min_count = 1;
  attn_bpe *own = NULL;
  if (!attn_bpe_train(texts, lens, 1, &cfg, &own)) round_trip(own, s, size);
  attn_bpe_free(own);
  free(s);
  return 0;
}
