/* nn modules against PyTorch golden files (tools/golden_nn.py): every case
 * runs through attn_layer_run_st (the `attn layer` path, which builds the
 * modules under state_dict names) and compares out, attn_weights and every
 * grad.<name> the file holds. The reference is float64 torch on f32-rounded
 * inputs. Tolerance (f32): |got - want| <= 1e-4 * max(1, max|want|) + 1e-4 * |want|
 * per tensor, i.e. ~1e-4 relative to the tensor's scale.
 * Files with F16 / BF16 parameters and inputs (values exact in those dtypes)
 * check the exact widening; *_seq_first files are batch_first=False
 * ([L, B, E] inputs, outputs and input gradients). */
#include "harness.h"

static double rel_worst; /* worst error / scale over all cases */

static void run_case(const char *file) {
  attn_st *in = NULL, *out = NULL;
  CHECK_OK(attn_st_load(file, &in));
  if (!in) return;
  CHECK_OK(attn_layer_run_st(in, ATTN_BACKEND_MATH, &out));
  double worst = 0;
  int compared = 0;
  for (int i = 0; out && i < attn_st_count(in); i++) {
    const char *name = attn_st_name(in, i);
    if (strcmp(name, "out") && strcmp(name, "attn_weights") && strncmp(name, "grad.", 5)) continue;
    const attn_tensor *want = attn_st_get(in, name), *got = attn_st_get(out, name);
    if (!got) {
      printf("  %s: missing output '%s'\n", file, name);
      h_case_failed = 1;
      continue;
    }
    int64_t n = attn_tensor_numel(want);
    CHECK(got->ndim == want->ndim && attn_tensor_numel(got) == n);
    for (int d = 0; d < want->ndim && got->ndim == want->ndim; d++)
      CHECK(got->shape[d] == want->shape[d]);
    if (attn_tensor_numel(got) != n) continue;
    double scale = 1;
    for (int64_t k = 0; k < n; k++)
      if (fabs(((float *)want->data)[k]) > scale) scale = fabs(((float *)want->data)[k]);
    double e = CHECK_CLOSE(name, got->data, want->data, n, 1e-4 * scale, 1e-4);
    if (e / scale > worst) worst = e / scale;
    compared++;
  }
  /* every output we produce is in the file too (same set of gradients) */
  for (int i = 0; out && i < attn_st_count(out); i++)
    if (!attn_st_get(in, attn_st_name(out, i))) {
      printf("  %s: extra output '%s'\n", file, attn_st_name(out, i));
      h_case_failed = 1;
    }
  CHECK(compared >= 3);
  printf("  %-48s %3d tensors, max err / scale %.2e\n", file, compared, worst);
  if (worst > rel_worst) rel_worst = worst;
  attn_st_free(in);
  attn_st_free(out);
}

#define CASE(name)                                                   \
  static void test_##name(void) { run_case("tests/golden/" #name ".safetensors"); }
CASE(nn_mha_self)
CASE(nn_mha_cross_kvdim)
CASE(nn_mha_nobias_masks)
CASE(nn_mha_perhead_float_masks)
CASE(nn_mha_float_kpm)
CASE(nn_encoder_post_relu)
CASE(nn_encoder_pre_gelu_masks)
CASE(nn_encoder_post_float_mask)
CASE(nn_encoder_nobias_3d_mask)
CASE(nn_decoder_post_relu_masks)
CASE(nn_decoder_pre_gelu_masks)
CASE(nn_seed000_self_attention)
CASE(nn_seed000_mha)
CASE(nn_seed004_self_attention)
CASE(nn_seed004_mha)
CASE(nn_seed004_transformer)
CASE(nn_mha_gqa)
CASE(nn_mha_mqa_kdim)
CASE(nn_encoder_tanh)
CASE(nn_encoder_silu)
CASE(nn_encoder_swiglu)
CASE(nn_encoder_geglu)
CASE(nn_decoder_swiglu)
CASE(nn_decoder_silu)
CASE(nn_mha_seq_first)
CASE(nn_mha_self_seq_first)
CASE(nn_encoder_seq_first)
CASE(nn_decoder_seq_first)
CASE(nn_encoder_bf16_params_f16_src)
CASE(nn_mha_f16_params_bf16_inputs_seq_first)
CASE(nn_mha_bias_kv_zero_attn)
CASE(nn_mha_bias_kv_float_mask)
CASE(nn_mha_zero_attn_kdim)
CASE(nn_mha_static_kv_seq_first)

int main(void) {
  RUN(test_nn_mha_self);
  RUN(test_nn_mha_cross_kvdim);
  RUN(test_nn_mha_nobias_masks);
  RUN(test_nn_mha_perhead_float_masks);
  RUN(test_nn_mha_float_kpm);
  RUN(test_nn_encoder_post_relu);
  RUN(test_nn_encoder_pre_gelu_masks);
  RUN(test_nn_encoder_post_float_mask);
  RUN(test_nn_encoder_nobias_3d_mask);
  RUN(test_nn_decoder_post_relu_masks);
  RUN(test_nn_decoder_pre_gelu_masks);
  RUN(test_nn_seed000_self_attention);
  RUN(test_nn_seed000_mha);
  RUN(test_nn_seed004_self_attention);
  RUN(test_nn_seed004_mha);
  RUN(test_nn_seed004_transformer);
  RUN(test_nn_mha_gqa);
  RUN(test_nn_mha_mqa_kdim);
  RUN(test_nn_encoder_tanh);
  RUN(test_nn_encoder_silu);
  RUN(test_nn_encoder_swiglu);
  RUN(test_nn_encoder_geglu);
  RUN(test_nn_decoder_swiglu);
  RUN(test_nn_decoder_silu);
  RUN(test_nn_mha_seq_first);
  RUN(test_nn_mha_self_seq_first);
  RUN(test_nn_encoder_seq_first);
  RUN(test_nn_decoder_seq_first);
  RUN(test_nn_encoder_bf16_params_f16_src);
  RUN(test_nn_mha_f16_params_bf16_inputs_seq_first);
  RUN(test_nn_mha_bias_kv_zero_attn);
  RUN(test_nn_mha_bias_kv_float_mask);
  RUN(test_nn_mha_zero_attn_kdim);
  RUN(test_nn_mha_static_kv_seq_first);
  printf("# worst error / scale over all golden cases: %.2e\n", rel_worst);
  HARNESS_END();
}
