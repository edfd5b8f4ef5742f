/* MHA with a bool key-padding mask that is right padding in every row: it
 * goes to SDPA as key_lens (flash skips padded tiles) and gives the results
 * of the byte-mask path (the same padding given as a per-head attn_mask);
 * any other padding keeps the byte mask. The classifier's attn_dropout:
 * attention-probability dropout apart from the residual / ff dropout. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier/classifier.h"
#include "harness.h"

static void fill(float *x, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = 2.0f * attn_rng_uniform(seed, (uint64_t)i) - 1.0f;
}

typedef struct {
  float *y, *dx, *grad;
  int used_key_lens, used_byte_mask;
} run_out;

/* forward + backward of one MHA (E 16, H 2) on x [B, L, E] */
static void run_mha(const attn_mha_masks *mk, int64_t B, int64_t L, attn_backend be, run_out *r) {
  const int64_t E = 16;
  attn_params p;
  attn_params_init(&p);
  attn_mha m;
  attn_mha_config c = {.embed_dim = E, .num_heads = 2, .bias = 1};
  CHECK_OK(attn_mha_declare(&m, &p, "", &c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_mha_init(&m, &p, ATTN_INIT_TORCH, 3));
  int64_t n = B * L * E;
  float *x = malloc((size_t)n * sizeof(float)), *dy = malloc((size_t)n * sizeof(float));
  r->y = malloc((size_t)n * sizeof(float));
  r->dx = calloc((size_t)n, sizeof(float));
  r->grad = malloc((size_t)p.numel * sizeof(float));
  fill(x, n, 1);
  fill(dy, n, 2);
  attn_nn_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.backend = be;
  attn_mha_saved s;
  memset(&s, 0, sizeof s);
  CHECK_OK(attn_mha_forward(&m, &p, &ctx, &s, x, NULL, NULL, B, L, L, mk, r->y, NULL, 0));
  r->used_key_lens = s.key_lens != NULL;
  r->used_byte_mask = s.mask_allow != NULL;
  CHECK_OK(attn_mha_backward(&m, &p, &ctx, &s, x, NULL, NULL, dy, r->dx, NULL, NULL));
  memcpy(r->grad, p.grad, (size_t)p.numel * sizeof(float));
  attn_mha_saved_free(&s);
  attn_params_free(&p);
  free(x);
  free(dy);
}

static void run_free(run_out *r) {
  free(r->y);
  free(r->dx);
  free(r->grad);
}

/* lengths 70, 33, 1 and 0 (all padding) over L = 70: more than one key tile */
static void check_right_padding(attn_backend be) {
  const int64_t B = 4, L = 70, H = 2, E = 16;
  const int lens[4] = {70, 33, 1, 0};
  uint8_t *kpm = calloc((size_t)(B * L), 1), *am = calloc((size_t)(B * H * L * L), 1);
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = lens[b]; j < L; j++) {
      kpm[b * L + j] = 1;
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < L; i++) am[((b * H + h) * L + i) * L + j] = 1;
    }
  attn_mha_masks by_kpm = {.key_padding_bool = kpm};
  attn_mha_masks by_am = {.attn_bool = am, .attn_per_head = 1};
  run_out a, r;
  run_mha(&by_kpm, B, L, be, &a);
  run_mha(&by_am, B, L, be, &r);
  CHECK(a.used_key_lens && !a.used_byte_mask);
  CHECK(!r.used_key_lens && r.used_byte_mask);
  /* forward: bit-identical (skipped tiles added nothing); backward: the sums
   * over keys end at key_lens, so the order (not the terms) may differ */
  CHECK_CLOSE("y: key_lens vs byte mask", a.y, r.y, B * L * E, 0, 0);
  CHECK_CLOSE("dx: key_lens vs byte mask", a.dx, r.dx, B * L * E, 1e-6, 1e-4);
  CHECK_CLOSE("param grads: key_lens vs byte mask", a.grad, r.grad, 4 * E * E + 4 * E, 1e-5, 1e-4);
  run_free(&a);
  run_free(&r);
  free(kpm);
  free(am);
}

static void test_right_padding_flash(void) { check_right_padding(ATTN_BACKEND_AUTO); }
static void test_right_padding_math(void) { check_right_padding(ATTN_BACKEND_MATH); }

/* padding that is not a suffix (a hole, or on the left) keeps the byte mask */
static void test_other_padding_keeps_mask(void) {
  const int64_t B = 2, L = 5;
  uint8_t hole[10] = {0, 0, 0, 0, 0, 0, 1, 0, 1, 1};
  uint8_t left[10] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  const uint8_t *cases[2] = {hole, left};
  for (int k = 0; k < 2; k++) {
    attn_mha_masks mk = {.key_padding_bool = cases[k]};
    run_out r;
    run_mha(&mk, B, L, ATTN_BACKEND_AUTO, &r);
    CHECK(!r.used_key_lens && r.used_byte_mask);
    run_free(&r);
  }
  /* with an attn_mask too, the byte mask also */
  uint8_t kpm[10] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, am[25] = {0};
  am[1] = 1;
  attn_mha_masks mk = {.key_padding_bool = kpm, .attn_bool = am};
  run_out r;
  run_mha(&mk, B, L, ATTN_BACKEND_AUTO, &r);
  CHECK(!r.used_key_lens && r.used_byte_mask);
  run_free(&r);
}

static void test_classifier_attn_dropout(void) {
  attn_clf_config c;
  attn_clf_config_default(&c);
  CHECK(c.attn_dropout < 0.0f); /* default: the same as dropout */
  c.vocab = 11;
  c.d_model = 8;
  c.heads = 2;
  c.ff = 12;
  c.max_len = 6;
  c.dropout = 0.1f;
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK(m.layer[0].self_attn.c.dropout == 0.1f && m.layer[1].ff.dropout == 0.1f);
  attn_clf_free(&m);
  char *json = NULL;
  CHECK_OK(attn_clf_config_to_json(&c, &json));
  CHECK(json && !strstr(json, "attn_dropout")); /* old readers see the old keys */
  free(json);
  c.attn_dropout = 0.0f;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK(m.layer[0].self_attn.c.dropout == 0.0f && m.layer[1].self_attn.c.dropout == 0.0f);
  CHECK(m.layer[0].ff.dropout == 0.1f);
  attn_clf_free(&m);
  CHECK_OK(attn_clf_config_to_json(&c, &json));
  attn_clf_config back;
  CHECK_OK(attn_clf_config_from_json(json, &back));
  CHECK(back.attn_dropout == 0.0f && back.dropout == 0.1f);
  free(json);
  c.attn_dropout = 1.0f;
  CHECK_ERR(attn_clf_create(&m, &c), ATTN_EINVAL);
}

int main(void) {
  RUN(test_right_padding_flash);
  RUN(test_right_padding_math);
  RUN(test_other_padding_keeps_mask);
  RUN(test_classifier_attn_dropout);
  HARNESS_END();
}
