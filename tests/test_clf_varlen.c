/* The classifier on packed batches (attn_clf.varlen, varlen attention): the
 * same logits, loss and gradients as the padded path (f32 tolerance: the
 * GEMMs sum a different number of rows), dropout on the residuals and the
 * feed-forward drawing the same numbers per real token, bit-identical at 1
 * and 2 threads, bf16 / fp16 training packed within their rounding, the
 * rule of attn_clf_varlen_applies and its fallbacks (QAT, attention
 * dropout), and the MHA's refusals. */
#include <stdint.h>
#include <string.h>

#include "apps/classifier/classifier.h"
#include "harness.h"

static attn_clf_config config(int sinusoidal, int norm_first, int pool, float dropout) {
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = 23;
  c.d_model = 16;
  c.heads = 2;
  c.ff = 24;
  c.layers = 2;
  c.max_len = 9;
  c.dropout = dropout;
  c.attn_dropout = 0.0f;
  c.sinusoidal = sinusoidal;
  c.norm_first = norm_first;
  c.pool = pool;
  return c;
}

/* 4 sequences padded to 9: lengths 9, 4, 1, 6; padding slots hold junk */
enum { B = 4, L = 9 };
static const int32_t LENS[B] = {9, 4, 1, 6};
static int32_t IDS[B * L];
static const int32_t TG[B] = {1, 0, 1, 1};

static void fill_ids(void) {
  for (int i = 0; i < B * L; i++) IDS[i] = (i * 7 + 3) % 23;
  for (int b = 0; b < B; b++)
    for (int t = LENS[b]; t < L; t++) IDS[b * L + t] = 99;
}

/* logits [B*2], grads [numel] of one training step's backward; *packed: it ran packed */
static float step(attn_clf *m, int varlen, const attn_nn_ctx *ctx, int ckpt, float *logits,
                  float *grads, int *packed) {
  m->varlen = varlen;
  attn_clf_acts a;
  memset(&a, 0, sizeof a);
  float dl[B * 2], loss = 0;
  attn_params_zero_grad(&m->p);
  CHECK_OK(attn_clf_forward(m, ctx, ckpt, &a, IDS, LENS, B, L, logits));
  CHECK_OK(attn_cross_entropy_f32(a.logits, TG, B, 2, -1, 0.0f, &loss, dl));
  CHECK_OK(attn_clf_backward(m, &a, dl));
  memcpy(grads, m->p.grad, (size_t)m->p.numel * sizeof(float));
  *packed = a.cu != NULL;
  attn_clf_acts_free(&a);
  return loss;
}

static void same_both_ways(int sinusoidal, int norm_first, int pool, float dropout, int ckpt) {
  fill_ids();
  attn_clf_config c = config(sinusoidal, norm_first, pool, dropout);
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 5));
  int64_t n = m.p.numel;
  float *g0 = malloc((size_t)n * sizeof(float)), *g1 = malloc((size_t)n * sizeof(float));
  float *g2 = malloc((size_t)n * sizeof(float));
  float l0[B * 2], l1[B * 2], l2[B * 2];
  int p0 = 1, p1 = 0, p2 = 0;
  attn_nn_ctx ctx = {.training = 1, .seed = 11, .step = 3};
  float loss0 = step(&m, ATTN_CLF_VARLEN_OFF, &ctx, ckpt, l0, g0, &p0);
  float loss1 = step(&m, ATTN_CLF_VARLEN_ON, &ctx, ckpt, l1, g1, &p1);
  CHECK(!p0 && p1);
  CHECK(fabsf(loss0 - loss1) <= 1e-5f);
  CHECK_CLOSE("logits", l1, l0, B * 2, 1e-5, 1e-5);
  CHECK_CLOSE("grads", g1, g0, n, 1e-5, 1e-4);
  if (dropout > 0) {  // another step draws other masks: the comparison above saw dropout
    ctx.step = 4;
    float loss2 = step(&m, ATTN_CLF_VARLEN_ON, &ctx, ckpt, l2, g2, &p2);
    CHECK(p2 && fabsf(loss2 - loss1) > 1e-6f);
  }
  free(g0);
  free(g1);
  free(g2);
  attn_clf_free(&m);
}

static void test_same_learned_postnorm_dropout(void) { same_both_ways(0, 0, ATTN_CLF_POOL_MEAN, 0.2f, 0); }
static void test_same_sinusoidal_prenorm_meanmax(void) {
  same_both_ways(1, 1, ATTN_CLF_POOL_MEANMAX, 0.2f, 0);
}
static void test_same_checkpointing(void) { same_both_ways(0, 0, ATTN_CLF_POOL_MEAN, 0.2f, 1); }
static void test_same_no_dropout(void) { same_both_ways(0, 1, ATTN_CLF_POOL_MEAN, 0.0f, 0); }

/* inference (predict, as eval uses) packed == padded */
static void test_predict_same(void) {
  fill_ids();
  attn_clf_config c = config(0, 0, ATTN_CLF_POOL_MEAN, 0.1f);
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 2));
  float p0[B * 2], p1[B * 2];
  CHECK_OK(attn_clf_predict(&m, IDS, LENS, B, L, p0));
  m.varlen = ATTN_CLF_VARLEN_AUTO;  // 20 of 36 tokens real: packed
  CHECK(attn_clf_varlen_applies(&m, NULL, LENS, B, L));
  CHECK_OK(attn_clf_predict(&m, IDS, LENS, B, L, p1));
  CHECK_CLOSE("probs", p1, p0, B * 2, 1e-6, 1e-5);
  attn_clf_free(&m);
}

static void test_threads_bit_identical(void) {
  fill_ids();
  attn_clf_config c = config(0, 0, ATTN_CLF_POOL_MEAN, 0.2f);
  c.d_model = 64;  // big enough for the GEMMs to split
  c.heads = 4;
  c.ff = 128;
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 9));
  int64_t n = m.p.numel;
  float *g1 = malloc((size_t)n * sizeof(float)), *g2 = malloc((size_t)n * sizeof(float));
  float l1[B * 2], l2[B * 2];
  int p1 = 0, p2 = 0;
  attn_nn_ctx ctx = {.training = 1, .seed = 1, .step = 0};
  int saved = attn_get_num_threads();
  attn_set_num_threads(1);
  float a = step(&m, ATTN_CLF_VARLEN_ON, &ctx, 0, l1, g1, &p1);
  attn_set_num_threads(2);
  float b = step(&m, ATTN_CLF_VARLEN_ON, &ctx, 0, l2, g2, &p2);
  attn_set_num_threads(saved);
  CHECK(p1 && p2 && a == b);
  CHECK(!memcmp(l1, l2, sizeof l1));
  CHECK(!memcmp(g1, g2, (size_t)n * sizeof(float)));
  free(g1);
  free(g2);
  attn_clf_free(&m);
}

/* the rule and the fallbacks to the padded path */
static void test_applies(void) {
  attn_clf_config c = config(0, 0, ATTN_CLF_POOL_MEAN, 0.1f);
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  const int32_t full[2] = {9, 9}, one_short[2] = {9, 8}, half[2] = {9, 4};
  attn_nn_ctx train = {.training = 1};
  CHECK(!attn_clf_varlen_applies(&m, NULL, half, 2, 9));  // off by default
  m.varlen = ATTN_CLF_VARLEN_AUTO;
  CHECK(!attn_clf_varlen_applies(&m, NULL, full, 2, 9));       // no padding
  CHECK(!attn_clf_varlen_applies(&m, NULL, one_short, 2, 9));  // 1/18 < 10 %
  CHECK(attn_clf_varlen_applies(&m, NULL, half, 2, 9));
  CHECK(attn_clf_varlen_applies(&m, &train, half, 2, 9));
  m.varlen = ATTN_CLF_VARLEN_ON;
  CHECK(attn_clf_varlen_applies(&m, NULL, full, 2, 9));
  attn_nn_ctx bf = {.training = 1, .precision = ATTN_PREC_BF16};
  CHECK(attn_clf_varlen_applies(&m, &bf, half, 2, 9));
  attn_qat *q = NULL;
  CHECK_OK(attn_qat_new(&q, 0));
  attn_nn_ctx qc = {.training = 1, .qat = q};
  CHECK(!attn_clf_varlen_applies(&m, &qc, half, 2, 9));
  attn_qat_free(q);
  attn_clf_free(&m);
  c.attn_dropout = -1.0f;  // = dropout: the attention probabilities are dropped while training
  CHECK_OK(attn_clf_create(&m, &c));
  m.varlen = ATTN_CLF_VARLEN_ON;
  CHECK(!attn_clf_varlen_applies(&m, &train, half, 2, 9));
  CHECK(attn_clf_varlen_applies(&m, NULL, half, 2, 9));  // inference: no dropout
  attn_clf_free(&m);
  int v = -1;
  CHECK_OK(attn_clf_varlen_from_name("auto", &v));
  CHECK(v == ATTN_CLF_VARLEN_AUTO && !strcmp(attn_clf_varlen_name(v), "auto"));
  CHECK_ERR(attn_clf_varlen_from_name("yes", &v), ATTN_EINVAL);
}

/* bf16 / fp16 mixed-precision training packed (bf16: the bf16 varlen
 * kernel on the bf16 q | k | v): the padded path's loss and gradients up to
 * the low precision's rounding (a summation-order change in f32 can move a
 * bf16 rounding by one step: 2^-8 relative) */
static void lowp_same(attn_precision prec, float dropout) {
  fill_ids();
  attn_clf_config c = config(0, 0, ATTN_CLF_POOL_MEAN, dropout);
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 3));
  int64_t n = m.p.numel;
  float *g0 = malloc((size_t)n * sizeof(float)), *g1 = malloc((size_t)n * sizeof(float));
  float l0[B * 2], l1[B * 2];
  int p0 = 1, p1 = 0;
  attn_nn_ctx ctx = {.training = 1, .seed = 3, .precision = prec};
  float a = step(&m, ATTN_CLF_VARLEN_OFF, &ctx, 0, l0, g0, &p0);
  float b = step(&m, ATTN_CLF_VARLEN_ON, &ctx, 0, l1, g1, &p1);
  CHECK(!p0 && p1);
  CHECK(fabsf(a - b) <= 2e-3f);
  double el = CHECK_CLOSE("logits", l1, l0, B * 2, 1e-2, 1e-2);
  double eg = CHECK_CLOSE("grads", g1, g0, n, 2e-3, 5e-2);
  printf("  %s, dropout %g: loss %.6f vs %.6f, max |dlogits| %.2e, max |dgrad| %.2e\n",
         attn_precision_name(prec), (double)dropout, (double)a, (double)b, el, eg);
  free(g0);
  free(g1);
  attn_clf_free(&m);
}
static void test_bf16_same(void) {
  lowp_same(ATTN_PREC_BF16, 0.0f);  // the bf16 flash attention (no dropout: bf16 FFN too)
  lowp_same(ATTN_PREC_BF16, 0.2f);
}
static void test_fp16_same(void) { lowp_same(ATTN_PREC_F16, 0.2f); }

/* MHA: packed rows refused where the packed attention cannot follow */
static void test_mha_refusals(void) {
  attn_params p;
  attn_params_init(&p);
  attn_mha mha;
  attn_mha_config mc = {.embed_dim = 8, .num_heads = 2, .bias = 1, .dropout = 0.5f};
  CHECK_OK(attn_mha_declare(&mha, &p, "a.", &mc));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_mha_init(&mha, &p, ATTN_INIT_TORCH, 1));
  float x[5 * 8], y[5 * 8];
  for (int i = 0; i < 40; i++) x[i] = (float)((i * 5) % 11) / 11.0f;
  const int32_t cu[3] = {0, 2, 5}, bad[3] = {0, 2, 4};
  attn_mha_masks mk = {.cu_seqlens = cu, .n_seqs = 2, .max_seqlen = 3};
  attn_mha_saved s;
  memset(&s, 0, sizeof s);
  attn_nn_ctx train = {.training = 1};
  CHECK_ERR(attn_mha_forward(&mha, &p, &train, &s, x, NULL, NULL, 1, 5, 5, &mk, y, NULL, 0),
            ATTN_EUNSUPPORTED);
  CHECK_OK(attn_mha_forward(&mha, &p, NULL, &s, x, NULL, NULL, 1, 5, 5, &mk, y, NULL, 0));
  float w[2 * 25];
  CHECK_ERR(attn_mha_forward(&mha, &p, NULL, &s, x, NULL, NULL, 1, 5, 5, &mk, y, w, 0),
            ATTN_EUNSUPPORTED);
  mk.cu_seqlens = bad;
  CHECK_ERR(attn_mha_forward(&mha, &p, NULL, &s, x, NULL, NULL, 1, 5, 5, &mk, y, NULL, 0),
            ATTN_EINVAL);
  mk.cu_seqlens = cu;
  CHECK_ERR(attn_mha_forward(&mha, &p, NULL, &s, x, NULL, NULL, 5, 1, 1, &mk, y, NULL, 0),
            ATTN_EINVAL);
  attn_mha_saved_free(&s);
  attn_params_free(&p);
}

/* a shard of the batch (data parallelism, attn_nn_ctx.shard_row0): packed,
 * its rows draw the padded whole batch's dropout numbers too */
static void test_shard_same(void) {
  fill_ids();
  attn_clf_config c = config(0, 0, ATTN_CLF_POOL_MEAN, 0.3f);
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 4));
  attn_nn_ctx ctx = {.training = 1, .seed = 2, .step = 7, .shard_row0 = 1, .shard_rows = 2};
  float lg[2][4];
  for (int on = 0; on < 2; on++) {
    attn_clf_acts a;
    memset(&a, 0, sizeof a);
    m.varlen = on ? ATTN_CLF_VARLEN_ON : ATTN_CLF_VARLEN_OFF;
    CHECK_OK(attn_clf_forward(&m, &ctx, 0, &a, IDS + L, LENS + 1, 2, L, lg[on]));
    CHECK((a.cu != NULL) == on);
    attn_clf_acts_free(&a);
  }
  CHECK_CLOSE("shard logits", lg[1], lg[0], 4, 1e-5, 1e-5);
  attn_clf_free(&m);
}

int main(void) {
  RUN(test_same_learned_postnorm_dropout);
  RUN(test_same_sinusoidal_prenorm_meanmax);
  RUN(test_same_checkpointing);
  RUN(test_same_no_dropout);
  RUN(test_predict_same);
  RUN(test_threads_bit_identical);
  RUN(test_shard_same);
  RUN(test_applies);
  RUN(test_bf16_same);
  RUN(test_fp16_same);
  RUN(test_mha_refusals);
  HARNESS_END();
}
