/* attn layer IN.safetensors OUT.safetensors [--backend math|flash|auto]:
 * runs nn.MultiheadAttention / TransformerEncoderLayer /
 * TransformerDecoderLayer (or a seed module) stored in IN under PyTorch's
 * state_dict and argument names; writes out (+ attn_weights, + grad.<name>
 * with dout) to OUT. See attn_layer_run_st in include/attn/nn.h. */
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "cli/commands.h"

static void layer_usage(FILE *f) {
  fprintf(f,
          "usage: attn layer IN.safetensors OUT.safetensors [--backend math|flash|auto]\n"
          "\n"
          "IN __metadata__: kind = mha | encoder | decoder, num_heads, norm_first (0/1),\n"
          "  activation (relu|gelu|gelu_tanh), layer_norm_eps, average_attn_weights (mha, 0/1),\n"
          "  num_kv_heads (mha: grouped-query attention; k/v_proj_weight have num_kv_heads*head_dim rows).\n"
          "IN tensors: the module's parameters under their state_dict() names, and inputs\n"
          "  (batch first): mha query [+ key, value], key_padding_mask, attn_mask;\n"
          "  encoder src, src_mask, src_key_padding_mask; decoder tgt, memory, tgt_mask,\n"
          "  memory_mask, tgt_key_padding_mask, memory_key_padding_mask.\n"
          "  BOOL masks are true where attention is NOT allowed; F32 masks are added.\n"
          "  Optional dout (same shape as out).\n"
          "OUT: out, attn_weights (mha), and with dout grad.<name> for every input and\n"
          "  parameter.\n");
}

int attn_cmd_layer(int argc, char **argv) {
  const char *paths[2] = {NULL, NULL};
  int np = 0;
  attn_backend backend = ATTN_BACKEND_AUTO;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      layer_usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--backend")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "attn layer: --backend needs a value (math|flash|auto)\n");
        return 2;
      }
      if (attn_backend_from_name(argv[++i], &backend) != ATTN_OK) return cli_fail("layer: --backend");
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "attn layer: unknown option '%s'\n", argv[i]);
      layer_usage(stderr);
      return 2;
    }
    if (np == 2) {
      fprintf(stderr, "attn layer: too many arguments\n");
      layer_usage(stderr);
      return 2;
    }
    paths[np++] = argv[i];
  }
  if (np != 2) {
    layer_usage(stderr);
    return 2;
  }
  attn_st *in = NULL, *out = NULL;
  if (attn_st_load(paths[0], &in) != ATTN_OK) return cli_fail(paths[0]);
  attn_status st = attn_layer_run_st(in, backend, &out);
  attn_st_free(in);
  if (st != ATTN_OK) return cli_fail(paths[0]);
  st = attn_st_save(out, paths[1]);
  attn_st_free(out);
  if (st != ATTN_OK) return cli_fail(paths[1]);
  return 0;
}
