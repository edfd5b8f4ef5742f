/* libFuzzer target: the JSON parser of safetensors headers (io/json.h),
 * unlimited and with a bound on items; a failure must say why. */
#include <stdio.h>
#include <stdlib.h>

#include "io/json.h"

static void parse(const uint8_t *data, size_t size, size_t max_items) {
  json_value *v = NULL;
  char err[160] = "";
  if (attn_json_parse_limited((const char *)data, size, max_items, &v, err, sizeof err) == 0) {
    attn_json_free(v);
  } else if (!err[0]) {
    fprintf(stderr, "fuzz: json: a failure without a message\n");
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parse(data, size, 0);
  parse(data, size, 8);
  return 0;
}
