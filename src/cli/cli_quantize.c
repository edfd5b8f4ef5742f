/* attn quantize MODEL.safetensors -o MODEL.int8.safetensors: every Linear
 * weight to int8 per output channel (+ F32 scales), the rest copied; prints
 * the sizes before and after (include/attn/quant.h). */
#include <stdio.h>
#include <string.h>

#include "apps/classifier_ensemble.h"
#include "attn.h"
#include "attn/quant.h"
#include "cli/commands.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: attn quantize MODEL.safetensors -o OUT.safetensors\n"
          "  quantizes every Linear weight (2-D *.weight / *_proj_weight; not embeddings or\n"
          "  norms) per output channel to I8 \"<name>\" + F32 \"<name>.scale\" [out];\n"
          "  copies every other tensor and the metadata, adds quantized=int8.\n"
          "  `attn predict` / `attn eval` load the result and run those Linears in int8.\n");
}

int attn_cmd_quantize(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
      out = argv[++i];
    } else if (argv[i][0] == '-' || in) {
      fprintf(stderr, "attn quantize: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    } else {
      in = argv[i];
    }
  }
  if (!in || !out) {
    usage(stderr);
    return 2;
  }
  attn_st *f = NULL;
  if (attn_st_load(in, &f)) return cli_fail(in);
  int members = attn_clf_ens_count(f);
  attn_st_free(f);
  if (members != 1) {
    if (members > 1)
      fprintf(stderr, "attn quantize: %s is an ensemble of %d models (attn train --members); quantize "
                      "one member's best.safetensors (the run's member<k>/ folders)\n", in, members);
    return members > 1 ? 2 : cli_fail(in);
  }
  attn_quant_report r;
  if (attn_quantize_file(in, out, &r)) return cli_fail("quantize");
  printf("%s: %d tensors, %d Linear weights quantized to int8 (per output channel)\n", in,
         r.tensors, r.quantized);
  printf("Linear weights: %lld bytes f32 -> %lld bytes int8 + scales (%.2fx smaller)\n",
         (long long)r.linear_f32_bytes, (long long)r.linear_i8_bytes,
         r.linear_i8_bytes ? (double)r.linear_f32_bytes / (double)r.linear_i8_bytes : 0.0);
  printf("file: %lld -> %lld bytes (%.2fx smaller) -> %s\n", (long long)r.file_in_bytes,
         (long long)r.file_out_bytes,
         r.file_out_bytes > 0 ? (double)r.file_in_bytes / (double)r.file_out_bytes : 0.0, out);
  return 0;
}
