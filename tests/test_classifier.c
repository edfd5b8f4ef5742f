/* TextClassifier (src/apps/classifier.h): parameter names, config JSON,
 * gradient check of the whole model against central finite differences
 * (mean and mean+max pooling),
 * gradient checkpointing == the normal path (bit-identical gradients, less
 * memory), save -> load -> identical predictions, padding ignored, errors.
 *
 * Gradient check tolerance: |analytic - numeric| <= 3e-3 + 3e-2 |numeric|
 * (f32 forward, eps 1e-2 central differences, GELU so no kinks). */
#include <stdint.h>
#include <unistd.h>

#include "apps/classifier/classifier.h"
#include "apps/classifier/classifier_data.h"
#include "apps/classifier/classifier_ensemble.h"
#include "apps/classifier/classifier_train.h"
#include "harness.h"

static attn_clf_config tiny_config(void) {
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = 13;
  c.d_model = 8;
  c.heads = 2;
  c.ff = 12;
  c.layers = 2;
  c.max_len = 6;
  c.dropout = 0.0f;
  c.activation = ATTN_ACT_GELU;
  return c;
}

/* a batch of 3: lengths 6, 3, 1; padding slots hold junk ids */
static const int32_t IDS[18] = {1, 5, 7, 2, 12, 3, 4, 4, 9, 99, -1, 77, 11, 50, 50, 50, 50, 50};
static const int32_t LENS[3] = {6, 3, 1};
static const int32_t TARGETS[3] = {1, 0, 1};

static float loss_of(const attn_clf *m, const attn_nn_ctx *ctx) {
  attn_clf_acts a;
  memset(&a, 0, sizeof a);
  float loss = 0;
  attn_status st = attn_clf_forward(m, ctx, 0, &a, IDS, LENS, 3, 6, NULL);
  if (!st) st = attn_cross_entropy_f32(a.logits, TARGETS, 3, 2, -1, 0.1f, &loss, NULL);
  attn_clf_acts_free(&a);
  return st ? NAN : loss;
}

static void grads_of(attn_clf *m, const attn_nn_ctx *ctx, int ckpt, size_t *bytes) {
  attn_clf_acts a;
  memset(&a, 0, sizeof a);
  float dl[6];
  attn_params_zero_grad(&m->p);
  CHECK_OK(attn_clf_forward(m, ctx, ckpt, &a, IDS, LENS, 3, 6, NULL));
  CHECK_OK(attn_cross_entropy_f32(a.logits, TARGETS, 3, 2, -1, 0.1f, NULL, dl));
  CHECK_OK(attn_clf_backward(m, &a, dl));
  if (bytes) *bytes = a.saved_bytes;
  attn_clf_acts_free(&a);
}

static void test_names_and_config(void) {
  attn_clf_config c = tiny_config();
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK(attn_params_find(&m.p, "embedding.weight") == 0);
  CHECK(attn_params_find(&m.p, "positions.weight") >= 0);
  CHECK(attn_params_find(&m.p, "layers.0.self_attn.in_proj_weight") >= 0);
  CHECK(attn_params_find(&m.p, "layers.1.norm2.bias") >= 0);
  CHECK(attn_params_find(&m.p, "fc.weight") >= 0);
  CHECK(attn_params_find(&m.p, "fc.bias") == m.p.count - 1);
  CHECK(attn_clf_decay_rule("fc.weight", NULL) == 1);
  CHECK(attn_clf_decay_rule("embedding.weight", NULL) == 0);
  CHECK(attn_clf_decay_rule("layers.0.norm1.weight", NULL) == 0);
  CHECK(attn_clf_decay_rule("layers.0.linear1.bias", NULL) == 0);
  char *j = NULL;
  CHECK_OK(attn_clf_config_to_json(&c, &j));
  attn_clf_config back;
  CHECK_OK(attn_clf_config_from_json(j, &back));
  CHECK(back.vocab == 13 && back.d_model == 8 && back.heads == 2 && back.ff == 12 &&
        back.layers == 2 && back.max_len == 6 && back.activation == ATTN_ACT_GELU &&
        back.dropout == 0.0f);
  CHECK(back.headers == 0 && back.tail == 0 && !strstr(j, "headers") && !strstr(j, "tail"));
  free(j);
  c.headers = 1; /* the input options travel with the config; absent keys read as 0 */
  c.tail = 2;
  CHECK_OK(attn_clf_config_to_json(&c, &j));
  CHECK_OK(attn_clf_config_from_json(j, &back));
  CHECK(back.headers == 1 && back.tail == 2 && back.max_len == 6);
  CHECK(attn_clf_mail_flags(&back) == ATTN_MAIL_MORE_HEADERS);
  free(j);
  c.headers = 0;
  c.tail = 0;
  CHECK(attn_clf_mail_flags(&c) == 0);
  c.pool = ATTN_CLF_POOL_MEANMAX; /* pooling travels with the config; fc sees 2 d_model */
  CHECK_OK(attn_clf_config_to_json(&c, &j));
  CHECK(strstr(j, "\"pool\":\"meanmax\"") != NULL);
  CHECK_OK(attn_clf_config_from_json(j, &back));
  CHECK(back.pool == ATTN_CLF_POOL_MEANMAX);
  free(j);
  attn_clf mm;
  CHECK_OK(attn_clf_create(&mm, &c));
  int fcw = attn_params_find(&mm.p, "fc.weight");
  CHECK(fcw >= 0 && mm.p.views[fcw].numel == 2 * 2 * 8);
  attn_clf_free(&mm);
  c.pool = 0;
  CHECK_ERR(attn_clf_config_from_json("{\"vocab\":5,\"pool\":\"sum\"}", &back), ATTN_EFORMAT);
  CHECK_ERR(attn_clf_config_from_json("{\"vocab\":5,\"colour\":1}", &back), ATTN_EFORMAT);
  CHECK_ERR(attn_clf_config_from_json("{\"vocab\":-5}", &back), ATTN_EFORMAT);
  CHECK_ERR(attn_clf_config_from_json("[1", &back), ATTN_EFORMAT);
  attn_clf_free(&m);
  c.heads = 3;
  CHECK_ERR(attn_clf_create(&m, &c), ATTN_EINVAL);
  c = tiny_config();
  c.tail = c.max_len; /* tail must leave room for the head */
  CHECK_ERR(attn_clf_create(&m, &c), ATTN_EINVAL);
  c = tiny_config();
  c.vocab = 0;
  CHECK_ERR(attn_clf_create(&m, &c), ATTN_EINVAL);
}

/* attn_clf_encode: all tokens of a short text; of a long one the first
 * max_len - tail and the last tail (byte tokens: a tokenizer without merges). */
static void test_encode_head_tail(void) {
  attn_bpe *b = NULL;
  CHECK_OK(attn_bpe_load("attn-bpe 1\nmax_chunk 64\nmerges 0\n", &b));
  if (!b) return;
  int32_t ids[6];
  size_t n = 0;
  const int32_t B0 = ATTN_BPE_BYTE0;
  CHECK_OK(attn_clf_encode(b, "abcdefghij", 10, 6, 2, ids, &n));
  CHECK(n == 6 && ids[0] == B0 + 'a' && ids[3] == B0 + 'd' && ids[4] == B0 + 'i' && ids[5] == B0 + 'j');
  CHECK_OK(attn_clf_encode(b, "abcdefghij", 10, 6, 0, ids, &n));
  CHECK(n == 6 && ids[4] == B0 + 'e' && ids[5] == B0 + 'f');
  CHECK_OK(attn_clf_encode(b, "abcdef", 6, 6, 2, ids, &n)); /* fits: unchanged */
  CHECK(n == 6 && ids[4] == B0 + 'e' && ids[5] == B0 + 'f');
  CHECK_OK(attn_clf_encode(b, "abc", 3, 6, 5, ids, &n));
  CHECK(n == 3 && ids[2] == B0 + 'c');
  CHECK_OK(attn_clf_encode(b, "", 0, 6, 2, ids, &n)); /* empty: one space */
  CHECK(n == 1 && ids[0] == B0 + ' ');
  CHECK_ERR(attn_clf_encode(b, "abc", 3, 6, 6, ids, &n), ATTN_EINVAL);
  CHECK_ERR(attn_clf_encode(b, "abc", 3, 6, -1, ids, &n), ATTN_EINVAL);
  attn_bpe_free(b);
}

static void test_errors(void) {
  attn_clf_config c = tiny_config();
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 3));
  float probs[6];
  int32_t bad_len[3] = {6, 0, 1}, bad_ids[6] = {1, 2, 13, 0, 0, 0}, one = 3;
  CHECK_ERR(attn_clf_predict(&m, IDS, bad_len, 3, 6, probs), ATTN_EINVAL);
  CHECK_ERR(attn_clf_predict(&m, bad_ids, &one, 1, 6, probs), ATTN_EINVAL);
  CHECK_ERR(attn_clf_predict(&m, IDS, LENS, 3, 7, probs), ATTN_EINVAL);  // L > max_len
  CHECK_ERR(attn_clf_predict(&m, NULL, LENS, 3, 6, probs), ATTN_EINVAL);
  attn_clf_free(&m);
}

/* Every gradient (a few entries of each tensor, all of the small ones)
 * against central differences, learned and sinusoidal positions, pre/post-norm. */
static void gradcheck(int sinusoidal, int norm_first, int pool) {
  attn_clf_config c = tiny_config();
  c.sinusoidal = sinusoidal;
  c.norm_first = norm_first;
  c.pool = pool;
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 7));
  attn_nn_ctx ctx = {.backend = ATTN_BACKEND_MATH};
  grads_of(&m, &ctx, 0, NULL);
  int checked = 0, bad = 0;
  for (int v = 0; v < m.p.count; v++) {
    const attn_param_view *pv = &m.p.views[v];
    int64_t stride = pv->numel > 24 ? pv->numel / 11 + 1 : 1;
    for (int64_t i = 0; i < pv->numel; i += stride) {
      float *w = m.p.data + pv->offset + i;
      float g = m.p.grad[pv->offset + i], w0 = *w, eps = 1e-2f;
      // the embedding rows of ids never used get exactly zero gradient
      *w = w0 + eps;
      float lp = loss_of(&m, &ctx);
      *w = w0 - eps;
      float lm = loss_of(&m, &ctx);
      *w = w0;
      double num = ((double)lp - (double)lm) / (2.0 * eps);
      checked++;
      if (fabs(g - num) > 3e-3 + 3e-2 * fabs(num)) {
        if (bad++ < 5) printf("  %s[%lld]: analytic %.6g numeric %.6g\n", pv->name, (long long)i, g, num);
      }
    }
  }
  CHECK(bad == 0);
  CHECK(checked > 100);
  attn_clf_free(&m);
}
static void test_gradcheck_learned_postnorm(void) { gradcheck(0, 0, ATTN_CLF_POOL_MEAN); }
static void test_gradcheck_sinusoidal_prenorm(void) { gradcheck(1, 1, ATTN_CLF_POOL_MEAN); }
static void test_gradcheck_meanmax_pool(void) { gradcheck(0, 0, ATTN_CLF_POOL_MEANMAX); }

/* Padding: the junk after lens[b] must not change anything. */
static void test_padding_ignored(void) {
  attn_clf_config c = tiny_config();
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 5));
  float p3[6], p1[2];
  CHECK_OK(attn_clf_predict(&m, IDS, LENS, 3, 6, p3));
  int32_t row1[3] = {4, 4, 9}, l1 = 3;
  CHECK_OK(attn_clf_predict(&m, row1, &l1, 1, 3, p1));
  CHECK_CLOSE("row 1 alone", p1, p3 + 2, 2, 1e-6, 1e-5);
  CHECK(fabsf(p3[0] + p3[1] - 1.0f) < 1e-6f);
  attn_clf_free(&m);
}

/* --checkpoint-activations: the same gradients bit for bit (dropout on:
 * the recomputed layer must draw the same masks), and less memory held. */
static void test_checkpointing_same_grads(void) {
  attn_clf_config c = tiny_config();
  c.dropout = 0.2f;
  c.layers = 3;
  attn_clf m;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 11));
  attn_nn_ctx ctx = {.backend = ATTN_BACKEND_AUTO, .training = 1, .seed = 42, .step = 3};
  size_t b0 = 0, b1 = 0;
  grads_of(&m, &ctx, 0, &b0);
  float *g0 = malloc((size_t)m.p.numel * sizeof(float));
  memcpy(g0, m.p.grad, (size_t)m.p.numel * sizeof(float));
  grads_of(&m, &ctx, 1, &b1);
  CHECK(memcmp(g0, m.p.grad, (size_t)m.p.numel * sizeof(float)) == 0);
  CHECK(b1 > 0 && b1 * 2 < b0);
  // and dropout did act: the inference gradients differ
  attn_nn_ctx inf = {.backend = ATTN_BACKEND_AUTO, .training = 0, .seed = 42, .step = 3};
  grads_of(&m, &inf, 0, NULL);
  CHECK(memcmp(g0, m.p.grad, (size_t)m.p.numel * sizeof(float)) != 0);
  free(g0);
  attn_clf_free(&m);
}

static void test_save_load_same_predictions(void) {
  attn_clf_config c = tiny_config();
  c.sinusoidal = 1;
  attn_clf m, m2;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 9));
  char path[64];
  snprintf(path, sizeof path, "/tmp/attn_test_clf_%d.safetensors", (int)getpid());
  attn_st *meta;
  CHECK_OK(attn_st_new(&meta));
  CHECK_OK(attn_st_set_meta(meta, "tokenizer", "attn-bpe 1\nmax_chunk 64\nmerges 0\n"));
  CHECK_OK(attn_clf_save(path, &m, NULL, NULL, meta));
  attn_st *file = NULL;
  CHECK_OK(attn_clf_load(path, &m2, &file));
  CHECK(file && attn_st_meta(file, "tokenizer") &&
        !strcmp(attn_st_meta(file, "tokenizer"), "attn-bpe 1\nmax_chunk 64\nmerges 0\n"));
  CHECK(m2.c.sinusoidal == 1 && m2.p.numel == m.p.numel);
  float a[6], b[6];
  CHECK_OK(attn_clf_predict(&m, IDS, LENS, 3, 6, a));
  CHECK_OK(attn_clf_predict(&m2, IDS, LENS, 3, 6, b));
  CHECK(memcmp(a, b, sizeof a) == 0);
  // attention maps: [layers, heads, n, n], rows sum to 1
  float att[2 * 2 * 4 * 4];
  CHECK_OK(attn_clf_attention(&m2, IDS, 4, att));
  for (int r = 0; r < 16; r++) {
    float s = 0;
    for (int j = 0; j < 4; j++) s += att[r * 4 + j];
    CHECK(fabsf(s - 1.0f) < 1e-5f);
  }
  attn_clf_free(&m2);
  CHECK_ERR(attn_clf_load("/nonexistent/x.safetensors", &m2, NULL), ATTN_EIO);
  attn_st_free(file);
  attn_st_free(meta);
  unlink(path);
  attn_clf_free(&m);
}

/* An ensemble file: the mean of its members' probabilities, member 1 for a
 * single-model reader; bad member counts, missing members and mixed
 * configs are errors. */
static void test_ensemble_save_load(void) {
  attn_clf_config c = tiny_config();
  attn_clf m[3], other;
  for (int k = 0; k < 3; k++) {
    CHECK_OK(attn_clf_create(&m[k], &c));
    CHECK_OK(attn_clf_init(&m[k], 100 + (uint64_t)k));
  }
  char path[64], bad[80];
  snprintf(path, sizeof path, "/tmp/attn_test_ens_%d.safetensors", (int)getpid());
  snprintf(bad, sizeof bad, "/tmp/attn_test_ens_bad_%d.safetensors", (int)getpid());
  attn_st *meta;
  CHECK_OK(attn_st_new(&meta));
  CHECK_OK(attn_st_set_meta(meta, "tokenizer", "attn-bpe 1\nmax_chunk 64\nmerges 0\n"));
  CHECK_OK(attn_clf_ens_save(path, m, 3, meta));
  attn_clf_ens e;
  attn_st *file = NULL;
  CHECK_OK(attn_clf_ens_load(path, &e, &file));
  CHECK(e.n == 3 && file && attn_st_meta(file, "tokenizer") && attn_clf_ens_count(file) == 3);
  float p[3][6], pe[6], p1[6];
  for (int k = 0; k < 3; k++) CHECK_OK(attn_clf_predict(&m[k], IDS, LENS, 3, 6, p[k]));
  CHECK_OK(attn_clf_ens_predict(&e, IDS, LENS, 3, 6, pe));
  int same = 1;
  for (int i = 0; i < 6; i++)
    same &= pe[i] == (float)(((double)p[0][i] + (double)p[1][i] + (double)p[2][i]) / 3);
  CHECK(same);
  CHECK(memcmp(p[0], p[1], sizeof p[0]) != 0);  // the members differ
  // a single-model reader gets member 1
  CHECK_OK(attn_clf_load(path, &other, NULL));
  CHECK_OK(attn_clf_predict(&other, IDS, LENS, 3, 6, p1));
  CHECK(memcmp(p1, p[0], sizeof p1) == 0);
  attn_clf_free(&other);
  // the same file claiming 4 members, or a count that is not one
  CHECK_OK(attn_st_set_meta(file, "ensemble.members", "4"));
  CHECK_OK(attn_st_save(file, bad));
  attn_clf_ens e4;
  CHECK_ERR(attn_clf_ens_load(bad, &e4, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "member4.") != NULL);
  CHECK_OK(attn_st_set_meta(file, "ensemble.members", "two"));
  CHECK_OK(attn_st_save(file, bad));
  attn_clf_ens e2;
  CHECK_ERR(attn_clf_ens_load(bad, &e2, NULL), ATTN_EFORMAT);
  CHECK(strstr(attn_last_error(), "ensemble.members") != NULL);
  // a plain checkpoint is an ensemble of one
  CHECK_OK(attn_clf_ens_save(bad, m, 1, meta));
  CHECK_OK(attn_clf_ens_load(bad, &e2, NULL));
  CHECK(e2.n == 1);
  attn_clf_ens_free(&e2);
  // members of different configs are refused
  attn_clf_config c2 = c;
  c2.d_model = 4;
  CHECK_OK(attn_clf_create(&other, &c2));
  attn_clf two[2] = {m[0], other};
  CHECK_ERR(attn_clf_ens_save(bad, two, 2, meta), ATTN_EINVAL);
  attn_clf_free(&other);
  attn_clf_ens_free(&e);
  attn_st_free(file);
  attn_st_free(meta);
  unlink(path);
  unlink(bad);
  for (int k = 0; k < 3; k++) attn_clf_free(&m[k]);
}

int main(void) {
  RUN(test_names_and_config);
  RUN(test_errors);
  RUN(test_encode_head_tail);
  RUN(test_gradcheck_learned_postnorm);
  RUN(test_gradcheck_sinusoidal_prenorm);
  RUN(test_gradcheck_meanmax_pool);
  RUN(test_padding_ignored);
  RUN(test_checkpointing_same_grads);
  RUN(test_save_load_same_predictions);
  RUN(test_ensemble_save_load);
  HARNESS_END();
}
