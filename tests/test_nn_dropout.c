/* MultiheadAttention with attention dropout (training, p > 0): the flash
 * path (no weights asked) and the math path (weights asked) draw the same
 * mask from the SDPA descriptor, so their outputs and gradients agree; the
 * weights are the probabilities after dropout (zero exactly where the mask
 * drops); the mask follows the ctx's seed and step, and eval mode or p = 0
 * runs without it. Tolerance: 2e-5 of the largest |value| (the two SDPA
 * backends round in different orders). */
#include <stdint.h>

#include "harness.h"

enum { B = 2, L = 37, E = 32, H = 4 };

typedef struct {
  attn_params p;
  attn_mha m;
} mha_fix;

static void fix_make(mha_fix *f, float dropout) {
  attn_params_init(&f->p);
  attn_mha_config c = {.embed_dim = E, .num_heads = H, .bias = 1, .dropout = dropout};
  CHECK_OK(attn_mha_declare(&f->m, &f->p, "", &c));
  CHECK_OK(attn_params_alloc(&f->p));
  CHECK_OK(attn_mha_init(&f->m, &f->p, ATTN_INIT_TORCH, 5));
}

static float max_abs(const float *x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
  return m;
}

static int close_all(const float *a, const float *b, int64_t n) {
  float worst = 0, s = max_abs(b, n);
  for (int64_t i = 0; i < n; i++)
    if (!(fabsf(a[i] - b[i]) <= worst)) worst = fabsf(a[i] - b[i]);
  if (!(worst <= 2e-5f * (s > 1 ? s : 1))) printf("  max |diff| %g of %g\n", (double)worst, (double)s);
  return worst <= 2e-5f * (s > 1 ? s : 1);
}

/* forward (weights: NULL or [B, H, L, L]) and backward of a causal self-attention (s
 * zeroed or holding an earlier forward: the forward frees it first) */
static void step(mha_fix *f, const attn_nn_ctx *ctx, const float *x, const float *dy, float *y,
                 float *w, float *dx, attn_mha_saved *s) {
  attn_mha_masks mk = {.causal = 1};
  CHECK_OK(attn_mha_forward(&f->m, &f->p, ctx, s, x, NULL, NULL, B, L, L, &mk, y, w, 0));
  attn_params_zero_grad(&f->p);
  memset(dx, 0, (size_t)B * L * E * sizeof(float));
  CHECK_OK(attn_mha_backward(&f->m, &f->p, ctx, s, x, NULL, NULL, dy, dx, NULL, NULL));
}

static void test_flash_and_weights_paths_agree(void) {
  mha_fix f;
  fix_make(&f, 0.3f);
  const int64_t n = B * L * E, nw = B * H * L * L;
  float *x = malloc(n * sizeof(float)), *dy = malloc(n * sizeof(float));
  float *y1 = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
  float *dx1 = malloc(n * sizeof(float)), *dx2 = malloc(n * sizeof(float));
  float *w = malloc(nw * sizeof(float)), *g1 = malloc(f.p.numel * sizeof(float));
  fill_uniform(x, n, 1, -1, 1);
  fill_uniform(dy, n, 2, -1, 1);
  attn_nn_ctx ctx = {.training = 1, .seed = 11, .step = 3};
  attn_mha_saved s1 = {0}, s2 = {0};
  step(&f, &ctx, x, dy, y1, NULL, dx1, &s1); /* flash */
  memcpy(g1, f.p.grad, f.p.numel * sizeof(float));
  step(&f, &ctx, x, dy, y2, w, dx2, &s2); /* math, weights out */
  CHECK(s1.drop_p == 0.3f && s1.drop_seed == s2.drop_seed);
  CHECK(close_all(y1, y2, n));
  CHECK(close_all(dx1, dx2, n));
  CHECK(close_all(g1, f.p.grad, f.p.numel));
  /* the weights: dropped exactly where the descriptor's mask drops */
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, B, H, H, L, L, E / H, E / H);
  d.dropout_p = s2.drop_p, d.dropout_seed = s2.drop_seed, d.dropout_batch0 = s2.drop_batch0;
  int dropped = 0, wrong = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j <= i; j++) { /* causal: j <= i has p > 0 */
          int keep = attn_sdpa_dropout_keep(&d, b, h, i, j);
          float v = w[((b * H + h) * L + i) * L + j];
          dropped += !keep;
          wrong += keep ? !(v > 0) : v != 0.0f;
        }
  CHECK(dropped > 0 && wrong == 0);
  /* dx through the fixed mask: central differences of sum(y dy) at a few inputs */
  attn_mha_masks mk = {.causal = 1};
  for (int64_t e = 5; e < n; e += n / 7) {
    double l[2];
    const float x0 = x[e], eps = 1e-2f;
    for (int sgn = 0; sgn < 2; sgn++) {
      x[e] = x0 + (sgn ? -eps : eps);
      CHECK_OK(attn_mha_forward(&f.m, &f.p, &ctx, &s2, x, NULL, NULL, B, L, L, &mk, y2, NULL, 0));
      l[sgn] = 0;
      for (int64_t i = 0; i < n; i++) l[sgn] += (double)y2[i] * dy[i];
    }
    x[e] = x0;
    double num = (l[0] - l[1]) / (2.0 * eps);
    if (!(fabs(num - dx1[e]) <= 3e-3 + 2e-2 * fabs(num)))
      printf("  dx[%lld]: numeric %g analytic %g\n", (long long)e, num, (double)dx1[e]);
    CHECK(fabs(num - dx1[e]) <= 3e-3 + 2e-2 * fabs(num));
  }
  /* without dropout (eval) the output differs; a new step draws a new mask */
  attn_nn_ctx ev = ctx;
  ev.training = 0;
  step(&f, &ev, x, dy, y2, NULL, dx2, &s2);
  CHECK(s2.drop_p == 0.0f);
  CHECK(!close_all(y1, y2, n));
  ctx.step = 4;
  step(&f, &ctx, x, dy, y2, NULL, dx2, &s2);
  CHECK(!close_all(y1, y2, n));
  ctx.step = 3;
  step(&f, &ctx, x, dy, y2, NULL, dx2, &s2);
  CHECK(memcmp(y1, y2, n * sizeof(float)) == 0);
  attn_mha_saved_free(&s1);
  attn_mha_saved_free(&s2);
  free(x), free(dy), free(y1), free(y2), free(dx1), free(dx2), free(w), free(g1);
  attn_params_free(&f.p);
}

/* p = 0 in training: the same numbers as eval */
static void test_zero_dropout_is_eval(void) {
  mha_fix f;
  fix_make(&f, 0.0f);
  const int64_t n = B * L * E;
  float *x = malloc(n * sizeof(float)), *dy = malloc(n * sizeof(float));
  float *y1 = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
  float *dx = malloc(n * sizeof(float));
  fill_uniform(x, n, 3, -1, 1);
  fill_uniform(dy, n, 4, -1, 1);
  attn_nn_ctx tr = {.training = 1, .seed = 1}, ev = {.training = 0};
  attn_mha_saved s = {0};
  step(&f, &tr, x, dy, y1, NULL, dx, &s);
  attn_mha_saved_free(&s);
  step(&f, &ev, x, dy, y2, NULL, dx, &s);
  attn_mha_saved_free(&s);
  CHECK(memcmp(y1, y2, n * sizeof(float)) == 0);
  free(x), free(dy), free(y1), free(y2), free(dx);
  attn_params_free(&f.p);
}

int main(void) {
  RUN(test_flash_and_weights_paths_agree);
  RUN(test_zero_dropout_is_eval);
  HARNESS_END();
}
