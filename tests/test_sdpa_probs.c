/* Probabilities recomputed from q, k and lse (attn_sdpa_forward with
 * args.probs_rows) equal the math path's stored probabilities, whichever
 * backend produced the lse. */
#include "harness.h"

/* rows row0 .. row0 + nrows - 1 of (b, h) through the entry */
static attn_status probs_rows(const attn_sdpa_desc *d, const float *q, const float *k,
                              const float *lse, int64_t b, int64_t h, int64_t row0, int64_t nrows,
                              float *probs) {
  const attn_sdpa_rows rows = {b, h, row0, nrows};
  const attn_sdpa_args a = {.dtype = ATTN_F32, .q = q, .k = k, .lse = (float *)lse, .probs = probs,
                            .probs_rows = &rows};
  return attn_sdpa_forward(d, &a);
}

typedef struct {
  int64_t B, Hq, Hkv, Lq, Lk, D;
  int causal, masks;
  float softcap; /* 0: off */
  int sinks;     /* 1: a sink logit per head */
} probs_case;

static void run_case(const probs_case *c, attn_backend lse_backend) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->D);
  d.causal = c->causal;
  d.softcap = c->softcap;
  float sinks[8] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f, 3.0f, -2.0f};
  if (c->sinks) d.sinks = sinks;
  long nq = c->B * c->Hq * c->Lq * c->D, nk = c->B * c->Hkv * c->Lk * c->D;
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
  float *out = malloc(nq * 4), *lse = malloc(c->B * c->Hq * c->Lq * 4);
  float *lse2 = malloc(c->B * c->Hq * c->Lq * 4);
  float *want = malloc(c->B * c->Hq * c->Lq * c->Lk * 4);
  float *got = malloc(c->Lq * c->Lk * 4);
  int32_t *lens = malloc(c->B * 4);
  float *add = malloc(c->Lq * c->Lk * 4);
  fill_uniform(q, nq, 1, -2, 2);
  fill_uniform(k, nk, 2, -2, 2);
  fill_uniform(v, nk, 3, -1, 1);
  if (c->masks) {
    for (int64_t b = 0; b < c->B; b++) lens[b] = (int32_t)(b == 0 ? c->Lk : c->Lk / 2);
    fill_uniform(add, c->Lq * c->Lk, 4, -1, 1);
    add[1] = -INFINITY;
    d.key_lens = lens;
    d.add_mask = add;
    d.add_mask_stride[2] = c->Lk;
    d.add_mask_stride[3] = 1;
    d.window_left = 5;
  }
  CHECK_OK(attn_sdpa_forward_math(&d, q, k, v, out, lse, want));
  CHECK_OK(attn_sdpa_forward_f32(&d, lse_backend, q, k, v, out, lse2, NULL));
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->Hq; h++) {
      CHECK_OK(probs_rows(&d, q, k, lse2, b, h, 0, c->Lq, got));
      /* f32 logits vs the math path's: a few ulp of exp(logit - lse) */
      CHECK_CLOSE("probs", got, want + ((b * c->Hq + h) * c->Lq) * c->Lk, c->Lq * c->Lk, 2e-6,
                  1e-4);
    }
  /* a sub-range of rows is the same rows */
  if (c->Lq > 3) {
    CHECK_OK(probs_rows(&d, q, k, lse2, c->B - 1, c->Hq - 1, 2, 2, got));
    CHECK_CLOSE("rows", got, want + (((c->B - 1) * c->Hq + c->Hq - 1) * c->Lq + 2) * c->Lk,
                2 * c->Lk, 2e-6, 1e-4);
  }
  free(q), free(k), free(v), free(out), free(lse), free(lse2), free(want), free(got), free(lens),
      free(add);
}

static void test_probs_match_math_path(void) {
  /* the score-modifier stage's units: softcap (the tile, as flash runs it)
   * and sinks (the lse holds them; probabilities exclude the sink) */
  probs_case cases[] = {{1, 2, 2, 7, 9, 8, 0, 0, 0, 0},      {2, 4, 2, 13, 13, 16, 1, 0, 0, 0},
                        {2, 2, 1, 11, 17, 5, 0, 1, 0, 0},    {1, 8, 8, 33, 33, 32, 1, 1, 0, 0},
                        {2, 2, 1, 11, 70, 8, 0, 1, 1.5f, 0}, {1, 4, 2, 33, 130, 16, 1, 0, 4.0f, 1},
                        {2, 2, 2, 9, 9, 8, 0, 1, 0.0f, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(&cases[i], ATTN_BACKEND_MATH);
    run_case(&cases[i], ATTN_BACKEND_FLASH);
  }
}

static void test_probs_fully_masked_row_is_zero(void) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, 1, 1, 3, 4, 2, 2);
  int32_t lens[1] = {0};
  d.key_lens = lens;
  float q[6], k[8], v[8], out[6], lse[3], p[12];
  fill_uniform(q, 6, 1, -1, 1);
  fill_uniform(k, 8, 2, -1, 1);
  fill_uniform(v, 8, 3, -1, 1);
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_AUTO, q, k, v, out, lse, NULL));
  for (int i = 0; i < 12; i++) p[i] = NAN;
  CHECK_OK(probs_rows(&d, q, k, lse, 0, 0, 0, 3, p));
  int zero = 1;
  for (int i = 0; i < 12; i++) zero &= p[i] == 0.0f;
  CHECK(zero);
}

static void test_probs_bad_arguments(void) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, 2, 2, 3, 3, 2, 2);
  float q[12] = {0}, k[12] = {0}, lse[6] = {0}, p[9];
  CHECK_ERR(probs_rows(&d, q, k, lse, 1, 0, 0, 1, p), ATTN_EINVAL);
  CHECK_ERR(probs_rows(&d, q, k, lse, 0, 2, 0, 1, p), ATTN_EINVAL);
  CHECK_ERR(probs_rows(&d, q, k, lse, 0, 0, 2, 2, p), ATTN_EINVAL);
  CHECK_ERR(probs_rows(&d, q, k, NULL, 0, 0, 0, 1, p), ATTN_EINVAL);
  CHECK_ERR(probs_rows(&d, q, k, lse, 0, 0, 0, 1, NULL), ATTN_EINVAL);
}

/* the deprecated wrapper is the entry's rows, bit for bit; the entry
 * refuses probs_rows where it has no meaning */
static void test_probs_wrapper_and_entry_refusals(void) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, 2, 1, 5, 6, 4, 4);
  d.causal = 1;
  float q[40], k[24], v[24], out[40], lse[10], dq[40], dk[24], dv[24], p1[30], p2[30];
  fill_uniform(q, 40, 1, -1, 1);
  fill_uniform(k, 24, 2, -1, 1);
  fill_uniform(v, 24, 3, -1, 1);
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_AUTO, q, k, v, out, lse, NULL));
  CHECK_OK(probs_rows(&d, q, k, lse, 0, 1, 0, 5, p1));
  CHECK_OK(attn_sdpa_probs_f32(&d, q, k, lse, 0, 1, 0, 5, p2));
  CHECK(memcmp(p1, p2, sizeof p1) == 0);
  const attn_sdpa_rows rows = {0, 0, 0, 1};
  attn_sdpa_args a = {.dtype = ATTN_F32, .q = q, .k = k, .v = v, .out = out, .lse = lse,
                      .probs = p1, .probs_rows = &rows, .dout = out, .dq = dq, .dk = dk, .dv = dv};
  CHECK_ERR(attn_sdpa_backward(&d, &a), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "probs_rows") != NULL);
  a.dtype = ATTN_BF16;
  CHECK_ERR(attn_sdpa_forward(&d, &a), ATTN_EUNSUPPORTED);
  CHECK(strstr(attn_last_error(), "probs_rows") != NULL);
}

int main(void) {
  RUN(test_probs_match_math_path);
  RUN(test_probs_fully_masked_row_is_zero);
  RUN(test_probs_bad_arguments);
  RUN(test_probs_wrapper_and_entry_refusals);
  HARNESS_END();
}
