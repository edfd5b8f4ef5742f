/* libFuzzer target: the safetensors reader (attn_st_parse) on fuzzed file
 * bytes. What it accepts is walked: every tensor's data read at both ends
 * (AddressSanitizer checks the bounds it claims), every metadata key and
 * value read to its NUL. */
#include <string.h>

#include "attn.h"

static volatile unsigned char sink;

static void walk(const attn_st *st) {
  for (int i = 0; i < attn_st_count(st); i++) {
    const attn_tensor *t = attn_st_get(st, attn_st_name(st, i));
    size_t n = attn_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
      n *= (size_t)t->shape[d];
    if (n) sink ^= ((const unsigned char *)t->data)[0] ^ ((const unsigned char *)t->data)[n - 1];
  }
  for (int i = 0; i < attn_st_meta_count(st); i++) {
    const char *k = attn_st_meta_key(st, i);
    sink ^= (unsigned char)(strlen(k) + strlen(attn_st_meta(st, k)));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_st *st = NULL;
  if (attn_st_parse(data, size, &st) == ATTN_OK) walk(st);
  attn_st_free(st);
  return 0;
}
