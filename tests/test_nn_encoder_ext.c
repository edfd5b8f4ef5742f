/* attn_encoder_ext (include/attn/nn_encoder_ext.h): the encoder layer over
 * caller-owned parameter memory gives, bit for bit, what attn_encoder_* give
 * on an attn_params with the same values (forward, every gradient, dsrc),
 * with masks, causal, dropout and both norm placements; several saved
 * forwards alive at once; backward accumulates; bad arguments refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { B = 2, L = 7, E = 16, H = 4, FF = 24 };

static void fill(float *x, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = 2.0f * attn_rng_uniform(seed, (uint64_t)i) - 1.0f;
}

static attn_layer_config config(int norm_first, attn_activation act, float dropout) {
  attn_layer_config c = {.d_model = E, .nhead = H, .dim_feedforward = FF, .dropout = dropout,
                         .activation = act, .layer_norm_eps = 1e-5f, .norm_first = norm_first,
                         .bias = 1};
  return c;
}

/* one forward + backward both ways; the results must be identical */
static void compare(const attn_layer_config *c, const attn_encoder_ext_masks *em, int training) {
  const int64_t n = (int64_t)B * L * E;
  attn_params p;
  attn_params_init(&p);
  attn_encoder_layer m;
  CHECK_OK(attn_encoder_declare(&m, &p, "", c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_encoder_init(&m, &p, ATTN_INIT_TORCH, 5));
  attn_encoder_ext *e = NULL;
  CHECK_OK(attn_encoder_ext_new(c, &e));
  if (!e) {
    attn_params_free(&p);
    return;
  }
  CHECK(attn_encoder_ext_numel(e) == p.numel);
  CHECK(attn_encoder_ext_count(e) == p.count);
  size_t bytes = (size_t)p.numel * sizeof(float);
  float *w = aligned_alloc(64, bytes), *g = aligned_alloc(64, bytes);
  memcpy(w, p.data, bytes);
  memset(g, 0, bytes);
  float *x = malloc(n * sizeof(float)), *dy = malloc(n * sizeof(float));
  float *y0 = malloc(n * sizeof(float)), *y1 = malloc(n * sizeof(float));
  float *dx0 = calloc(n, sizeof(float)), *dx1 = calloc(n, sizeof(float));
  fill(x, n, 1);
  fill(dy, n, 2);

  attn_nn_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.training = training;
  ctx.seed = 99;
  attn_mha_masks mm;
  memset(&mm, 0, sizeof mm);
  if (em) {
    if (em->key_padding_float) mm.key_padding_float = em->key_padding;
    else mm.key_padding_bool = em->key_padding;
    if (em->attn_mask_float) mm.attn_float = em->attn_mask;
    else mm.attn_bool = em->attn_mask;
    mm.attn_per_head = em->attn_mask_per_head;
    mm.causal = em->causal;
  }
  attn_encoder_saved s;
  memset(&s, 0, sizeof s);
  CHECK_OK(attn_encoder_forward(&m, &p, &ctx, &s, x, B, L, &mm, y0));
  CHECK_OK(attn_encoder_backward(&m, &p, &ctx, &s, x, dy, dx0));

  /* two forwards alive at once; backward of the first twice = 2x */
  attn_encoder_ext_saved *s1 = NULL, *s2 = NULL;
  CHECK_OK(attn_encoder_ext_forward(e, w, training, 99, ATTN_PREC_F32, em, x, B, L, y1, &s1));
  CHECK_OK(attn_encoder_ext_forward(e, w, training, 99, ATTN_PREC_F32, em, x, B, L, y1, &s2));
  CHECK(s1 && s2);
  if (s1 && s2) {
    CHECK_OK(attn_encoder_ext_backward(e, w, g, s1, x, dy, dx1));
    CHECK(memcmp(y0, y1, n * sizeof(float)) == 0);
    CHECK(memcmp(dx0, dx1, n * sizeof(float)) == 0);
    CHECK(memcmp(p.grad, g, bytes) == 0);
    CHECK_OK(attn_encoder_ext_backward(e, w, g, s2, x, dy, dx1));
    /* accumulated into a nonzero buffer: the same sums up to rounding */
    float worst = 0.0f, big = 0.0f;
    for (int64_t i = 0; i < p.numel; i++) {
      worst = fmaxf(worst, fabsf(g[i] - 2.0f * p.grad[i]));
      big = fmaxf(big, fabsf(p.grad[i]));
    }
    CHECK(big > 0.0f && worst <= 1e-5f * big);
  }
  attn_encoder_ext_saved_free(s1);
  attn_encoder_ext_saved_free(s2);
  attn_encoder_saved_free(&s);
  attn_encoder_ext_free(e);
  attn_params_free(&p);
  free(w), free(g), free(x), free(dy), free(y0), free(y1), free(dx0), free(dx1);
}

static void test_post_norm_padding(void) {
  attn_layer_config c = config(0, ATTN_ACT_RELU, 0.0f);
  uint8_t pad[B * L] = {0};
  pad[L - 1] = pad[L - 2] = pad[L + 3] = 1; /* not right padding in row 1 */
  attn_encoder_ext_masks em = {.key_padding = pad};
  compare(&c, &em, 0);
}

static void test_pre_norm_causal_dropout(void) {
  attn_layer_config c = config(1, ATTN_ACT_GELU, 0.25f);
  attn_encoder_ext_masks em = {.causal = 1};
  compare(&c, &em, 1);
}

static void test_float_masks(void) {
  attn_layer_config c = config(0, ATTN_ACT_GELU, 0.0f);
  float am[L * L], kp[B * L];
  fill(am, L * L, 3);
  fill(kp, B * L, 4);
  attn_encoder_ext_masks em = {.key_padding = kp, .key_padding_float = 1, .attn_mask = am,
                               .attn_mask_float = 1};
  compare(&c, &em, 0);
}

static void test_params_layout(void) {
  attn_layer_config c = config(0, ATTN_ACT_RELU, 0.0f);
  attn_encoder_ext *e = NULL;
  CHECK_OK(attn_encoder_ext_new(&c, &e));
  const char *name = NULL;
  int ndim = 0;
  int64_t shape[4], off = -1;
  CHECK_OK(attn_encoder_ext_param(e, 0, &name, &ndim, shape, &off));
  CHECK(name && strcmp(name, "self_attn.in_proj_weight") == 0);
  CHECK(ndim == 2 && shape[0] == 3 * E && shape[1] == E && off == 0);
  CHECK_ERR(attn_encoder_ext_param(e, attn_encoder_ext_count(e), &name, &ndim, shape, &off),
            ATTN_EINVAL);
  CHECK_ERR(attn_encoder_ext_param(e, -1, &name, &ndim, shape, &off), ATTN_EINVAL);
  attn_encoder_ext_free(e);
}

static void test_bad_arguments(void) {
  attn_layer_config c = config(0, ATTN_ACT_RELU, 0.0f);
  attn_encoder_ext *e = (attn_encoder_ext *)&c;
  c.nhead = 5; /* does not divide 16 */
  CHECK_ERR(attn_encoder_ext_new(&c, &e), ATTN_EINVAL);
  CHECK(e == NULL);
  CHECK_ERR(attn_encoder_ext_new(&c, NULL), ATTN_EINVAL);
  c.nhead = H;
  CHECK_OK(attn_encoder_ext_new(&c, &e));
  size_t bytes = (size_t)attn_encoder_ext_numel(e) * sizeof(float) + 64;
  float *w = aligned_alloc(64, bytes);
  memset(w, 0, bytes);
  float x[B * L * E] = {0}, y[B * L * E];
  attn_encoder_ext_saved *s = (attn_encoder_ext_saved *)w;
  /* misaligned parameters */
  CHECK_ERR(attn_encoder_ext_forward(e, w + 1, 0, 0, ATTN_PREC_F32, NULL, x, B, L, y, &s),
            ATTN_EINVAL);
  CHECK(s == NULL);
  CHECK_ERR(attn_encoder_ext_forward(e, w, 0, 0, ATTN_PREC_F32, NULL, x, 0, L, y, &s),
            ATTN_EINVAL);
  CHECK_ERR(attn_encoder_ext_forward(e, w, 0, 0, ATTN_PREC_F32, NULL, x, B, L, y, NULL),
            ATTN_EINVAL);
  CHECK_OK(attn_encoder_ext_forward(e, w, 0, 0, ATTN_PREC_F32, NULL, x, B, L, y, &s));
  CHECK_ERR(attn_encoder_ext_backward(e, w, NULL, s, x, x, y), ATTN_EINVAL);
  CHECK_ERR(attn_encoder_ext_backward(e, w, w + 1, s, x, x, y), ATTN_EINVAL);
  CHECK_ERR(attn_encoder_ext_backward(e, w, w, NULL, x, x, y), ATTN_EINVAL);
  attn_encoder_ext_saved_free(s);
  attn_encoder_ext_saved_free(NULL);
  attn_encoder_ext_free(e);
  attn_encoder_ext_free(NULL);
  free(w);
}

int main(void) {
  RUN(test_post_norm_padding);
  RUN(test_pre_norm_causal_dropout);
  RUN(test_float_masks);
  RUN(test_params_layout);
  RUN(test_bad_arguments);
  HARNESS_END();
}
