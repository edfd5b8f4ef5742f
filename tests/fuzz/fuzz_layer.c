/* libFuzzer target: `attn layer IN OUT` on a fuzzed IN, in-process (the
 * library calls the command makes: attn_st_load, attn_layer_run_st,
 * attn_st_save), with the math and the auto backend. A run either succeeds
 * or fails with a message, and leaves no partial OUT (fuzz_file.h). */
#include "fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  attn_set_num_threads(1);
  return 0;
}

static attn_status run_layer(const char *in_path, const char *out_path, attn_backend backend) {
  attn_st *in = NULL, *out = NULL;
  attn_status st = attn_st_load(in_path, &in);
  if (!st) st = attn_layer_run_st(in, backend, &out);
  attn_st_free(in);
  if (!st) st = attn_st_save(out, out_path);
  attn_st_free(out);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_file_run("attn layer", run_layer, data, size);
  return 0;
}
