/* attn layer IN.safetensors OUT.safetensors [--backend math|flash|auto] [--threads N]:
 * runs nn.MultiheadAttention / TransformerEncoderLayer /
 * TransformerDecoderLayer (or a seed module) stored in IN under PyTorch's
 * state_dict and argument names; writes out (+ attn_weights, + grad.<name>
 * with dout) to OUT. See attn_layer_run_st in include/attn/nn.h. */
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "cli/commands.h"

static void layer_usage(FILE *f) {
  fprintf(
      f,
      "usage: attn layer IN.safetensors OUT.safetensors [--backend math|flash|auto] [--threads N]\n"
      "\n"
      "  --threads N  threads (default: all cores this process may use, or\n"
      "               $ATTN_NUM_THREADS; results do not depend on it)\n"
      "IN __metadata__: kind = mha | encoder | decoder, num_heads, norm_first (boolean),\n"
      "  activation (relu|gelu|gelu_tanh|tanh|silu|swiglu|geglu; swiglu / geglu read a third\n"
      "  FFN Linear linear3: linear2(act(linear1(x)) * linear3(x))), layer_norm_eps,\n"
      "  average_attn_weights (mha, boolean),\n"
      "  batch_first (default true; false: inputs, dout, out and their grads [L, B, E]);\n"
      "  booleans: true/false (any case: PyTorch's True),\n"
      "  1/0, yes/no, on/off;\n"
      "  num_kv_heads (mha: grouped-query attention; k/v_proj_weight have num_kv_heads*head_dim "
      "rows).\n"
      "  add_zero_attn (mha, boolean); tensors bias_k, bias_v (add_bias_kv) and inputs\n"
      "  static_k, static_v [B*num_heads, Ls, head_dim] as torch's.\n"
      "IN tensors: the module's parameters under their state_dict() names, and inputs\n"
      "  (batch first unless batch_first=false): mha query [+ key, value], key_padding_mask, "
      "attn_mask;\n"
      "  encoder src, src_mask, src_key_padding_mask; decoder tgt, memory, tgt_mask,\n"
      "  memory_mask, tgt_key_padding_mask, memory_key_padding_mask.\n"
      "  BOOL masks are true where attention is NOT allowed; float masks are added.\n"
      "  Float tensors may be F32, F16 or BF16 (widened exactly; outputs are F32).\n"
      "  Optional dout (same shape as out).\n"
      "OUT: out, attn_weights (mha), and with dout grad.<name> for every input and\n"
      "  parameter.\n");
}

int attn_cmd_layer(int argc, char **argv) {
  static const cli_opt opts[] = {{"--backend", CLI_VALUE}, {"--threads", CLI_VALUE}, {NULL, 0}};
  const char *paths[2] = {NULL, NULL};
  int np = 0, r;
  attn_backend backend = ATTN_BACKEND_AUTO;
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_OPT && !strcmp(a.opt, "--threads")) {
      if (cli_set_threads(a.opt, a.val)) return CLI_USAGE;
    } else if (r == CLI_OPT) { /* --backend */
      if (attn_backend_from_name(a.val, &backend)) return cli_fail("--backend"), CLI_USAGE;
    } else if (np == 2) {
      return cli_usage("unexpected argument '%s' (see attn layer --help)", a.val);
    } else {
      paths[np++] = a.val;
    }
  }
  if (r == CLI_HELP) layer_usage(stdout);
  if (r < 0) return cli_args_exit(r);
  if (np != 2) {
    cli_usage("expected IN.safetensors and OUT.safetensors");
    layer_usage(stderr);
    return CLI_USAGE;
  }
  attn_st *in = NULL, *out = NULL;
  if (attn_st_load(paths[0], &in) != ATTN_OK) return cli_fail(paths[0]);
  attn_status st = attn_layer_run_st(in, backend, &out);
  attn_st_free(in);
  if (st != ATTN_OK) return cli_fail(paths[0]);
  st = attn_st_save(out, paths[1]);
  attn_st_free(out);
  if (st != ATTN_OK) return cli_fail(paths[1]);
  return CLI_OK;
}
