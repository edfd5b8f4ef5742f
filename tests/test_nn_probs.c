/* Attention probabilities captured from a saved MHA forward (attn_mha_probs)
 * equal the per-head weights the math path returns, whichever backend ran
 * the forward (flash stores none), with masks and grouped heads. */
#include "harness.h"

static void capture_case(int64_t H, int64_t Hkv, int causal) {
  const int64_t B = 2, L = 9, E = 16;
  attn_params p;
  attn_params_init(&p);
  attn_mha m;
  attn_mha_config c = {.embed_dim = E, .num_heads = H, .num_kv_heads = Hkv, .bias = 1};
  CHECK_OK(attn_mha_declare(&m, &p, "", &c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_mha_init(&m, &p, ATTN_INIT_TORCH, 3));
  float x[2 * 9 * 16], y[2 * 9 * 16], want[2 * 4 * 9 * 9], got[9 * 9];
  uint8_t kpm[2 * 9] = {0};
  kpm[9 + 7] = kpm[9 + 8] = 1; /* batch 1: two padding keys */
  attn_mha_masks mk = {.key_padding_bool = kpm, .causal = causal};
  fill_uniform(x, B * L * E, 5, -2, 2);
  attn_mha_saved s = {0};
  attn_nn_ctx math = {.backend = ATTN_BACKEND_MATH}, flash = {.backend = ATTN_BACKEND_FLASH};
  CHECK_OK(attn_mha_forward(&m, &p, &math, &s, x, NULL, NULL, B, L, L, &mk, y, want, 0));
  CHECK_OK(attn_mha_forward(&m, &p, &flash, &s, x, NULL, NULL, B, L, L, &mk, y, NULL, 0));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++) {
      CHECK_OK(attn_mha_probs(&m, &s, b, h, 0, L, got));
      CHECK_CLOSE("probs", got, want + (b * H + h) * L * L, L * L, 2e-6, 1e-4);
    }
  /* two rows of the last head only */
  CHECK_OK(attn_mha_probs(&m, &s, 1, H - 1, 3, 2, got));
  CHECK_CLOSE("rows", got, want + ((1 * H + H - 1) * L + 3) * L, 2 * L, 2e-6, 1e-4);
  CHECK_ERR(attn_mha_probs(&m, &s, 2, 0, 0, 1, got), ATTN_EINVAL);
  attn_mha_saved_free(&s);
  CHECK_ERR(attn_mha_probs(&m, &s, 0, 0, 0, 1, got), ATTN_EINVAL); /* nothing saved */
  attn_params_free(&p);
}

static void test_capture_from_flash_forward(void) { capture_case(4, 4, 0); }
static void test_capture_causal_grouped_heads(void) { capture_case(4, 2, 1); }

int main(void) {
  RUN(test_capture_from_flash_forward);
  RUN(test_capture_causal_grouped_heads);
  HARNESS_END();
}
