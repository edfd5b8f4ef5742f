/* libFuzzer target: `attn sdpa IN OUT` on a fuzzed IN, in-process
 * (cli_sdpa_run: what the command does after its arguments), with the math
 * and the auto backend. A run either succeeds or fails with a message, and
 * leaves no partial OUT (fuzz_file.h). */
#include "cli/commands.h"
#include "fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  attn_set_num_threads(1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_file_run("attn sdpa", cli_sdpa_run, data, size);
  return 0;
}
