/* libFuzzer target: GPT-2's tokenizer (apps/text/gpt2_bpe.h). The first
 * byte picks how the rest is read: as a tokenizer.json, as vocab.json and
 * merges.txt (split at the first NUL), or as text for a fixed tokenizer.
 * A tokenizer that loads encodes a fixed text and the input itself; every
 * encoding must decode back to its text, and the heap's merges must equal
 * the plain min-rank loop's ids (tokens at most as many as bytes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/gpt2_bpe.h"
#include "attn.h"

static attn_gpt2_bpe *fixed; /* the 256 bytes and a few merges */

static void fail(const char *what) {
  fprintf(stderr, "fuzz: gpt2tok: %s\n", what);
  abort();
}

/* the byte-level character of byte b as UTF-8 into out; its length */
static int byte_char(int b, char *out) {
  int own = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE, k = 0;
  unsigned cp = (unsigned)b;
  if (!own) {
    cp = 0x100;
    for (int c = 0; c < b; c++)
      cp += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
  }
  if (cp < 0x80) {
    out[k++] = (char)cp;
  } else {
    out[k++] = (char)(0xC0 | cp >> 6);
    out[k++] = (char)(0x80 | (cp & 0x3F));
  }
  return k;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  attn_set_num_threads(1);
  static char vocab[8192];
  size_t n = 0;
  vocab[n++] = '{';
  for (int b = 0; b < 256; b++) {
    char c[4];
    int k = byte_char(b, c);
    n += (size_t)snprintf(vocab + n, sizeof vocab - n, "%s\"%s%.*s\": %d", b ? ", " : "",
                          b == '"' || b == '\\' ? "\\" : "", k, c, b);
  }
  static const char *const extra[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "in", "er", "aa", "aaaa"};
  for (int i = 0; i < 7; i++)
    n += (size_t)snprintf(vocab + n, sizeof vocab - n, ", \"%s\": %d", extra[i], 256 + i);
  n += (size_t)snprintf(vocab + n, sizeof vocab - n, "}");
  static const char merges[] =
      "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\ni n\ne r\na a\naa aa\n";
  if (attn_gpt2_bpe_from_vocab_merges(vocab, n, merges, sizeof merges - 1, NULL, NULL, &fixed))
    fail(attn_last_error());
  return 0;
}

static void round_trip(const attn_gpt2_bpe *t, const char *s, size_t n) {
  int32_t *ids = NULL;
  size_t k = 0, len = 0;
  if (attn_gpt2_bpe_encode(t, s, n, &ids, &k)) return; /* a byte without a token */
  if (k > n + 1) fail("more tokens than bytes");
  char *back = NULL;
  if (attn_gpt2_bpe_decode(t, ids, k, &back, &len)) fail("its own ids do not decode");
  /* add_prefix_space may have put a space in front */
  if (!(len == n && !memcmp(back, s, n)) &&
      !(len == n + 1 && back[0] == ' ' && !memcmp(back + 1, s, n)))
    fail("decode(encode(s)) != s");
  free(back);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *s = (const char *)data + 1;
  size_t n = size - 1;
  static const char text[] =
      "Hello world, it's the 1st test: \xc3\xa9t\xc3\xa9 \xf0\x9f\x99\x82  ok\n";
  attn_gpt2_bpe *t = NULL;
  switch (data[0] % 3) {
  case 0:
    if (!attn_gpt2_bpe_from_tokenizer_json(s, n, "fuzz.json", &t)) {
      round_trip(t, text, sizeof text - 1);
      round_trip(t, s, n);
      attn_gpt2_bpe_free(t);
    } else if (!attn_last_error()[0]) {
      fail("a failure without a message");
    }
    break;
  case 1: {
    const char *nul = memchr(s, 0, n);
    size_t vn = nul ? (size_t)(nul - s) : n;
    const char *m = nul ? nul + 1 : "";
    if (!attn_gpt2_bpe_from_vocab_merges(s, vn, m, nul ? n - vn - 1 : 0, NULL, NULL, &t)) {
      round_trip(t, text, sizeof text - 1);
      round_trip(t, s, n);
      attn_gpt2_bpe_free(t);
    }
    break;
  }
  default: round_trip(fixed, s, n);
  }
  return 0;
}
