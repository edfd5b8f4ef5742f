/* attn quantize MODEL.safetensors -o MODEL.int8.safetensors: every Linear
 * weight to int8 per output channel (+ F32 scales), the rest copied; prints
 * the sizes before and after (include/attn/quant.h). */
#include <stdio.h>
#include <string.h>

#include "apps/classifier/classifier_ensemble.h"
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
  static const cli_opt opts[] = {{"-o", CLI_VALUE}, {NULL, 0}};
  const char *in = NULL, *out = NULL;
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  int r;
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_OPT) out = a.val;
    else if (in) return cli_usage("unexpected argument '%s' (see attn quantize --help)", a.val);
    else in = a.val;
  }
  if (r == CLI_HELP) usage(stdout);
  if (r < 0) return cli_args_exit(r);
  if (!in || !out) {
    cli_usage("expected MODEL.safetensors and -o OUT.safetensors");
    usage(stderr);
    return CLI_USAGE;
  }
  attn_st *f = NULL;
  if (attn_st_load(in, &f)) return cli_fail(in);
  int members = attn_clf_ens_count(f);
  attn_st_free(f);
  if (members > 1)
    return cli_error(in, "an ensemble of %d models (attn train --members); quantize one member's "
                         "best.safetensors (the run's member<k>/ folders)", members);
  if (members != 1) return cli_fail(in);
  attn_quant_report rep;
  if (attn_quantize_file(in, out, &rep)) return cli_fail(in);
  printf("%s: %d tensors, %d Linear weights quantized to int8 (per output channel)\n", in,
         rep.tensors, rep.quantized);
  printf("Linear weights: %lld bytes f32 -> %lld bytes int8 + scales (%.2fx smaller)\n",
         (long long)rep.linear_f32_bytes, (long long)rep.linear_i8_bytes,
         rep.linear_i8_bytes ? (double)rep.linear_f32_bytes / (double)rep.linear_i8_bytes : 0.0);
  printf("file: %lld -> %lld bytes (%.2fx smaller) -> %s\n", (long long)rep.file_in_bytes,
         (long long)rep.file_out_bytes,
         rep.file_out_bytes > 0 ? (double)rep.file_in_bytes / (double)rep.file_out_bytes : 0.0, out);
  return 0;
}
