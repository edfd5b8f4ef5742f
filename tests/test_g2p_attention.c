/* A G2P model's cross attention on a word's output
 * (src/apps/seq2seq/g2p_attention.h) on small random models: equal to the
 * full teacher-forced forward's probabilities (attn_mha_probs on the saved
 * cross attention) on every backend, for the greedy output and for fixed
 * outputs with and without </s>; the rows are distributions over the
 * letters; the file round-trips through attn viz's reader with its labels
 * and the cross marker; bad arguments are refused with nothing allocated.
 *
 * Tolerance: probabilities of softmaxes of O(1) scores; the replay computes
 * the same scores through GEMMs of other shapes (one row per step) and, on
 * flash, another softmax order: |replay - full| <= 1e-5 + 1e-4 p (the
 * logits differ by at most 2e-5 + 2e-4 |logit|, test_g2p_decode). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "apps/seq2seq/g2p_attention.h"
#include "apps/viz/viz.h"
#include "g2p_small.h"
#include "harness.h"

static const int32_t word[7] = {11, 4, 5, 6, 4, 9, 10}; /* "G'AB'EF" (ids 4.. = "'ABCDEFG") */

/* c against the full forward (backend be) on <s> + ph: returns the
 * number of probabilities off, *worst the largest difference */
static int against_full(const attn_g2p_model *m, attn_backend be, const int32_t *ph, int len,
                        int eos, const attn_g2p_cross *c, double *worst) {
  const int64_t S = 7, T = len + eos, H = m->c.heads;
  attn_nn_ctx ctx = {.backend = be};
  attn_g2p_saved full = {0};
  int32_t tgt[16], sl[1] = {7};
  tgt[0] = ATTN_G2P_BOS;
  for (int t = 1; t < T; t++) tgt[t] = ph[t - 1];
  CHECK_OK(attn_g2p_encode(m, &ctx, &full, word, sl, 1, S));
  CHECK_OK(attn_g2p_decode(m, &ctx, &full, tgt, T));
  float want[16 * 7];
  int bad = 0;
  for (int64_t l = 0; l < m->c.dec_layers; l++)
    for (int64_t h = 0; h < H; h++) {
      CHECK_OK(attn_mha_probs(&m->dec[l].multihead_attn, &full.ds[l].ca, 0, h, 0, T, want));
      const float *got = c->probs + (l * H + h) * T * S;
      for (int64_t i = 0; i < T * S; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (d > *worst) *worst = d;
        bad += !(d <= 1e-5 + 1e-4 * want[i]);
      }
    }
  attn_g2p_saved_free(&full);
  return bad;
}

static void test_replay_equals_full_forward(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 10, 3, 7);
  int32_t greedy[10];
  int glen = 0;
  attn_nn_ctx ref = {.backend = ATTN_BACKEND_MATH};
  const int32_t *src[1] = {word};
  const int32_t sl[1] = {7};
  CHECK_OK(attn_g2p_greedy(&m, &ref, src, sl, 1, 1, greedy, &glen));
  const int32_t fixed[9] = {30, 4, 50, 17, 60, 8, 8, 40, 5};
  struct {
    const int32_t *ph;
    int len, eos;
  } outs[4] = {{greedy, glen, glen < 9}, {fixed, 5, 1}, {fixed, 9, 0}, {fixed, 0, 1}};
  const attn_backend bes[3] = {ATTN_BACKEND_MATH, ATTN_BACKEND_FLASH, ATTN_BACKEND_AUTO};
  for (int k = 0; k < 4; k++)
    for (int b = 0; b < 3; b++) {
      attn_nn_ctx ctx = {.backend = bes[b]};
      attn_g2p_cross c;
      CHECK_OK(attn_g2p_cross_attention(&m, &ctx, word, 7, outs[k].ph, outs[k].len, outs[k].eos, &c));
      const int64_t T = outs[k].len + outs[k].eos;
      CHECK(c.layers == 3 && c.heads == 4 && c.l_out == T && c.l_src == 7);
      double worst = 0;
      int bad = against_full(&m, ATTN_BACKEND_MATH, outs[k].ph, outs[k].len, outs[k].eos, &c, &worst);
      bad += against_full(&m, bes[b], outs[k].ph, outs[k].len, outs[k].eos, &c, &worst);
      if (bad) printf("  output %d, backend %d: %d probabilities off (worst %.3g)\n", k, (int)bes[b], bad, worst);
      CHECK(bad == 0);
      int rows_bad = 0; /* every row a distribution over the letters */
      for (int64_t r = 0; r < c.layers * c.heads * T; r++) {
        double s = 0;
        for (int64_t j = 0; j < 7; j++) s += c.probs[r * 7 + j];
        rows_bad += !(fabs(s - 1) <= 1e-5);
      }
      CHECK(rows_bad == 0);
      for (int64_t t = 0; t < T; t++)
        CHECK(!strcmp(c.out_labels[t], attn_g2p_phone_name(t < outs[k].len ? outs[k].ph[t] : ATTN_G2P_EOS)));
      CHECK(!strcmp(c.src_labels[0], "G") && !strcmp(c.src_labels[1], "'") && !strcmp(c.src_labels[6], "F"));
      attn_g2p_cross_free(&c);
    }
  attn_g2p_free(&m);
}

static void test_file_round_trip(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 10, 3, 3);
  const int32_t ph[3] = {30, 4, 50};
  attn_g2p_cross c;
  CHECK_OK(attn_g2p_cross_attention(&m, NULL, word, 7, ph, 3, 1, &c));
  char path[] = "/tmp/attn_g2p_attention_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  const char *kv[] = {"word", "g'ab'ef", NULL};
  CHECK_OK(attn_g2p_cross_save(path, &c, kv));
  attn_viz_input in;
  CHECK_OK(attn_viz_input_load(path, NULL, &in));
  CHECK(in.cross == 1 && in.rank == 4 && in.layers == 3 && in.heads == 4 && in.lq == 4 && in.lk == 7);
  CHECK(in.q_labels && in.k_labels && !strcmp(in.q_labels[0], attn_g2p_phone_name(30)) &&
        !strcmp(in.q_labels[3], "</s>") && !strcmp(in.k_labels[2], "A"));
  CHECK(in.probs && !memcmp(in.probs, c.probs, (size_t)(3 * 4 * 4 * 7) * sizeof(float)));
  attn_viz_input_free(&in);
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(path, &st));
  CHECK(!strcmp(attn_st_meta(st, "model.kind"), "g2p") && !strcmp(attn_st_meta(st, "word"), "g'ab'ef") &&
        !strcmp(attn_st_meta(st, "attention"), "cross"));
  attn_st_free(st);
  unlink(path);
  attn_g2p_cross_free(&c);
  attn_g2p_free(&m);
}

static void test_bad_arguments(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 10, 3, 3);
  const int32_t ph[10] = {30, 4, 50, 30, 4, 50, 30, 4, 50, 30}, odd[2] = {4, 2};
  attn_g2p_cross c;
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, word, 0, ph, 3, 1, &c), ATTN_EINVAL);   /* no letters */
  CHECK(c.probs == NULL && c.out_labels == NULL);
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, word, 13, ph, 3, 1, &c), ATTN_EINVAL);  /* > max_src */
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, word, 7, ph, 10, 0, &c), ATTN_EINVAL);  /* > max_tgt - 1 */
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, word, 7, ph, 0, 0, &c), ATTN_EINVAL);   /* no row */
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, word, 7, odd, 2, 1, &c), ATTN_EINVAL);  /* <s> as output */
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, odd, 2, ph, 2, 1, &c), ATTN_EINVAL);    /* <unk> letter */
  CHECK(strstr(attn_last_error(), "letter 2") != NULL);
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, word, 7, ph, 3, 2, &c), ATTN_EINVAL);   /* eos 0 or 1 */
  CHECK_ERR(attn_g2p_cross_attention(&m, NULL, word, 7, ph, 3, 1, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_g2p_cross_save("/tmp/x.safetensors", &c, NULL), ATTN_EINVAL);          /* empty */
  CHECK_OK(attn_g2p_cross_attention(&m, NULL, word, 7, ph, 3, 1, &c));
  CHECK_ERR(attn_g2p_cross_save("/nonexistent-dir/x.safetensors", &c, NULL), ATTN_EIO);
  attn_g2p_cross_free(&c);
  attn_g2p_free(&m);
}

int main(void) {
  RUN(test_replay_equals_full_forward);
  RUN(test_file_round_trip);
  RUN(test_bad_arguments);
  HARNESS_END();
}
